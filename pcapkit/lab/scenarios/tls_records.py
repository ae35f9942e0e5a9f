"""TLS record sizing: tiny records (T1) and large records across a lost segment (T2).

Both pairs use one TLS 1.3 connection (Python ``ssl`` / OpenSSL 3, both ends TCP_NODELAY so
only the record sizes differ between variants), port 443 so tshark decodes TLS without
"decode as", a per-run self-signed certificate, and key logs embedded in both captures.
The client connects, sends a one-line request and reads the response; the server answers
after reading the request (so its NewSessionTickets are long gone when the response starts).

* ``tls_tiny_records`` (DETECTION.md §5.1): the server writes each message one byte per
  ``SSL_write`` — every byte becomes a 23-byte TLS 1.3 record (5 header + 1 plaintext + 1
  inner content type + 16 tag), one record per PSH segment with NODELAY — except where the
  sender runs out of cwnd: in the first message the initial window (10 segments, two of
  them the session tickets) is used up after 8 records and the remaining 12 leave together
  in one segment when the first ACK returns (real stack behaviour, kept in the fixture).
  ``tls_buffered_records`` writes each 20-byte message with one ``SSL_write`` (one 42-byte
  record: > 16 B plaintext, so not "tiny" by §5.1's definition).
* ``tls_large_record_drop`` (§5.2): the server writes 64 KiB with one ``SSL_write``; OpenSSL
  cuts it into four 16 KiB records (16 401-byte records, 16 406 bytes on the wire, ≈ 12
  segments each).  The forwarder drops one server→client segment inside the first record
  (the 5th of the response), so none of that record's plaintext reaches the application
  before the retransmission.  ``tls_small_records_drop`` writes the same 64 KiB in
  1 426-byte ``SSL_write`` slices with the same drop: each record is 1 448 bytes on the wire,
  exactly one MSS (TCP timestamps on), so every segment carries exactly one whole record —
  alone while cwnd is open, and packed back to back (still aligned) once writes queue.  The
  records before the hole are delivered at once; only the lost segment's record and those
  behind it wait.  Both variants show TCP head-of-line blocking (any drop does), so it is
  ``incidental``, not what the pair tests.

  Why 1 426 and not nginx's 1 369 (DETECTION.md §5.2's recipe): 1 369 is sized for TLS 1.2
  framing and smaller MSS; with TLS 1.3 a 1 369-byte record is 1 391 bytes on the wire, and
  once cwnd is exhausted Linux packs queued records into full 1 448-byte segments, so records
  straddle segments — in a trial run record 44 of 48 spanned two flights 27.9 ms apart, the
  T2 signature, in the control.  1 426 is DETECTION.md §5.2's own "plaintext > 1426 B spans"
  threshold: the largest record that never spans.

Ground truth: write times and sizes (server), the record layout the writes imply, the
client's read times with byte counts (what the application got when), and the drop with
its retransmission from the forwarder.
"""

from __future__ import annotations

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
    tcp_info,
    tcp_options,
    tls_client_context,
    tls_info,
    tls_server_context,
)
from ..certs import DEFAULT_HOSTNAME
from . import RunData, Scenario, register

TLS13_RECORD_OVERHEAD = 22  # 5 header + 1 inner content type + 16 AEAD tag (DETECTION §1.7)
TLS_MAX_PLAINTEXT = 16_384  # RFC 8446 §5.1
REQUEST = b"GET /stream HTTP/1.1\r\nHost: pcapkit.lab\r\n\r\n"

TINY_PARAMS: dict[str, Any] = {
    "delay_ms": 15.0,
    "port": 443,
    "mode": "tiny",  # "tiny": one SSL_write per byte; "buffered": one SSL_write per message
    "messages": 5,
    "message_len": 20,  # > 16 B: the buffered control's records are not "tiny" (§5.1)
    "interval_ms": 100.0,  # > RTT + delayed ACK: each message starts with nothing in flight
    "server_nodelay": True,
    "client_nodelay": True,
}

LARGE_PARAMS: dict[str, Any] = {
    "delay_ms": 15.0,
    "port": 443,
    "response_len": 65_536,
    "slice_len": None,  # None: one SSL_write (16 KiB records); N: SSL_write per N bytes
    # s2c payload packets: 1 server handshake flight, 2 NewSessionTickets (one segment
    # each), then the response: #8 is the response's 5th segment, inside the first record
    "drop_s2c": [8],
    "server_nodelay": True,
    "client_nodelay": True,
}


def _accept_tls(p: dict[str, Any], ready: Callable[[], None]) -> tuple[Any, Any, dict[str, Any]]:
    ctx = tls_server_context(p["cert"], p["key"], p["keylog_server"])
    ls = listen(p["server_ip"], p["port"], cc=p["cc"], nodelay=p["server_nodelay"])
    ready()
    raw, _ = ls.accept()
    raw.settimeout(IO_TIMEOUT_S)
    opts = tcp_options(raw)
    conn = ctx.wrap_socket(raw, server_side=True)
    request = b""
    while b"\r\n\r\n" not in request:
        data = conn.recv(4096)
        if not data or len(request) > 16_384:
            raise ConnectionError("no complete request")
        request += data
    return ls, conn, opts


def _close_tls_server(ls: socket.socket, conn: ssl.SSLSocket) -> None:
    try:  # orderly close: wait for the client's close_notify/FIN, then ours
        while conn.recv(4096):
            pass
        conn.unwrap().close()
    except (OSError, ssl.SSLError):
        conn.close()
    ls.close()


def connect_tls(p: dict[str, Any]) -> tuple[ssl.SSLSocket, dict[str, Any]]:
    ctx = tls_client_context(p["cert"], p["keylog_client"])
    raw = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    apply_tcp_options(raw, cc=p["cc"], nodelay=p["client_nodelay"])
    raw.settimeout(CONNECT_TIMEOUT_S)
    t_connect = now_ns()
    raw.connect((p["server_ip"], p["port"]))
    conn = ctx.wrap_socket(raw, server_hostname=DEFAULT_HOSTNAME)
    t_hs = now_ns()
    conn.settimeout(IO_TIMEOUT_S)
    meta = {
        "socket": tcp_options(conn),
        "tls": tls_info(conn),
        "connect_ns": t_connect,
        "handshake_done_ns": t_hs,
    }
    return conn, meta


def read_all(conn: ssl.SSLSocket, total: int) -> list[dict[str, int]]:
    """Read ``total`` bytes; one entry per recv: time and cumulative bytes."""
    reads = []
    got = 0
    while got < total:
        data = conn.recv(65_536)
        t = now_ns()
        if not data:
            raise ConnectionError(f"server closed after {got} of {total} bytes")
        got += len(data)
        reads.append({"t_ns": t, "bytes": got})
    return reads


def client_close(conn: ssl.SSLSocket) -> None:
    try:
        conn.unwrap().close()
    except (OSError, ssl.SSLError):
        conn.close()


# --------------------------------------------------------------------------- tiny records


def tiny_server(p: dict[str, Any], ready: Callable[[], None]) -> dict[str, Any]:
    ls, conn, opts = _accept_tls(p, ready)
    t_request = now_ns()
    writes = []
    start = time.monotonic()
    for m in range(p["messages"]):
        delay = start + m * p["interval_ms"] / 1000 - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        msg = (b"%d" % m) * p["message_len"]
        msg = msg[: p["message_len"]]
        t0 = now_ns()
        if p["mode"] == "tiny":
            for i in range(len(msg)):
                conn.sendall(msg[i : i + 1])  # one SSL_write, one record per byte
            n = len(msg)
        else:
            conn.sendall(msg)
            n = 1
        writes.append(
            {"message": m, "first_write_ns": t0, "last_write_ns": now_ns(), "ssl_writes": n}
        )
    _close_tls_server(ls, conn)
    return {"socket": opts, "request_read_ns": t_request, "writes": writes}


def tiny_client(p: dict[str, Any]) -> dict[str, Any]:
    conn, meta = connect_tls(p)
    meta["request_write_ns"] = now_ns()
    conn.sendall(REQUEST)
    reads = read_all(conn, p["messages"] * p["message_len"])
    client_close(conn)
    return {**meta, "reads": reads}


def tiny_ground_truth(run: RunData) -> dict[str, Any]:
    p = run.params
    pkts = truth.packets(run.forwarder)
    tiny = p["mode"] == "tiny"
    n_records = p["messages"] * (p["message_len"] if tiny else 1)
    plaintext = 1 if tiny else p["message_len"]
    reads = run.client["reads"]
    msgs = []
    for w in run.server["writes"]:
        end = (w["message"] + 1) * p["message_len"]
        r = next((x for x in reads if x["bytes"] >= end), None)
        msgs.append(
            {
                **w,
                "read_ns": None if r is None else r["t_ns"],
                "latency_ms": None if r is None else truth.ms(r["t_ns"] - w["first_write_ns"]),
            }
        )
    # response data segments (after the request was delivered): each should carry one record
    # response data segments (after the first message write): each should carry one record
    first_write = run.server["writes"][0]["first_write_ns"]
    segs = [
        x for x in truth.data_packets(pkts, "s2c") if x.t_in_ns >= first_write and x.action == "fwd"
    ]
    start = min((x.rel_seq for x in segs), default=None)  # type: ignore[type-var]
    wire = plaintext + TLS13_RECORD_OVERHEAD
    segs = [x for x in segs if start is not None and x.rel_seq < start + n_records * wire]  # type: ignore[operator]
    return {
        "handshake": list(truth.handshake(pkts)),
        "app_records": {
            "count": n_records,
            "plaintext_len": plaintext,
            "record_length": plaintext + 17,  # tls.record.length: plaintext + type + tag
            "wire_len": wire,
        },
        "response_rel_seq": start,
        "response_wire_len": n_records * wire,
        "response_segments": len(segs),
        "response_segment_lens": sorted({x.len for x in segs}),
        "single_record_segments": sum(1 for x in segs if x.len == wire),
        "messages": msgs,
        "summary": {
            "records": n_records,
            "segments": len(segs),
            "single_record_segments": sum(1 for x in segs if x.len == wire),
            "overhead_ratio": round((wire - plaintext) / wire, 3),
            "latency_ms_max": max((m["latency_ms"] or 0.0) for m in msgs) if msgs else None,
        },
    }


def _validate_tiny(doc: dict[str, Any]) -> list[str]:
    gt = doc["ground_truth"]
    want = gt["app_records"]["count"]
    if doc["params"]["mode"] == "tiny" and gt["response_segments"] < 0.7 * want:
        return [f"tiny records were coalesced: {gt['response_segments']} segments for {want}"]
    return []


# --------------------------------------------------------------------------- large records


def large_server(p: dict[str, Any], ready: Callable[[], None]) -> dict[str, Any]:
    ls, conn, opts = _accept_tls(p, ready)
    t_request = now_ns()
    body = bytes(range(256)) * (p["response_len"] // 256 + 1)
    body = body[: p["response_len"]]
    step = p["slice_len"] or len(body)
    writes = []
    t0 = now_ns()
    for off in range(0, len(body), step):
        conn.sendall(body[off : off + step])
        writes.append({"offset": off, "len": min(step, len(body) - off)})
    t1 = now_ns()
    info = tcp_info(conn)
    _close_tls_server(ls, conn)
    return {
        "socket": opts,
        "request_read_ns": t_request,
        "write_start_ns": t0,
        "write_end_ns": t1,
        "ssl_writes": len(writes),
        "tcp_info_after_write": info,
    }


def large_client(p: dict[str, Any]) -> dict[str, Any]:
    conn, meta = connect_tls(p)
    meta["request_write_ns"] = now_ns()
    conn.sendall(REQUEST)
    reads = read_all(conn, p["response_len"])
    client_close(conn)
    return {**meta, "reads": reads}


def record_layout(response_len: int, slice_len: int | None) -> list[int]:
    """Plaintext length of each record the server's writes produce (OpenSSL: ≤ 16 KiB each)."""
    out = []
    step = slice_len or response_len
    for off in range(0, response_len, step):
        n = min(step, response_len - off)
        while n > 0:
            out.append(min(n, TLS_MAX_PLAINTEXT))
            n -= TLS_MAX_PLAINTEXT
    return out


def large_ground_truth(run: RunData) -> dict[str, Any]:
    p = run.params
    pkts = truth.packets(run.forwarder)
    srv = run.server
    resp = [x for x in truth.data_packets(pkts, "s2c") if x.t_in_ns >= srv["write_start_ns"]]
    start = min((x.rel_seq for x in resp), default=None)  # type: ignore[type-var]
    layout = record_layout(p["response_len"], p["slice_len"])
    records = []
    off = 0 if start is None else start
    for i, n in enumerate(layout):
        wire = n + TLS13_RECORD_OVERHEAD
        records.append({"record": i + 1, "rel_seq": off, "wire_len": wire, "plaintext_len": n})
        off += wire
    drops = truth.tcp_drops(pkts, run.forwarder)
    for d in drops:
        rec = next(
            (r for r in records if r["rel_seq"] <= d["rel_seq"] < r["rel_seq"] + r["wire_len"]),
            None,
        )
        d["response_segment"] = (
            None
            if start is None
            else 1
            + sum(
                1
                for x in resp
                if x.rel_seq < d["rel_seq"] and x.action != "drop" and x.t_in_ns < d["t_ns"]
            )  # type: ignore[operator]
        )
        d["in_record"] = None if rec is None else rec["record"]
        d["records_hit"] = [
            r["record"]
            for r in records
            if r["rel_seq"] < d["rel_seq"] + d["len"]
            and d["rel_seq"] < r["rel_seq"] + r["wire_len"]
        ]
        retx = d["retransmissions"]
        arrived = retx[0]["t_out_ns"] if retx else None
        # what the application had read before the retransmission reached the client
        d["app_bytes_before_fill"] = max(
            (
                r["bytes"]
                for r in run.client["reads"]
                if arrived is not None and r["t_ns"] < arrived
            ),
            default=0,
        )
    reads = run.client["reads"]
    first_read = reads[0] if reads else None
    return {
        "handshake": list(truth.handshake(pkts)),
        "response_rel_seq": start,
        "records": records,
        "drops": drops,
        "first_read_ns": None if first_read is None else first_read["t_ns"],
        "first_read_bytes": None if first_read is None else first_read["bytes"],
        "reads": reads,
        "summary": {
            "records": len(records),
            "record_plaintext_max": max(layout),
            "segments_per_record_max": -(-(max(layout) + TLS13_RECORD_OVERHEAD) // 1448),
            "first_byte_ms": None
            if first_read is None
            else truth.ms(first_read["t_ns"] - srv["write_start_ns"]),
            "complete_ms": truth.ms(reads[-1]["t_ns"] - srv["write_start_ns"]) if reads else None,
            "drop_in_record": drops[0]["in_record"] if drops else None,
            "retransmit_after_ms": drops[0]["retransmit_after_ms"] if drops else None,
            "app_bytes_before_fill": drops[0]["app_bytes_before_fill"] if drops else None,
        },
    }


def _validate_large(doc: dict[str, Any]) -> list[str]:
    gt = doc["ground_truth"]
    if len(gt["drops"]) != 1:
        return [f"expected one drop, got {len(gt['drops'])}"]
    d = gt["drops"][0]
    problems = []
    if d["in_record"] is None or not d["retransmissions"]:
        problems.append(f"drop not inside the response, or never retransmitted: {d}")
    if doc["params"]["slice_len"] is None:
        if d["in_record"] != 1 or d["app_bytes_before_fill"] != 0:
            problems.append("positive: the drop must hide all of record 1 until the fill")
    elif not d["app_bytes_before_fill"]:
        problems.append("control: records before the hole should be read before the fill")
    return problems


_M = __name__
register(
    Scenario(
        name="tls_tiny_records",
        summary="TLS 1.3, 1-byte SSL_write loop with TCP_NODELAY: 23-byte records, one per segment",
        what="100 one-byte SSL_writes → 100 TLS 1.3 records of 23 bytes, nearly all alone in a PSH segment",
        expected=("tls_tiny_records",),
        pair="tls_buffered_records",
        server=f"{_M}:tiny_server",
        client=f"{_M}:tiny_client",
        params=TINY_PARAMS,
        tls=True,
        ground_truth=tiny_ground_truth,
        validate=_validate_tiny,
    )
)
register(
    Scenario(
        name="tls_buffered_records",
        summary="TLS 1.3, one SSL_write per 20-byte message (control for tiny records)",
        what="5 messages, one SSL_write each → 5 records of 42 bytes",
        expected=(),
        controls=("tls_tiny_records",),
        pair="tls_tiny_records",
        server=f"{_M}:tiny_server",
        client=f"{_M}:tiny_client",
        params={**TINY_PARAMS, "mode": "buffered"},
        tls=True,
        ground_truth=tiny_ground_truth,
        validate=_validate_tiny,
    )
)
register(
    Scenario(
        name="tls_large_record_drop",
        summary="TLS 1.3 64 KiB write as 16 KiB records; one s2c segment of record 1 dropped",
        what="16 KiB record 1 loses its 5th segment: none of it is readable until the retransmission",
        expected=("tls_record_spanning",),
        incidental=("tcp_hol_blocking",),
        pair="tls_small_records_drop",
        server=f"{_M}:large_server",
        client=f"{_M}:large_client",
        params=LARGE_PARAMS,
        tls=True,
        ground_truth=large_ground_truth,
        validate=_validate_large,
    )
)
register(
    Scenario(
        name="tls_small_records_drop",
        summary="TLS 1.3 64 KiB in one-segment records (1426 B), same drop (control for spanning)",
        what="same drop, 1426-byte records (one per segment): records before the hole are read at once",
        expected=(),
        controls=("tls_record_spanning",),
        incidental=("tcp_hol_blocking",),
        pair="tls_large_record_drop",
        server=f"{_M}:large_server",
        client=f"{_M}:large_client",
        params={**LARGE_PARAMS, "slice_len": 1426},
        tls=True,
        ground_truth=large_ground_truth,
        validate=_validate_large,
    )
)
