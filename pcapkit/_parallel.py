"""Run independent chunks of columnar work on a few threads (DESIGN.md §3).

The packet decode (chunks of frames) and the TCP analysis (batches of whole flows)
are independent pieces of numpy work; numpy releases the GIL inside its loops, so
two threads over two chunks use two cores with no copying and no pickling.
Results come back in input order, so the output never depends on how many
threads ran.

Per-record Python loops hold the GIL and gain nothing from threads.  The
classic-pcap record walk is forked into two children before numpy and pandas are
imported (:mod:`pcapkit.io.prefetch`, started by the CLI once the capture is named
and by the first ``pcapkit.open``), so it runs on the other core during the
imports; without a prefetch the reader forks the walk's second half right after
the file is mapped (``pcapkit.io.reader._split_walk``).
The TLS header walk stays in one process: forked out, it took 0.30 s on two
processes as on one on the 1M-packet benchmark (fork 22 ms, the child's exit with
a copy of a 1.4 GB address space, and page faults in both).

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
