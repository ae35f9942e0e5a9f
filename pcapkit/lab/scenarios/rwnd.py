"""Receiver stops reading → zero window (positive) vs keeps reading (control) — DETECTION.md §7.2.

The client is the receiver: it sets ``SO_RCVBUF`` = 8 KiB before connecting (the kernel
doubles it and stops auto-tuning it), sends one request line, reads ``read_before_pause``
bytes, then — positive — stops reading for ``pause_s`` (1.5 s) before reading the rest;
the control reads continuously.  The server (CUBIC, Nagle on, nothing else special) writes
``response_len`` bytes with one ``sendall``.

Positive: the client's buffer fills, it advertises window 0; the server stops and probes
(Linux: 0-byte segments at snd_una − 1, first after ≈ RTO, then backed off — Wireshark
labels them keep-alives, DETECTION.md §6); when the client reads again, its window update
reopens the window and the server resumes ≈ one-way delay later.  Ground truth from the
forwarder (which records each packet's raw TCP window): every zero-window ACK, the probes,
the reopening update, the episode duration, and the client's pause times.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import Any

from .. import truth
from ..apps import (
    CONNECT_TIMEOUT_S,
    IO_TIMEOUT_S,
    apply_tcp_options,
    listen,
    now_ns,
    recv_exact,
    tcp_info,
    tcp_options,
)
from . import RunData, Scenario, register

TCP_SYN, TCP_FIN, TCP_RST = 0x02, 0x01, 0x04
REQUEST = b"GET /download\n"

PARAMS: dict[str, Any] = {
    "delay_ms": 15.0,  # RTT 30 ms like the other fixtures (DETECTION.md's run used 20 ms)
    "response_len": 65_536,
    "client_rcvbuf": 8_192,  # SO_RCVBUF before connect (the kernel doubles it)
    "read_before_pause": 16_384,
    "pause_s": 1.5,  # 0: the reader keeps up (control)
    "read_chunk": 4_096,
    "server_nodelay": False,
    "client_nodelay": True,
}


def server(p: dict[str, Any], ready: Callable[[], None]) -> dict[str, Any]:
    ls = listen(p["server_ip"], p["port"], cc=p["cc"], nodelay=p["server_nodelay"])
    ready()
    conn, _ = ls.accept()
    conn.settimeout(IO_TIMEOUT_S)
    opts = tcp_options(conn)
    recv_exact(conn, len(REQUEST))
    t0 = now_ns()
    conn.sendall(bytes(range(256)) * (p["response_len"] // 256))
    t1 = now_ns()
    info = tcp_info(conn)
    conn.recv(1)  # the client's FIN
    conn.close()
    ls.close()
    return {"socket": opts, "write_start_ns": t0, "write_end_ns": t1, "tcp_info_end": info}


def client(p: dict[str, Any]) -> dict[str, Any]:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, p["client_rcvbuf"])
    apply_tcp_options(s, cc=p["cc"], nodelay=p["client_nodelay"])
    s.settimeout(CONNECT_TIMEOUT_S)
    s.connect((p["server_ip"], p["port"]))
    s.settimeout(IO_TIMEOUT_S)
    opts = tcp_options(s)
    opts["SO_RCVBUF"] = s.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
    s.sendall(REQUEST)
    total, got = p["response_len"] // 256 * 256, 0
    pause_start = pause_end = None
    reads = []
    while got < total:
        if pause_start is None and got >= p["read_before_pause"] and p["pause_s"]:
            pause_start = now_ns()
            time.sleep(p["pause_s"])
            pause_end = now_ns()
        data = s.recv(min(p["read_chunk"], total - got))
        if not data:
            raise ConnectionError(f"server closed after {got} bytes")
        got += len(data)
        reads.append({"t_ns": now_ns(), "bytes": got})
    s.close()
    return {
        "socket": opts,
        "pause_start_ns": pause_start,
        "pause_end_ns": pause_end,
        "reads": reads,
    }


def zero_window_episodes(pkts: list[truth.TracePacket], receiver_dir: str) -> list[dict[str, Any]]:
    """Runs of zero-window ACKs from the receiver, each closed by the first non-zero window."""
    sender_dir = "s2c" if receiver_dir == "c2s" else "c2s"
    eps: list[dict[str, Any]] = []
    cur: dict[str, Any] | None = None
    last_ack: int | None = None
    for x in pkts:
        if x.proto != 6:
            continue
        if x.dir == receiver_dir and not x.flags & (TCP_SYN | TCP_FIN | TCP_RST):
            if x.win == 0:
                if cur is None:
                    cur = {"first_zero_ns": x.t_in_ns, "zero_acks": [], "probes": []}
                    eps.append(cur)
                cur["zero_acks"].append(x.t_in_ns)
            elif cur is not None:
                cur["reopen_ns"] = x.t_in_ns
                cur["reopen_window"] = x.win
                cur["duration_ms"] = truth.ms(x.t_in_ns - cur["first_zero_ns"])
                cur = None
            last_ack = x.rel_ack
        elif x.dir == sender_dir and cur is not None and x.len <= 1:
            # Linux probe: 0-byte segment at snd_una − 1 (a keep-alive look-alike)
            if last_ack is not None and x.rel_seq is not None and x.rel_seq == last_ack - 1:
                cur["probes"].append(x.t_in_ns)
    for e in eps:
        e["zero_ack_count"] = len(e.pop("zero_acks"))
        e["probe_ns"] = e.pop("probes")
        e["probe_count"] = len(e["probe_ns"])
    return eps


def ground_truth(run: RunData) -> dict[str, Any]:
    pkts = truth.packets(run.forwarder)
    eps = zero_window_episodes(pkts, "c2s")
    resume = None
    if eps and eps[0].get("reopen_ns"):
        nxt = next(
            (
                x
                for x in truth.data_packets(pkts, "s2c")
                if x.t_in_ns > eps[0]["reopen_ns"]  # type: ignore[operator]
            ),
            None,
        )
        resume = None if nxt is None else nxt.t_in_ns
    c = run.client
    reads = c["reads"]
    return {
        "handshake": list(truth.handshake(pkts)),
        "client_rcvbuf": c["socket"]["SO_RCVBUF"],
        "pause_start_ns": c["pause_start_ns"],
        "pause_end_ns": c["pause_end_ns"],
        "zero_window_episodes": eps,
        "sender_resume_ns": resume,
        "summary": {
            "episodes": len(eps),
            "zero_window_acks": sum(e["zero_ack_count"] for e in eps),
            "probes": sum(e["probe_count"] for e in eps),
            "stall_ms": eps[0].get("duration_ms") if eps else None,
            "pause_ms": None
            if c["pause_start_ns"] is None
            else truth.ms(c["pause_end_ns"] - c["pause_start_ns"]),
            "transfer_ms": truth.ms(reads[-1]["t_ns"] - run.server["write_start_ns"]),
        },
    }


def _validate(doc: dict[str, Any]) -> list[str]:
    s = doc["ground_truth"]["summary"]
    if doc["params"]["pause_s"]:
        ok = s["episodes"] >= 1 and s["probes"] >= 1 and s["stall_ms"] is not None
        return [] if ok else [f"positive without a full zero-window episode: {s}"]
    return [] if s["zero_window_acks"] == 0 else [f"control advertised a zero window: {s}"]


_M = __name__
register(
    Scenario(
        name="zero_window",
        summary="receiver with an 8 KiB SO_RCVBUF stops reading 1.5 s: zero window, probes, reopen",
        what="reader pauses 1.5 s: zero-window ACKs, backed-off probes, window update, resume",
        expected=("zero_window",),
        pair="zero_window_control",
        server=f"{_M}:server",
        client=f"{_M}:client",
        params=PARAMS,
        ground_truth=ground_truth,
        validate=_validate,
    )
)
register(
    Scenario(
        name="zero_window_control",
        summary="same small receive buffer, reader keeps up: the window never closes (control)",
        what="same 8 KiB SO_RCVBUF, continuous reader: no zero window",
        expected=(),
        controls=("zero_window",),
        pair="zero_window",
        server=f"{_M}:server",
        client=f"{_M}:client",
        params={**PARAMS, "pause_s": 0},
        ground_truth=ground_truth,
        validate=_validate,
    )
)


# ----------------------------------------------------------------- receiver_limited (R7)
# DETECTION.md §11.5: a reader that keeps reading, but slowly.  The client leaves its
# buffers at the defaults (autotuning on); the positive reads ``read_chunk`` bytes then
# sleeps ``read_sleep_ms``; the control reads 64 KiB at a time without sleeping.  The
# server writes ``response_len`` bytes with one ``sendall`` and then reads the kernel's own
# account of the transfer from TCP_INFO: ``tcpi_busy_time`` and ``tcpi_rwnd_limited``
# (µs, u64 at offsets 168 and 176 of ``struct tcp_info``, include/uapi/linux/tcp.h) — the
# time the sender was blocked at the advertised window, the ground truth of the cost.
RL_PARAMS: dict[str, Any] = {
    "delay_ms": 15.0,
    "response_len": 163_840,  # 160 KiB: the default 64 KiB window fills, then ~20 updates
    "client_rcvbuf": 0,  # 0: default buffers, autotuning on (§11.5's rl_slow4k)
    "read_before_pause": 0,
    "pause_s": 0,
    "read_chunk": 4_096,
    "read_sleep_ms": 10.0,  # 0: read as fast as possible (control)
    "server_nodelay": False,
    "client_nodelay": True,
}
_TCP_INFO_FULL = 232  # sizeof(struct tcp_info) on 6.x
_TCPI_BUSY, _TCPI_RWND, _TCPI_SNDBUF = 168, 176, 184  # u64 µs (uapi tcp.h)


def _chrono_us(s: socket.socket) -> dict[str, int | None]:
    import struct

    raw = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, _TCP_INFO_FULL)
    if len(raw) < _TCPI_SNDBUF + 8:
        return {"busy_us": None, "rwnd_limited_us": None, "sndbuf_limited_us": None}
    busy, rwnd, sndbuf = struct.unpack_from("=QQQ", raw, _TCPI_BUSY)
    return {"busy_us": busy, "rwnd_limited_us": rwnd, "sndbuf_limited_us": sndbuf}


def rl_server(p: dict[str, Any], ready: Callable[[], None]) -> dict[str, Any]:
    ls = listen(p["server_ip"], p["port"], cc=p["cc"], nodelay=p["server_nodelay"])
    ready()
    conn, _ = ls.accept()
    conn.settimeout(IO_TIMEOUT_S)
    opts = tcp_options(conn)
    recv_exact(conn, len(REQUEST))
    t0 = now_ns()
    conn.sendall(bytes(range(256)) * (p["response_len"] // 256))
    t1 = now_ns()
    conn.recv(1)  # the client's FIN: everything was ACKed, the chronographs are final
    chrono = _chrono_us(conn)
    info = tcp_info(conn)
    conn.close()
    ls.close()
    return {
        "socket": opts,
        "write_start_ns": t0,
        "write_end_ns": t1,
        "tcp_info_end": info,
        "chrono": chrono,
    }


def rl_client(p: dict[str, Any]) -> dict[str, Any]:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    apply_tcp_options(s, cc=p["cc"], nodelay=p["client_nodelay"])
    s.settimeout(CONNECT_TIMEOUT_S)
    s.connect((p["server_ip"], p["port"]))
    s.settimeout(IO_TIMEOUT_S)
    opts = tcp_options(s)
    opts["SO_RCVBUF"] = s.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
    s.sendall(REQUEST)
    total, got = p["response_len"] // 256 * 256, 0
    reads = []
    sleep_s = p["read_sleep_ms"] / 1000
    chunk = p["read_chunk"] if sleep_s else 65_536
    while got < total:
        data = s.recv(min(chunk, total - got))
        if not data:
            raise ConnectionError(f"server closed after {got} bytes")
        got += len(data)
        reads.append({"t_ns": now_ns(), "bytes": got})
        if sleep_s:
            time.sleep(sleep_s)
    s.close()
    return {"socket": opts, "reads": reads}


def rl_ground_truth(run: RunData) -> dict[str, Any]:
    pkts = truth.packets(run.forwarder)
    zero = sum(
        1
        for x in pkts
        if x.proto == 6
        and x.dir == "c2s"
        and x.win == 0
        and not x.flags & (TCP_SYN | TCP_FIN | TCP_RST)
    )
    reads = run.client["reads"]
    ch = run.server["chrono"]
    gaps = [b["t_ns"] - a["t_ns"] for a, b in zip(reads, reads[1:], strict=False)]
    return {
        "handshake": list(truth.handshake(pkts)),
        "client_rcvbuf": run.client["socket"]["SO_RCVBUF"],
        "reads": len(reads),
        "read_gap_p50_ms": truth.ms(sorted(gaps)[len(gaps) // 2]) if gaps else None,
        "tcpi": ch,
        "summary": {
            "zero_window_acks": zero,
            # the kernel's own account (tcp_write_xmit's TCP_CHRONO_RWND_LIMITED)
            "rwnd_limited_ms": None
            if ch["rwnd_limited_us"] is None
            else round(ch["rwnd_limited_us"] / 1000, 3),
            "busy_ms": None if ch["busy_us"] is None else round(ch["busy_us"] / 1000, 3),
            "transfer_ms": truth.ms(reads[-1]["t_ns"] - run.server["write_start_ns"]),
        },
    }


def _rl_validate(doc: dict[str, Any]) -> list[str]:
    s = doc["ground_truth"]["summary"]
    problems = []
    if s["zero_window_acks"]:
        problems.append(f"the window reached zero (that is zero_window, not R7): {s}")
    if s["rwnd_limited_ms"] is None:
        return problems + ["no tcpi_rwnd_limited from the kernel"]
    if doc["params"]["read_sleep_ms"]:
        if s["rwnd_limited_ms"] < 0.3 * s["transfer_ms"]:
            problems.append(f"positive hardly window-limited: {s}")
    elif s["rwnd_limited_ms"] > 0.05 * s["transfer_ms"]:
        problems.append(f"control was window-limited: {s}")
    return problems


register(
    Scenario(
        name="receiver_limited",
        summary="slow reader (4 KiB every 10 ms, default buffers): the server sends at the "
        "advertised window's edge, never zero",
        what="160 KiB download read 4 KiB / 10 ms: small non-zero windows, the sender stops at "
        "the window's right edge and resumes on each window update (reader's cadence)",
        expected=("receiver_limited",),
        pair="receiver_limited_control",
        server=f"{_M}:rl_server",
        client=f"{_M}:rl_client",
        params=RL_PARAMS,
        ground_truth=rl_ground_truth,
        validate=_rl_validate,
    )
)
register(
    Scenario(
        name="receiver_limited_control",
        summary="the same download read 64 KiB at a time without sleeping (control)",
        what="the same 160 KiB download, fast reader: cwnd-limited, the window autotunes open",
        expected=(),
        controls=("receiver_limited",),
        pair="receiver_limited",
        server=f"{_M}:rl_server",
        client=f"{_M}:rl_client",
        params={**RL_PARAMS, "read_sleep_ms": 0.0},
        ground_truth=rl_ground_truth,
        validate=_rl_validate,
    )
)
