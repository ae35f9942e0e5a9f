"""Healthy bulk TLS downloads over offloading paths: lone controls (no positive twin).

Issue 5 ("How we will know it works"): captures of normal bulk transfers — loopback with
64 KB segments, veth with GSO super-segments — must yield no Nagle, head-of-line or record
finding.  These are the offload artefacts of DETECTION.md §1.4 that the forwarder's TUN path
cannot produce (TUN has no TSO/GSO: wire-sized segments only), so both scenarios run on a
forwarder-less topology (:mod:`pcapkit.lab.netns`, DETECTION.md §8.1):

* ``bulk_loopback_tls``: client and server in one namespace over ``lo`` (MTU 65 536: SYN MSS
  65 495, 65 483 bytes per segment with timestamps).  A segment carries up to 64 KB, so
  every 64 KiB write leaves as one full 65 483-byte segment plus a short tail, and µs
  timings throughout.  tcpdump runs on ``lo`` in the namespace: one capture, both ends'
  vantage, stored as ``client.pcapng``.
* ``bulk_veth_gso_tls``: the same transfer over a veth pair between two namespaces, MTU
  1500 (MSS 1 460, 1 448 with timestamps), offloads as the kernel sets them (TSO/GSO on):
  the server's stack hands the veth ≤ 64 KB GSO skbs, tcpdump sees them whole at the
  server, and veth passes the same skb to the client namespace, so the client capture
  shows the super-segments too (DETECTION.md §1.4 [lab]).  No delay (the kernel here has
  no netem and the forwarder would bring back TUN's wire-sized segments): RTT is the two
  stacks' processing, tens of µs.

The transfer: a TLS 1.3 connection (Python ``ssl`` / OpenSSL 3, port 443 so tshark decodes
TLS, per-run self-signed certificate, key log embedded), the client sends one request, the
server answers with ``response_len`` bytes (160 KiB) in ``write_len`` (64 KiB) application
writes and closes.  The server runs TLS through a memory BIO, as asyncio's SSL transport
does: each 64 KiB write is encrypted into four 16 KiB records (16 406 bytes on the wire each)
and handed to the kernel with *one* ``send()`` of 65 624 bytes — on loopback one full
65 483-byte segment and a 141-byte tail.  (An ``SSLSocket`` writes one record per
``send()``: with TCP_NODELAY every segment would be a 16 406-byte record, never 64 KB.)

Socket options, each for a reason seen in the lab:

* server TCP_NODELAY, as bulk servers set it (nginx ``tcp_nodelay on``, Go's default).  With
  Nagle on, this very transfer on loopback is *not* healthy: the next send's partial last
  segment (< MSS 65 483) waits for the ACK of the previous 141-byte tail, which the client
  delays — a real Nagle × delayed-ACK stall of 42 ms that the detectors rightly report;
* client TCP_NODELAY (DETECTION.md §8.1a: its request must not wait behind its own
  handshake bytes);
* client ``SO_RCVBUF`` 1 MiB (``client_rcvbuf``): with the default 128 KiB buffer the
  loopback receiver advertised ≤ 95 KB, the sender's segments were capped at half the
  peer's largest window (``tcp_bound_to_half_wnd``: 32–48 KB, never 64 KB) and the Python
  reader fell behind into a zero window — not the offload pattern this control is for.

Both control for every kind a super-segment, a 64 KB loopback MSS or a µs RTT could fool:
Nagle (holds and delayed-ACK interplay), delayed ACK, cork, TCP head-of-line blocking, the
four TLS record kinds and slow-start restart.  Each scenario stands alone (``pair=None``):
there is no "unhealthy bulk" positive — the positives are the other scenarios.

Ground truth: the server's write times and sizes and its ``TCP_INFO`` after the last write
(``snd_mss`` is the MSS the stack really used: 65 483 on loopback, 1 448 on veth;
``total_retrans`` must be 0), the client's reads (time and cumulative bytes) and its
``connect()`` duration as the handshake RTT (there is no forwarder trace to time it).
"""

from __future__ import annotations

import contextlib
import socket
import ssl
from collections.abc import Callable
from typing import Any

from ..apps import (
    CONNECT_TIMEOUT_S,
    IO_TIMEOUT_S,
    apply_tcp_options,
    listen,
    now_ns,
    tcp_info,
    tcp_options,
    tls_client_context,
    tls_info,
    tls_server_context,
)
from ..certs import DEFAULT_HOSTNAME
from . import RunData, Scenario, register
from .tls_records import REQUEST, TLS13_RECORD_OVERHEAD, client_close, read_all, record_layout

LOOPBACK_EFF_MSS = 65_483  # lo MTU 65 536 − 40 (IPv4 + TCP) − 1 (MSS 65 495) − 12 (timestamps)
VETH_EFF_MSS = 1_448  # MTU 1500 − 40 − 12 (timestamps)
# A healthy transfer of 160 KiB between two local stacks completes in a few ms; a delayed-ACK
# stall (Linux ≥ 40 ms, TCP_DELACK_MIN) or a retransmission timeout (≥ 200 ms) would show as
# a gap this long between two client reads (judgement: below the 40 ms delayed-ACK floor).
HEALTHY_MAX_READ_GAP_MS = 30.0

PARAMS: dict[str, Any] = {
    # no forwarder: the path parameters stay at zero (runner._check_direct_path)
    "delay_ms": 0.0,
    "realtime_forwarder": False,
    "port": 443,
    "response_len": 163_840,  # 160 KiB: 10 records of 16 KiB, capture ≈ 170 KB
    "write_len": 65_536,  # 64 KiB SSL_writes: 4 full 16 KiB records each
    "server_nodelay": True,  # bulk servers do (nginx tcp_nodelay, Go): see the module doc
    "client_nodelay": True,
    "client_rcvbuf": 1_048_576,  # SO_RCVBUF: see the module doc (None = kernel default)
}


def _bio_pump(raw: socket.socket, inc: ssl.MemoryBIO, out: ssl.MemoryBIO) -> None:
    """Send what the TLS engine produced (one send), then feed it what the peer sent."""
    _flush(raw, out)
    chunk = raw.recv(65_536)
    if not chunk:
        raise ConnectionError("client closed")
    inc.write(chunk)


def _flush(raw: socket.socket, out: ssl.MemoryBIO) -> None:
    data = out.read()
    if data:
        raw.sendall(data)


def server(p: dict[str, Any], ready: Callable[[], None]) -> dict[str, Any]:
    """TLS through a memory BIO (like asyncio's SSL transport): each 64 KiB application write
    is encrypted into its four records and handed to the kernel with one ``send()``."""
    ctx = tls_server_context(p["cert"], p["key"], p["keylog_server"])
    ls = listen(p["server_ip"], p["port"], cc=p["cc"], nodelay=p["server_nodelay"])
    ready()
    raw, _ = ls.accept()
    raw.settimeout(IO_TIMEOUT_S)
    opts = tcp_options(raw)
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = ctx.wrap_bio(inc, out, server_side=True)
    while True:
        try:
            tls.do_handshake()
            break
        except ssl.SSLWantReadError:
            _bio_pump(raw, inc, out)
    request = b""
    while b"\r\n\r\n" not in request:
        try:
            request += tls.read(4096)
        except ssl.SSLWantReadError:
            _bio_pump(raw, inc, out)
    _flush(raw, out)  # session tickets, if still pending
    t_request = now_ns()
    body = bytes(range(256)) * (p["response_len"] // 256 + 1)
    body = body[: p["response_len"]]
    writes = []
    for off in range(0, len(body), p["write_len"]):
        n = min(p["write_len"], len(body) - off)
        t0 = now_ns()
        tls.write(body[off : off + n])
        wire = out.pending
        _flush(raw, out)
        writes.append(
            {"offset": off, "len": n, "wire_len": wire, "start_ns": t0, "end_ns": now_ns()}
        )
    info = tcp_info(raw)
    try:  # orderly close: the client's close_notify, then ours, then FIN
        while True:
            try:
                if not tls.read(4096):
                    break
            except ssl.SSLWantReadError:
                _bio_pump(raw, inc, out)
    except (ssl.SSLZeroReturnError, ssl.SSLEOFError, ConnectionError):
        pass
    with contextlib.suppress(ssl.SSLError, OSError):
        tls.unwrap()
    with contextlib.suppress(OSError):
        _flush(raw, out)
    raw.close()
    ls.close()
    return {"socket": opts, "request_read_ns": t_request, "writes": writes, "tcp_info": info}


def client(p: dict[str, Any]) -> dict[str, Any]:
    ctx = tls_client_context(p["cert"], p["keylog_client"])
    raw = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    apply_tcp_options(raw, cc=p["cc"], nodelay=p["client_nodelay"])
    if p["client_rcvbuf"]:
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, p["client_rcvbuf"])
    # on loopback both addresses are local: bind, or the kernel picks the server's address
    # as the source and the two directions cannot be told apart by address
    raw.bind((p["client_ip"], 0))
    raw.settimeout(CONNECT_TIMEOUT_S)
    t_connect = now_ns()
    raw.connect((p["server_ip"], p["port"]))
    t_connected = now_ns()
    conn: ssl.SSLSocket = ctx.wrap_socket(raw, server_hostname=DEFAULT_HOSTNAME)
    t_hs = now_ns()
    conn.settimeout(IO_TIMEOUT_S)
    meta = {
        "socket": tcp_options(conn),
        "tls": tls_info(conn),
        "connect_ns": t_connect,
        "connected_ns": t_connected,
        "handshake_done_ns": t_hs,
    }
    meta["request_write_ns"] = now_ns()
    conn.sendall(REQUEST)
    reads = read_all(conn, p["response_len"])
    info = tcp_info(conn)
    client_close(conn)
    return {**meta, "reads": reads, "tcp_info": info}


def ground_truth(run: RunData) -> dict[str, Any]:
    p, srv, cli = run.params, run.server, run.client
    layout = record_layout(p["response_len"], p["write_len"])
    reads = cli["reads"]
    t_first_write = srv["writes"][0]["start_ns"] if srv["writes"] else None
    gaps = [b["t_ns"] - a["t_ns"] for a, b in zip(reads, reads[1:], strict=False)]
    first = reads[0]["t_ns"] if reads else None

    def ms(ns: int | None) -> float | None:
        return None if ns is None else round(ns / 1e6, 3)

    return {
        "handshake": [
            {
                "rtt_ms": ms(cli["connected_ns"] - cli["connect_ns"]),
                "source": "client connect() duration (no forwarder trace on this topology)",
            }
        ],
        "writes": srv["writes"],
        "records": {
            "count": len(layout),
            "plaintext_len": sorted(set(layout)),
            "wire_len": sorted({n + TLS13_RECORD_OVERHEAD for n in layout}),
        },
        "reads": reads,
        "server_tcp_info": {
            k: srv["tcp_info"][k]
            for k in ("snd_mss", "rcv_mss", "snd_cwnd", "total_retrans", "rtt_us")
        },
        "client_tcp_info": {
            k: cli["tcp_info"][k] for k in ("snd_mss", "rcv_mss", "total_retrans", "rtt_us")
        },
        "summary": {
            "response_len": p["response_len"],
            "ssl_writes": len(srv["writes"]),
            "records": len(layout),
            "server_snd_mss": srv["tcp_info"]["snd_mss"],
            "retransmissions": srv["tcp_info"]["total_retrans"],
            "client_reads": len(reads),
            "first_byte_ms": None
            if first is None or t_first_write is None
            else ms(first - t_first_write),
            "transfer_ms": None
            if not reads or t_first_write is None
            else ms(reads[-1]["t_ns"] - t_first_write),
            "max_read_gap_ms": ms(max(gaps)) if gaps else 0.0,
        },
    }


def _validator(eff_mss: int) -> Callable[[dict[str, Any]], list[str]]:
    def validate(doc: dict[str, Any]) -> list[str]:
        s = doc["ground_truth"]["summary"]
        problems = []
        if s["server_snd_mss"] != eff_mss:
            problems.append(f"server MSS {s['server_snd_mss']}, the topology gives {eff_mss}")
        if s["retransmissions"]:
            problems.append(f"{s['retransmissions']} retransmissions: not a healthy transfer")
        if (s["max_read_gap_ms"] or 0.0) >= HEALTHY_MAX_READ_GAP_MS:
            problems.append(
                f"a {s['max_read_gap_ms']} ms gap between client reads: a stall, not healthy"
            )
        return problems

    return validate


_M = __name__
CONTROLS = (
    "nagle",
    "nagle_delayed_ack",
    "delayed_ack",
    "tcp_cork",
    "tcp_hol_blocking",
    "tls_tiny_records",
    "tls_record_spanning",
    "tls_record_split_write",
    "tls_records_coalesced",
    "slow_start_restart",
)
register(
    Scenario(
        name="bulk_loopback_tls",
        summary="TLS 1.3 160 KiB download in 64 KiB writes over loopback (MSS 65 483)",
        what="healthy bulk transfer on lo: 64 KB segments, µs RTT, 16 KiB records; one capture "
        "(client.pcapng) is both ends' vantage",
        expected=(),
        controls=CONTROLS,
        pair=None,
        server=f"{_M}:server",
        client=f"{_M}:client",
        params=PARAMS,
        tls=True,
        ground_truth=ground_truth,
        validate=_validator(LOOPBACK_EFF_MSS),
        topology="loopback",
        fixture_middle=False,
    )
)
register(
    Scenario(
        name="bulk_veth_gso_tls",
        summary="TLS 1.3 160 KiB download in 64 KiB writes over veth, TSO/GSO on (super-segments)",
        what="healthy bulk transfer over a veth pair: GSO super-segments (> MSS 1448) at both "
        "ends, µs RTT, 16 KiB records",
        expected=(),
        controls=CONTROLS,
        pair=None,
        server=f"{_M}:server",
        client=f"{_M}:client",
        params=PARAMS,
        tls=True,
        ground_truth=ground_truth,
        validate=_validator(VETH_EFF_MSS),
        topology="veth",
        fixture_middle=False,
    )
)
