"""TCP_CORK left on (positive) vs cleared after each write (control) — DETECTION.md §3.

The client connects (TCP_NODELAY) and sends one subscribe line; the server sets TCP_CORK on
the accepted socket and then writes a 100-byte message every ``interval_ms``.  Positive: the
cork is never cleared, so each sub-MSS message waits in the socket until the kernel's
zero-window/probe timer fires (``tcp_probe0_base`` = max(RTO, 200 ms); RTO ≈ srtt +
200 ms ≈ 230 ms on the 30 ms RTT path) and ``tcp_write_wakeup`` sends it with PSH — with no
packet from the client anywhere near (timer-driven, unlike Nagle).  Control: the server
clears TCP_CORK right after each write (and sets it again before the next one), the
correct use of the option: the message leaves at once.

Both variants leave Nagle on at the server (so the cork is the only difference) and space
the messages 600 ms apart: longer than the hold, so every message starts with nothing in
flight and nothing unacknowledged.  Ground truth: each write's time, when its segment left
the server (forwarder ingress), the hold, the PSH flag, the last client packet that reached
the server before the release (the "no inbound trigger" check), the server's RTO from
``TCP_INFO``, and TCP_CORK read back from the kernel.
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
    listen,
    now_ns,
    recv_exact,
    tcp_info,
    tcp_options,
    tcp_socket,
)
from . import RunData, Scenario, register

TCP_PSH = 0x08
REQUEST = b"SUBSCRIBE updates\n"

PARAMS: dict[str, Any] = {
    "delay_ms": 15.0,
    "messages": 4,
    "message_len": 100,
    "interval_ms": 600.0,  # > the ≈ 230 ms hold: each message is corked on an idle socket
    "clear_cork": False,
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
    t_request = now_ns()
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 1)
    opts["TCP_CORK"] = bool(conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_CORK))
    info_before = tcp_info(conn)
    writes = []
    start = time.monotonic()
    for m in range(p["messages"]):
        delay = start + m * p["interval_ms"] / 1000 - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        if p["clear_cork"]:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 1)
        t = now_ns()
        conn.sendall(bytes([65 + m % 26]) * p["message_len"])
        if p["clear_cork"]:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 0)  # push what is queued
        writes.append({"message": m, "write_ns": t})
    opts["TCP_CORK_at_end"] = bool(conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_CORK))
    conn.recv(1)  # the client's FIN
    conn.close()
    ls.close()
    return {
        "socket": opts,
        "request_read_ns": t_request,
        "tcp_info_before": info_before,
        "writes": writes,
    }


def client(p: dict[str, Any]) -> dict[str, Any]:
    s = tcp_socket(cc=p["cc"], nodelay=p["client_nodelay"])
    s.settimeout(CONNECT_TIMEOUT_S)
    s.connect((p["server_ip"], p["port"]))
    s.settimeout(IO_TIMEOUT_S)
    opts = tcp_options(s)
    t_req = now_ns()
    s.sendall(REQUEST)
    reads = []
    for m in range(p["messages"]):
        recv_exact(s, p["message_len"])
        reads.append({"message": m, "read_ns": now_ns()})
    s.close()
    return {"socket": opts, "request_write_ns": t_req, "reads": reads}


def ground_truth(run: RunData) -> dict[str, Any]:
    p = run.params
    pkts = truth.packets(run.forwarder)
    reads = {r["message"]: r["read_ns"] for r in run.client["reads"]}
    c2s = [x for x in pkts if x.dir == "c2s" and x.t_out_ns is not None]
    rows = []
    for w in run.server["writes"]:
        off = w["message"] * p["message_len"]
        seg = truth.first_transmission(pkts, "s2c", off)
        row: dict[str, Any] = {**w, "rel_seq": off, "wireshark_seq": off + 1}
        if seg is not None:
            before = [x for x in c2s if x.t_out_ns <= seg.t_in_ns]  # type: ignore[operator]
            last_in = before[-1] if before else None
            row.update(
                {
                    "leave_ns": seg.t_in_ns,
                    "hold_ms": truth.ms(seg.t_in_ns - w["write_ns"]),
                    "segment_len": seg.len,
                    "psh": bool(seg.flags & TCP_PSH),
                    # the last client packet that reached the server before the release:
                    # older than the write ⇒ nothing from the peer triggered it
                    "last_inbound_ns": None if last_in is None else last_in.t_out_ns,
                    "inbound_before_write": last_in is None or last_in.t_out_ns <= w["write_ns"],  # type: ignore[operator]
                }
            )
        r = reads.get(w["message"])
        row["read_ns"] = r
        row["latency_ms"] = None if r is None else truth.ms(r - w["write_ns"])
        rows.append(row)
    holds = [r["hold_ms"] for r in rows if r.get("hold_ms") is not None]
    return {
        "handshake": list(truth.handshake(pkts)),
        "server_rto_ms": run.server["tcp_info_before"]["rto_us"] / 1000,
        "messages": rows,
        "summary": {
            "messages": len(rows),
            "hold_ms": holds,
            "hold_ms_min": min(holds) if holds else None,
            "hold_ms_max": max(holds) if holds else None,
            "all_psh": all(r.get("psh") for r in rows),
            "no_inbound_trigger": all(r.get("inbound_before_write") for r in rows),
        },
    }


def _validate(doc: dict[str, Any]) -> list[str]:
    s = doc["ground_truth"]["summary"]
    if len(s["hold_ms"]) != doc["params"]["messages"]:
        return ["a message's segment was not found"]
    if doc["params"]["clear_cork"]:
        return [] if s["hold_ms_max"] < 5 else [f"control held a message {s['hold_ms_max']} ms"]
    problems = []
    if s["hold_ms_min"] < 190:
        problems.append(f"positive hold too short: {s['hold_ms']}")
    if not (s["all_psh"] and s["no_inbound_trigger"]):
        problems.append("positive release had no PSH or had an inbound trigger")
    return problems


_M = __name__
register(
    Scenario(
        name="tcp_cork",
        summary="TCP_CORK set and never cleared: each 100-byte message waits ≈ RTO for the probe timer",
        what="4 corked 100-byte writes 600 ms apart; each leaves ≈ 230 ms later with PSH, no inbound trigger",
        expected=("tcp_cork",),
        pair="tcp_cork_cleared",
        server=f"{_M}:server",
        client=f"{_M}:client",
        params=PARAMS,
        ground_truth=ground_truth,
        validate=_validate,
    )
)
register(
    Scenario(
        name="tcp_cork_cleared",
        summary="TCP_CORK cleared after each write: every message leaves at once (control)",
        what="same writes, cork cleared after each: each segment leaves < 1 ms after its write",
        expected=(),
        controls=("tcp_cork",),
        pair="tcp_cork",
        server=f"{_M}:server",
        client=f"{_M}:client",
        params={**PARAMS, "clear_cork": True},
        ground_truth=ground_truth,
        validate=_validate,
    )
)
