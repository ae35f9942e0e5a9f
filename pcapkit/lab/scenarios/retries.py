"""Request-level retries and timeouts (issue 21; DETECTION.md §11.1, §11.2, §11.6).

An LLM-style API over HTTP/1.1 + TLS 1.3 (Python ``ssl`` both ends, port 443, a per-run
self-signed certificate, key logs embedded so the requests are readable at every
vantage), one-way delay 15 ms (RTT 30 ms), CUBIC, both ends TCP_NODELAY.  The client
``POST``s ``/v1/chat/completions`` with a JSON body and the headers a real SDK sends to name
a call: ``Idempotency-Key`` (one per logical call, the same on every attempt),
``x-request-id`` (the same), a W3C ``traceparent`` (one trace id per call, a new parent id
per attempt) and ``x-stainless-retry-count`` (0, 1, 2 … per attempt).  A 200 answer is a
chunked ``text/event-stream`` of ``events`` JSON tokens every ``interval_ms``, then
``data: [DONE]``.

Three pairs:

* ``retry_early`` (positive: ``retry_ignored_retry_after``) — the server rate-limits: every
  request arriving less than ``window_s`` (0.95 s) after its first refusal gets ``429``
  with ``Retry-After: 1`` (RFC 9110 §10.2.3, RFC 6585 §4) and
  ``RateLimit: "default";r=0;t=1``; later requests get the stream.  The client retries
  after a fixed ``backoff_ms`` = 350 ms whatever the answer says (the pre-2.52 openai-python
  shape for waits it does not honour): attempts at ≈ 0, 0.38, 0.76 s are refused, the one
  at ≈ 1.14 s is served (early too, but the window had lapsed).  ``retry_honoured`` (control): the client waits the
  Retry-After it was given (1 s), the second attempt is served.  Both on one keep-alive
  connection.
* ``hedged_duplicate`` (positive: ``retry_amplification``) — the client sends the call on
  connection A and, ``hedge_ms`` = 400 ms later, the same call (same key, same body, the
  next ``x-stainless-retry-count``) on a new connection B without cancelling A (a hedge, or
  a proxy retrying on its per-try timeout while the application still waits).  The server
  thinks ``think_ms`` = 600 ms before each stream and serves both: double work, and the
  copy on B streams for nothing once A is complete.  ``single_attempt`` (control): the same
  call once.
* ``stream_timeout`` (positive: ``client_timeout``) — the server streams for ``stream_s`` =
  2 s; the client has a total deadline of ``deadline_s`` = 1 s per call (socket timeout =
  time left): at the deadline it ``close()``s the connection mid-stream (FIN, then RST on
  the next event; RST at once when unread data is queued — RFC 2525 §2.17) and makes the
  next call on a new connection, ``calls`` = 3 times.  ``stream_complete`` (control): no
  deadline — the client reads every stream to its terminal chunk, the three calls on one
  keep-alive connection.  The new connection after each cancel is not
  ``connection_not_reused``: closing is HTTP/1.1's only way to abandon a response.

Ground truth (``scenario.json``, client clock = capture clock): every attempt's write,
head read, status, Retry-After and end (or cancel) time, and the cost each detector prices
— ``retry``: the round trips of the refused attempts that left before the Retry-After
had passed; ``amplification``: the time the non-winning copies were in flight;
``timeout``: request write → cancel, summed over the cancelled calls.
"""

from __future__ import annotations

import json
import select
import socket
import ssl
import threading
import time
import uuid
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
from .h2 import Writer

PARAMS: dict[str, Any] = {
    "delay_ms": 15.0,
    "port": 443,  # tshark decodes TLS on 443 without "decode as"
    "mode": "ratelimit",  # "ratelimit" | "hedge" | "timeout"
    "events": 10,
    "interval_ms": 50.0,
    "think_ms": 0.0,  # server: before the first event
    # ratelimit
    "window_s": 0.95,  # refuse requests arriving this long after the first refusal
    "retry_after_s": 1,
    # client: fixed wait after a refusal; None: honour Retry-After (not 250 ms: a request
    # 250 ms after the answer sits at the TCP cork probe's ~230 ms ceiling)
    "backoff_ms": 350.0,
    "max_attempts": 6,
    # layered: 503s for the first fail_first requests; the SDK's retries inside the app's
    "fail_first": 4,
    "inner_attempts": 3,  # openai-python: max_retries=2
    "outer_attempts": 2,
    "outer_wait_ms": 300.0,
    # hedge
    "attempts": 2,  # concurrent copies of the call, one connection each
    "hedge_ms": 400.0,
    # timeout
    "calls": 3,
    "deadline_s": 1.0,  # client: total deadline per call; None: read to the end
    "keepalive": False,  # timeout mode: all calls on one connection (only without deadline)
    "h2": False,  # timeout mode over HTTP/2: one connection, a stream per call, RST_STREAM
    "server_nodelay": True,
    "client_nodelay": True,
}
MAX_HEAD_BYTES = 16_384
PATH = "/v1/chat/completions"
BODY = json.dumps(
    {
        "model": "lab-1",
        "stream": True,
        "messages": [{"role": "user", "content": "Why is my stream slow?"}],
    },
    separators=(",", ":"),
).encode()


# ----------------------------------------------------------------------------- server
def _read_request(conn: ssl.SSLSocket, buf: bytearray) -> tuple[dict[str, str], bytes] | None:
    """One request (head + Content-Length body) from ``conn``; None at EOF."""
    while b"\r\n\r\n" not in buf:
        data = conn.recv(4096)
        if not data:
            return None
        buf += data
        if len(buf) > MAX_HEAD_BYTES:
            raise ConnectionError("request head too long")
    head, _, rest = bytes(buf).partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    n = int(headers.get("content-length", "0"))
    while len(rest) < n:
        data = conn.recv(4096)
        if not data:
            return None
        rest += data
    buf[:] = rest[n:]
    return headers, rest[:n]


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n" % len(data) + data + b"\r\n"


SSE_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
    b"Transfer-Encoding: chunked\r\n"
)


def _stream(conn: ssl.SSLSocket, p: dict[str, Any], rid: str) -> tuple[int, bool]:
    """The SSE answer; (events written, completed).  A client that went away ends it."""
    conn.sendall(SSE_HEAD + b"x-request-id: " + rid.encode() + b"\r\n\r\n")
    if p["think_ms"]:
        time.sleep(p["think_ms"] / 1000)
    start = time.monotonic()
    n = 0
    try:
        for n in range(1, p["events"] + 1):
            delay = start + (n - 1) * p["interval_ms"] / 1000 - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            conn.sendall(_chunk(b'data: {"token":%d,"text":"tok%d"}\n\n' % (n, n)))
        # [DONE] at the stream's cadence too (written with the last token, the two would
        # arrive together: a burst sse_batching rightly reports)
        delay = start + p["events"] * p["interval_ms"] / 1000 - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        conn.sendall(_chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")
    except (OSError, ssl.SSLError):
        return n, False
    return n, True


def _refusal(p: dict[str, Any], rid: str) -> bytes:
    body = b'{"error":{"type":"rate_limit_exceeded","message":"slow down"}}'
    ra = p["retry_after_s"]
    return (
        b"HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\n"
        b'Retry-After: %d\r\nRateLimit: "default";r=0;t=%d\r\nx-request-id: %s\r\n'
        b"Content-Length: %d\r\n\r\n" % (ra, ra, rid.encode(), len(body)) + body
    )


def _unavailable(rid: str) -> bytes:
    body = b'{"error":{"type":"overloaded","message":"try again"}}'
    return (
        b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
        b"x-request-id: %s\r\nContent-Length: %d\r\n\r\n" % (rid.encode(), len(body)) + body
    )


def server(p: dict[str, Any], ready: Callable[[], None]) -> dict[str, Any]:
    ctx = tls_server_context(p["cert"], p["key"], p["keylog_server"])
    ls = listen(p["server_ip"], p["port"], cc=p["cc"], nodelay=p["server_nodelay"])
    ready()
    mode = p["mode"]
    if mode in ("ratelimit", "layered") or (mode == "timeout" and p["keepalive"]):
        conns = 1
    elif mode == "hedge":
        conns = p["attempts"]
    else:
        conns = p["calls"]
    log: list[dict[str, Any]] = []
    lock = threading.Lock()
    first_refusal: list[int] = []
    opts: dict[str, Any] = {}

    def serve(raw: socket.socket, c: int) -> None:
        try:
            conn = ctx.wrap_socket(raw, server_side=True)
        except (OSError, ssl.SSLError):
            raw.close()
            return
        buf = bytearray()
        try:
            while True:
                req = _read_request(conn, buf)
                if req is None:
                    break
                headers, _body = req
                t = now_ns()
                rid = headers.get("x-request-id", "")
                rec: dict[str, Any] = {
                    "connection": c,
                    "read_ns": t,
                    "idempotency_key": headers.get("idempotency-key"),
                    "retry_count": headers.get("x-stainless-retry-count"),
                }
                with lock:
                    refuse = mode == "ratelimit" and (
                        not first_refusal or t < first_refusal[0] + p["window_s"] * 1e9
                    )
                    if refuse and not first_refusal:
                        first_refusal.append(t)
                    overloaded = mode == "layered" and len(log) < p["fail_first"]
                if refuse:
                    conn.sendall(_refusal(p, rid))
                    rec.update(status=429, end_ns=now_ns())
                elif overloaded:
                    conn.sendall(_unavailable(rid))
                    rec.update(status=503, end_ns=now_ns())
                else:
                    n, done = _stream(conn, p, rid)
                    rec.update(status=200, events=n, complete=done, end_ns=now_ns())
                with lock:
                    log.append(rec)
                if (mode == "timeout" and not p["keepalive"]) or mode == "hedge":
                    break
        except (OSError, ssl.SSLError, ConnectionError):
            pass
        try:  # orderly close when the client closed first; an aborted one just closes
            while conn.recv(4096):
                pass
            conn.unwrap().close()
        except (OSError, ssl.SSLError, ValueError):
            conn.close()

    threads = []
    for c in range(conns):
        raw, _ = ls.accept()
        raw.settimeout(IO_TIMEOUT_S)
        opts = tcp_options(raw)
        th = threading.Thread(target=serve, args=(raw, c), daemon=True)
        th.start()
        threads.append(th)
    for th in threads:
        th.join(IO_TIMEOUT_S)
    ls.close()
    return {"socket": opts, "requests": sorted(log, key=lambda r: r["read_ns"])}


# ----------------------------------------------------------------------------- client
def _connect(
    p: dict[str, Any], ctx: ssl.SSLContext, session: Any = None
) -> tuple[ssl.SSLSocket, dict[str, Any]]:
    """A new TLS connection, resuming ``session`` when given (a client with a session
    cache: new connections are the recipe's, a full handshake on each is not)."""
    raw = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    apply_tcp_options(raw, cc=p["cc"], nodelay=p["client_nodelay"])
    raw.settimeout(CONNECT_TIMEOUT_S)
    t0 = now_ns()
    raw.connect((p["server_ip"], p["port"]))
    conn = ctx.wrap_socket(raw, server_hostname=DEFAULT_HOSTNAME, session=session)
    conn.settimeout(IO_TIMEOUT_S)
    return conn, {
        "session_reused": conn.session_reused,
        "connect_ns": t0,
        "client_port": conn.getsockname()[1],
        "socket": tcp_options(conn),
        "tls": tls_info(conn),
    }


def _request(key: str, trace_id: str, attempt: int) -> bytes:
    parent = uuid.uuid4().hex[:16]
    return (
        b"POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
        b"Accept: text/event-stream\r\nAuthorization: Bearer sk-lab\r\n"
        b"Idempotency-Key: %s\r\nx-request-id: %s\r\n"
        b"traceparent: 00-%s-%s-01\r\nx-stainless-retry-count: %d\r\n"
        b"Content-Length: %d\r\n\r\n"
        % (
            PATH.encode(),
            DEFAULT_HOSTNAME.encode(),
            key.encode(),
            key.encode(),
            trace_id.encode(),
            parent.encode(),
            attempt,
            len(BODY),
        )
        + BODY
    )


class _Reader:
    """Reads one HTTP/1.1 response (Content-Length or chunked) from a socket, with an
    optional absolute deadline (``time.monotonic``): past it, :class:`TimeoutError`."""

    def __init__(self, conn: ssl.SSLSocket, deadline: float | None) -> None:
        self.conn, self.deadline, self.buf = conn, deadline, b""

    def _more(self) -> None:
        if self.deadline is not None:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            self.conn.settimeout(left)
        data = self.conn.recv(65_536)
        if not data:
            raise ConnectionError("server closed mid-response")
        self.buf += data

    def head(self) -> tuple[int, dict[str, str]]:
        while b"\r\n\r\n" not in self.buf:
            self._more()
        head, _, self.buf = self.buf.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        hdrs = {}
        for line in lines[1:]:
            k, _, v = line.partition(":")
            hdrs[k.strip().lower()] = v.strip()
        return int(lines[0].split()[1]), hdrs

    def body(self, hdrs: dict[str, str], events: list[int]) -> int:
        """The body's length; appends each SSE event's read time to ``events``."""
        if "content-length" in hdrs:
            n = int(hdrs["content-length"])
            while len(self.buf) < n:
                self._more()
            self.buf = self.buf[n:]
            return n
        total = 0
        while True:
            while b"\r\n" not in self.buf:
                self._more()
            line, _, rest = self.buf.partition(b"\r\n")
            size = int(line.split(b";")[0], 16)
            while len(rest) < size + 2:
                self._more()
                line, _, rest = self.buf.partition(b"\r\n")
            self.buf = rest[size + 2 :]
            total += size
            if size == 0:
                return total
            events.append(now_ns())


def _close(conn: ssl.SSLSocket, orderly: bool) -> int:
    if orderly:
        try:
            conn.unwrap().close()
        except (OSError, ssl.SSLError):
            conn.close()
    else:
        conn.close()  # what an HTTP client does on a timeout: drop the connection
    return now_ns()


def _attempt(
    conn: ssl.SSLSocket, key: str, trace_id: str, n: int, deadline_s: float | None = None
) -> dict[str, Any]:
    t0 = now_ns()
    deadline = None if deadline_s is None else time.monotonic() + deadline_s
    conn.sendall(_request(key, trace_id, n))
    rd = _Reader(conn, deadline)
    rec: dict[str, Any] = {"n": n, "write_ns": t0, "events": []}
    try:
        status, hdrs = rd.head()
        rec.update(status=status, head_read_ns=now_ns(), retry_after=hdrs.get("retry-after"))
        rec["body_bytes"] = rd.body(hdrs, rec["events"])
        rec["end_ns"] = now_ns()
        rec["complete"] = True
    except TimeoutError:
        rec["complete"] = False
    rec["events_read"] = len(rec.pop("events"))
    return rec


def client(p: dict[str, Any]) -> dict[str, Any]:
    ctx = tls_client_context(p["cert"], p["keylog_client"])
    mode = p["mode"]
    conns: list[dict[str, Any]] = []
    attempts: list[dict[str, Any]] = []
    if mode == "ratelimit":
        conn, meta = _connect(p, ctx)
        conns.append(meta)
        key, trace_id = str(uuid.uuid4()), uuid.uuid4().hex
        for n in range(p["max_attempts"]):
            rec = _attempt(conn, key, trace_id, n)
            attempts.append(rec)
            if rec["status"] != 429:
                break
            ra = float(rec["retry_after"] or 0)
            wait = ra if p["backoff_ms"] is None else p["backoff_ms"] / 1000
            time.sleep(wait)
        meta["closed_ns"] = _close(conn, True)
    elif mode == "layered":
        # the SDK retries inner_attempts times (x-stainless-retry-count 0, 1, …, backoff
        # 0.1 · 2^n s); the application around it calls the SDK again after outer_wait_ms
        conn, meta = _connect(p, ctx)
        conns.append(meta)
        key, trace_id = str(uuid.uuid4()), uuid.uuid4().hex
        done = False
        for outer in range(p["outer_attempts"]):
            if outer:
                time.sleep(p["outer_wait_ms"] / 1000)
            for inner in range(p["inner_attempts"]):
                if inner:
                    time.sleep(0.1 * 2 ** (inner - 1))
                rec = _attempt(conn, key, trace_id, inner)
                rec["outer"] = outer
                attempts.append(rec)
                if rec["status"] == 200:
                    done = True
                    break
            if done:
                break
        meta["closed_ns"] = _close(conn, True)
    elif mode == "hedge":
        key, trace_id = str(uuid.uuid4()), uuid.uuid4().hex
        results: list[dict[str, Any]] = [{} for _ in range(p["attempts"])]
        t_start = time.monotonic()
        first: list[ssl.SSLSocket] = []

        def one(i: int) -> None:
            delay = t_start + i * p["hedge_ms"] / 1000 - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            c, m = _connect(p, ctx, first[0].session if first else None)
            if i == 0:
                first.append(c)
            r = _attempt(c, key, trace_id, i)
            m["closed_ns"] = _close(c, True)
            results[i] = {**r, "connection": m}

        ths = [threading.Thread(target=one, args=(i,)) for i in range(p["attempts"])]
        for th in ths:
            th.start()
        for th in ths:
            th.join(IO_TIMEOUT_S)
        for r in results:
            conns.append(r.pop("connection"))
            attempts.append(r)
    else:
        conn = None
        session = None
        for n in range(p["calls"]):
            if conn is None:
                conn, meta = _connect(p, ctx, session)
                session = conn.session
                conns.append(meta)
            key, trace_id = str(uuid.uuid4()), uuid.uuid4().hex
            rec = _attempt(conn, key, trace_id, 0, p["deadline_s"])
            rec["call"] = n
            attempts.append(rec)
            session = conn.session  # the tickets came before the response
            if not rec["complete"]:
                rec["cancel_ns"] = conns[-1]["closed_ns"] = _close(conn, False)
                conn = None
            elif not p["keepalive"]:
                conns[-1]["closed_ns"] = _close(conn, True)
                conn = None
            time.sleep(0.1)
        if conn is not None:
            conns[-1]["closed_ns"] = _close(conn, True)
    return {
        "socket": conns[0]["socket"],
        "tls": conns[0]["tls"],
        "connections": conns,
        "attempts": attempts,
    }


# ----------------------------------------------------------------------------- HTTP/2
def _h2(client_side: bool) -> Any:
    import h2.config
    import h2.connection

    return h2.connection.H2Connection(
        h2.config.H2Configuration(client_side=client_side, header_encoding="utf-8")
    )


def h2_server(p: dict[str, Any], ready: Callable[[], None]) -> dict[str, Any]:
    """One HTTP/2 connection; every request stream gets the SSE answer at the scenario's
    cadence until it ends or the client resets it (RST_STREAM)."""
    import h2.events

    ctx = tls_server_context(p["cert"], p["key"], p["keylog_server"], alpn="h2")
    ls = listen(p["server_ip"], p["port"], cc=p["cc"], nodelay=p["server_nodelay"])
    ready()
    raw, _ = ls.accept()
    raw.settimeout(IO_TIMEOUT_S)
    opts = tcp_options(raw)
    sock = ctx.wrap_socket(raw, server_side=True)
    conn = _h2(False)
    w = Writer(sock, conn)
    conn.initiate_connection()
    w.flush()
    active: dict[int, dict[str, Any]] = {}
    log: list[dict[str, Any]] = []
    open_ = True
    while open_ or active:
        now = time.monotonic()
        due = [a["next"] for a in active.values()]
        wait = max(0.0, min(due) - now) if due else IO_TIMEOUT_S
        if not open_:
            time.sleep(wait)
        elif sock.pending() or select.select([sock], [], [], wait)[0]:
            try:
                data = sock.recv(65_536)
            except (OSError, ssl.SSLError):
                data = b""
            if not data:
                open_ = False
                for a in active.values():
                    a["rec"].update(end_ns=now_ns(), complete=False, reset=False)
                active.clear()
                continue
            t = now_ns()
            for ev in conn.receive_data(data):
                if isinstance(ev, h2.events.RequestReceived):
                    rec = {"stream": ev.stream_id, "read_ns": t, "events": 0}
                    log.append(rec)
                    conn.send_headers(
                        ev.stream_id,
                        [(":status", "200"), ("content-type", "text/event-stream")],
                    )
                    first = time.monotonic() + p["think_ms"] / 1000
                    active[ev.stream_id] = {"rec": rec, "n": 1, "next": first, "t0": first}
                elif isinstance(ev, h2.events.DataReceived):
                    conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                elif isinstance(ev, h2.events.StreamReset):
                    a = active.pop(ev.stream_id, None)
                    if a is not None:
                        a["rec"].update(end_ns=t, complete=False, reset=True)
                        a["rec"]["error_code"] = int(ev.error_code)
                elif isinstance(ev, h2.events.ConnectionTerminated):
                    open_ = False
            w.flush()
            continue
        for sid, a in list(active.items()):
            if a["next"] > time.monotonic():
                continue
            n = a["n"]
            if n <= p["events"]:
                conn.send_data(sid, b'data: {"token":%d,"text":"tok%d"}\n\n' % (n, n))
                a["rec"]["events"] = n
            else:
                conn.send_data(sid, b"data: [DONE]\n\n", end_stream=True)
                a["rec"].update(end_ns=now_ns(), complete=True, reset=False)
                del active[sid]
            a["n"] = n + 1
            a["next"] = a["t0"] + n * p["interval_ms"] / 1000
        try:
            w.flush()
        except (OSError, ssl.SSLError):
            break
    try:
        sock.unwrap().close()
    except (OSError, ssl.SSLError, ValueError):
        sock.close()
    ls.close()
    return {"socket": opts, "requests": log}


def h2_client(p: dict[str, Any]) -> dict[str, Any]:
    """``calls`` streams one after another on one HTTP/2 connection; with a deadline each is
    cancelled by RST_STREAM(CANCEL) when it fires (what an h2 client should do)."""
    import h2.errors
    import h2.events

    ctx = tls_client_context(p["cert"], p["keylog_client"], alpn="h2")
    raw = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    apply_tcp_options(raw, cc=p["cc"], nodelay=p["client_nodelay"])
    raw.settimeout(CONNECT_TIMEOUT_S)
    t_connect = now_ns()
    raw.connect((p["server_ip"], p["port"]))
    sock = ctx.wrap_socket(raw, server_hostname=DEFAULT_HOSTNAME)
    sock.settimeout(IO_TIMEOUT_S)
    meta = {
        "connect_ns": t_connect,
        "client_port": sock.getsockname()[1],
        "socket": tcp_options(sock),
        "tls": tls_info(sock),
    }
    conn = _h2(True)
    w = Writer(sock, conn)
    conn.initiate_connection()
    w.flush()
    attempts: list[dict[str, Any]] = []
    for call in range(p["calls"]):
        key, trace_id = str(uuid.uuid4()), uuid.uuid4().hex
        sid = conn.get_next_available_stream_id()
        head = [
            (":method", "POST"),
            (":scheme", "https"),
            (":authority", DEFAULT_HOSTNAME),
            (":path", PATH),
            ("content-type", "application/json"),
            ("accept", "text/event-stream"),
            ("idempotency-key", key),
            ("x-request-id", key),
            ("traceparent", f"00-{trace_id}-{uuid.uuid4().hex[:16]}-01"),
            ("x-stainless-retry-count", "0"),
        ]
        t0 = now_ns()
        conn.send_headers(sid, head)
        conn.send_data(sid, BODY, end_stream=True)
        w.flush()
        rec: dict[str, Any] = {"n": 0, "call": call, "stream": sid, "write_ns": t0}
        deadline = None if p["deadline_s"] is None else time.monotonic() + p["deadline_s"]
        events = 0
        done = False
        while not done:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                break
            if not sock.pending() and not select.select([sock], [], [], left)[0]:
                continue
            data = sock.recv(65_536)
            if not data:
                raise ConnectionError("server closed")
            for ev in conn.receive_data(data):
                if isinstance(ev, h2.events.ResponseReceived) and ev.stream_id == sid:
                    rec["status"] = int(dict(ev.headers)[":status"])
                    rec["head_read_ns"] = now_ns()
                elif isinstance(ev, h2.events.DataReceived):
                    conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                    if ev.stream_id == sid:
                        events += ev.data.count(b"data: ")
                elif isinstance(ev, h2.events.StreamEnded) and ev.stream_id == sid:
                    done = True
            w.flush()
        rec["events_read"] = events
        rec["complete"] = done
        if done:
            rec["end_ns"] = now_ns()
        else:
            conn.reset_stream(sid, error_code=h2.errors.ErrorCodes.CANCEL)
            w.flush()
            rec["cancel_ns"] = now_ns()
        attempts.append(rec)
        time.sleep(0.1)
    # late DATA of the cancelled streams is read and dropped until the server is idle
    end = time.monotonic() + 0.2
    while (left := end - time.monotonic()) > 0:
        if sock.pending() or select.select([sock], [], [], left)[0]:
            data = sock.recv(65_536)
            if not data:
                break
            for ev in conn.receive_data(data):
                if isinstance(ev, h2.events.DataReceived):
                    conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            w.flush()
    conn.close_connection()
    w.flush()
    try:
        sock.unwrap().close()
    except (OSError, ssl.SSLError, ValueError):
        sock.close()
    meta["closed_ns"] = now_ns()
    return {
        "socket": meta["socket"],
        "tls": meta["tls"],
        "connections": [meta],
        "attempts": attempts,
    }


# ----------------------------------------------------------------------------- HTTP/3
def h3_server(p: dict[str, Any], ready: Callable[[], None]) -> dict[str, Any]:
    import asyncio

    return asyncio.run(_h3_server(p, ready))


async def _h3_server(p: dict[str, Any], ready: Callable[[], None]) -> dict[str, Any]:
    """aioquic: every request stream gets the SSE answer at the scenario's cadence until it
    ends or the client cancels it (STOP_SENDING / RESET_STREAM)."""
    import asyncio

    from aioquic.asyncio import QuicConnectionProtocol, serve
    from aioquic.h3.connection import H3_ALPN, H3Connection
    from aioquic.h3.events import HeadersReceived
    from aioquic.quic.configuration import QuicConfiguration
    from aioquic.quic.events import ConnectionTerminated, StopSendingReceived, StreamReset

    done = asyncio.Event()
    log: list[dict[str, Any]] = []

    class Server(QuicConnectionProtocol):
        def __init__(self, *a: Any, **kw: Any) -> None:
            super().__init__(*a, **kw)
            self._h3 = H3Connection(self._quic)
            self._stopped: set[int] = set()

        def quic_event_received(self, event: Any) -> None:
            if isinstance(event, ConnectionTerminated):
                done.set()
                return
            if isinstance(event, StopSendingReceived | StreamReset):
                if event.stream_id not in self._stopped:
                    self._stopped.add(event.stream_id)
                    for r in log:
                        if r["stream"] == event.stream_id and "end_ns" not in r:
                            r.update(end_ns=now_ns(), complete=False, reset=True)
            for ev in self._h3.handle_event(event):
                if isinstance(ev, HeadersReceived):
                    rec = {"stream": ev.stream_id, "read_ns": now_ns(), "events": 0}
                    log.append(rec)
                    asyncio.ensure_future(self._stream(ev.stream_id, rec))

        async def _stream(self, sid: int, rec: dict[str, Any]) -> None:
            self._h3.send_headers(
                sid, [(b":status", b"200"), (b"content-type", b"text/event-stream")]
            )
            self.transmit()
            loop = asyncio.get_running_loop()
            start = loop.time() + p["think_ms"] / 1000
            for n in range(1, p["events"] + 2):
                delay = start + (n - 1) * p["interval_ms"] / 1000 - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)
                if sid in self._stopped:
                    return
                last = n > p["events"]
                data = (
                    b"data: [DONE]\n\n"
                    if last
                    else b'data: {"token":%d,"text":"tok%d"}\n\n' % (n, n)
                )
                self._h3.send_data(sid, data, end_stream=last)
                self.transmit()
                if not last:
                    rec["events"] = n
            rec.update(end_ns=now_ns(), complete=True, reset=False)

    with open(p["keylog_server"], "a", encoding="ascii") as keylog:
        cfg = QuicConfiguration(is_client=False, alpn_protocols=H3_ALPN, secrets_log_file=keylog)
        cfg.load_cert_chain(p["cert"], p["key"])
        srv = await serve(p["server_ip"], p["port"], configuration=cfg, create_protocol=Server)
        ready()
        try:
            await asyncio.wait_for(done.wait(), timeout=float(p["timeout_s"]))
        finally:
            srv.close()
    return {"socket": None, "requests": log}


def h3_client(p: dict[str, Any]) -> dict[str, Any]:
    import asyncio

    return asyncio.run(_h3_client(p))


# RFC 9114 §8.1: H3_REQUEST_CANCELLED — "the request or its response is cancelled"
H3_REQUEST_CANCELLED = 0x010C


async def _h3_client(p: dict[str, Any]) -> dict[str, Any]:
    """``calls`` request streams one after another on one QUIC connection; with a deadline
    each is cancelled as RFC 9114 §4.1.1 says: RESET_STREAM + STOP_SENDING
    (H3_REQUEST_CANCELLED)."""
    import asyncio

    from aioquic.asyncio import QuicConnectionProtocol, connect
    from aioquic.h3.connection import H3_ALPN, H3Connection
    from aioquic.h3.events import DataReceived, HeadersReceived
    from aioquic.quic.configuration import QuicConfiguration

    class Client(QuicConnectionProtocol):
        def __init__(self, *a: Any, **kw: Any) -> None:
            super().__init__(*a, **kw)
            self._h3 = H3Connection(self._quic)
            self.recs: dict[int, dict[str, Any]] = {}
            self.ended: dict[int, asyncio.Event] = {}

        def quic_event_received(self, event: Any) -> None:
            for ev in self._h3.handle_event(event):
                rec = self.recs.get(getattr(ev, "stream_id", -1))
                if rec is None or rec.get("cancel_ns"):
                    continue
                if isinstance(ev, HeadersReceived):
                    rec["status"] = int(dict(ev.headers).get(b":status", b"0"))
                    rec["head_read_ns"] = now_ns()
                elif isinstance(ev, DataReceived):
                    rec["events_read"] += ev.data.count(b"data: ")
                    if ev.stream_ended:
                        rec["end_ns"] = now_ns()
                        self.ended[ev.stream_id].set()

        def call(self, n: int) -> int:
            sid = self._quic.get_next_available_stream_id()
            key, trace_id = str(uuid.uuid4()), uuid.uuid4().hex
            self.recs[sid] = {"n": 0, "call": n, "stream": sid, "events_read": 0}
            self.ended[sid] = asyncio.Event()
            head = [
                (b":method", b"POST"),
                (b":scheme", b"https"),
                (b":authority", DEFAULT_HOSTNAME.encode()),
                (b":path", PATH.encode()),
                (b"content-type", b"application/json"),
                (b"idempotency-key", key.encode()),
                (b"traceparent", f"00-{trace_id}-{uuid.uuid4().hex[:16]}-01".encode()),
            ]
            self.recs[sid]["write_ns"] = now_ns()
            self._h3.send_headers(sid, head)
            self._h3.send_data(sid, BODY, end_stream=True)
            self.transmit()
            return sid

        def cancel(self, sid: int) -> None:
            self._quic.reset_stream(sid, H3_REQUEST_CANCELLED)
            self._quic.stop_stream(sid, H3_REQUEST_CANCELLED)
            self.transmit()
            self.recs[sid]["cancel_ns"] = now_ns()

    attempts: list[dict[str, Any]] = []
    meta: dict[str, Any] = {}
    with open(p["keylog_client"], "a", encoding="ascii") as keylog:
        cfg = QuicConfiguration(
            is_client=True,
            alpn_protocols=H3_ALPN,
            secrets_log_file=keylog,
            server_name=DEFAULT_HOSTNAME,
        )
        cfg.load_verify_locations(cafile=p["cert"])
        meta["connect_ns"] = now_ns()
        async with connect(
            p["server_ip"], p["port"], configuration=cfg, create_protocol=Client
        ) as conn:
            c: Any = conn
            for n in range(p["calls"]):
                sid = c.call(n)
                try:
                    await asyncio.wait_for(c.ended[sid].wait(), timeout=p["deadline_s"])
                    c.recs[sid]["complete"] = True
                except TimeoutError:
                    c.recs[sid]["complete"] = False
                    c.cancel(sid)
                attempts.append(c.recs[sid])
                await asyncio.sleep(0.1)
            await asyncio.sleep(0.1)
        meta["closed_ns"] = now_ns()
    return {
        "socket": None,
        "tls": {"version": "TLSv1.3", "cipher": None, "alpn": "h3"},
        "connections": [meta],
        "attempts": attempts,
    }


# ----------------------------------------------------------------------------- truth
TOLERANCE_MS = 100.0  # DETECTION.md §11.1: tol = max(100 ms, RTT, 5 % of the wait)


def ground_truth(run: RunData) -> dict[str, Any]:
    pkts = truth.packets(run.forwarder)
    mode = run.params["mode"]
    att = run.client["attempts"]
    out: dict[str, Any] = {
        "alpn": (run.client.get("tls") or {}).get("alpn"),
        "handshake": list(truth.handshake(pkts)),
        "connections": run.client["connections"],
        "attempts": att,
        "server_requests": run.server["requests"],
    }
    if mode == "ratelimit":
        early = []
        for prev, cur in zip(att, att[1:], strict=False):
            if prev.get("status") != 429 or prev.get("retry_after") is None:
                continue
            wait_ms = (cur["write_ns"] - prev["head_read_ns"]) / 1e6
            w_ms = float(prev["retry_after"]) * 1000
            tol = max(TOLERANCE_MS, 0.05 * w_ms)
            if wait_ms < w_ms - tol:
                rt = (cur["head_read_ns"] - cur["write_ns"]) / 1e6
                early.append(
                    {
                        "n": cur["n"],
                        "wait_ms": round(wait_ms, 3),
                        "retry_after_s": float(prev["retry_after"]),
                        "status": cur["status"],
                        "round_trip_ms": round(rt, 3),
                    }
                )
        refused = [e for e in early if e["status"] == 429]
        out["retry"] = {
            "attempts": len(att),
            "refusals": sum(1 for a in att if a.get("status") == 429),
            "early_attempts": len(early),
            "early_refused": len(refused),
            "early": early,
            # the round trips of the refused early attempts: what ignoring Retry-After cost
            "cost_ms": round(sum(e["round_trip_ms"] for e in refused), 3),
        }
    elif mode == "layered":
        ok = next((a for a in att if a.get("status") == 200), None)
        last = ok["write_ns"] if ok else att[-1].get("end_ns", att[-1]["write_ns"])
        out["amplification"] = {
            "attempts": len(att),
            "layers": 1 + sum(1 for a, b in zip(att, att[1:], strict=False) if b["n"] <= a["n"]),
            "retry_counts": [a["n"] for a in att],
            "statuses": [a.get("status") for a in att],
            # the delay the layered retries added: first attempt written → the winner written
            "cost_ms": truth.ms(last - att[0]["write_ns"]),
        }
    elif mode == "hedge":
        spans = [(a["write_ns"], a.get("end_ns")) for a in att]
        done = [i for i, a in enumerate(att) if a.get("complete") and a.get("status") == 200]
        winner = min(done, key=lambda i: att[i]["end_ns"]) if done else None
        wasted = [(e - s) / 1e6 for i, (s, e) in enumerate(spans) if i != winner and e is not None]
        ends = [e for _s, e in spans if e is not None]
        overlap = (min(ends) - max(s for s, _e in spans)) / 1e6 if len(ends) == len(spans) else 0
        out["amplification"] = {
            "attempts": len(att),
            "winner": None if winner is None else att[winner]["n"],
            "overlap_ms": round(overlap, 3),
            "server_streams": sum(1 for r in run.server["requests"] if r["status"] == 200),
            # the time the non-winning copies were in flight (write → last byte read)
            "cost_ms": round(sum(wasted), 3),
        }
    else:
        cancels = [
            {
                "call": a["call"],
                "elapsed_ms": truth.ms(a["cancel_ns"] - a["write_ns"]),
                "events_read": a["events_read"],
            }
            for a in att
            if not a["complete"]
        ]
        out["timeout"] = {
            "calls": len(att),
            "cancelled": len(cancels),
            "cancels": cancels,
            "deadline_s": run.params["deadline_s"],
            # request write → cancel, summed: the time the cancelled calls took for nothing
            "cost_ms": round(sum(c["elapsed_ms"] or 0.0 for c in cancels), 3),
        }
    return out


def _validate(doc: dict[str, Any]) -> list[str]:
    p, gt = doc["params"], doc["ground_truth"]
    att = gt["attempts"]
    problems = []
    if p["mode"] == "ratelimit":
        r = gt["retry"]
        if not att or att[-1].get("status") != 200 or not att[-1].get("complete"):
            problems.append(f"the call never succeeded: {[a.get('status') for a in att]}")
        if p["backoff_ms"] is None and (r["early_attempts"] or r["attempts"] != 2):
            problems.append(f"control retried early or not once: {r}")
        if p["backoff_ms"] is not None and r["early_refused"] < 2:
            problems.append(f"fewer than 2 refused early attempts: {r}")
    elif p["mode"] == "layered":
        a = gt["amplification"]
        want = 2 if p["fail_first"] >= p["inner_attempts"] else 1
        if a["layers"] != want or a["statuses"][-1] != 200:
            problems.append(f"expected {want} layer(s) ending in a 200: {a}")
    elif p["mode"] == "hedge":
        a = gt["amplification"]
        if a["server_streams"] != p["attempts"] or a["winner"] is None:
            problems.append(f"server did not serve every copy: {a}")
        if p["attempts"] > 1 and a["overlap_ms"] < 200:
            problems.append(f"copies did not overlap: {a}")
    else:
        t = gt["timeout"]
        want = p["calls"] if p["deadline_s"] is not None else 0
        if t["cancelled"] != want:
            problems.append(f"{t['cancelled']} cancels, expected {want}")
        if any(c["events_read"] < 3 for c in t["cancels"]):
            problems.append(f"a call was cancelled before it streamed: {t['cancels']}")
        if p["deadline_s"] is None and any(a.get("status") != 200 for a in att):
            problems.append("a control call failed")
    return problems


def frames_of_interest(doc: dict[str, Any], caps: dict[str, list[Any]]) -> list[str]:
    """README lines: each attempt's first request packet at the client and its outcome."""
    cli = caps.get("client", [])
    out = []
    for i, a in enumerate(doc["ground_truth"]["attempts"]):
        first = next(
            (x for x in cli if x.ts_ns >= a["write_ns"] and x.dir == "c2s" and x.len), None
        )
        frame = first.frame if first else "?"
        if not a.get("complete"):
            what = f"cancelled after {truth.ms(a['cancel_ns'] - a['write_ns'])} ms"
        else:
            what = f"status {a.get('status')}"
            if a.get("retry_after"):
                what += f", Retry-After {a['retry_after']}"
        label = f"call {a['call'] + 1}" if "call" in a else f"attempt {i + 1}"
        out.append(f"client: {label} request frame {frame}, {what}")
    return out


_M = __name__
register(
    Scenario(
        name="retry_early",
        summary="429 + Retry-After: 1, the client retries every 350 ms regardless",
        what="POST refused with 429 Retry-After: 1; the client retries 350 ms after each "
        "refusal (2 more refusals), the 4th attempt is served",
        expected=("retry_ignored_retry_after",),
        pair="retry_honoured",
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
        name="retry_honoured",
        summary="429 + Retry-After: 1, the client waits 1 s and is served (control)",
        what="the same refusal; the client waits the Retry-After second, the retry is served",
        expected=(),
        controls=("retry_ignored_retry_after",),
        pair="retry_early",
        server=f"{_M}:server",
        client=f"{_M}:client",
        params={**PARAMS, "backoff_ms": None},
        tls=True,
        ground_truth=ground_truth,
        validate=_validate,
    )
)
L_PARAMS = {**PARAMS, "mode": "layered"}
register(
    Scenario(
        name="layered_retries",
        summary="an SDK retrying 3 times inside an application that retries the SDK call: "
        "503, 503, 503, 503 (x-stainless-retry-count 0 1 2 0), then 200",
        what="the same POST 5 times on one connection: the SDK's 3 attempts (retry counts 0, "
        "1, 2) fail with 503, the application calls again (0, 1): served at the 5th",
        expected=("retry_amplification",),
        pair="single_layer_retries",
        server=f"{_M}:server",
        client=f"{_M}:client",
        params=L_PARAMS,
        tls=True,
        ground_truth=ground_truth,
        validate=_validate,
    )
)
register(
    Scenario(
        name="single_layer_retries",
        summary="the SDK's own retries only: 503, 503, then 200 (control)",
        what="the same POST 3 times (retry counts 0, 1, 2): two 503s, served at the 3rd",
        expected=(),
        controls=("retry_amplification",),
        pair="layered_retries",
        server=f"{_M}:server",
        client=f"{_M}:client",
        params={**L_PARAMS, "fail_first": 2},
        tls=True,
        ground_truth=ground_truth,
        validate=_validate,
    )
)
H_PARAMS = {**PARAMS, "mode": "hedge", "think_ms": 600.0}
register(
    Scenario(
        name="hedged_duplicate",
        summary="the same call (same Idempotency-Key) on a second connection 400 ms later, "
        "the first not cancelled: the server streams both",
        what="attempt 1 on connection A; 400 ms later the same POST (same Idempotency-Key) on "
        "connection B while A still waits; both are served in full",
        expected=("retry_amplification",),
        pair="single_attempt",
        server=f"{_M}:server",
        client=f"{_M}:client",
        params=H_PARAMS,
        tls=True,
        ground_truth=ground_truth,
        validate=_validate,
    )
)
register(
    Scenario(
        name="single_attempt",
        summary="the same call sent once (control for retry_amplification)",
        what="one POST with its Idempotency-Key, served once",
        expected=(),
        controls=("retry_amplification",),
        pair="hedged_duplicate",
        server=f"{_M}:server",
        client=f"{_M}:client",
        params={**H_PARAMS, "attempts": 1},
        tls=True,
        ground_truth=ground_truth,
        validate=_validate,
    )
)
T_PARAMS = {**PARAMS, "mode": "timeout", "events": 20, "interval_ms": 100.0}
register(
    Scenario(
        name="stream_timeout",
        summary="a 1 s total deadline cuts three 2 s SSE streams (FIN/RST mid-body)",
        what="3 calls, each on a new connection; the client's 1 s deadline closes each "
        "connection mid-stream (after ≈ 9 of 20 events)",
        expected=("client_timeout",),
        pair="stream_complete",
        server=f"{_M}:server",
        client=f"{_M}:client",
        params=T_PARAMS,
        tls=True,
        ground_truth=ground_truth,
        validate=_validate,
    )
)
register(
    Scenario(
        name="stream_complete",
        summary="the same three 2 s SSE streams read to the end on one connection (control)",
        what="3 calls on one keep-alive connection, every stream read to its terminal chunk",
        expected=(),
        controls=("client_timeout",),
        pair="stream_timeout",
        server=f"{_M}:server",
        client=f"{_M}:client",
        params={**T_PARAMS, "deadline_s": None, "keepalive": True},
        tls=True,
        ground_truth=ground_truth,
        validate=_validate,
    )
)
T2_PARAMS = {**T_PARAMS, "h2": True}
register(
    Scenario(
        name="h2_stream_timeout",
        summary="HTTP/2: a 1 s deadline cancels three 2 s SSE streams with RST_STREAM(CANCEL)",
        what="3 streams one after another on one HTTP/2 connection; the client's 1 s "
        "deadline resets each (RST_STREAM CANCEL) after ≈ 9 of 20 events",
        expected=("client_timeout",),
        pair="h2_stream_complete",
        server=f"{_M}:h2_server",
        client=f"{_M}:h2_client",
        params=T2_PARAMS,
        tls=True,
        ground_truth=ground_truth,
        validate=_validate,
    )
)
register(
    Scenario(
        name="h2_stream_complete",
        summary="HTTP/2: the same three 2 s SSE streams read to END_STREAM (control)",
        what="3 streams on one HTTP/2 connection, each read to its END_STREAM",
        expected=(),
        controls=("client_timeout",),
        pair="h2_stream_timeout",
        server=f"{_M}:h2_server",
        client=f"{_M}:h2_client",
        params={**T2_PARAMS, "deadline_s": None},
        tls=True,
        ground_truth=ground_truth,
        validate=_validate,
    )
)
T3_PARAMS = {**T_PARAMS, "port": 443}
register(
    Scenario(
        name="h3_stream_timeout",
        summary="HTTP/3: a 1 s deadline cancels three 2 s SSE streams (RESET_STREAM + "
        "STOP_SENDING, H3_REQUEST_CANCELLED)",
        what="3 request streams one after another on one QUIC connection; the client's 1 s "
        "deadline cancels each (RESET_STREAM + STOP_SENDING 0x10c) after ≈ 9 of 20 events",
        expected=("client_timeout",),
        pair="h3_stream_complete",
        server=f"{_M}:h3_server",
        client=f"{_M}:h3_client",
        params=T3_PARAMS,
        tls=True,
        ground_truth=ground_truth,
        validate=_validate,
    )
)
register(
    Scenario(
        name="h3_stream_complete",
        summary="HTTP/3: the same three 2 s SSE streams read to their FIN (control)",
        what="3 request streams on one QUIC connection, each read to its end",
        expected=(),
        controls=("client_timeout",),
        pair="h3_stream_timeout",
        server=f"{_M}:h3_server",
        client=f"{_M}:h3_client",
        params={**T3_PARAMS, "deadline_s": None},
        tls=True,
        ground_truth=ground_truth,
        validate=_validate,
    )
)
