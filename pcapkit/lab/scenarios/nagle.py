"""Write-write-read request/response with Nagle on (positive) vs TCP_NODELAY (control).

DETECTION.md §2.2/§2.6: the client writes a 100-byte "header" and then a 100-byte "body",
then reads a 100-byte response, several times on one connection.  With Nagle on, the body
(a second small segment while the first is unacknowledged) is held until the server ACKs the
header; after the first exchange the server is in ping-pong mode and delays that ACK
(Linux ≥ 40 ms), so each exchange costs RTT + delayed ACK instead of one RTT.  The control
sets TCP_NODELAY: both writes leave within µs.

The one-way delay defaults to 15 ms (RTT 30 ms), away from any application cadence
(§8.1a).  The server sets TCP_NODELAY so only the client's behaviour differs between the
variants.  Ground truth: each exchange's write/read times (client clock = capture clock),
the server's ACK wait for the header segment and the time the body sat in the client's
socket, both measured at the forwarder.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .. import truth
from ..apps import (
    CONNECT_TIMEOUT_S,
    IO_TIMEOUT_S,
    listen,
    now_ns,
    recv_exact,
    tcp_options,
    tcp_socket,
)
from . import RunData, Scenario, register

PARAMS: dict[str, Any] = {
    "delay_ms": 15.0,
    "exchanges": 8,  # ≥ 5 (issue 4); the first is quick-ACKed, the rest show the 40 ms stall
    "header_len": 100,
    "body_len": 100,
    "response_len": 100,
    "think_ms": 0.0,  # pause between exchanges
    "client_nodelay": False,
    "server_nodelay": True,
}


def server(p: dict[str, Any], ready: Callable[[], None]) -> dict[str, Any]:
    ls = listen(p["server_ip"], p["port"], cc=p["cc"], nodelay=p["server_nodelay"])
    ready()
    conn, _ = ls.accept()
    conn.settimeout(IO_TIMEOUT_S)
    request_len = p["header_len"] + p["body_len"]
    response = b"R" * p["response_len"]
    requests: list[dict[str, int]] = []
    with conn:
        opts = tcp_options(conn)
        for _ in range(p["exchanges"]):
            recv_exact(conn, request_len)
            t_req = now_ns()
            conn.sendall(response)
            requests.append({"request_read_ns": t_req, "response_write_ns": now_ns()})
        conn.recv(1)  # wait for the client's FIN so the close is orderly
    ls.close()
    return {"socket": opts, "requests": requests}


def client(p: dict[str, Any]) -> dict[str, Any]:
    s = tcp_socket(cc=p["cc"], nodelay=p["client_nodelay"])
    s.settimeout(CONNECT_TIMEOUT_S)
    t_connect = now_ns()
    s.connect((p["server_ip"], p["port"]))
    t_established = now_ns()
    s.settimeout(IO_TIMEOUT_S)
    header, body = b"H" * p["header_len"], b"B" * p["body_len"]
    exchanges: list[dict[str, int]] = []
    with s:
        opts = tcp_options(s)
        for _ in range(p["exchanges"]):
            t1 = now_ns()
            s.sendall(header)
            t2 = now_ns()
            s.sendall(body)
            recv_exact(s, p["response_len"])
            t3 = now_ns()
            exchanges.append({"write1_ns": t1, "write2_ns": t2, "response_read_ns": t3})
            if p["think_ms"]:
                import time

                time.sleep(p["think_ms"] / 1000)
    return {
        "socket": opts,
        "connect_ns": t_connect,
        "established_ns": t_established,
        "exchanges": exchanges,
    }


def ground_truth(run: RunData) -> dict[str, Any]:
    p = run.params
    pkts = truth.packets(run.forwarder)
    hs = list(truth.handshake(pkts))
    req = p["header_len"] + p["body_len"]
    rows = []
    for i, ex in enumerate(run.client["exchanges"]):
        off1, off2 = i * req, i * req + p["header_len"]
        s1 = truth.first_transmission(pkts, "c2s", off1)
        s2 = truth.first_transmission(pkts, "c2s", off2)
        row: dict[str, Any] = {
            "exchange": i + 1,
            "write1_ns": ex["write1_ns"],
            "write2_ns": ex["write2_ns"],
            "response_read_ns": ex["response_read_ns"],
            "exchange_ms": truth.ms(ex["response_read_ns"] - ex["write1_ns"]),
        }
        if s1 is not None and s2 is not None:
            coalesced = s1 is s2
            row.update(
                {
                    "header_rel_seq": off1,
                    "body_rel_seq": off2,
                    "coalesced": coalesced,
                    # how long the body sat in the client's socket (leaves ≈ t_in at the forwarder)
                    "body_hold_ms": truth.ms(s2.t_in_ns - ex["write2_ns"]),
                    "segment_gap_ms": truth.ms(s2.t_in_ns - s1.t_in_ns),
                }
            )
            ack = truth.releasing_ack(pkts, s1)
            if ack is not None and s1.t_out_ns is not None:
                row.update(
                    {
                        "header_ack_pure": ack.len == 0,
                        # the server's ACK wait for the header: its delayed-ACK timer when pure
                        "server_ack_delay_ms": truth.ms(ack.t_in_ns - s1.t_out_ns),
                        "ack_to_body_ms": None
                        if coalesced
                        else truth.ms(s2.t_in_ns - ack.t_out_ns)
                        if ack.t_out_ns is not None
                        else None,
                    }
                )
        rows.append(row)
    held = [r for r in rows if r.get("body_hold_ms") is not None and r["body_hold_ms"] > 1.0]
    delacks = [
        r["server_ack_delay_ms"]
        for r in rows
        if r.get("header_ack_pure") and r.get("server_ack_delay_ms", 0) >= 30.0
    ]
    return {
        "handshake": hs,
        "exchanges": rows,
        "summary": {
            "exchanges": len(rows),
            "held_exchanges": len(held),
            "delayed_acks_ms": delacks,
            "exchange_ms": [r["exchange_ms"] for r in rows],
        },
    }


def _validate(doc: dict[str, Any]) -> list[str]:
    s, n = doc["ground_truth"]["summary"], doc["params"]["exchanges"]
    if doc["params"]["client_nodelay"]:
        return [] if s["held_exchanges"] == 0 else [f"control held a body: {s}"]
    ok = s["held_exchanges"] == n and len(s["delayed_acks_ms"]) == n - 1
    return [] if ok else [f"not every body waited for the (delayed) ACK: {s}"]


_SERVER = f"{__name__}:server"
_CLIENT = f"{__name__}:client"

register(
    Scenario(
        name="nagle_wwr",
        summary="write-write-read client with Nagle on: body held until the delayed ACK",
        what="8 write-write-read exchanges: from exchange 2 on, the 100-byte body waits for the server's delayed ACK (≈ 40 ms)",
        expected=("nagle_delayed_ack",),
        pair="nagle_wwr_nodelay",
        server=_SERVER,
        client=_CLIENT,
        params=PARAMS,
        ground_truth=ground_truth,
        validate=_validate,
    )
)
register(
    Scenario(
        name="nagle_wwr_nodelay",
        summary="write-write-read client with TCP_NODELAY: both writes leave at once (control)",
        what="same exchanges with TCP_NODELAY: header and body leave together",
        expected=(),
        controls=("nagle_delayed_ack",),
        pair="nagle_wwr",
        server=_SERVER,
        client=_CLIENT,
        params={**PARAMS, "client_nodelay": True},
        ground_truth=ground_truth,
        validate=_validate,
    )
)
