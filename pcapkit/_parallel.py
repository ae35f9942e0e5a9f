"""Run independent chunks of columnar work on a few threads (DESIGN.md §3).

The packet decode (chunks of frames), the TCP analysis (batches of whole flows) and
the records' alignment (slices of directions) are independent pieces of numpy work;
numpy releases the GIL inside its loops, so two threads over two chunks use two cores
with no copying and no pickling.
Results come back in input order, so the output never depends on how many
threads ran.

Per-record Python loops hold the GIL and gain nothing from threads.  The
classic-pcap record walk is forked into two children before numpy and pandas are
imported (:mod:`pcapkit.io.prefetch`, started by the CLI once the capture is named
and by the first ``pcapkit.open``), so it runs on the other core during the
imports; without a prefetch the reader forks the walk's second half right after
the file is mapped (``pcapkit.io.reader._split_walk``).
On a big capture, half of the detectors run in a forked child while the analysis
process runs the others (:class:`ForkedCall`, from
:func:`pcapkit.detect.run_detectors`): they are Python-heavy, and two threads of them
took longer than one (the GIL: sse-1M 4.6-4.9 s against 3.9-4.1 s).  The TLS header
walk stays in one process: forked out, it took 0.30 s on two processes as on one on
the 1M-packet benchmark (fork 22 ms, the child's exit with a copy of a 1.4 GB address
space, and page faults in both).

``PCAPKIT_THREADS`` sets the number of threads (``1`` runs everything in the
calling thread and process); the default is the number of usable cores, at most
:data:`MAX_THREADS`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")

# More threads than this stop paying: each holds a chunk's temporaries in memory,
# and the Python between numpy calls still takes the GIL.
MAX_THREADS = 4
ENV = "PCAPKIT_THREADS"


def thread_count() -> int:
    """Threads to use: ``PCAPKIT_THREADS`` if set to a positive integer, else the usable cores (≤ 4)."""
    raw = os.environ.get(ENV, "").strip()
    if raw:
        try:
            n = int(raw)
        except ValueError:
            n = 0
        if n >= 1:
            return n
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1, min(cores, MAX_THREADS))


def map_in_threads(fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
    """``[fn(x) for x in items]``, on up to :func:`thread_count` threads when there are several items."""
    workers = min(thread_count(), len(items))
    if workers <= 1:
        return [fn(x) for x in items]
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="pcapkit") as ex:
        return list(ex.map(fn, items))


def forking_allowed() -> bool:
    """Whether work may go to a forked child: Linux (where it is measured and tested; on
    macOS not every system library is safe to use in a forked child), more than one
    thread allowed (:func:`thread_count`) and a single Python thread in this process
    (forking a multi-threaded process can deadlock)."""
    import sys
    import threading

    return (
        sys.platform.startswith("linux")
        and hasattr(os, "fork")
        and thread_count() >= 2
        and threading.active_count() == 1
    )


def write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` to ``fd`` (a pipe takes a part at a time)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def end_child(pid: int, fd: int) -> None:
    """Close ``fd`` (the read end of the child's pipe), kill the child and reap it."""
    import signal

    try:
        os.close(fd)
    except OSError:
        pass
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except OSError:
        pass


# A child that has not finished and used no CPU for this long is taken for stuck (a lock
# some thread of the parent held at the fork); its work is then done in the parent.
STUCK_S = 20.0

# bytes of the length that heads a child's message (ForkedCall)
_LENGTH = 8


class Tickets:
    """The numbers 0…n−1 (n ≤ 255), each taken once by whichever of this process and its
    forked children asks first (:meth:`take`): one byte each in a pipe they all hold
    the read end of, its write end closed once they are in (a one-byte read is atomic;
    an empty pipe without writers reads as its end, so no one ever waits).  Made before
    the fork."""

    def __init__(self, n: int) -> None:
        if not 0 <= n <= 255:
            raise ValueError(f"{n} tickets: 0 to 255")
        self._r, w = os.pipe()
        try:
            write_all(w, bytes(range(n)))  # far below a pipe's capacity: never blocks
        finally:
            os.close(w)

    def take(self) -> int | None:
        """The next number, or None when all are taken (or :meth:`close` was called)."""
        if self._r < 0:
            return None
        got = os.read(self._r, 1)
        return got[0] if got else None

    def close(self) -> None:
        if self._r >= 0:
            os.close(self._r)
            self._r = -1


class ForkedCall:
    """``fn()`` run in a forked child while this process goes on; :meth:`result` is its
    return value (pickled back through a pipe), or None when the child failed, was
    killed or stopped using CPU for :data:`STUCK_S` seconds without finishing (the caller
    then does the work itself: what the child computes must never be needed for
    correctness, only for time).

    The child leaves with ``os._exit`` (no atexit handlers, no flush of buffers it
    inherited) and with the cyclic GC off (a collection would touch, and copy, every
    page of objects it shares with this process).  It sends its value's length first
    and closes the pipe before it exits: the end of the message is not the end of the
    child, whose exit (the teardown of an address space shared with this one: 0.02-0.07
    s at 1M packets) goes on while this process unpickles."""

    def __init__(self, fn: Callable[[], object]) -> None:
        import gc

        self._done = False
        self._r, w = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:  # the child
            code = 1
            try:
                gc.disable()
                os.close(self._r)
                import pickle

                data = pickle.dumps(fn(), protocol=pickle.HIGHEST_PROTOCOL)
                write_all(w, len(data).to_bytes(_LENGTH, "little"))
                write_all(w, data)
                os.close(w)  # the message is whole: the parent reads it while this exits
                code = 0
            except BaseException:  # noqa: BLE001 - the parent does the work itself
                pass
            finally:
                os._exit(code)
        os.close(w)

    def _cpu_ticks(self) -> int | None:
        try:
            with open(f"/proc/{self.pid}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            return int(fields[11]) + int(fields[12])  # utime + stime
        except (OSError, IndexError, ValueError):
            return None

    def result(self) -> object | None:
        """The child's return value, or None (see the class); waits for the child."""
        if self._done:
            return None
        import pickle
        import select
        import signal
        import time

        self._done = True
        parts: list[bytes] = []
        try:
            ticks, since = self._cpu_ticks(), time.monotonic()
            while True:
                ready, _, _ = select.select([self._r], [], [], 1.0)
                if ready:
                    b = os.read(self._r, 1 << 20)
                    if not b:
                        break
                    parts.append(b)
                    since = time.monotonic()
                    continue
                now = self._cpu_ticks()
                if now != ticks:
                    ticks, since = now, time.monotonic()
                elif time.monotonic() - since > STUCK_S:
                    os.kill(self.pid, signal.SIGKILL)
                    return None
            msg = memoryview(b"".join(parts))
            parts.clear()
            n = len(msg) - _LENGTH
            whole = n >= 0 and int.from_bytes(msg[:_LENGTH], "little") == n
            got: object = None
            if whole:
                try:  # unpickled while the child's exit goes on
                    got = pickle.loads(msg[_LENGTH:])
                except Exception:  # noqa: BLE001 - a torn message: the parent does the work
                    whole = False
            _, status = os.waitpid(self.pid, 0)
            self.pid = 0
            if not whole or os.waitstatus_to_exitcode(status) != 0:
                return None  # nothing sent, not all of it, or the child failed after all
            return got
        finally:
            self.abandon()

    def abandon(self) -> None:
        """Kill the child if it still runs and reap it."""
        self._done = True
        if self.pid:
            end_child(self.pid, self._r)
        elif self._r >= 0:
            os.close(self._r)
        self._r, self.pid = -1, 0
