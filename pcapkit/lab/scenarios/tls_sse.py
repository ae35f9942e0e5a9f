"""SSE-style token stream over TLS 1.3, server Nagle on (positive) vs TCP_NODELAY (control).

DETECTION.md §2.2 and §8.1a: a Python ``ssl`` (OpenSSL 3) server sends two TLS 1.3
NewSessionTicket records right after the handshake, then — after the client's ``GET`` — the
response headers and an event every 50 ms (``data: token N\\n\\n``, one HTTP/1.1 chunk = one
``SSL_write`` = one TLS record each).  With Nagle on, a small record written while an earlier
small segment is unacknowledged waits for the client's ACK — often its delayed ACK (≥ 40 ms)
— so tokens arrive late and in bursts ("first token is late").  With TCP_NODELAY every record
leaves at once.  The client always sets TCP_NODELAY (§8.1a: otherwise its own GET is held
and contaminates the control).

One-way delay 15 ms (RTT 30 ms, away from the 50 ms event cadence).  The certificate is
self-signed and made per run; both ends write an NSS key log (``keylog_filename``), which
the runner embeds into both captures.  Ground truth: each event's write time (server) and
read time (client) and their difference — the delivery latency the user felt.
"""

from __future__ import annotations

import re
import socket
import ssl
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
    tcp_options,
    tls_client_context,
    tls_info,
    tls_server_context,
)
from ..certs import DEFAULT_HOSTNAME
from . import RunData, Scenario, register

PARAMS: dict[str, Any] = {
    "delay_ms": 15.0,
    "port": 443,  # Wireshark/tshark decode TLS on 443 without "decode as"
    "events": 20,
    "interval_ms": 50.0,
    "server_nodelay": False,
    "client_nodelay": True,
    # planted server think time: pause think_ms more before event think_before (0: none)
    "think_before": 0,
    "think_ms": 0.0,
}

RESPONSE_HEAD = (
    b"HTTP/1.1 200 OK\r\n"
    b"Content-Type: text/event-stream\r\n"
    b"Cache-Control: no-cache\r\n"
    b"Transfer-Encoding: chunked\r\n"
    b"\r\n"
)
MAX_REQUEST_BYTES = 16_384  # a GET line plus headers; more is a broken client
_EVENT_RE = re.compile(rb"data: token (\d+)\n\n")


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n" % len(data) + data + b"\r\n"


def server(p: dict[str, Any], ready: Callable[[], None]) -> dict[str, Any]:
    ctx = tls_server_context(p["cert"], p["key"], p["keylog_server"])
    ls = listen(p["server_ip"], p["port"], cc=p["cc"], nodelay=p["server_nodelay"])
    ready()
    raw, _ = ls.accept()
    raw.settimeout(IO_TIMEOUT_S)
    opts = tcp_options(raw)
    conn = ctx.wrap_socket(raw, server_side=True)  # handshake; OpenSSL sends 2 tickets
    t_handshake = now_ns()
    request = b""
    while b"\r\n\r\n" not in request:
        data = conn.recv(4096)
        if not data or len(request) > MAX_REQUEST_BYTES:
            raise ConnectionError("no complete request")
        request += data
    t_request = now_ns()
    conn.sendall(RESPONSE_HEAD)
    t_head = now_ns()
    writes = []
    start = time.monotonic()
    for n in range(1, p["events"] + 1):
        # event 1 right after the headers, then one every interval_ms (absolute schedule)
        if p["think_before"] and n == p["think_before"]:
            start += p["think_ms"] / 1000  # the schedule shifts: one long gap, then steady
        delay = start + (n - 1) * p["interval_ms"] / 1000 - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        t = now_ns()
        conn.sendall(_chunk(b"data: token %d\n\n" % n))
        writes.append({"n": n, "write_ns": t})
    conn.sendall(b"0\r\n\r\n")
    t_end = now_ns()
    try:  # orderly close: wait for the client's close_notify/FIN, then ours
        while conn.recv(4096):
            pass
        conn.unwrap().close()
    except (OSError, ssl.SSLError):
        conn.close()
    ls.close()
    return {
        "socket": opts,
        "handshake_done_ns": t_handshake,
        "request_read_ns": t_request,
        "head_write_ns": t_head,
        "events": writes,
        "end_write_ns": t_end,
        "request_line": request.split(b"\r\n", 1)[0].decode("ascii", "replace"),
    }


def client(p: dict[str, Any]) -> dict[str, Any]:
    ctx = tls_client_context(p["cert"], p["keylog_client"])
    raw = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    apply_tcp_options(raw, cc=p["cc"], nodelay=p["client_nodelay"])
    raw.settimeout(CONNECT_TIMEOUT_S)
    t_connect = now_ns()
    raw.connect((p["server_ip"], p["port"]))
    t_established = now_ns()
    conn = ctx.wrap_socket(raw, server_hostname=DEFAULT_HOSTNAME)
    t_handshake = now_ns()
    conn.settimeout(IO_TIMEOUT_S)
    opts = tcp_options(conn)  # wrap_socket detached ``raw``
    info = tls_info(conn)
    t_get = now_ns()
    conn.sendall(
        b"GET /v1/stream HTTP/1.1\r\nHost: "
        + DEFAULT_HOSTNAME.encode()
        + b"\r\nAccept: text/event-stream\r\n\r\n"
    )
    buf = b""
    body = b""
    head_done = False
    t_head = None
    reads: dict[int, int] = {}
    done = False
    while not done:
        data = conn.recv(65536)
        t = now_ns()
        if not data:
            break
        buf += data
        if not head_done:
            if b"\r\n\r\n" not in buf:
                continue
            _, buf = buf.split(b"\r\n\r\n", 1)
            head_done, t_head = True, t
        while True:  # de-chunk what is complete
            line, sep, rest = buf.partition(b"\r\n")
            if not sep:
                break
            size = int(line.split(b";")[0], 16)
            if len(rest) < size + 2:
                break
            body += rest[:size]
            buf = rest[size + 2 :]
            if size == 0:
                done = True
                break
        for m in _EVENT_RE.finditer(body):
            reads.setdefault(int(m.group(1)), t)
    try:
        conn.unwrap().close()
    except (OSError, ssl.SSLError):
        conn.close()
    return {
        "socket": opts,
        "tls": info,
        "connect_ns": t_connect,
        "established_ns": t_established,
        "handshake_done_ns": t_handshake,
        "get_write_ns": t_get,
        "head_read_ns": t_head,
        "events": [{"n": n, "read_ns": t} for n, t in sorted(reads.items())],
        "complete": done,
    }


def ground_truth(run: RunData) -> dict[str, Any]:
    pkts = truth.packets(run.forwarder)
    reads = {e["n"]: e["read_ns"] for e in run.client["events"]}
    # the first server payload packet the forwarder read at or after each write: when the
    # event left the server's stack (Nagle holds it there) and reached the client's
    # interface — apart from when the client app, a normal-priority process, got to read it
    s2c = sorted(
        (p.t_in_ns, p.t_out_ns) for p in truth.data_packets(pkts, "s2c") if p.t_out_ns is not None
    )
    events = []
    for w in run.server["events"]:
        r = reads.get(w["n"])
        wire = next((x for x in s2c if x[0] >= w["write_ns"]), None)
        events.append(
            {
                "n": w["n"],
                "write_ns": w["write_ns"],
                "read_ns": r,
                "latency_ms": truth.ms(None if r is None else r - w["write_ns"]),
                "left_ms": truth.ms(None if wire is None else wire[0] - w["write_ns"]),
                "arrived_ms": truth.ms(None if wire is None else wire[1] - w["write_ns"]),
            }
        )
    lat = sorted(e["latency_ms"] for e in events if e["latency_ms"] is not None)
    one_way = run.params["delay_s2c_ms"] or run.params["delay_ms"]
    waits = truth.ack_waits(pkts, "s2c")
    return {
        "handshake": list(truth.handshake(pkts)),
        # the client's ACK waits for server segments (the 2nd NewSessionTicket's delayed ACK
        # is what holds the first event with Nagle on, DETECTION.md §8.1a)
        "client_ack_waits": waits,
        "tls_handshake_ms": truth.ms(run.client["handshake_done_ns"] - run.client["connect_ns"]),
        "first_event_latency_ms": events[0]["latency_ms"] if events else None,
        "events": events,
        "summary": {
            "events_written": len(events),
            "events_read": len(reads),
            "complete": run.client["complete"],
            "latency_ms_min": lat[0] if lat else None,
            "latency_ms_p50": lat[len(lat) // 2] if lat else None,
            "latency_ms_max": lat[-1] if lat else None,
            # an event is "late" when it needed more than the one-way delay + 5 ms
            "late_events": sum(1 for x in lat if x > float(one_way) + 5.0),
            # ... and held in the server's stack more than 5 ms (what Nagle does)
            "held_events": sum(1 for e in events if (e["left_ms"] or 0.0) > 5.0),
            "client_delayed_acks_ms": [w["wait_ms"] for w in waits if w["delayed"]],
        },
    }


def _validate(doc: dict[str, Any]) -> list[str]:
    gt, p = doc["ground_truth"], doc["params"]
    s = gt["summary"]
    one_way = p["delay_s2c_ms"] or p["delay_ms"]
    first = gt["first_event_latency_ms"]
    problems = [] if s["events_read"] == p["events"] else [f"events lost: {s}"]
    if p.get("drop_s2c"):
        if s["late_events"] < 1:
            problems.append(f"the drop delayed no event: {s}")
    elif p.get("think_before"):
        ev = gt["events"]
        k = p["think_before"] - 1
        gap = (ev[k]["write_ns"] - ev[k - 1]["write_ns"]) / 1e6
        if gap < p["think_ms"] + p["interval_ms"] - 5 or s["late_events"] > 2:
            problems.append(f"think gap {gap:.1f} ms not planted, or events late: {s}")
    elif p["server_nodelay"]:
        if first is None or first >= one_way + 5 or s["late_events"] > 2:
            problems.append(f"control events were late: first {first} ms, {s}")
    elif first is None or first < one_way + doc["path"]["rtt_ms"] + 30:
        problems.append(f"first event not held behind the delayed ACK: {first} ms")
    return problems


_SERVER = f"{__name__}:server"
_CLIENT = f"{__name__}:client"

register(
    Scenario(
        name="tls_sse_nagle",
        summary="TLS 1.3 SSE token stream, server Nagle on: tokens wait for (delayed) ACKs",
        what="20 SSE events over TLS 1.3 every 50 ms; event 1 waits behind the client's delayed ACK of the 2nd session ticket",
        expected=("nagle_delayed_ack",),
        pair="tls_sse_nodelay",
        server=_SERVER,
        client=_CLIENT,
        params=PARAMS,
        tls=True,
        ground_truth=ground_truth,
        validate=_validate,
    )
)
register(
    Scenario(
        name="tls_sse_nodelay",
        summary="TLS 1.3 SSE token stream, server TCP_NODELAY: each token leaves at once (control)",
        what="same stream with TCP_NODELAY at the server: each event leaves when written",
        expected=(),
        controls=("nagle_delayed_ack",),
        pair="tls_sse_nagle",
        server=_SERVER,
        client=_CLIENT,
        params={**PARAMS, "server_nodelay": True},
        tls=True,
        ground_truth=ground_truth,
        validate=_validate,
    )
)
register(
    Scenario(
        name="tls_sse_think",
        summary="TLS 1.3 SSE token stream with TCP_NODELAY and a 400 ms server pause before event 11",
        what="20 SSE events every 50 ms, the server thinks 400 ms more before event 11: a long "
        "gap with no network cause (attributed to the server)",
        expected=(),
        controls=("tcp_hol_blocking",),
        incidental=("sse_batching",),
        pair="tls_sse_drop",
        server=_SERVER,
        client=_CLIENT,
        params={**PARAMS, "server_nodelay": True, "think_before": 11, "think_ms": 400.0},
        tls=True,
        ground_truth=ground_truth,
        validate=_validate,
    )
)
register(
    Scenario(
        name="tls_sse_drop",
        summary="TLS 1.3 SSE token stream with TCP_NODELAY; the segment carrying event 10 is dropped",
        what="20 SSE events every 50 ms; the s2c packet of event 10 is lost: events 10–12 wait for "
        "the retransmission and arrive together (gap attributed to tcp_hol_blocking)",
        expected=("tcp_hol_blocking",),
        # seen downstream of the drop only (client, middle); the server sends on schedule
        incidental=("sse_batching",),
        pair="tls_sse_think",
        server=_SERVER,
        client=_CLIENT,
        # s2c payload packets: 1 server flight, 2 session tickets, 3 response head, then
        # one per event: event 10 is payload packet 14 (checked by the validation)
        params={**PARAMS, "server_nodelay": True, "drop_s2c": [14]},
        tls=True,
        ground_truth=ground_truth,
        validate=_validate,
    )
)
