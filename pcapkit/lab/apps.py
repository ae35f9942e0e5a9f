"""Process entry and socket helpers for the scenario programs that run inside the namespaces.

``python .../pcapkit/lab/apps.py server|client MODULE:FUNCTION PARAMS.json RESULT.json``
imports the function,
calls it with the params (and, for servers, a ``ready`` callback that prints ``READY`` so the
runner knows the socket listens), and writes the returned dict as JSON.  Each end is its own
process so it has its own network namespace and its own GIL: the application's write cadence
is not disturbed by the other end, the forwarder or the runner.

Run by path, this script registers ``pcapkit`` as a bare package (its ``__init__``, which
loads the analysis stack — pandas and friends, ~0.6 s — is not executed) before importing
the scenario module: the programs start fast and depend only on the lab and the stdlib.

Times recorded by scenario programs are ``time.time_ns()``: CLOCK_REALTIME, the clock tcpdump
stamps packets with, so write times line up with capture timestamps directly.
"""

from __future__ import annotations

import importlib
import json
import socket
import ssl
import struct
import sys
import time
from collections.abc import Callable
from typing import Any

READY_LINE = "READY"
LISTEN_BACKLOG = 16
CONNECT_TIMEOUT_S = 10.0  # a lab path has ≤ a few hundred ms RTT; 10 s means "broken"
IO_TIMEOUT_S = 30.0  # any single blocking read/write; the runner's timeout_s bounds the run


def now_ns() -> int:
    return time.time_ns()


def tcp_socket(*, cc: str | None, nodelay: bool) -> socket.socket:
    """An IPv4 TCP socket with congestion control and Nagle set per socket (before connect)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    apply_tcp_options(s, cc=cc, nodelay=nodelay)
    return s


def apply_tcp_options(s: socket.socket, *, cc: str | None, nodelay: bool) -> None:
    if cc:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cc.encode())
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1 if nodelay else 0)


def tcp_options(s: socket.socket | ssl.SSLSocket) -> dict[str, Any]:
    """Read back what the kernel has (what was really in force, for scenario.json)."""
    cc = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16).rstrip(b"\0").decode()
    return {
        "TCP_NODELAY": bool(s.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)),
        "TCP_CONGESTION": cc,
    }


# struct tcp_info (include/uapi/linux/tcp.h): 8 one-byte fields, then u32s from offset 8.
_TCP_INFO_LEN = 104
_TCP_INFO_U32 = {
    "rto_us": 8,
    "ato_us": 12,
    "snd_mss": 16,
    "rcv_mss": 20,
    "unacked": 24,
    "lost": 32,
    "retrans": 36,
    "rtt_us": 68,
    "rttvar_us": 72,
    "snd_ssthresh": 76,
    "snd_cwnd": 80,
    "advmss": 84,
    "rcv_space": 96,
    "total_retrans": 100,
}


def tcp_info(s: socket.socket | ssl.SSLSocket) -> dict[str, int]:
    """A few ``TCP_INFO`` fields (cwnd in segments, times in µs), read from the kernel."""
    raw = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, _TCP_INFO_LEN)
    out = {k: struct.unpack_from("=I", raw, off)[0] for k, off in _TCP_INFO_U32.items()}
    out["probes"] = raw[3]
    out["backoff"] = raw[4]
    return out


def listen(ip: str, port: int, *, cc: str | None, nodelay: bool) -> socket.socket:
    """Listening socket; accepted sockets inherit TCP_NODELAY and TCP_CONGESTION on Linux."""
    s = tcp_socket(cc=cc, nodelay=nodelay)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((ip, port))
    s.listen(LISTEN_BACKLOG)
    s.settimeout(IO_TIMEOUT_S)
    return s


def recv_exact(s: socket.socket | ssl.SSLSocket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError(f"peer closed after {len(buf)} of {n} bytes")
        buf += chunk
    return bytes(buf)


def tls_server_context(
    cert: str, key: str, keylog: str, *, alpn: str = "http/1.1"
) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    ctx.load_cert_chain(cert, key)
    ctx.set_alpn_protocols([alpn])
    ctx.keylog_filename = keylog  # NSS key log: the capture becomes decryptable
    return ctx


def tls_client_context(cafile: str, keylog: str, *, alpn: str = "http/1.1") -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=cafile)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    ctx.set_alpn_protocols([alpn])
    ctx.keylog_filename = keylog
    return ctx


def tls_info(s: ssl.SSLSocket) -> dict[str, Any]:
    c = s.cipher()
    return {
        "version": s.version(),
        "cipher": c[0] if c else None,
        "alpn": s.selected_alpn_protocol(),
    }


def _load(target: str) -> Callable[..., dict[str, Any]]:
    mod, _, fn = target.partition(":")
    obj = getattr(importlib.import_module(mod), fn)
    if not callable(obj):
        raise TypeError(f"{target} is not callable")
    return obj  # type: ignore[no-any-return]


def _bare_package_import() -> None:
    """Make ``pcapkit`` importable without executing ``pcapkit/__init__.py``."""
    if "pcapkit" in sys.modules:
        return
    import types
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    pkg = types.ModuleType("pcapkit")
    pkg.__path__ = [str(root)]
    sys.modules["pcapkit"] = pkg


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 4 or args[0] not in ("server", "client"):
        print("usage: apps.py server|client MODULE:FN PARAMS RESULT", file=sys.stderr)
        return 2
    role, target, params_path, result_path = args
    with open(params_path, encoding="utf-8") as f:
        params = json.load(f)
    fn = _load(target)

    def ready() -> None:
        print(READY_LINE, flush=True)

    result = fn(params, ready) if role == "server" else fn(params)
    with open(result_path, "w", encoding="utf-8") as f:
        json.dump(result, f)
    return 0


if __name__ == "__main__":
    _bare_package_import()
    sys.exit(main())
