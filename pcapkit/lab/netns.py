"""Lab topology: two network namespaces joined by the userspace forwarder, captured at both ends.

::

    netns <prefix>-cli                    root netns                   netns <prefix>-srv
    10.77.0.1 ── TUN pkl…c ══ fd ══ python …/lab/forwarder.py ══ fd ══ TUN pkl…s ── 10.77.0.2
       kernel TCP, tcpdump                 (delay, rate, drops)            kernel TCP, tcpdump

Why this shape (DETECTION.md §8.1): each end namespace has its own kernel TCP stack, address
and route; every packet between them crosses the forwarder process; TUN has no TSO/GSO, so
both captures show wire-sized segments; and both tcpdumps run on one host, so their
timestamps share one clock.  One TUN per end namespace (rather than a router namespace with
two TUNs plus veths) keeps veth — which passes GSO super-segments — out of the path.

The TUN devices are created non-persistent by this process, moved into the namespaces, and
their file descriptors handed to the forwarder child; when the forwarder dies, the devices
vanish with it.  Namespaces are named ``pklab-<owner pid>-<random>-cli|srv`` so that
:func:`cleanup_stale` can tell a crashed run's leftovers (owner dead) from a concurrent run's.

Teardown is robust: :class:`Lab` is a context manager, also registered with ``atexit`` and
with SIGTERM/SIGHUP handlers (SIGINT already raises ``KeyboardInterrupt``); every child gets a
parent-death signal, so even ``kill -9`` of the runner leaves only the namespaces, which the
next run (or ``cleanup_stale()``) removes.

Other topologies (``Lab(kind=…)``; DETECTION.md §8.1), for the offload artefacts a TUN path
cannot show — no forwarder, so no delay, loss or middle vantage:

* ``"loopback"``: one namespace ``…-cli`` (the ``srv`` role maps to it too); both lab
  addresses on its ``lo`` (MTU 65 536: MSS 65 483, 64 KB segments), one capture on ``lo``
  that is both ends' vantage;
* ``"veth"``: the two namespaces joined by a veth pair ``pkv<suffix>c`` ↔ ``pkv<suffix>s``
  (MTU 1500) with the kernel's default offloads left on (TSO/GSO: the sender's capture shows
  GSO super-segments, and veth hands the same skb to the peer, so the receiver's does too),
  static neighbour entries (no ARP in the captures), captured at both ends on one clock.

Middle vantage: with ``ForwarderConfig.middle`` the forwarder also writes every packet as it
passes the middle of the path (each delay split in halves around that point) to
:attr:`Lab.middle_path`, on the same clock — see :mod:`pcapkit.lab.forwarder`.

Captures: ``tcpdump -i IF -s 0 -B 131072 --time-stamp-precision=nano -w FILE`` (plus
``--immediate-mode``: with TPACKET_V3 blocks, packets still in a half-filled ring block
at SIGINT are otherwise lost — seen in the lab) in each end
namespace, started before traffic (we wait for "listening on"), stopped with SIGINT (tcpdump
then flushes and closes the file), and its "packets dropped by kernel" line checked: a
non-zero count is a :class:`CaptureError`.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import fcntl
import json
import os
import re
import secrets
import shutil
import signal
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import IO, Any

from .errors import CaptureError, LabError, RootRequiredError
from .forwarder import TRACE_COLUMNS, ForwarderConfig

NAME_PREFIX = "pklab"  # every namespace this module creates starts with this
TUN_PREFIX = "pkl"  # TUN names: pkl<6 hex><c|s>, 10 chars (IFNAMSIZ allows 15)
VETH_PREFIX = "pkv"  # veth ends (kind "veth"): pkv<6 hex><c|s>; they die with their namespace
KINDS = ("tun", "loopback", "veth")  # topology kinds (Scenario.topology)
LOOPBACK_MTU = 65_536  # the kernel's default lo MTU (MSS 65 495, 65 483 with timestamps)
CLIENT_IP = "10.77.0.1"
SERVER_IP = "10.77.0.2"
ROLES = ("cli", "srv")

TCPDUMP_BUFFER_KIB = 131_072  # -B: TUN captures with the default buffer drop under bursts
#   (DETECTION.md §8.1a); 128 MiB is ample for lab scenarios
TCPDUMP_START_TIMEOUT_S = 10.0  # waiting for "listening on"
TCPDUMP_STOP_TIMEOUT_S = 10.0  # waiting for tcpdump to flush and exit after SIGINT
FORWARDER_START_TIMEOUT_S = 10.0
FORWARDER_STOP_TIMEOUT_S = 10.0
CHILD_KILL_TIMEOUT_S = 5.0
SETTLE_S = 0.05  # after links come up, before traffic: lets the kernel finish link setup

_TUNSETIFF = 0x400454CA
_IFF_TUN = 0x0001
_IFF_NO_PI = 0x1000
_PR_SET_PDEATHSIG = 1

_NS_RE = re.compile(rf"^{NAME_PREFIX}-(\d+)-([0-9a-f]+)-(cli|srv)$")


# --------------------------------------------------------------------------- preconditions


def require_root() -> None:
    """Raise :class:`RootRequiredError` unless running as root."""
    if os.geteuid() != 0:
        raise RootRequiredError(
            "the lab needs root (it creates network namespaces and TUN devices and runs "
            "tcpdump); run it as root, e.g. `sudo pcapkit lab run NAME -o DIR`"
        )


def require_tools(*names: str) -> None:
    missing = [n for n in names if shutil.which(n) is None]
    if missing:
        raise LabError(
            f"the lab needs {', '.join(missing)} on PATH (Debian: apt-get install iproute2 tcpdump)"
        )


def _die_with_parent() -> None:
    """preexec_fn: the child gets SIGKILL when the runner dies, even by kill -9."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _run(argv: Sequence[str], *, check: bool = True) -> subprocess.CompletedProcess[str]:
    p = subprocess.run(list(argv), capture_output=True, text=True, check=False)
    if check and p.returncode != 0:
        raise LabError(f"command failed ({p.returncode}): {' '.join(argv)}: {p.stderr.strip()}")
    return p


def list_namespaces() -> list[str]:
    """Names of all lab namespaces (any owner) currently present."""
    p = _run(["ip", "netns", "list"], check=False)
    names = [line.split()[0] for line in p.stdout.splitlines() if line.strip()]
    return [n for n in names if n.startswith(NAME_PREFIX + "-")]


def list_tun_links() -> list[str]:
    """Lab TUN devices visible in the root namespace (should be none outside a run)."""
    p = _run(["ip", "-o", "link", "show"], check=False)
    out = []
    for line in p.stdout.splitlines():
        parts = line.split(":")
        if len(parts) > 1:
            name = parts[1].strip().split("@")[0]
            if re.fullmatch(rf"{TUN_PREFIX}[0-9a-f]{{6}}[cs]", name):
                out.append(name)
    return out


def _pid_alive(pid: int) -> bool:
    """True if ``pid`` runs (a zombie, dead but not yet reaped, counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            state = f.read().rsplit(")", 1)[-1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in ("Z", "X")


def _kill_pids_in(ns: str) -> None:
    p = _run(["ip", "netns", "pids", ns], check=False)
    pids = [int(x) for x in p.stdout.split() if x.isdigit()]
    for pid in pids:  # processes a lab run started in its own namespace
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + CHILD_KILL_TIMEOUT_S
    while pids and time.monotonic() < deadline:
        pids = [pid for pid in pids if _pid_alive(pid)]
        time.sleep(0.01)


def _delete_ns(ns: str) -> None:
    _kill_pids_in(ns)
    _run(["ip", "netns", "del", ns], check=False)


def cleanup_stale(*, force: bool = False) -> list[str]:
    """Remove lab namespaces left by crashed runs (owner pid gone); all of them if ``force``.

    Processes still inside a removed namespace are killed first (they can only be ones a lab
    run started there).  TUN devices need no cleanup: they are non-persistent and disappear
    with the forwarder's file descriptors, or with their namespace.  Returns the names removed.
    """
    require_root()
    removed = []
    for ns in list_namespaces():
        m = _NS_RE.match(ns)
        owner = int(m.group(1)) if m else -1
        if force or owner < 0 or (owner != os.getpid() and not _pid_alive(owner)):
            if not force and owner == os.getpid():
                continue
            _delete_ns(ns)
            removed.append(ns)
    return removed


def netns_sysctl(ns: str, key: str, value: str | int) -> None:
    """``ip netns exec NS sysctl -w key=value`` (per-netns knobs, e.g. SSR after idle)."""
    _run(["ip", "netns", "exec", ns, "sysctl", "-qw", f"{key}={value}"])


def netns_read_sysctl(ns: str, key: str) -> str:
    return _run(["ip", "netns", "exec", ns, "sysctl", "-n", key]).stdout.strip()


def _open_tun(name: str) -> int:
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_CLOEXEC)
    try:
        fcntl.ioctl(fd, _TUNSETIFF, struct.pack("16sH", name.encode(), _IFF_TUN | _IFF_NO_PI))
    except OSError as e:
        os.close(fd)
        raise LabError(f"cannot create TUN device {name}: {e}") from e
    return fd


# --------------------------------------------------------------------------- capture


@dataclass(slots=True)
class CaptureStats:
    captured: int | None = None
    received_by_filter: int | None = None
    dropped_by_kernel: int | None = None


class Capture:
    """tcpdump on one interface inside one namespace, writing a nanosecond pcap."""

    def __init__(self, ns: str, iface: str, path: Path, *, bpf: str = "") -> None:
        self.ns, self.iface, self.path, self.bpf = ns, iface, path, bpf
        self.proc: subprocess.Popen[str] | None = None
        self._stderr: list[str] = []
        self._listening = threading.Event()
        self._reader: threading.Thread | None = None
        self.stats = CaptureStats()

    def _read_stderr(self, stream: IO[str]) -> None:
        for line in stream:
            self._stderr.append(line.rstrip("\n"))
            if "listening on" in line:
                self._listening.set()

    def start(self) -> None:
        """Spawn tcpdump and wait until it is listening."""
        self.spawn()
        self.wait_listening()

    def spawn(self) -> None:
        argv = [
            "ip",
            "netns",
            "exec",
            self.ns,
            "tcpdump",
            "-i",
            self.iface,
            "-s",
            "0",
            "-B",
            str(TCPDUMP_BUFFER_KIB),
            "--time-stamp-precision=nano",
            "--immediate-mode",
            "-n",
            "-U",
            "-Z",
            "root",
            "-w",
            str(self.path),
        ]
        if self.bpf:
            argv.append(self.bpf)
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=_die_with_parent,
        )
        assert self.proc.stderr is not None
        self._reader = threading.Thread(
            target=self._read_stderr, args=(self.proc.stderr,), daemon=True
        )
        self._reader.start()

    def wait_listening(self) -> None:
        if not self._listening.wait(TCPDUMP_START_TIMEOUT_S):
            self.kill()
            raise CaptureError(f"tcpdump did not start on {self.iface}: {self.stderr_text()}")

    def stderr_text(self) -> str:
        return " | ".join(self._stderr[-5:])

    def stop(self) -> CaptureStats:
        """SIGINT, wait for the file to be flushed, parse the counters; raise on kernel drops."""
        if self.proc is None:
            return self.stats
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(TCPDUMP_STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired as e:
            self.kill()
            raise CaptureError(f"tcpdump on {self.iface} did not stop on SIGINT") from e
        if self._reader is not None:
            self._reader.join(TCPDUMP_STOP_TIMEOUT_S)
        for line in self._stderr:
            m = re.match(r"(\d+) packets? (captured|received by filter|dropped by kernel)", line)
            if m:
                n, what = int(m.group(1)), m.group(2)
                if what == "captured":
                    self.stats.captured = n
                elif what == "received by filter":
                    self.stats.received_by_filter = n
                else:
                    self.stats.dropped_by_kernel = n
        self.proc = None
        if self.stats.dropped_by_kernel is None:
            raise CaptureError(f"tcpdump on {self.iface} gave no drop count: {self.stderr_text()}")
        if self.stats.dropped_by_kernel:
            raise CaptureError(
                f"tcpdump on {self.iface} dropped {self.stats.dropped_by_kernel} packets "
                "(kernel buffer): the capture has holes and cannot be a fixture"
            )
        # on lo every packet passes the packet socket twice (sent, and looped back as
        # PACKET_LOOPBACK, which af_packet counts and then discards): "received by filter"
        # is twice "captured" there, and only the kernel-drop count tells of holes
        if (
            self.iface != "lo"
            and self.stats.captured is not None
            and self.stats.received_by_filter is not None
            and self.stats.captured < self.stats.received_by_filter
        ):
            raise CaptureError(
                f"tcpdump on {self.iface} wrote {self.stats.captured} of "
                f"{self.stats.received_by_filter} packets it received"
            )
        if not self.path.exists():
            raise CaptureError(f"tcpdump on {self.iface} wrote no file")
        return self.stats

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(CHILD_KILL_TIMEOUT_S)
        self.proc = None


# --------------------------------------------------------------------------- the lab


def no_forwarder_log() -> dict[str, Any]:
    """The forwarder log of a topology without a forwarder (loopback, veth): nothing
    forwarded, nothing dropped, an empty trace — same keys as the forwarder's own log."""
    return {
        "config": None,
        "stats": {},
        "events": [],
        "trace_columns": list(TRACE_COLUMNS),
        "trace": [],
        "trace_truncated": False,
        "realtime": None,
        "spin_ns": None,
        "stalls": [],
    }


@dataclass(slots=True)
class Topology:
    """Names and addresses of one run."""

    suffix: str
    owner_pid: int
    cli_ns: str
    srv_ns: str
    cli_if: str
    srv_if: str
    cli_ip: str = CLIENT_IP
    srv_ip: str = SERVER_IP
    kind: str = "tun"

    @classmethod
    def new(cls, kind: str = "tun") -> Topology:
        if kind not in KINDS:
            raise LabError(f"unknown lab topology {kind!r} (known: {', '.join(KINDS)})")
        suffix = secrets.token_hex(3)
        pid = os.getpid()
        cli_ns = f"{NAME_PREFIX}-{pid}-{suffix}-cli"
        prefix = VETH_PREFIX if kind == "veth" else TUN_PREFIX
        return cls(
            suffix=suffix,
            owner_pid=pid,
            cli_ns=cli_ns,
            srv_ns=cli_ns if kind == "loopback" else f"{NAME_PREFIX}-{pid}-{suffix}-srv",
            cli_if="lo" if kind == "loopback" else f"{prefix}{suffix}c",
            srv_if="lo" if kind == "loopback" else f"{prefix}{suffix}s",
            kind=kind,
        )

    def namespaces(self) -> list[str]:
        return list(dict.fromkeys((self.cli_ns, self.srv_ns)))  # loopback: one

    def ns(self, role: str) -> str:
        return {"cli": self.cli_ns, "srv": self.srv_ns}[role]

    def iface(self, role: str) -> str:
        return {"cli": self.cli_if, "srv": self.srv_if}[role]

    def as_dict(self) -> dict[str, Any]:
        kind = {
            "tun": "two netns joined by the pcapkit userspace forwarder over TUN",
            "loopback": "one netns, client and server on its loopback interface (no forwarder)",
            "veth": "two netns joined by a veth pair, offloads on (no forwarder)",
        }[self.kind]
        return {
            "kind": kind,
            "topology": self.kind,
            "client": {"netns": self.cli_ns, "iface": self.cli_if, "ip": self.cli_ip},
            "server": {"netns": self.srv_ns, "iface": self.srv_if, "ip": self.srv_ip},
            "mtu": LOOPBACK_MTU if self.kind == "loopback" else 1500,
        }


def project_root() -> Path:
    """The directory holding the ``pcapkit`` package (for children's PYTHONPATH)."""
    return Path(__file__).resolve().parents[2]


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    root = str(project_root())
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.pop("SSLKEYLOGFILE", None)  # key logs are set explicitly per socket context
    if extra:
        env.update(extra)
    return env


@dataclass(slots=True)
class Lab:
    """One run's topology; use as a context manager.  Requires root.

    ``with Lab(config, workdir) as lab:`` creates the namespaces, TUNs and forwarder;
    :meth:`capture`, :meth:`popen` and :meth:`sysctl` act inside them; leaving the block (or a
    signal, or interpreter exit) tears everything down.  :attr:`forwarder_result` holds the
    forwarder's log after teardown.
    """

    config: ForwarderConfig
    workdir: Path
    realtime_forwarder: bool = True
    kind: str = "tun"  # topology: "tun" (forwarder path), "loopback", "veth" (module doc)
    topo: Topology = field(default_factory=Topology.new)
    forwarder_result: dict[str, Any] | None = None
    _fwd: subprocess.Popen[bytes] | None = None
    _children: list[subprocess.Popen[Any]] = field(default_factory=list)
    _captures: list[Capture] = field(default_factory=list)
    _old_handlers: dict[int, Any] = field(default_factory=dict)
    _down: bool = True

    # -- lifecycle
    def __enter__(self) -> Lab:
        self.up()
        return self

    def __exit__(self, *exc: object) -> None:
        self.down()

    def __post_init__(self) -> None:
        if self.topo.kind != self.kind:
            self.topo = Topology.new(self.kind)

    def up(self) -> None:
        require_root()
        require_tools("ip", "tcpdump")
        if not os.path.exists("/dev/net/tun"):
            raise LabError("/dev/net/tun is missing (load the tun module)")
        cleanup_stale()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._down = False
        atexit.register(self.down)
        self._install_signal_handlers()
        try:
            self._setup()
        except BaseException:
            self.down()
            raise

    def _install_signal_handlers(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return

        def _handler(signum: int, frame: FrameType | None) -> None:
            raise SystemExit(128 + signum)

        for sig in (signal.SIGTERM, signal.SIGHUP):
            self._old_handlers[sig] = signal.signal(sig, _handler)

    def _setup(self) -> None:
        if self.kind != "tun":
            self._setup_direct()
            return
        t = self.topo
        fds: list[int] = []
        try:
            for role in ROLES:
                ns, iface = t.ns(role), t.iface(role)
                _run(["ip", "netns", "add", ns])
                fd = _open_tun(iface)
                fds.append(fd)
                _run(["ip", "link", "set", iface, "netns", ns])
                for key in ("all", "default", iface):
                    netns_sysctl(ns, f"net.ipv6.conf.{key}.disable_ipv6", 1)
                me, peer = (t.cli_ip, t.srv_ip) if role == "cli" else (t.srv_ip, t.cli_ip)
                _run(["ip", "-n", ns, "link", "set", "lo", "up"])
                _run(["ip", "-n", ns, "addr", "add", me, "peer", f"{peer}/32", "dev", iface])
                _run(["ip", "-n", ns, "link", "set", iface, "mtu", "1500", "up"])
            self._start_forwarder(fds[0], fds[1])
        finally:
            for fd in fds:  # the forwarder holds its own copies now
                os.close(fd)
        time.sleep(SETTLE_S)

    def _setup_direct(self) -> None:
        """Loopback or veth (module doc): no TUN, no forwarder; an empty forwarder log."""
        t = self.topo
        if self.config.middle:
            raise LabError(f"topology {self.kind!r} has no forwarder: no middle vantage")
        for ns in t.namespaces():
            _run(["ip", "netns", "add", ns])
            for key in ("all", "default"):  # before any link exists: new links inherit it
                netns_sysctl(ns, f"net.ipv6.conf.{key}.disable_ipv6", 1)
            _run(["ip", "-n", ns, "link", "set", "lo", "up"])
        if self.kind == "loopback":
            for ip in (t.cli_ip, t.srv_ip):
                _run(["ip", "-n", t.cli_ns, "addr", "add", f"{ip}/32", "dev", "lo"])
        else:
            _run(
                ["ip", "link", "add", t.cli_if, "netns", t.cli_ns, "type", "veth"]
                + ["peer", "name", t.srv_if, "netns", t.srv_ns]
            )
            macs = {}
            for role in ROLES:
                ns, iface = t.ns(role), t.iface(role)
                netns_sysctl(ns, f"net.ipv6.conf.{iface}.disable_ipv6", 1)
                me, peer = (t.cli_ip, t.srv_ip) if role == "cli" else (t.srv_ip, t.cli_ip)
                _run(["ip", "-n", ns, "addr", "add", me, "peer", f"{peer}/32", "dev", iface])
                _run(["ip", "-n", ns, "link", "set", iface, "mtu", "1500", "up"])
                info = json.loads(_run(["ip", "-n", ns, "-j", "link", "show", iface]).stdout)
                macs[role] = info[0]["address"]
            for role, peer_role in (("cli", "srv"), ("srv", "cli")):
                peer_ip = t.srv_ip if role == "cli" else t.cli_ip
                _run(
                    ["ip", "-n", t.ns(role), "neigh", "replace", peer_ip, "lladdr"]
                    + [macs[peer_role], "dev", t.iface(role), "nud", "permanent"]
                )
        self.forwarder_result = no_forwarder_log()
        time.sleep(SETTLE_S)

    def _start_forwarder(self, fd_c: int, fd_s: int) -> None:
        cfg_path = self.workdir / "forwarder-config.json"
        cfg_path.write_text(json.dumps(self.config.to_dict()), encoding="utf-8")
        log_path = self.workdir / "forwarder-log.json"
        r, w = os.pipe()
        argv = [
            # by path: forwarder.py is stdlib-only, so it starts without importing pcapkit
            sys.executable,
            str(Path(__file__).resolve().with_name("forwarder.py")),
            "--fds",
            f"{fd_c},{fd_s}",
            "--config",
            str(cfg_path),
            "--log",
            str(log_path),
            "--ready",
            str(w),
        ]
        if self.realtime_forwarder:
            argv.append("--realtime")
        if self.middle_path is not None:
            argv += ["--middle", str(self.middle_path)]
        try:
            self._fwd = subprocess.Popen(
                argv,
                pass_fds=(fd_c, fd_s, w),
                env=child_env(),
                stdin=subprocess.DEVNULL,
                preexec_fn=_die_with_parent,
            )
        finally:
            os.close(w)
        try:
            ready = _read_with_timeout(r, FORWARDER_START_TIMEOUT_S)
        finally:
            os.close(r)
        if ready != b"R":
            raise LabError("the forwarder did not start (see its stderr above)")

    def down(self) -> None:
        """Tear everything down; safe to call twice, from atexit or from a signal."""
        if self._down:
            return
        self._down = True
        with contextlib.suppress(Exception):
            atexit.unregister(self.down)
        for cap in self._captures:
            cap.kill()
        for p in self._children:
            if p.poll() is None:
                p.kill()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    p.wait(CHILD_KILL_TIMEOUT_S)
        self._stop_forwarder()
        for ns in self.topo.namespaces():
            _delete_ns(ns)
        for sig, old in self._old_handlers.items():
            with contextlib.suppress(Exception):
                signal.signal(sig, old)
        self._old_handlers.clear()

    @property
    def middle_path(self) -> Path | None:
        """The forwarder's middle-vantage pcap (nanosecond, raw IP), when the config has one."""
        return self.workdir / "middle.pcap" if self.config.middle else None

    def stop_forwarder(self) -> dict[str, Any]:
        """Stop the forwarder now (traffic is over) and return its log."""
        self._stop_forwarder()
        if self.forwarder_result is None:
            raise LabError("the forwarder left no log")
        return self.forwarder_result

    def _stop_forwarder(self) -> None:
        p = self._fwd
        if p is None:
            return
        self._fwd = None
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(FORWARDER_STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(CHILD_KILL_TIMEOUT_S)
        log_path = self.workdir / "forwarder-log.json"
        if log_path.exists():
            self.forwarder_result = json.loads(log_path.read_text(encoding="utf-8"))

    # -- acting inside the namespaces
    def exec_prefix(self, role: str) -> list[str]:
        return ["ip", "netns", "exec", self.topo.ns(role)]

    def sysctl(self, role: str, key: str, value: str | int) -> None:
        netns_sysctl(self.topo.ns(role), key, value)

    def read_sysctl(self, role: str, key: str) -> str:
        return netns_read_sysctl(self.topo.ns(role), key)

    def popen(self, role: str, argv: Sequence[str], **kw: Any) -> subprocess.Popen[Any]:
        """Start a process inside ``role``'s namespace; it is killed at teardown if alive."""
        kw.setdefault("env", child_env())
        kw.setdefault("stdin", subprocess.DEVNULL)
        p = subprocess.Popen([*self.exec_prefix(role), *argv], preexec_fn=_die_with_parent, **kw)
        self._children.append(p)
        return p

    def capture(self, role: str, path: Path, *, bpf: str = "") -> Capture:
        """Start tcpdump on ``role``'s TUN; returns once it is listening."""
        return self.captures({role: path}, bpf=bpf)[role]

    def captures(self, paths: dict[str, Path], *, bpf: str = "") -> dict[str, Capture]:
        """Start tcpdump on several roles at once (in parallel); return once all listen."""
        caps = {}
        for role, path in paths.items():
            cap = Capture(self.topo.ns(role), self.topo.iface(role), path, bpf=bpf)
            self._captures.append(cap)
            cap.spawn()
            caps[role] = cap
        for cap in caps.values():
            cap.wait_listening()
        return caps

    def tun_drops(self) -> dict[str, int]:
        """TX drops of each end's interface: for a TUN, packets the kernel could not queue
        to the forwarder (the name stays for scenario.json's ``tun_tx_dropped``); for veth
        and loopback, packets the interface dropped."""
        out = {}
        for role in ROLES:
            p = _run(
                [
                    *self.exec_prefix(role),
                    "cat",
                    f"/sys/class/net/{self.topo.iface(role)}/statistics/tx_dropped",
                ],
                check=False,
            )
            out[role] = int(p.stdout.strip() or 0)
        return out


def _read_with_timeout(fd: int, timeout_s: float) -> bytes:
    import select

    ready, _, _ = select.select([fd], [], [], timeout_s)
    return os.read(fd, 1) if ready else b""


@contextlib.contextmanager
def lab(config: ForwarderConfig, workdir: Path, **kw: Any) -> Iterator[Lab]:
    """Functional spelling of ``with Lab(config, workdir) as lab``."""
    with Lab(config, workdir, **kw) as lb:
        yield lb
