"""Request concurrency caps: an HTTP/1.1 connection pool (P1) and HTTP/2's
SETTINGS_MAX_CONCURRENT_STREAMS (P2) — DETECTION.md §11.3, §11.4.

Both ends: Python ``ssl`` (TLS 1.3, key logs embedded), TCP_NODELAY, port 443.  Every
response is a short SSE stream: ``2 + (3·i mod 4)`` events ``interval_ms`` apart (so
responses end at different times, as in §11.3's lab), then the end of the body.  The
client wants all ``requests`` at once (t_wanted) and sends each as soon as its cap allows.

* ``connection_pool_queueing``: HTTP/1.1 keep-alive; the client runs ``pool`` worker
  threads, each with one connection, pulling request indices from a queue filled at
  t_wanted (a pool of 2: the other 6 requests wait for a connection).
  ``connection_pool_queueing_control``: a pool of 8 (every request at once).
* ``h2_concurrency_limited``: one HTTP/2 connection; the server (``h2``) advertises
  SETTINGS_MAX_CONCURRENT_STREAMS = ``max_streams`` (2) in its first SETTINGS (set before
  ``initiate_connection``, §11.4); the client waits for that SETTINGS, then opens streams
  while ``open_outbound_streams`` < the peer's limit and one more at each ``StreamEnded``.
  ``h2_concurrency_limited_control``: the limit is 100.

Ground truth: per request, when the client wanted it, sent it (the write of its request
line / HEADERS) and saw its response end; the queueing cost the detectors must find =
Σ (sent − first sent) over the requests that waited (§11.3/§11.4 "dispatch − burst start").
"""

from __future__ import annotations

import queue
import select
import socket
import ssl
import threading
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
    tls_server_context,
)
from ..certs import DEFAULT_HOSTNAME
from . import RunData, Scenario, register

MAX_REQUEST_BYTES = 16_384


def _events(i: int) -> int:
    return 2 + (3 * i) % 4


def _event(i: int, n: int) -> bytes:
    return b"data: request %d token %d\n\n" % (i, n)


# ------------------------------------------------------------------ HTTP/1.1 pool (P1)
POOL_PARAMS: dict[str, Any] = {
    "delay_ms": 15.0,
    "port": 443,
    "requests": 8,
    "pool": 2,
    "interval_ms": 50.0,
    "server_nodelay": True,
    "client_nodelay": True,
}


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n" % len(data) + data + b"\r\n"


def _serve_h1(conn: ssl.SSLSocket, p: dict[str, Any], log: list[dict[str, Any]]) -> None:
    buf = b""
    while True:
        while b"\r\n\r\n" not in buf:
            try:
                data = conn.recv(4096)
            except (OSError, ssl.SSLError):
                data = b""
            if not data:
                return
            buf += data
            if len(buf) > MAX_REQUEST_BYTES:
                raise ConnectionError("request too long")
        head, _, buf = buf.partition(b"\r\n\r\n")
        t_req = now_ns()
        i = int(head.split(b" ", 2)[1].rsplit(b"/", 1)[1])
        conn.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        start = time.monotonic()
        for n in range(_events(i)):
            delay = start + n * p["interval_ms"] / 1000 - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            conn.sendall(_chunk(_event(i, n)))
        conn.sendall(b"0\r\n\r\n")
        log.append({"i": i, "request_read_ns": t_req, "end_write_ns": now_ns()})


def pool_server(p: dict[str, Any], ready: Callable[[], None]) -> dict[str, Any]:
    ctx = tls_server_context(p["cert"], p["key"], p["keylog_server"])
    ls = listen(p["server_ip"], p["port"], cc=p["cc"], nodelay=p["server_nodelay"])
    ready()
    log: list[dict[str, Any]] = []
    threads = []
    opts: dict[str, Any] = {}
    for _ in range(min(p["pool"], p["requests"])):
        raw, _ = ls.accept()
        raw.settimeout(IO_TIMEOUT_S)
        opts = tcp_options(raw)
        conn = ctx.wrap_socket(raw, server_side=True, do_handshake_on_connect=False)

        def run(c: ssl.SSLSocket = conn) -> None:
            c.do_handshake()
            _serve_h1(c, p, log)
            try:
                c.unwrap().close()
            except (OSError, ssl.SSLError):
                c.close()

        th = threading.Thread(target=run, daemon=True)
        th.start()
        threads.append(th)
    for th in threads:
        th.join(p["timeout_s"])
    ls.close()
    return {"socket": opts, "responses": sorted(log, key=lambda r: r["i"])}


def _read_sse_response(conn: ssl.SSLSocket) -> None:
    buf = b""
    while not buf.endswith(b"0\r\n\r\n"):
        data = conn.recv(65_536)
        if not data:
            raise ConnectionError("server closed mid-response")
        buf += data


def pool_client(p: dict[str, Any]) -> dict[str, Any]:
    ctx = tls_client_context(p["cert"], p["keylog_client"])
    todo: queue.Queue[int] = queue.Queue()
    rows: list[dict[str, Any]] = []
    conns: list[dict[str, Any]] = []
    errors: list[str] = []
    t_wanted = now_ns()
    for i in range(p["requests"]):
        todo.put(i)

    def worker(k: int) -> None:
        try:
            raw = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            apply_tcp_options(raw, cc=p["cc"], nodelay=p["client_nodelay"])
            raw.settimeout(CONNECT_TIMEOUT_S)
            raw.connect((p["server_ip"], p["port"]))
            conn = ctx.wrap_socket(raw, server_hostname=DEFAULT_HOSTNAME)
            conn.settimeout(IO_TIMEOUT_S)
            conns.append({"worker": k, "client_port": conn.getsockname()[1], "ready_ns": now_ns()})
            while True:
                try:
                    i = todo.get_nowait()
                except queue.Empty:
                    break
                t = now_ns()
                conn.sendall(
                    b"GET /events/%d HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\n\r\n"
                    % (i, DEFAULT_HOSTNAME.encode())
                )
                _read_sse_response(conn)
                rows.append(
                    {"i": i, "worker": k, "wanted_ns": t_wanted, "sent_ns": t, "end_ns": now_ns()}
                )
            try:
                conn.unwrap().close()
            except (OSError, ssl.SSLError):
                conn.close()
        except Exception as e:  # noqa: BLE001 - reported in the result, the run fails
            errors.append(f"worker {k}: {e!r}")

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(p["pool"])]
    for th in threads:
        th.start()
    for th in threads:
        th.join(p["timeout_s"])
    if errors:
        raise ConnectionError("; ".join(errors))
    return {"requests": sorted(rows, key=lambda r: r["sent_ns"]), "connections": conns}


def _queue_truth(rows: list[dict[str, Any]], cap: int) -> dict[str, Any]:
    """Requests beyond the first ``cap`` waited; cost = Σ (sent − first sent)."""
    rows = sorted(rows, key=lambda r: r["sent_ns"])
    first = rows[0]["sent_ns"] if rows else 0
    queued = rows[cap:]
    waits = [truth.ms(r["sent_ns"] - first) or 0.0 for r in queued]
    return {
        "requests": rows,
        "queued": len(queued),
        "queued_waits_ms": waits,
        "queueing_ms": round(sum(waits), 3),
        "done_ms": truth.ms(max(r["end_ns"] for r in rows) - first) if rows else None,
    }


def pool_ground_truth(run: RunData) -> dict[str, Any]:
    p = run.params
    pkts = truth.packets(run.forwarder)
    cap = min(p["pool"], p["requests"])
    q = _queue_truth(run.client["requests"], cap)
    return {
        "handshakes": list(truth.handshake(pkts)),
        "connections": run.client["connections"],
        "responses": run.server["responses"],
        **q,
        "summary": {
            "connections": len(run.client["connections"]),
            "queued": q["queued"],
            "queueing_ms": q["queueing_ms"],
            "done_ms": q["done_ms"],
        },
    }


def _pool_validate(doc: dict[str, Any]) -> list[str]:
    s = doc["ground_truth"]["summary"]
    p = doc["params"]
    if s["connections"] != min(p["pool"], p["requests"]):
        return [f"{s['connections']} connections, not {p['pool']}"]
    if p["pool"] < p["requests"]:  # a pool of 1 queues too; the detector must not say so
        return [] if s["queued"] >= 3 else [f"fewer than 3 queued requests: {s}"]
    return [] if s["queued"] == 0 else [f"control queued requests: {s}"]


# -------------------------------------------------------- HTTP/2 MAX_CONCURRENT_STREAMS (P2)
H2_PARAMS: dict[str, Any] = {
    "delay_ms": 15.0,
    "port": 443,
    "requests": 8,
    "max_streams": 2,  # the server's SETTINGS_MAX_CONCURRENT_STREAMS
    "client_cap": None,  # an application semaphore below the server's limit (None: none)
    "interval_ms": 50.0,
    "server_nodelay": True,
    "client_nodelay": True,
}


def h2_server(p: dict[str, Any], ready: Callable[[], None]) -> dict[str, Any]:
    import h2.config
    import h2.connection
    import h2.events
    import h2.settings

    from .h2 import Writer

    ctx = tls_server_context(p["cert"], p["key"], p["keylog_server"], alpn="h2")
    ls = listen(p["server_ip"], p["port"], cc=p["cc"], nodelay=p["server_nodelay"])
    ready()
    raw, _ = ls.accept()
    raw.settimeout(IO_TIMEOUT_S)
    opts = tcp_options(raw)
    sock = ctx.wrap_socket(raw, server_side=True)
    conn = h2.connection.H2Connection(
        h2.config.H2Configuration(client_side=False, header_encoding="utf-8")
    )
    # the limit must be in the *first* SETTINGS (§11.4: update_settings later races the
    # client's first HEADERS and gives REFUSED_STREAM instead)
    conn.local_settings = h2.settings.Settings(
        client=False,
        initial_values={h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: p["max_streams"]},
    )
    w = Writer(sock, conn)
    conn.initiate_connection()
    w.flush()
    due: list[tuple[float, int, int, int]] = []  # (monotonic due, stream, request i, event n)
    served: list[dict[str, Any]] = []
    done = 0
    closed = False
    while done < p["requests"] or not closed:
        timeout = max(0.0, min(d[0] for d in due) - time.monotonic()) if due else 1.0
        readable = sock.pending() > 0 or bool(select.select([sock], [], [], timeout)[0])
        if readable:
            data = sock.recv(65_536)
            if not data:
                break
            t = now_ns()
            for ev in conn.receive_data(data):
                if isinstance(ev, h2.events.RequestReceived):
                    path = dict(ev.headers).get(":path", "/events/0")
                    i = int(path.rsplit("/", 1)[1])
                    conn.send_headers(
                        ev.stream_id, [(":status", "200"), ("content-type", "text/event-stream")]
                    )
                    due.append((time.monotonic(), ev.stream_id, i, 0))
                    served.append({"i": i, "stream": ev.stream_id, "request_read_ns": t})
                elif isinstance(ev, h2.events.ConnectionTerminated):
                    closed = True
            w.flush()
            if closed:
                break
        now = time.monotonic()
        for item in sorted(d for d in due if d[0] <= now):
            due.remove(item)
            _, sid, i, n = item
            last = n + 1 == _events(i)
            conn.send_data(sid, _event(i, n), end_stream=last)
            if last:
                done += 1
            else:
                due.append((item[0] + p["interval_ms"] / 1000, sid, i, n + 1))
        w.flush()
    try:
        sock.unwrap().close()
    except (OSError, ssl.SSLError):
        sock.close()
    ls.close()
    return {"socket": opts, "served": served, "writes": w.log}


def h2_client(p: dict[str, Any]) -> dict[str, Any]:
    import h2.config
    import h2.connection
    import h2.events

    from .h2 import Writer

    ctx = tls_client_context(p["cert"], p["keylog_client"], alpn="h2")
    raw = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    apply_tcp_options(raw, cc=p["cc"], nodelay=p["client_nodelay"])
    raw.settimeout(CONNECT_TIMEOUT_S)
    raw.connect((p["server_ip"], p["port"]))
    sock = ctx.wrap_socket(raw, server_hostname=DEFAULT_HOSTNAME)
    sock.settimeout(IO_TIMEOUT_S)
    opts = tcp_options(sock)
    conn = h2.connection.H2Connection(
        h2.config.H2Configuration(client_side=True, header_encoding="utf-8")
    )
    conn.initiate_connection()
    w = Writer(sock, conn)
    w.flush()
    pending = list(range(p["requests"]))
    rows: dict[int, dict[str, Any]] = {}
    by_stream: dict[int, int] = {}
    t_wanted: int | None = None
    limit: int | None = None

    def open_streams() -> None:
        cap = limit if limit is None or not p["client_cap"] else min(limit, p["client_cap"])
        while pending and cap is not None and conn.open_outbound_streams < cap:
            i = pending.pop(0)
            sid = conn.get_next_available_stream_id()
            conn.send_headers(
                sid,
                [
                    (":method", "GET"),
                    (":scheme", "https"),
                    (":authority", DEFAULT_HOSTNAME),
                    (":path", f"/events/{i}"),
                    ("accept", "text/event-stream"),
                ],
                end_stream=True,
            )
            w.flush()
            rows[i] = {"i": i, "stream": sid, "wanted_ns": t_wanted, "sent_ns": w.log[-1]["t_ns"]}
            by_stream[sid] = i

    ended = 0
    while ended < p["requests"]:
        data = sock.recv(65_536)
        t = now_ns()
        if not data:
            raise ConnectionError("server closed early")
        for ev in conn.receive_data(data):
            if isinstance(ev, h2.events.RemoteSettingsChanged) and limit is None:
                t_wanted = t  # the requests are wanted once the peer's limit is known
                limit = conn.remote_settings.max_concurrent_streams
            elif isinstance(ev, h2.events.DataReceived):
                conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            elif isinstance(ev, h2.events.StreamEnded):
                rows[by_stream[ev.stream_id]]["end_ns"] = t
                ended += 1
        w.flush()
        open_streams()
    conn.close_connection()
    w.flush()
    try:
        sock.unwrap().close()
    except (OSError, ssl.SSLError):
        sock.close()
    return {"socket": opts, "limit": limit, "requests": list(rows.values()), "writes": w.log}


def h2_ground_truth(run: RunData) -> dict[str, Any]:
    p = run.params
    lim = run.client["limit"] or p["requests"]
    if p.get("client_cap"):
        lim = min(lim, p["client_cap"])
    q = _queue_truth(run.client["requests"], min(lim, p["requests"]))
    return {
        "handshakes": list(truth.handshake(truth.packets(run.forwarder))),
        "max_concurrent_streams": run.client["limit"],
        **q,
        "summary": {
            "max_concurrent_streams": run.client["limit"],
            "queued": q["queued"],
            "queueing_ms": q["queueing_ms"],
            "done_ms": q["done_ms"],
        },
    }


def _h2_validate(doc: dict[str, Any]) -> list[str]:
    s = doc["ground_truth"]["summary"]
    p = doc["params"]
    if s["max_concurrent_streams"] != p["max_streams"]:
        return [f"client saw limit {s['max_concurrent_streams']}, not {p['max_streams']}"]
    if p.get("client_cap"):  # the application's own cap: queued, but not by the peer's limit
        return [] if s["queued"] >= 3 else [f"the client cap queued fewer than 3: {s}"]
    if p["max_streams"] < p["requests"]:
        return [] if s["queued"] >= 3 else [f"fewer than 3 queued streams: {s}"]
    return [] if s["queued"] == 0 else [f"control queued streams: {s}"]


# ------------------------------------------------- HTTP/3: QUIC MAX_STREAMS (P2, §11.4 (iii))
H3_PARAMS: dict[str, Any] = {
    "delay_ms": 15.0,
    "port": 443,
    "requests": 8,
    "max_streams": 2,  # the server's initial_max_streams_bidi (and +1 per closed stream)
    "interval_ms": 50.0,
    "idle_timeout_s": 10.0,
}


def h3_server(p: dict[str, Any], ready: Callable[[], None]) -> dict[str, Any]:
    import asyncio

    return asyncio.run(_h3_server(p, ready))


async def _h3_server(p: dict[str, Any], ready: Callable[[], None]) -> dict[str, Any]:
    import asyncio

    from aioquic.asyncio import QuicConnectionProtocol, serve
    from aioquic.h3.connection import H3_ALPN, H3Connection
    from aioquic.h3.events import HeadersReceived
    from aioquic.quic.configuration import QuicConfiguration
    from aioquic.quic.events import ConnectionTerminated

    done = asyncio.Event()
    served: list[dict[str, Any]] = []

    class Server(QuicConnectionProtocol):
        def __init__(self, *a: Any, **kw: Any) -> None:
            super().__init__(*a, **kw)
            # aioquic 1.7.2 grants 128 bidirectional streams (private Limit, §11.4): set
            # before the handshake, so the transport parameter carries the lower value,
            # and aioquic raises it by one per closed stream (MAX_STREAMS)
            lim = self._quic._local_max_streams_bidi
            lim.value = lim.sent = int(p["max_streams"])
            self._h3 = H3Connection(self._quic)

        def quic_event_received(self, event: Any) -> None:
            if isinstance(event, ConnectionTerminated):
                done.set()
                return
            for ev in self._h3.handle_event(event):
                if isinstance(ev, HeadersReceived):
                    path = dict(ev.headers).get(b":path", b"/events/0").decode()
                    i = int(path.rsplit("/", 1)[1])
                    served.append({"i": i, "stream": ev.stream_id, "request_read_ns": now_ns()})
                    asyncio.ensure_future(self._respond(ev.stream_id, i))

        async def _respond(self, sid: int, i: int) -> None:
            self._h3.send_headers(
                sid, [(b":status", b"200"), (b"content-type", b"text/event-stream")]
            )
            self.transmit()
            loop = asyncio.get_running_loop()
            start = loop.time()
            for n in range(_events(i)):
                delay = start + n * p["interval_ms"] / 1000 - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)
                self._h3.send_data(sid, _event(i, n), end_stream=n + 1 == _events(i))
                self.transmit()

    with open(p["keylog_server"], "a", encoding="ascii") as keylog:
        cfg = QuicConfiguration(
            is_client=False,
            alpn_protocols=H3_ALPN,
            secrets_log_file=keylog,
            idle_timeout=p["idle_timeout_s"],
        )
        cfg.load_cert_chain(p["cert"], p["key"])
        srv = await serve(p["server_ip"], p["port"], configuration=cfg, create_protocol=Server)
        ready()
        try:
            await asyncio.wait_for(done.wait(), timeout=float(p["timeout_s"]))
        finally:
            srv.close()
    return {"socket": None, "served": served}


def h3_client(p: dict[str, Any]) -> dict[str, Any]:
    import asyncio

    return asyncio.run(_h3_client(p))


async def _h3_client(p: dict[str, Any]) -> dict[str, Any]:
    import asyncio

    from aioquic.asyncio import QuicConnectionProtocol, connect
    from aioquic.h3.connection import H3_ALPN, H3Connection
    from aioquic.h3.events import DataReceived
    from aioquic.quic.configuration import QuicConfiguration
    from aioquic.quic.events import HandshakeCompleted
    from aioquic.quic.logger import QuicLogger

    all_done = asyncio.Event()
    ends: dict[int, int] = {}
    meta: dict[str, Any] = {}

    class Client(QuicConnectionProtocol):
        def __init__(self, *a: Any, **kw: Any) -> None:
            super().__init__(*a, **kw)
            self._h3 = H3Connection(self._quic)

        def quic_event_received(self, event: Any) -> None:
            if isinstance(event, HandshakeCompleted):
                meta["alpn"] = event.alpn_protocol
            for ev in self._h3.handle_event(event):
                if isinstance(ev, DataReceived) and ev.stream_ended:
                    ends[ev.stream_id] = now_ns()
                    if len(ends) == p["requests"]:
                        all_done.set()

        def request_all(self) -> dict[int, int]:
            out = {}
            for i in range(p["requests"]):  # aioquic queues the streams beyond the limit
                sid = self._quic.get_next_available_stream_id()
                self._h3.send_headers(
                    sid,
                    [
                        (b":method", b"GET"),
                        (b":scheme", b"https"),
                        (b":authority", DEFAULT_HOSTNAME.encode()),
                        (b":path", f"/events/{i}".encode()),
                        (b"accept", b"text/event-stream"),
                    ],
                    end_stream=True,
                )
                out[sid] = i
            self.transmit()
            return out

    logger = QuicLogger()
    with open(p["keylog_client"], "a", encoding="ascii") as keylog:
        cfg = QuicConfiguration(
            is_client=True,
            alpn_protocols=H3_ALPN,
            secrets_log_file=keylog,
            quic_logger=logger,
            server_name=DEFAULT_HOSTNAME,
            idle_timeout=p["idle_timeout_s"],
        )
        cfg.load_verify_locations(cafile=p["cert"])
        async with connect(
            p["server_ip"], p["port"], configuration=cfg, create_protocol=Client
        ) as conn:
            t_wanted = now_ns()
            streams = conn.request_all()  # type: ignore[attr-defined]
            await asyncio.wait_for(all_done.wait(), timeout=float(p["timeout_s"]))
    # when each request stream's first STREAM frame left (the client's qlog)
    first_sent: dict[int, int] = {}
    blocked: list[dict[str, Any]] = []
    for trace in logger.to_dict().get("traces", []):
        for ev in trace.get("events", []):
            if ev["name"] != "transport:packet_sent":
                continue
            t = round(ev["time"] * 1e6)
            for f in ev["data"].get("frames", []):
                if f.get("frame_type") == "stream" and f["stream_id"] in streams:
                    first_sent.setdefault(f["stream_id"], t)
                elif f.get("frame_type") == "streams_blocked":
                    blocked.append({"t_ns": t, "limit": f.get("limit")})
    rows = [
        {
            "i": i,
            "stream": sid,
            "wanted_ns": t_wanted,
            "sent_ns": first_sent.get(sid, t_wanted),
            "end_ns": ends.get(sid, t_wanted),
        }
        for sid, i in streams.items()
    ]
    return {
        "socket": None,
        "tls": {"version": "TLSv1.3", "cipher": None, "alpn": meta.get("alpn")},
        "alpn": meta.get("alpn"),
        "initial_limit": p["max_streams"],
        "requests": rows,
        "streams_blocked": blocked,
    }


def h3_ground_truth(run: RunData) -> dict[str, Any]:
    p = run.params
    q = _queue_truth(run.client["requests"], min(p["max_streams"], p["requests"]))
    return {
        "alpn": run.client.get("alpn"),
        "max_streams_bidi": p["max_streams"],
        "streams_blocked_sent": run.client["streams_blocked"],
        **q,
        "summary": {
            "max_streams_bidi": p["max_streams"],
            "streams_blocked_frames": len(run.client["streams_blocked"]),
            "queued": q["queued"],
            "queueing_ms": q["queueing_ms"],
            "done_ms": q["done_ms"],
        },
    }


def _h3_validate(doc: dict[str, Any]) -> list[str]:
    s = doc["ground_truth"]["summary"]
    p = doc["params"]
    if p["max_streams"] < p["requests"]:
        ok = s["queued"] >= 3 and s["streams_blocked_frames"] >= 1
        return [] if ok else [f"fewer than 3 queued streams or no STREAMS_BLOCKED: {s}"]
    return [] if s["streams_blocked_frames"] == 0 else [f"control was blocked: {s}"]


_M = __name__
# every SSE event is its own small TLS record (one h2 DATA frame per write): T1/T3b may
# fire in either variant (in the control 8 streams interleave their tiny records)
_H2_INCIDENTAL = ("tls_tiny_records", "tls_records_coalesced")
register(
    Scenario(
        name="connection_pool_queueing",
        summary="8 HTTP/1.1 SSE requests wanted at once through a pool of 2 TLS connections",
        what="8 requests, 2 keep-alive connections: after the first two, each request leaves "
        "when the response on its connection ends, while the other connection is busy",
        expected=("connection_pool_queueing",),
        pair="connection_pool_queueing_control",
        server=f"{_M}:pool_server",
        client=f"{_M}:pool_client",
        params=POOL_PARAMS,
        tls=True,
        ground_truth=pool_ground_truth,
        validate=_pool_validate,
    )
)
register(
    Scenario(
        name="connection_pool_queueing_control",
        summary="the same 8 requests through a pool of 8 connections (control)",
        what="the same 8 requests on 8 connections: all sent within milliseconds",
        expected=(),
        controls=("connection_pool_queueing",),
        pair="connection_pool_queueing",
        server=f"{_M}:pool_server",
        client=f"{_M}:pool_client",
        params={**POOL_PARAMS, "pool": 8},
        tls=True,
        ground_truth=pool_ground_truth,
        validate=_pool_validate,
    )
)
register(
    Scenario(
        name="h2_concurrency_limited",
        summary="8 HTTP/2 SSE streams wanted at once; the server's "
        "SETTINGS_MAX_CONCURRENT_STREAMS is 2",
        what="one h2 connection, MAX_CONCURRENT_STREAMS 2: after the first two, each stream's "
        "HEADERS leaves when another stream ends",
        expected=("h2_concurrency_limited",),
        pair="h2_concurrency_limited_control",
        incidental=_H2_INCIDENTAL,
        server=f"{_M}:h2_server",
        client=f"{_M}:h2_client",
        params=H2_PARAMS,
        tls=True,
        ground_truth=h2_ground_truth,
        validate=_h2_validate,
    )
)
register(
    Scenario(
        name="h2_concurrency_limited_control",
        summary="the same 8 streams with SETTINGS_MAX_CONCURRENT_STREAMS 100 (control)",
        what="the same 8 streams, limit 100: all HEADERS in one write",
        expected=(),
        controls=("h2_concurrency_limited",),
        pair="h2_concurrency_limited",
        incidental=_H2_INCIDENTAL,
        server=f"{_M}:h2_server",
        client=f"{_M}:h2_client",
        params={**H2_PARAMS, "max_streams": 100},
        tls=True,
        ground_truth=h2_ground_truth,
        validate=_h2_validate,
    )
)
register(
    Scenario(
        name="h3_concurrency_limited",
        summary="8 HTTP/3 SSE streams wanted at once; the server grants 2 bidirectional "
        "streams (initial_max_streams_bidi), +1 per closed stream (MAX_STREAMS)",
        what="aioquic, max_streams_bidi 2: the client sends STREAMS_BLOCKED, and each queued "
        "request stream opens right after a MAX_STREAMS from the server",
        expected=("h2_concurrency_limited",),
        pair="h3_concurrency_limited_control",
        server=f"{_M}:h3_server",
        client=f"{_M}:h3_client",
        params=H3_PARAMS,
        tls=True,
        fixture_middle=False,  # as the other h3 fixtures (middle checks read TCP legs)
        ground_truth=h3_ground_truth,
        validate=_h3_validate,
    )
)
register(
    Scenario(
        name="h3_concurrency_limited_control",
        summary="the same 8 HTTP/3 streams with aioquic's default 128 streams (control)",
        what="the same 8 streams, 128 bidirectional streams granted: all open at once",
        expected=(),
        controls=("h2_concurrency_limited",),
        pair="h3_concurrency_limited",
        server=f"{_M}:h3_server",
        client=f"{_M}:h3_client",
        params={**H3_PARAMS, "max_streams": 128},
        tls=True,
        fixture_middle=False,  # as the other h3 fixtures (middle checks read TCP legs)
        ground_truth=h3_ground_truth,
        validate=_h3_validate,
    )
)
register(
    Scenario(
        name="connection_pool_one",
        summary="the same 8 requests through a pool of ONE connection (lone control: N = 1 "
        "is a sequential program on the wire, not reported)",
        what="8 requests, one keep-alive connection, each sent when the previous response "
        "ended: a pool of one and a sequential program look the same (DETECTION.md §11.3)",
        expected=(),
        controls=("connection_pool_queueing",),
        pair=None,
        server=f"{_M}:pool_server",
        client=f"{_M}:pool_client",
        params={**POOL_PARAMS, "pool": 1, "requests": 6},
        tls=True,
        ground_truth=pool_ground_truth,
        validate=_pool_validate,
    )
)
register(
    Scenario(
        name="h2_client_cap",
        summary="8 HTTP/2 streams, server limit 100, the client's own semaphore of 2 (lone "
        "control: open streams pinned below the peer's limit are not h2_concurrency_limited)",
        what="SETTINGS_MAX_CONCURRENT_STREAMS 100 but the application opens at most 2 streams "
        "at a time: queued, by the client itself (DETECTION.md §11.4 false positives)",
        expected=(),
        controls=("h2_concurrency_limited",),
        pair=None,
        incidental=_H2_INCIDENTAL,
        server=f"{_M}:h2_server",
        client=f"{_M}:h2_client",
        params={**H2_PARAMS, "max_streams": 100, "client_cap": 2},
        tls=True,
        ground_truth=h2_ground_truth,
        validate=_h2_validate,
    )
)
