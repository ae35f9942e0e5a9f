"""Live capture to pcapng — optionally around a command whose TLS keys end up in the file.

``capture(iface, out)`` records an interface until a packet, time or size limit or Ctrl-C;
``run_and_capture(iface, out, [cmd, ...])`` runs ``cmd`` with ``SSLKEYLOGFILE`` pointing at a
fresh private key log, captures while it runs, and writes one pcapng that carries the packets
*and* the key log (a Decryption Secrets Block, via :func:`pcapkit.io.writer.inject_secrets`),
so ``pcapkit.open(out)`` decrypts it with nothing else at hand.  ``pcapkit capture`` is the
command-line face of both.

Engine: Wireshark's ``dumpcap``, run as a child process.  Why not the others:

* ``dumpcap`` writes pcapng natively (interface names, nanosecond ``if_tsresol``, statistics
  blocks), stops by itself on a packet count or file size (``-c``, ``-a filesize``) and
  reports every drop counter libpcap has (ring overflow, its own buffer, the NIC's); it is the
  capture engine of Wireshark and tshark, so it is present wherever those are.
* ``tcpdump`` (what the lab uses, inside its namespaces) writes only classic pcap, reports
  only the kernel's drop counter, and stops on time or size only through its file rotation
  options (``-G``/``-C`` with ``-W``); it has ``--immediate-mode`` (see the trap below), but
  nothing else over dumpcap here.
* scapy's sniffer decodes every packet in Python and drops silently under a burst — not
  acceptable for forensics.

Measured here (2 cores, loopback, 64-byte UDP datagrams sent by one Python process as fast as
it can): dumpcap through :func:`run_and_capture` kept 200,000 of 200,000 with 0 drops
reported; scapy's ``AsyncSniffer`` with the same filter kept 1,042 of 50,000.  dumpcap is
capturing ~50 ms (median; 60 ms max over 10 starts) after :func:`capture` is called.

One dumpcap trap, measured on this project's machines: dumpcap 4.0 has no immediate mode, so
libpcap gives it TPACKET_V3 ring *blocks* that the kernel hands over only when full or after
the 250 ms block timeout.  Packets in a block not yet handed over when dumpcap gets SIGINT are
lost *and not counted as drops* (1000 UDP packets then an immediate SIGINT: 546 written, "0
dropped"; one packet then SIGINT ≤ 0.2 s later: lost; ≥ 0.26 s later: kept, every time).  So
every stop that pcapkit initiates waits :data:`BLOCK_DRAIN_S` before signalling dumpcap, and
dumpcap runs in its own session so that a terminal's Ctrl-C never reaches it directly.
Stops that dumpcap makes itself (count, size) lose nothing: they follow packets it has read.

Stopping and signals (``run_and_capture``): the capture ends when the command exits, plus
``tail_s`` (default :data:`DEFAULT_TAIL_S`: the last ACK or FIN from a remote peer arrives
about one RTT after the command is done) plus the block drain.  A packet, time or size limit
stops the *capture* only; pcapkit still waits for the command (its key log is complete only
when it exits).  SIGINT, SIGTERM and SIGHUP reach the command exactly once:

* when pcapkit is the terminal's foreground job, the command shares pcapkit's process group,
  so it can use the terminal and receives Ctrl-C from the kernel itself; pcapkit forwards only
  signals that a *process* sent to it (``si_code`` is not ``SI_KERNEL``), as ``sudo`` does
  for the same reason (a process signalling that whole group, ``kill -INT -PGID``, still
  reaches the command twice: siginfo cannot tell it from ``kill -INT PID``);
* otherwise (scripts, CI, background jobs) the command gets its own process group and pcapkit
  forwards every such signal to that group.

The third interrupt while the command is still running kills it (SIGKILL).  The command gets
SIGTERM if pcapkit itself dies (parent-death signal); dumpcap then gets SIGINT and finalises
its file.  Signal handling needs the main thread; elsewhere only the limits and the command's
exit stop a capture.

Secrets: the key log lives in a fresh 0700 directory (on ``/dev/shm`` when available, so it
never reaches a disk), created 0600 and deleted before returning, on every path but a
``kill -9`` of pcapkit.  Its content is never printed or logged — results carry line counts.
The output pcapng, which holds the keys, is created 0600.  The command must run as the same
user as pcapkit to be able to write the key log.  Embedding rewrites the file with pcapkit's
writer (~120,000 packets/s): packets, interfaces and nanosecond timestamps are kept, dumpcap's
interface-statistics block is not (its counters are in :class:`CaptureResult`).
"""

from __future__ import annotations

import contextlib
import ctypes
import enum
import math
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import IO, Any

from ..errors import PcapkitError
from .reader import read_capture
from .writer import inject_secrets

ENGINE = "dumpcap"

# Caps and timings, each with its reason.
BUFFER_MIB = 32  # dumpcap -B: libpcap's ring.  The default (2 MiB) overflows in a burst of a
#   few thousand full-size packets; 32 MiB holds ~0.25 s of 1 Gbit/s line rate.
START_TIMEOUT_S = 10.0  # dumpcap opens the device and the file in ~20–30 ms; 10 s means stuck
STOP_TIMEOUT_S = 10.0  # dumpcap flushes and exits within ms of SIGINT; then it is killed
BLOCK_DRAIN_S = 0.5  # ≥ 2 × libpcap's 250 ms TPACKET_V3 block timeout (see the docstring):
#   one period for the kernel to hand over the last block, one for dumpcap to be scheduled on
#   a busy host and write it
DEFAULT_TAIL_S = 0.25  # after the command exits: packets still in flight (the final ACK/FIN
#   from a remote peer, one RTT later) are captured; a path slower than this needs tail_s
POLL_S = 0.02  # how often the supervisor looks at its children when no signal arrives
MAX_KEYLOG_BYTES = 64 * 1024 * 1024  # a pcapng block length is 32-bit and readers hold a
#   DSB in memory; 64 MiB is ~300,000 TLS 1.3 sessions — more means a runaway key log
FORCE_KILL_INTERRUPTS = 3  # the 3rd SIGINT/SIGTERM/SIGHUP while the command runs: SIGKILL
KEYLOG_FILENAME = "sslkeylog.txt"
PRIVATE_TMP_CANDIDATES = ("/dev/shm",)  # tmpfs: key material stays in memory

SI_KERNEL = 0x80  # siginfo si_code of a signal the kernel generated (tty ^C, hangup), as
#   opposed to SI_USER (kill()); Linux include/uapi/asm-generic/siginfo.h
_PR_SET_PDEATHSIG = 1
_HANDLED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

_STATS_RE = re.compile(
    r"Packets received/dropped on interface '.*': (\d+)/(\d+) "
    r"\(pcap:(\d+)/dumpcap:(\d+)/flushed:(\d+)/ps_ifdrop:(\d+)\)"
)


# --------------------------------------------------------------------------- errors


class LiveCaptureError(PcapkitError):
    """A live capture could not start, or failed while running."""


class EngineNotFound(LiveCaptureError):
    """dumpcap is not installed (or not on PATH)."""


class InterfaceNotFound(LiveCaptureError):
    """The interface does not exist (in this network namespace)."""


class CapturePermissionError(LiveCaptureError):
    """Not allowed to capture: not root, and dumpcap has no CAP_NET_RAW/CAP_NET_ADMIN."""


# --------------------------------------------------------------------------- result


class StopReason(str, enum.Enum):
    """Why the capture ended (``CaptureResult.stopped_by``)."""

    COMMAND = "command"  # the command exited (run_and_capture)
    COUNT = "count"  # packet limit reached
    SIZE = "size"  # file size limit reached
    DURATION = "duration"  # time limit reached
    INTERRUPT = "interrupt"  # SIGINT/SIGTERM/SIGHUP (capture without a command)
    BLOCK = "block"  # the caller's with-block ended (LiveCapture, the pytest plugin)


@dataclass(frozen=True, slots=True, kw_only=True)
class CaptureResult:
    """What a capture did — counts and statuses only, never key material."""

    output: Path
    interface: str
    bpf: str | None
    engine: str
    packets: int  # frames in the output file
    file_bytes: int
    dropped_by_kernel: int | None  # libpcap ring overflow (ps_drop); None: not reported
    dropped_by_engine: int | None  # dumpcap's own buffer and flush losses
    dropped_by_interface: int | None  # the driver / NIC (ps_ifdrop)
    stopped_by: StopReason
    start_latency_s: float  # dumpcap spawned → device and file open (capturing)
    capture_s: float  # capturing → dumpcap stopped
    command: list[str] | None = None
    returncode: int | None = None  # the command's exit status (−N: killed by signal N)
    keylog_lines: int | None = None  # key-log lines embedded (None without a command)
    interrupted: bool = False  # a SIGINT/SIGTERM/SIGHUP arrived during the run
    signals_forwarded: int = 0

    @property
    def dropped(self) -> int:
        """Every packet the capture path lost (0 when nothing was reported)."""
        parts = (self.dropped_by_kernel, self.dropped_by_engine, self.dropped_by_interface)
        return sum(p for p in parts if p)

    def as_dict(self) -> dict[str, Any]:
        return {
            "output": str(self.output),
            "interface": self.interface,
            "bpf": self.bpf,
            "engine": self.engine,
            "packets": self.packets,
            "file_bytes": self.file_bytes,
            "dropped": self.dropped,
            "dropped_by_kernel": self.dropped_by_kernel,
            "dropped_by_engine": self.dropped_by_engine,
            "dropped_by_interface": self.dropped_by_interface,
            "stopped_by": self.stopped_by.value,
            "start_latency_s": round(self.start_latency_s, 6),
            "capture_s": round(self.capture_s, 6),
            "command": self.command,
            "returncode": self.returncode,
            "keylog_lines": self.keylog_lines,
            "interrupted": self.interrupted,
            "signals_forwarded": self.signals_forwarded,
        }


# --------------------------------------------------------------------------- signals


def _set_pdeathsig(sig: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)


class _SignalGate:
    """Holds SIGINT/SIGTERM/SIGHUP for the supervisor while a capture runs.

    In the main thread the signals are blocked and fetched with ``sigtimedwait``, which says
    who sent them (``si_code``, ``si_pid``); a Python handler catches the rare one delivered
    to another thread (source unknown).  Signals the caller ignores (SIG_IGN, e.g. under
    ``nohup``) stay ignored.  Elsewhere than the main thread the gate is inert.
    """

    def __init__(self) -> None:
        self.active = threading.current_thread() is threading.main_thread()
        self.signals: set[int] = set()
        self._old_mask: set[int] = set()
        self._old_handlers: dict[int, Any] = {}
        self._caught: list[tuple[int, int, int]] = []

    def __enter__(self) -> _SignalGate:
        if not self.active:
            return self
        self.signals = {s for s in _HANDLED_SIGNALS if signal.getsignal(s) != signal.SIG_IGN}
        for s in self.signals:
            self._old_handlers[s] = signal.signal(s, self._handler)
        self._old_mask = set(signal.pthread_sigmask(signal.SIG_BLOCK, self.signals))
        return self

    def __exit__(self, *exc: object) -> None:
        if not self.active:
            return
        self.wait(0.0)  # consume what is pending: it belonged to this capture
        for s, old in self._old_handlers.items():
            signal.signal(s, old)
        signal.pthread_sigmask(signal.SIG_SETMASK, self._old_mask)

    def _handler(self, signum: int, frame: FrameType | None) -> None:
        self._caught.append((signum, 0, 0))  # SI_USER, unknown sender: forward

    def child_mask(self) -> None:
        """preexec_fn part: children start with the caller's original signal mask."""
        if self.active:
            signal.pthread_sigmask(signal.SIG_SETMASK, self._old_mask)

    def wait(self, timeout_s: float) -> list[tuple[int, int, int]]:
        """Signals that arrived within ``timeout_s``: (signo, si_code, si_pid)."""
        if not self.active or not self.signals:
            if timeout_s > 0:
                time.sleep(timeout_s)
            return []
        out, self._caught = self._caught, []
        info = signal.sigtimedwait(self.signals, max(0.0, timeout_s))
        while info is not None:
            out.append((info.si_signo, info.si_code, info.si_pid))
            info = signal.sigtimedwait(self.signals, 0)
        return out


# --------------------------------------------------------------------------- dumpcap


def find_engine() -> str:
    """Path of dumpcap, or :class:`EngineNotFound`."""
    exe = shutil.which(ENGINE)
    if exe is None:
        raise EngineNotFound(
            "dumpcap is not installed (it comes with Wireshark: Debian/Ubuntu "
            "`apt-get install tshark` or `wireshark-common`; Fedora `wireshark-cli`)"
        )
    return exe


class _Dumpcap:
    """One dumpcap child: start (wait until capturing), stop (SIGINT), parse its counters."""

    def __init__(
        self,
        exe: str,
        interface: str,
        path: Path,
        *,
        bpf: str | None,
        count: int | None,
        max_bytes: int | None,
        snaplen: int,
    ) -> None:
        self.interface, self.path, self.count, self.max_bytes = interface, path, count, max_bytes
        self.argv = [exe, "-i", interface, "-w", str(path), "-q", "-n", "-B", str(BUFFER_MIB)]
        if bpf:
            self.argv += ["-f", bpf]
        if count is not None:
            self.argv += ["-c", str(count)]
        if max_bytes is not None:
            # dumpcap's unit is kB = 1000 bytes; it stops after the packet that reaches it
            self.argv += ["-a", f"filesize:{max(1, math.ceil(max_bytes / 1000))}"]
        if snaplen:
            self.argv += ["-s", str(snaplen)]
        self.proc: subprocess.Popen[bytes] | None = None
        self._err: IO[bytes] = tempfile.TemporaryFile(prefix="pcapkit-dumpcap-")
        self.stop_requested = False

    def start(self, gate: _SignalGate) -> float:
        """Spawn and wait until dumpcap has the device and the file open; returns seconds."""

        def preexec() -> None:
            gate.child_mask()
            _set_pdeathsig(signal.SIGINT)  # pcapkit dies → dumpcap finalises its file

        t0 = time.monotonic()
        self.proc = subprocess.Popen(
            self.argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self._err,
            start_new_session=True,  # a terminal ^C must not stop it before the drain
            preexec_fn=preexec,
        )
        deadline = t0 + START_TIMEOUT_S
        # dumpcap prints "File: NAME" after the device is activated with its filter and the
        # output file is open (capture_loop_start → report_new_capture_file): from then on
        # every packet is captured.  "Capturing on" comes earlier and proves nothing.
        while b"File: " not in self.stderr_bytes():
            if self.proc.poll() is not None:
                raise self._start_error()
            if time.monotonic() > deadline:
                self.kill()
                raise LiveCaptureError(
                    f"dumpcap did not start capturing on {self.interface!r} within "
                    f"{START_TIMEOUT_S:g} s: {self.message() or 'no message'}"
                )
            time.sleep(0.002)
        return time.monotonic() - t0

    def stderr_bytes(self) -> bytes:
        # pread: dumpcap writes through a shared file description; never move its offset
        return os.pread(self._err.fileno(), 1 << 16, 0)

    def message(self) -> str:
        """dumpcap's error in one line (its "dumpcap: ..." line plus the reason after it)."""
        lines = [ln.strip() for ln in self.stderr_bytes().decode(errors="replace").splitlines()]
        for i, ln in enumerate(lines):
            if ln.startswith("dumpcap: "):
                msg = ln[len("dumpcap: ") :]
                nxt = lines[i + 1] if i + 1 < len(lines) else ""
                if nxt.startswith("(") and nxt.endswith(")"):
                    msg += " " + nxt
                return msg
        return " ".join(ln for ln in lines if ln and not ln.startswith(("Capturing on", "File:")))

    def _start_error(self) -> LiveCaptureError:
        msg = self.message()
        low = msg.lower()
        if "no device named" in low or "no such device" in low:
            return InterfaceNotFound(
                f"no capture interface named {self.interface!r} in this network namespace "
                "(see `ip link` or `dumpcap -D`)"
            )
        if "permission" in low or "operation not permitted" in low:
            return CapturePermissionError(
                f"no permission to capture on {self.interface!r}: run as root, or give "
                "dumpcap CAP_NET_RAW and CAP_NET_ADMIN (`sudo setcap "
                "cap_net_raw,cap_net_admin=ep $(command -v dumpcap)`; Debian: "
                "`dpkg-reconfigure wireshark-common` and join the wireshark group)"
            )
        if "capture filter" in low:
            return LiveCaptureError(f"invalid capture filter: {msg}")
        return LiveCaptureError(f"dumpcap could not start: {msg or 'no message'}")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        """SIGINT (dumpcap finalises the file), then wait; killed after STOP_TIMEOUT_S."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.stop_requested = True  # only when it was still running: else a limit fired
            self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired as e:
            self.kill()
            raise LiveCaptureError("dumpcap did not stop on SIGINT; its file may be cut") from e

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def failed(self) -> str | None:
        """dumpcap's error if it exited non-zero, else None."""
        if self.proc is None or self.proc.returncode in (None, 0):
            return None
        return self.message() or f"exit status {self.proc.returncode}"

    def counters(self) -> tuple[int | None, int | None, int | None]:
        """(dropped by kernel, by dumpcap, by interface) from dumpcap's final report."""
        text = self.stderr_bytes().decode(errors="replace")
        m = _STATS_RE.search(text)
        if not m:
            return None, None, None
        pcap, own, flushed, ifdrop = (int(m.group(i)) for i in (3, 4, 5, 6))
        return pcap, own + flushed, ifdrop

    def close(self) -> None:
        self._err.close()


# --------------------------------------------------------------------------- helpers


def _check_limits(
    count: int | None, duration_s: float | None, max_bytes: int | None, snaplen: int
) -> None:
    if count is not None and count < 1:
        raise ValueError("count must be >= 1")
    if duration_s is not None and not duration_s > 0:
        raise ValueError("duration_s must be > 0")
    if max_bytes is not None and max_bytes < 1:
        raise ValueError("max_bytes must be >= 1")
    if snaplen < 0:
        raise ValueError("snaplen must be >= 0 (0: the engine's maximum)")


def _check_output(output: Path) -> None:
    parent = output.parent
    if not parent.is_dir():
        raise LiveCaptureError(f"{parent}: no such directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise LiveCaptureError(f"{parent}: not writable")
    if output.is_dir():
        raise LiveCaptureError(f"{output}: is a directory")


def _check_command(command: Sequence[str]) -> list[str]:
    argv = [os.fspath(a) for a in command]
    if not argv or not argv[0]:
        raise ValueError("command must not be empty")
    exe = argv[0]
    if os.sep in exe:
        if not (os.path.isfile(exe) and os.access(exe, os.X_OK)):
            raise LiveCaptureError(f"command not found or not executable: {exe}")
    elif shutil.which(exe) is None:
        raise LiveCaptureError(f"command not found: {exe}")
    return argv


def _private_dir() -> str:
    """A fresh 0700 directory for the key log, in memory (``/dev/shm``) when possible."""
    for base in PRIVATE_TMP_CANDIDATES:
        if os.path.isdir(base) and os.access(base, os.W_OK | os.X_OK):
            with contextlib.suppress(OSError):
                return tempfile.mkdtemp(prefix="pcapkit-keys-", dir=base)
    return tempfile.mkdtemp(prefix="pcapkit-keys-")


def _keylog_lines(data: bytes) -> int:
    return sum(1 for ln in data.splitlines() if ln.strip() and not ln.lstrip().startswith(b"#"))


def _sibling_temp(output: Path, suffix: str) -> Path:
    """A 0600 temp file next to ``output`` (same file system: the final rename is atomic)."""
    fd, name = tempfile.mkstemp(prefix=f".{output.name}.", suffix=suffix, dir=output.parent)
    os.close(fd)
    return Path(name)


def _unlink(path: Path | None) -> None:
    if path is not None:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


class _Command:
    """The command under capture, with the signal-forwarding policy of the module docstring."""

    def __init__(self, argv: list[str], keylog: Path, gate: _SignalGate) -> None:
        self.argv = argv
        # the terminal's foreground job keeps the command in its group (terminal I/O, ^C)
        self.same_group = _is_foreground_job()
        env = dict(os.environ)
        env["SSLKEYLOGFILE"] = str(keylog)
        own_group = not self.same_group

        def preexec() -> None:
            gate.child_mask()
            if own_group:
                os.setpgid(0, 0)
            _set_pdeathsig(signal.SIGTERM)

        try:
            self.proc = subprocess.Popen(argv, env=env, preexec_fn=preexec)
        except OSError as e:
            raise LiveCaptureError(f"cannot run {argv[0]}: {e.strerror or e}") from e
        self.forwarded = 0
        self.interrupts = 0

    def poll(self) -> int | None:
        return self.proc.poll()

    def on_signal(self, signo: int, si_code: int, si_pid: int) -> None:
        """Forward one signal pcapkit received, unless the command already got it."""
        if self.proc.poll() is not None:
            return
        self.interrupts += 1
        if self.interrupts >= FORCE_KILL_INTERRUPTS:
            self._send(signal.SIGKILL)
            return
        if si_code == SI_KERNEL and self.same_group:
            return  # the terminal signalled the whole foreground group, the command included
        if si_pid and si_pid == self.proc.pid:
            return  # the command signalled pcapkit: do not bounce it back
        self._send(signo)
        self.forwarded += 1

    def _send(self, signo: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            if self.same_group:
                os.kill(self.proc.pid, signo)
            else:
                os.killpg(self.proc.pid, signo)

    def terminate(self) -> None:
        """Error path: SIGTERM, then SIGKILL after STOP_TIMEOUT_S."""
        if self.proc.poll() is None:
            self._send(signal.SIGTERM)
            try:
                self.proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self._send(signal.SIGKILL)
                self.proc.wait()


def _is_foreground_job() -> bool:
    """True when stdin is a terminal whose foreground process group is ours."""
    try:
        return os.isatty(0) and os.tcgetpgrp(0) == os.getpgrp()
    except OSError:
        return False


@contextlib.contextmanager
def _keylog_file() -> Iterator[Path]:
    """A fresh empty 0600 key log in a private directory; removed on exit, whatever happens."""
    d = _private_dir()
    path = Path(d) / KEYLOG_FILENAME
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        yield path
    finally:
        _unlink(path)
        with contextlib.suppress(OSError):
            os.rmdir(d)


# --------------------------------------------------------------------------- public API


def capture(
    interface: str,
    output: str | os.PathLike[str],
    *,
    bpf: str | None = None,
    count: int | None = None,
    duration_s: float | None = None,
    max_bytes: int | None = None,
    snaplen: int = 0,
) -> CaptureResult:
    """Capture ``interface`` to the pcapng ``output`` until a limit is reached or a signal.

    ``bpf`` is a libpcap capture filter; ``count`` stops after that many packets,
    ``max_bytes`` once the file reaches that size (checked per packet: it may exceed it by one
    packet), ``duration_s`` after that many seconds of capturing (the file then covers up to
    :data:`BLOCK_DRAIN_S` more, so nothing seen before the deadline is lost); ``snaplen`` 0
    keeps whole packets.  SIGINT/SIGTERM/SIGHUP (main thread only) stop it cleanly.  Needs
    root or a dumpcap with CAP_NET_RAW; raises :class:`LiveCaptureError` and subclasses.
    """
    return _run(interface, Path(output), None, bpf, count, duration_s, max_bytes, snaplen, 0.0)


def run_and_capture(
    interface: str,
    output: str | os.PathLike[str],
    command: Sequence[str],
    *,
    bpf: str | None = None,
    count: int | None = None,
    duration_s: float | None = None,
    max_bytes: int | None = None,
    snaplen: int = 0,
    tail_s: float = DEFAULT_TAIL_S,
) -> CaptureResult:
    """Run ``command`` with ``SSLKEYLOGFILE`` set, capture while it runs, embed its key log.

    The capture starts before the command and stops ``tail_s`` (+ :data:`BLOCK_DRAIN_S`)
    after it exits; the limits (as in :func:`capture`) end the capture early but never the
    command.  The key log the command wrote goes into ``output`` as a Decryption Secrets
    Block; without one, ``output`` is dumpcap's file as written.  ``returncode`` in the
    result is the command's exit status; signals are forwarded as the module docstring says.
    """
    argv = _check_command(command)
    if tail_s < 0:
        raise ValueError("tail_s must be >= 0")
    return _run(interface, Path(output), argv, bpf, count, duration_s, max_bytes, snaplen, tail_s)


class LiveCapture:
    """Capture in the background while the caller's own code makes the traffic.

    ``with LiveCapture("lo", out, bpf="tcp port 8443") as cap: ...`` — dumpcap is capturing
    when the block starts; for the block's duration ``SSLKEYLOGFILE`` names a fresh private
    key log (``cap.keylog``), so TLS contexts made by ``ssl.create_default_context()`` in this
    process or its children log their keys there (contexts built otherwise can be given
    ``cap.keylog`` themselves, e.g. ``ctx.keylog_filename = str(cap.keylog)``; aioquic's
    ``secrets_log_file`` too).  When the block ends the capture runs ``tail_s`` longer (the
    last ACK or FIN in flight) plus :data:`BLOCK_DRAIN_S`, stops, and the key log goes into
    ``out`` as a Decryption Secrets Block; ``cap.result`` is the :class:`CaptureResult`.
    ``SSLKEYLOGFILE`` is restored on exit.  No signal handling: the caller's process owns its
    signals.  Errors as :func:`capture` (:class:`CapturePermissionError` without the rights).
    """

    def __init__(
        self,
        interface: str,
        output: str | os.PathLike[str],
        *,
        bpf: str | None = None,
        snaplen: int = 0,
        tail_s: float = DEFAULT_TAIL_S,
        keylog_env: bool = True,
    ) -> None:
        _check_limits(None, None, None, snaplen)
        if tail_s < 0:
            raise ValueError("tail_s must be >= 0")
        self.interface, self.output, self.bpf = interface, Path(output), bpf
        self.snaplen, self.tail_s, self.keylog_env = snaplen, tail_s, keylog_env
        self.keylog: Path | None = None
        self.result: CaptureResult | None = None
        self._stack: contextlib.ExitStack | None = None
        self._dc: _Dumpcap | None = None
        self._raw: Path | None = None
        self._t0 = 0.0
        self._latency = 0.0
        self._old_env: str | None = None

    def __enter__(self) -> LiveCapture:
        exe = find_engine()
        _check_output(self.output)
        self._raw = _sibling_temp(self.output, ".part")
        self._dc = _Dumpcap(
            exe, self.interface, self._raw, bpf=self.bpf, count=None, max_bytes=None,
            snaplen=self.snaplen,
        )  # fmt: skip
        stack = contextlib.ExitStack()
        try:
            self.keylog = stack.enter_context(_keylog_file())
            gate = _SignalGate()
            gate.active = False  # inert: start() only uses it to set the child's mask
            self._latency = self._dc.start(gate)
        except BaseException:
            stack.close()
            self._cleanup()
            raise
        self._stack = stack
        self._t0 = time.monotonic()
        if self.keylog_env:
            self._old_env = os.environ.get("SSLKEYLOGFILE")
            os.environ["SSLKEYLOGFILE"] = str(self.keylog)
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._dc is not None and self._raw is not None and self._stack is not None
        dc, stack = self._dc, self._stack
        try:
            if self.keylog_env:
                if self._old_env is None:
                    os.environ.pop("SSLKEYLOGFILE", None)
                else:
                    os.environ["SSLKEYLOGFILE"] = self._old_env
            time.sleep(self.tail_s + BLOCK_DRAIN_S)
            dc.stop()
            t_stopped = time.monotonic()
            if (err := dc.failed()) is not None:
                raise LiveCaptureError(f"dumpcap failed on {self.interface!r}: {err}")
            assert self.keylog is not None
            lines = _finish_output(self._raw, self.output, self.keylog)
            kernel, engine, ifdrop = dc.counters()
            cap = read_capture(self.output)
            try:
                packets = cap.frames
            finally:
                cap.close()
            self.result = CaptureResult(
                output=self.output,
                interface=self.interface,
                bpf=self.bpf,
                engine=ENGINE,
                packets=packets,
                file_bytes=self.output.stat().st_size,
                dropped_by_kernel=kernel,
                dropped_by_engine=engine,
                dropped_by_interface=ifdrop,
                stopped_by=StopReason.BLOCK,
                start_latency_s=self._latency,
                capture_s=t_stopped - self._t0,
                keylog_lines=lines,
            )
        finally:
            stack.close()
            self._cleanup()

    def _cleanup(self) -> None:
        if self._dc is not None:
            if self._dc.alive():
                with contextlib.suppress(LiveCaptureError):
                    self._dc.stop()
            self._dc.close()
        _unlink(self._raw)


def _run(
    interface: str,
    output: Path,
    command: list[str] | None,
    bpf: str | None,
    count: int | None,
    duration_s: float | None,
    max_bytes: int | None,
    snaplen: int,
    tail_s: float,
) -> CaptureResult:
    _check_limits(count, duration_s, max_bytes, snaplen)
    exe = find_engine()
    _check_output(output)
    raw = _sibling_temp(output, ".part") if command is not None else output
    dc = _Dumpcap(exe, interface, raw, bpf=bpf, count=count, max_bytes=max_bytes, snaplen=snaplen)
    cmd: _Command | None = None
    try:
        with contextlib.ExitStack() as stack:
            gate = stack.enter_context(_SignalGate())
            keylog = stack.enter_context(_keylog_file()) if command is not None else None
            start_latency = dc.start(gate)
            t_capturing = time.monotonic()
            interrupted = False
            if command is not None and keylog is not None:
                if gate.wait(0.0):  # interrupted while dumpcap started: do not start the command
                    interrupted = True
                else:
                    cmd = _Command(command, keylog, gate)
            reason, t_stopped, interrupted = _supervise(
                dc, cmd, gate, t_capturing, duration_s, tail_s, interrupted
            )
            if (err := dc.failed()) is not None:
                raise LiveCaptureError(f"dumpcap failed on {interface!r}: {err}")
            keylog_lines = None if keylog is None else _finish_output(raw, output, keylog)
        kernel, engine, ifdrop = dc.counters()
        cap = read_capture(output)
        try:
            packets = cap.frames
        finally:
            cap.close()
        return CaptureResult(
            output=output,
            interface=interface,
            bpf=bpf,
            engine=ENGINE,
            packets=packets,
            file_bytes=output.stat().st_size,
            dropped_by_kernel=kernel,
            dropped_by_engine=engine,
            dropped_by_interface=ifdrop,
            stopped_by=reason,
            start_latency_s=start_latency,
            capture_s=t_stopped - t_capturing,
            command=command,
            returncode=None if cmd is None else cmd.proc.returncode,
            keylog_lines=keylog_lines,
            interrupted=interrupted,
            signals_forwarded=0 if cmd is None else cmd.forwarded,
        )
    finally:
        if cmd is not None:
            cmd.terminate()  # no-op unless we are leaving on an error
        if dc.alive():
            with contextlib.suppress(LiveCaptureError):
                dc.stop()
        dc.close()
        if raw != output:
            _unlink(raw)


def _supervise(
    dc: _Dumpcap,
    cmd: _Command | None,
    gate: _SignalGate,
    t_capturing: float,
    duration_s: float | None,
    tail_s: float,
    interrupted: bool,
) -> tuple[StopReason, float, bool]:
    """Wait for the end: the command's exit (+ tail), a limit, or a signal; stop dumpcap.

    Returns (why the capture stopped, when dumpcap stopped, whether a signal arrived).
    """
    deadline = None if duration_s is None else t_capturing + duration_s
    stop_at: float | None = None  # when to SIGINT dumpcap (after the block drain)
    planned: StopReason | None = None  # why stop_at was set
    reason: StopReason | None = None  # what actually stopped dumpcap
    t_stopped: float | None = None
    if cmd is None and interrupted:
        stop_at, planned = time.monotonic() + BLOCK_DRAIN_S, StopReason.INTERRUPT
    while True:
        now = time.monotonic()
        if dc.alive() and stop_at is not None and now >= stop_at:
            dc.stop()
        if not dc.alive() and t_stopped is None:
            t_stopped = time.monotonic()
            # a limit may fire during the drain of a planned stop: dumpcap's own stop wins
            reason = planned if dc.stop_requested and planned else _self_stop_reason(dc)
        command_done = cmd is None or cmd.poll() is not None
        if cmd is not None and command_done and stop_at is None and dc.alive():
            stop_at, planned = now + tail_s + BLOCK_DRAIN_S, StopReason.COMMAND
        if t_stopped is not None and command_done:
            break
        if deadline is not None and now >= deadline and stop_at is None and dc.alive():
            stop_at, planned = now + BLOCK_DRAIN_S, StopReason.DURATION
        timeout = POLL_S
        if stop_at is not None and dc.alive():
            timeout = max(0.0, min(timeout, stop_at - now))
        elif deadline is not None and stop_at is None:
            timeout = max(0.0, min(timeout, deadline - now))
        for signo, si_code, si_pid in gate.wait(timeout):
            interrupted = True
            if cmd is not None and cmd.poll() is None:
                cmd.on_signal(signo, si_code, si_pid)
            elif stop_at is None and dc.alive():
                stop_at, planned = time.monotonic() + BLOCK_DRAIN_S, StopReason.INTERRUPT
    assert reason is not None and t_stopped is not None
    return reason, t_stopped, interrupted


def _self_stop_reason(dc: _Dumpcap) -> StopReason:
    """dumpcap exited without being told to: which of its limits fired."""
    if dc.count is not None and dc.max_bytes is not None:
        try:
            cap = read_capture(dc.path)
        except (PcapkitError, OSError):
            return StopReason.SIZE
        try:
            return StopReason.COUNT if cap.frames >= dc.count else StopReason.SIZE
        finally:
            cap.close()
    if dc.count is not None:
        return StopReason.COUNT
    if dc.max_bytes is not None:
        return StopReason.SIZE
    return StopReason.INTERRUPT  # stopped from outside (someone signalled dumpcap) or failed


def _finish_output(raw: Path, output: Path, keylog: Path) -> int:
    """Move the capture to ``output``, with the key log embedded when there is one.

    Returns the number of key-log lines embedded.  A key log above :data:`MAX_KEYLOG_BYTES`
    is not read: ``output`` gets the packets only and :class:`LiveCaptureError` says why.
    """
    size = keylog.stat().st_size if keylog.exists() else 0
    if size > MAX_KEYLOG_BYTES:
        os.replace(raw, output)
        raise LiveCaptureError(
            f"the command wrote a {size}-byte key log (> {MAX_KEYLOG_BYTES}): not embedded; "
            f"{output} holds the packets only"
        )
    data = keylog.read_bytes() if size else b""
    lines = _keylog_lines(data)
    if not lines:
        os.replace(raw, output)  # nothing to embed: keep dumpcap's file as written
        return 0
    tmp = _sibling_temp(output, ".tmp")  # 0600: the file will hold keys
    try:
        inject_secrets(raw, tmp, data)
        os.replace(tmp, output)
        _unlink(raw)
    finally:
        _unlink(tmp)
    return lines
