"""TLS records handed to TCP in pieces (T3a, DETECTION.md §5.3) vs whole records.

One TLS 1.3 connection (OpenSSL 3 through Python's ``ssl``, port 443, key logs embedded),
RTT 30 ms, client TCP_NODELAY (§8.1a), server with Nagle **on** (the default) in both
variants.  After the client's request the server sends ``messages`` messages of
``message_len`` bytes, ``interval_ms`` apart, one ``SSL_write`` — one TLS record — each.

The server drives TLS through ``ssl.SSLObject`` + ``MemoryBIO`` (the sans-I/O API that
asyncio, Trio and Twisted build on): OpenSSL seals each record into the outgoing BIO and the
server itself writes the ciphertext to its TCP socket.

* ``tls_record_split_write`` (positive, ``mode="split"``): the record's 5-byte header and its
  body are written with two ``send()`` calls — what a TLS layer that writes header and body
  separately, or a relay forwarding ciphertext as it arrives, does.  The header leaves at
  once as a 5-byte PSH segment that ends *inside* the record (DETECTION.md §1.5 rule 2: every
  ``sendmsg`` ends with PSH); the body is a second small write while the first small segment
  is unacknowledged, so Nagle holds it until the client's ACK of the header returns (§2.2
  lists "TLS record header/body" among the write-write-read cases).  The client cannot
  decrypt the record meanwhile: every message arrives ≥ 1 RTT late.  (The first message is
  the exception: written while the session tickets' segment is still unacknowledged, its
  header is held too and both pieces leave together after the client's delayed ACK — in
  both variants.)
* ``tls_record_whole_write`` (control, ``mode="whole"``): the same records, each written
  with one ``send()``: one PSH segment per record, ending at the record's end; Nagle has
  nothing to hold (the previous message was acknowledged long ago).

Why not the recipe DETECTION.md §8.2 suggests (a non-blocking socket with a tiny
``SO_SNDBUF``, OpenSSL retrying the rest of a record after ``SSL_ERROR_WANT_WRITE``): tried
with a non-blocking ``SSLSocket`` (four 16 KiB ``SSL_write`` calls, two of them retried after
``WANT_WRITE``) and here with the ciphertext writer retrying short ``send()`` calls on a
non-blocking socket (``mode="nonblocking"``, kept for reproduction: ``pcapkit lab run
tls_record_split_write -o out --set mode='"nonblocking"' --set message_len=16384 --set
server_sndbuf=4096 --set interval_ms=0 --set messages=6``).  The writes do come back short
(records 3–6 needed 2–3 ``send()`` calls, SO_SNDBUF 8 KiB after doubling), but Linux's
``tcp_sendmsg_locked`` only runs out of send-buffer space when it needs a *new* skb, so a
short ``send()`` always ends on a full skb: the PSH lands on a full-MSS segment, exactly like
a GSO burst end (§1.5 rule 6), and no sub-MSS PSH segment ends inside a record (ground truth
``records_split`` 0).  The pauses show up as records crossing flights, which T2
(``tls_record_spanning``) reports.  With Python's ``ssl`` on Linux the §5.3 signature comes
from the application's (or a relay's) own write boundaries, as in this scenario.

Ground truth: the server's send times per record piece, the client's read times per message
(latency from the first piece's send), and from the forwarder's trace each record's
segments, the sub-MSS PSH segments ending inside it and the wait from that head to the
record's tail.
"""

from __future__ import annotations

import select
import socket
import ssl
import time
from collections.abc import Callable
from typing import Any

from .. import truth
from ..apps import IO_TIMEOUT_S, listen, now_ns, tcp_info, tcp_options, tls_server_context
from . import RunData, Scenario, register
from .tls_records import TLS13_RECORD_OVERHEAD, client_close, connect_tls, read_all

REQUEST = b"GET /events HTTP/1.1\r\nHost: pcapkit.lab\r\n\r\n"
TLS_HEADER = 5  # RFC 8446 §5.1: type, legacy version, length
MAX_REQUEST_BYTES = 16_384
SELECT_TIMEOUT_S = 10.0  # one wait for socket-buffer space; the lab path drains it in ~RTT
WIRE_MSS = 1448  # 1500-byte MTU − 40 (IPv4 + TCP) − 12 (timestamps): the lab path's MSS

PARAMS: dict[str, Any] = {
    "delay_ms": 15.0,
    "port": 443,
    "messages": 10,
    "message_len": 600,  # < MSS: the body is one small segment, Nagle's business
    "interval_ms": 150.0,  # > RTT + Linux delayed ACK (≤ 200 ms cap reached rarely): no overlap
    "mode": "split",  # "split": header, then body; "whole": one send; "nonblocking": see above
    "server_sndbuf": None,  # SO_SNDBUF for mode="nonblocking" (kernel doubles it)
    "server_nodelay": False,  # Nagle on, the default of every socket
    "client_nodelay": True,
}


class _Tls:
    """A server-side ``SSLObject`` over a socket: the application writes the ciphertext."""

    def __init__(self, ctx: ssl.SSLContext, sock: socket.socket) -> None:
        self.sock = sock
        self.inc, self.out = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.obj = ctx.wrap_bio(self.inc, self.out, server_side=True)

    def flush(self) -> None:
        data = self.out.read()
        if data:
            self.sock.sendall(data)

    def _feed(self) -> None:
        data = self.sock.recv(65_536)
        if not data:
            raise ConnectionError("peer closed")
        self.inc.write(data)

    def handshake(self) -> None:
        while True:
            try:
                self.obj.do_handshake()
                break
            except ssl.SSLWantReadError:
                self.flush()
                self._feed()
        self.flush()

    def read_request(self) -> bytes:
        buf = b""
        while b"\r\n\r\n" not in buf:
            try:
                buf += self.obj.read(65_536)
            except ssl.SSLWantReadError:
                self.flush()
                self._feed()
            if len(buf) > MAX_REQUEST_BYTES:
                raise ConnectionError("no complete request")
        self.flush()  # NewSessionTickets, if OpenSSL produced them on the first read
        return buf

    def seal(self, plaintext: bytes) -> bytes:
        """One SSL_write: the ciphertext OpenSSL put in the outgoing BIO (whole records)."""
        self.flush()
        self.obj.write(plaintext)
        return self.out.read()

    def close(self) -> None:
        try:
            self.obj.unwrap()
        except (ssl.SSLWantReadError, ssl.SSLError):
            pass
        self.flush()
        self.sock.settimeout(IO_TIMEOUT_S)
        try:  # the client's close_notify and FIN
            while self.sock.recv(65_536):
                pass
        except OSError:
            pass
        self.sock.close()


def _records(ct: bytes) -> list[tuple[int, int]]:
    """(offset, length) of each TLS record in ``ct``."""
    out, off = [], 0
    while off + TLS_HEADER <= len(ct):
        n = TLS_HEADER + int.from_bytes(ct[off + 3 : off + 5], "big")
        out.append((off, n))
        off += n
    return out


def _send_nonblocking(sock: socket.socket, data: bytes) -> list[dict[str, Any]]:
    """Write all of ``data`` on a non-blocking socket; one entry per ``send()``/wait."""
    log: list[dict[str, Any]] = []
    view = memoryview(data)
    while view:
        t = now_ns()  # before the call, like the other modes' piece times
        try:
            n = sock.send(view)
        except BlockingIOError:
            log.append({"t_ns": t, "sent": 0})
            _, w, _ = select.select([], [sock], [], SELECT_TIMEOUT_S)
            if not w:
                raise TimeoutError("socket never became writable") from None
            continue
        log.append({"t_ns": t, "sent": n})
        view = view[n:]
    return log


def server(p: dict[str, Any], ready: Callable[[], None]) -> dict[str, Any]:
    ctx = tls_server_context(p["cert"], p["key"], p["keylog_server"])
    ls = listen(p["server_ip"], p["port"], cc=p["cc"], nodelay=p["server_nodelay"])
    ready()
    raw, _ = ls.accept()
    raw.settimeout(IO_TIMEOUT_S)
    opts = tcp_options(raw)
    tls = _Tls(ctx, raw)
    tls.handshake()
    tls.read_request()
    t_request = now_ns()
    if p["mode"] == "nonblocking":
        if p["server_sndbuf"] is not None:
            raw.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, p["server_sndbuf"])
        raw.setblocking(False)
    sent = []
    start = time.monotonic()
    for m in range(p["messages"]):
        delay = start + m * p["interval_ms"] / 1000 - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        msg = (b"%d:" % m + b"x" * p["message_len"])[: p["message_len"]]
        ct = tls.seal(msg)
        pieces: list[dict[str, Any]] = []
        for off, n in _records(ct):
            rec = ct[off : off + n]
            if p["mode"] == "split":
                for part in (rec[:TLS_HEADER], rec[TLS_HEADER:]):
                    t = now_ns()
                    raw.sendall(part)
                    pieces.append({"t_ns": t, "len": len(part)})
            elif p["mode"] == "whole":
                t = now_ns()
                raw.sendall(rec)
                pieces.append({"t_ns": t, "len": len(rec)})
            else:
                for e in _send_nonblocking(raw, rec):
                    pieces.append({"t_ns": e["t_ns"], "len": e["sent"]})
        sent.append({"message": m, "records": len(_records(ct)), "pieces": pieces})
    info = tcp_info(raw)
    sndbuf = raw.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)
    raw.setblocking(True)
    tls.close()
    ls.close()
    return {
        "socket": {**opts, "SO_SNDBUF": sndbuf},
        "request_read_ns": t_request,
        "messages": sent,
        "tcp_info_after_write": info,
    }


def client(p: dict[str, Any]) -> dict[str, Any]:
    conn, meta = connect_tls(p)
    meta["request_write_ns"] = now_ns()
    conn.sendall(REQUEST)
    reads = read_all(conn, p["messages"] * p["message_len"])
    client_close(conn)
    return {**meta, "reads": reads}


def ground_truth(run: RunData) -> dict[str, Any]:
    p = run.params
    pkts = truth.packets(run.forwarder)
    msgs = run.server["messages"]
    first_send = msgs[0]["pieces"][0]["t_ns"] if msgs and msgs[0]["pieces"] else 0
    resp = [x for x in truth.data_packets(pkts, "s2c") if x.t_in_ns >= first_send]
    start = min((x.rel_seq for x in resp), default=None)  # type: ignore[type-var]
    reads = run.client["reads"]
    records = []
    off = 0 if start is None else start
    for m in msgs:
        wire = p["message_len"] + TLS13_RECORD_OVERHEAD
        end = off + wire
        segs = sorted(
            (
                x
                for x in resp
                if x.rel_seq is not None and x.rel_seq < end and off < x.rel_seq + x.len
            ),
            key=lambda x: x.t_in_ns,
        )
        # a write boundary inside the record: a sub-MSS PSH segment ending strictly inside
        heads = [
            x
            for x in segs
            if x.flags & 0x08 and x.len < WIRE_MSS and off < x.rel_seq + x.len < end  # type: ignore[operator]
        ]
        tail = next((x for x in segs if x.rel_seq + x.len >= end), None)  # type: ignore[operator]
        msg_end = (m["message"] + 1) * p["message_len"]
        r = next((x for x in reads if x["bytes"] >= msg_end), None)
        t0 = m["pieces"][0]["t_ns"] if m["pieces"] else None
        records.append(
            {
                "message": m["message"],
                "rel_seq": off,
                "wire_len": wire,
                "send_calls": len(m["pieces"]),
                "segments": len({(x.rel_seq, x.len) for x in segs}),
                "psh_inside": len(heads),
                "head_out_ns": heads[0].t_in_ns if heads else None,
                "tail_out_ns": None if tail is None else tail.t_in_ns,
                "head_to_tail_ms": (
                    truth.ms(tail.t_in_ns - heads[0].t_in_ns) if heads and tail else None
                ),
                "read_ns": None if r is None else r["t_ns"],
                "latency_ms": None if r is None or t0 is None else truth.ms(r["t_ns"] - t0),
            }
        )
        off = end
    split = [r for r in records if r["psh_inside"]]
    waits = [r["head_to_tail_ms"] for r in split if r["head_to_tail_ms"] is not None]
    lat = [r["latency_ms"] for r in records if r["latency_ms"] is not None]
    return {
        "handshake": list(truth.handshake(pkts)),
        "response_rel_seq": start,
        "records": records,
        "reads": reads,
        "summary": {
            "records": len(records),
            "records_split": len(split),
            "head_to_tail_ms": waits,
            "head_to_tail_ms_total": round(sum(waits), 3),
            "latency_ms_median": sorted(lat)[len(lat) // 2] if lat else None,
        },
    }


def _validate(doc: dict[str, Any]) -> list[str]:
    s = doc["ground_truth"]["summary"]
    if doc["params"]["mode"] == "whole":
        return (
            [f"control: a write boundary fell inside a record: {s}"] if s["records_split"] else []
        )
    # the first message may leave whole: written while the session tickets' segment is still
    # unacknowledged, Nagle holds its header too and both pieces leave together
    if not s["records_split"] or s["records_split"] < s["records"] - 1:
        return [f"records did not reach TCP in pieces: {s}"]
    return []


_M = __name__
INCIDENTAL = ("nagle", "nagle_delayed_ack")
register(
    Scenario(
        name="tls_record_split_write",
        summary="TLS 1.3 records written as header, then body (Nagle on): every record reaches "
        "TCP in two pieces and its body waits for the ACK of its header",
        what="each TLS record's 5-byte header leaves alone (PSH inside the record); the body "
        "follows ≥ 1 RTT later, released by the client's ACK",
        expected=("tls_record_split_write",),
        # Nagle is the mechanism that makes the split cost an RTT (the body waits for the
        # header's ACK: `nagle` in the positive), and in both variants the first message waits
        # behind the session tickets for the client's delayed ACK (tls_sse_nagle's case):
        # Nagle detectors may report either; neither is what the pair tests
        incidental=INCIDENTAL,
        pair="tls_record_whole_write",
        server=f"{_M}:server",
        client=f"{_M}:client",
        params=PARAMS,
        tls=True,
        ground_truth=ground_truth,
        validate=_validate,
    )
)
register(
    Scenario(
        name="tls_record_whole_write",
        summary="the same TLS 1.3 records, each written with one send (control)",
        what="each record leaves in one PSH segment ending at the record's end",
        expected=(),
        controls=("tls_record_split_write",),
        incidental=INCIDENTAL,
        pair="tls_record_split_write",
        server=f"{_M}:server",
        client=f"{_M}:client",
        params={**PARAMS, "mode": "whole"},
        tls=True,
        ground_truth=ground_truth,
        validate=_validate,
    )
)
