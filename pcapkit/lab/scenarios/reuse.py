"""Connection reuse (R3) and TLS session resumption (R4): sequential HTTPS requests.

DETECTION.md §7.3, §7.4 and §8.2 ("curl twice without connection reuse / without session
cache vs ``curl url url``").  A client makes ``requests`` HTTP/1.1 requests over TLS, one
after another with ``think_ms`` between them (> RTT: the previous exchange is complete and
its connection idle or closed when the next request is due).  Python ``ssl`` (OpenSSL 3)
both ends, port 443, a per-run self-signed ECDSA certificate, key logs embedded, both ends
TCP_NODELAY (§8.1a: nothing but the connection handling differs between variants).

Two pairs:

* ``tls_no_reuse`` (positive: ``connection_not_reused``, ``tls_resumption_missing``) — TLS 1.3;
  every request on a new TCP + TLS connection (``Connection: close``; the client closes
  after the response, close_notify then FIN) and no session cache: each ClientHello offers
  nothing to resume, so each connection pays TCP (1 RTT) + a full TLS 1.3 handshake (1 RTT)
  before its request.  ``tls_reuse`` (control for both) sends the same requests over one
  keep-alive connection.
* ``tls_resumption_rejected`` (positive: ``tls_resumption_missing``) — TLS 1.2, new
  connections, the client *offers* the previous connection's session (``session=``: session
  ID and RFC 5077 ticket) but every connection is served by a fresh server ``SSLContext`` —
  new ticket keys and an empty session cache, as behind a load balancer whose servers do not
  share ticket keys — so the server runs a full handshake (2 RTT in TLS 1.2).
  ``tls_resumed`` (control for ``tls_resumption_missing``) is the same with one server
  context: every repeat connection resumes (abbreviated handshake, 1 RTT).  TLS 1.2 makes the
  resumption cost visible on the wire: the full handshake is one round trip longer (TLS 1.3
  resumption saves no round trip — only the certificate flight and signatures).  New
  connections in both variants make ``connection_not_reused`` ``incidental`` to this pair.

Ground truth per connection (client clock = capture clock): connect → established → TLS
handshake done → request written → response read → closed, the client port, whether a
session was offered and whether the handshake resumed; and the per-connection setup time
(connect → request written: what an avoidable connection costs, DETECTION.md §7.3).
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
    tcp_options,
    tls_info,
)
from ..certs import DEFAULT_HOSTNAME
from . import RunData, Scenario, register

PARAMS: dict[str, Any] = {
    "delay_ms": 15.0,  # RTT 30 ms, as the other TLS scenarios
    "port": 443,  # tshark decodes TLS on 443 without "decode as"
    "requests": 3,
    "mode": "new",  # "new": one connection per request; "keepalive": one connection for all
    "tls_version": "1.3",  # "1.3" | "1.2"
    "offer_session": False,  # client passes the previous connection's session (session=)
    "server_ticket_keys": "shared",  # "shared": one server SSLContext; "per_connection": new
    #                                  context (ticket keys, session cache) per connection
    "think_ms": 200.0,  # between one response and the next request (> RTT: idle / closed)
    "response_len": 2000,
    "server_nodelay": True,
    "client_nodelay": True,
}
MAX_REQUEST_BYTES = 16_384  # a GET line plus headers; more is a broken client
# every connection's SYN → SYN/ACK within 5 % of the path RTT (the fixtures' own rule for
# the first handshake, pcapkit.lab.fixtures.HANDSHAKE_RTT_TOLERANCE, applied to each one)
RTT_TOLERANCE = 1.05
ALPN = "http/1.1"


def _versions(ctx: ssl.SSLContext, version: str) -> None:
    v = ssl.TLSVersion.TLSv1_3 if version == "1.3" else ssl.TLSVersion.TLSv1_2
    ctx.minimum_version = ctx.maximum_version = v


def _server_ctx(p: dict[str, Any]) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _versions(ctx, p["tls_version"])
    ctx.load_cert_chain(p["cert"], p["key"])
    ctx.set_alpn_protocols([ALPN])
    ctx.keylog_filename = p["keylog_server"]  # appended to: every context, one file
    return ctx


def _client_ctx(p: dict[str, Any]) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=p["cert"])
    _versions(ctx, p["tls_version"])
    ctx.set_alpn_protocols([ALPN])
    ctx.keylog_filename = p["keylog_client"]
    return ctx


def _read_request(conn: ssl.SSLSocket) -> bytes | None:
    buf = b""
    while b"\r\n\r\n" not in buf:
        data = conn.recv(4096)
        if not data:
            return None  # the client closed: no more requests on this connection
        buf += data
        if len(buf) > MAX_REQUEST_BYTES:
            raise ConnectionError("request too long")
    return buf


def _response(p: dict[str, Any], n: int, keep: bool) -> bytes:
    body = (b"response %d " % n) * (p["response_len"] // 10 + 1)
    body = body[: p["response_len"]]
    head = (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n"
        b"Connection: %s\r\n\r\n" % (len(body), b"keep-alive" if keep else b"close")
    )
    return head + body


def server(p: dict[str, Any], ready: Callable[[], None]) -> dict[str, Any]:
    keep = p["mode"] == "keepalive"
    shared = _server_ctx(p)
    ls = listen(p["server_ip"], p["port"], cc=p["cc"], nodelay=p["server_nodelay"])
    ready()
    conns = []
    served = 0
    opts: dict[str, Any] = {}
    while served < p["requests"]:
        raw, _ = ls.accept()
        raw.settimeout(IO_TIMEOUT_S)
        opts = tcp_options(raw)
        ctx = shared if p["server_ticket_keys"] == "shared" else _server_ctx(p)
        t_acc = now_ns()
        conn = ctx.wrap_socket(raw, server_side=True)
        rec: dict[str, Any] = {
            "accepted_ns": t_acc,
            "handshake_done_ns": now_ns(),
            "session_reused": conn.session_reused,
            "requests": [],
        }
        while served < p["requests"]:
            req = _read_request(conn)
            if req is None:
                break
            t_req = now_ns()
            served += 1
            conn.sendall(_response(p, served, keep))
            rec["requests"].append({"n": served, "request_read_ns": t_req, "response_ns": now_ns()})
            if not keep:
                break
        try:  # orderly close: wait for the client's close_notify/FIN, then ours
            while conn.recv(4096):
                pass
            conn.unwrap().close()
        except (OSError, ssl.SSLError):
            conn.close()
        rec["closed_ns"] = now_ns()
        conns.append(rec)
    ls.close()
    return {"socket": opts, "connections": conns}


def _read_response(conn: ssl.SSLSocket) -> int:
    buf = b""
    while b"\r\n\r\n" not in buf:
        data = conn.recv(65_536)
        if not data:
            raise ConnectionError("server closed before the response head")
        buf += data
    head, _, body = buf.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        data = conn.recv(65_536)
        if not data:
            raise ConnectionError(f"server closed after {len(body)} of {length} body bytes")
        body += data
    return len(body)


def _connect(p: dict[str, Any], ctx: ssl.SSLContext, session: Any) -> tuple[Any, dict[str, Any]]:
    raw = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    apply_tcp_options(raw, cc=p["cc"], nodelay=p["client_nodelay"])
    raw.settimeout(CONNECT_TIMEOUT_S)
    t0 = now_ns()
    raw.connect((p["server_ip"], p["port"]))
    t1 = now_ns()
    conn = ctx.wrap_socket(raw, server_hostname=DEFAULT_HOSTNAME, session=session)
    t2 = now_ns()
    conn.settimeout(IO_TIMEOUT_S)
    return conn, {
        "client_port": conn.getsockname()[1],
        "connect_ns": t0,
        "established_ns": t1,
        "handshake_done_ns": t2,
        "session_offered": session is not None,
        "session_reused": conn.session_reused,
        "tls": tls_info(conn),
        "socket": tcp_options(conn),
        "requests": [],
    }


def _close(conn: ssl.SSLSocket) -> int:
    try:  # close_notify, then FIN: the client ends every connection
        conn.unwrap().close()
    except (OSError, ssl.SSLError):
        conn.close()
    return now_ns()


def _request(p: dict[str, Any], conn: ssl.SSLSocket, n: int, keep: bool) -> dict[str, Any]:
    req = b"GET /r%d HTTP/1.1\r\nHost: %s\r\nConnection: %s\r\n\r\n" % (
        n,
        DEFAULT_HOSTNAME.encode(),
        b"keep-alive" if keep else b"close",
    )
    t = now_ns()
    conn.sendall(req)
    got = _read_response(conn)
    return {"n": n, "request_write_ns": t, "response_read_ns": now_ns(), "bytes": got}


def client(p: dict[str, Any]) -> dict[str, Any]:
    ctx = _client_ctx(p)
    keep = p["mode"] == "keepalive"
    conns: list[dict[str, Any]] = []
    session = None
    conn = None
    for n in range(1, p["requests"] + 1):
        if n > 1:
            time.sleep(p["think_ms"] / 1000)
        if conn is None:
            conn, meta = _connect(p, ctx, session if p["offer_session"] else None)
            conns.append(meta)
        conns[-1]["requests"].append(_request(p, conn, n, keep))
        if not keep:
            session = conn.session  # TLS 1.3: the tickets arrived before the response
            conns[-1]["closed_ns"] = _close(conn)
            conn = None
    if conn is not None:
        conns[-1]["closed_ns"] = _close(conn)
    first = conns[0]
    return {
        "socket": first["socket"],
        "tls": first["tls"],
        "connections": conns,
    }


def _second_round_trip_ms(pkts: list[truth.TracePacket], port: int) -> float | None:
    """TLS 1.2 full handshake, at the forwarder: the client's second flight (ClientKeyExchange
    … Finished) leaves → the server's Finished flight reaches the client.  The round trip an
    abbreviated (resumed) handshake does not need (DETECTION.md §7.4)."""
    c2s = [x for x in truth.data_packets(pkts, "c2s") if x.sport == port]
    s2c = [x for x in truth.data_packets(pkts, "s2c") if x.dport == port]
    if not s2c:
        return None
    second = next((x for x in c2s if x.t_in_ns > s2c[0].t_in_ns), None)
    if second is None:
        return None
    fin = next((x for x in s2c if x.t_in_ns > second.t_in_ns and x.t_out_ns is not None), None)
    return None if fin is None else truth.ms(fin.t_out_ns - second.t_in_ns)  # type: ignore[operator]


def ground_truth(run: RunData) -> dict[str, Any]:
    pkts = truth.packets(run.forwarder)
    hs = {h["client_port"]: h for h in truth.handshake(pkts)}
    tls12 = run.params["tls_version"] == "1.2"
    conns = []
    for c in run.client["connections"]:
        h = hs.get(c["client_port"])
        first = c["requests"][0]
        second_rt = (
            _second_round_trip_ms(pkts, c["client_port"])
            if tls12 and not c["session_reused"]
            else None
        )
        conns.append(
            {
                "client_port": c["client_port"],
                "syn_ns": None if h is None else h["syn_ns"],
                "handshake_rtt_ms": None if h is None else round(h["rtt_ms"], 3),
                "tcp_ms": truth.ms(c["established_ns"] - c["connect_ns"]),
                "tls_ms": truth.ms(c["handshake_done_ns"] - c["established_ns"]),
                # connect() → first request written: what a new connection costs before its
                # request (DETECTION.md §7.3), on the capture clock
                "setup_ms": truth.ms(first["request_write_ns"] - c["connect_ns"]),
                # TLS 1.2 full handshakes: the round trip resumption would have saved
                "second_round_trip_ms": second_rt,
                "session_offered": c["session_offered"],
                "session_reused": c["session_reused"],
                "version": c["tls"]["version"],
                "cipher": c["tls"]["cipher"],
                "requests": [r["n"] for r in c["requests"]],
                "connect_ns": c["connect_ns"],
                "closed_ns": c.get("closed_ns"),
            }
        )
    rtts = [c["handshake_rtt_ms"] for c in conns if c["handshake_rtt_ms"] is not None]
    full = [c["tls_ms"] for c in conns if not c["session_reused"]]
    resumed = [c["tls_ms"] for c in conns if c["session_reused"]]
    gaps = [
        truth.ms(b["connect_ns"] - a["closed_ns"])
        for a, b in zip(conns, conns[1:], strict=False)
        if a["closed_ns"] is not None
    ]
    return {
        "handshake": list(truth.handshake(pkts)),
        "connections": conns,
        "summary": {
            "connections": len(conns),
            "requests": sum(len(c["requests"]) for c in conns),
            "sessions_offered": sum(1 for c in conns[1:] if c["session_offered"]),
            "sessions_resumed": sum(1 for c in conns if c["session_reused"]),
            "version": conns[0]["version"],
            "rtt_ms": round(sum(rtts) / len(rtts), 3) if rtts else None,
            # R3: what the repeat connections cost before their requests could leave
            "repeat_setup_ms": [c["setup_ms"] for c in conns[1:]],
            "repeat_setup_ms_total": round(sum(c["setup_ms"] or 0.0 for c in conns[1:]), 3),
            # the client closed each connection this long before opening the next
            "close_to_next_connect_ms": gaps,
            # R4: TLS handshake time, full vs resumed (TLS 1.2: resumption saves one RTT)
            "tls_ms_full": full,
            "tls_ms_resumed": resumed,
            "repeat_second_round_trip_ms": [c["second_round_trip_ms"] for c in conns[1:]],
        },
    }


def _validate(doc: dict[str, Any]) -> list[str]:
    p, gt = doc["params"], doc["ground_truth"]
    s = gt["summary"]
    problems = []
    if s["requests"] != p["requests"]:
        problems.append(f"{s['requests']} requests answered of {p['requests']}")
    want_conns = 1 if p["mode"] == "keepalive" else p["requests"]
    if s["connections"] != want_conns:
        problems.append(f"{s['connections']} connections, expected {want_conns}")
    want_version = "TLSv1.3" if p["tls_version"] == "1.3" else "TLSv1.2"
    if any(c["version"] != want_version for c in gt["connections"]):
        problems.append(f"not every connection negotiated {want_version}")
    repeat = want_conns - 1
    if p["offer_session"] and p["mode"] == "new":
        if s["sessions_offered"] != repeat:
            problems.append(f"{s['sessions_offered']} sessions offered of {repeat}")
        want_resumed = repeat if p["server_ticket_keys"] == "shared" else 0
        if s["sessions_resumed"] != want_resumed:
            problems.append(f"{s['sessions_resumed']} sessions resumed, expected {want_resumed}")
    elif s["sessions_resumed"]:
        problems.append("a session resumed although none was offered")
    if len(gt["handshake"]) != want_conns:
        problems.append(f"{len(gt['handshake'])} TCP handshakes on the path")
    # every handshake on the configured path (a late read by the forwarder on a busy host
    # would put one connection's RTT legs, and so its costs, off the path's)
    rtt = doc["path"]["rtt_ms"]
    slow = [
        c["handshake_rtt_ms"]
        for c in gt["connections"]
        if c["handshake_rtt_ms"] is None or c["handshake_rtt_ms"] > rtt * RTT_TOLERANCE
    ]
    if slow:
        problems.append(f"handshake RTTs {slow} ms off the {rtt:g} ms path")
    return problems


def frames_of_interest(doc: dict[str, Any], caps: dict[str, list[Any]]) -> list[str]:
    """README lines for ``pcapkit.lab.fixtures`` (``Caps`` = packets per vantage): each
    connection's SYN frame at the client and its setup, session offered/resumed."""
    syn = [
        x
        for x in caps["client"]
        if x.proto == 6 and x.flags & 0x02 and not x.flags & 0x10  # SYN without ACK
    ]
    out = []
    for i, c in enumerate(doc["ground_truth"]["connections"]):
        frame = syn[i].frame if i < len(syn) else "?"
        state = (
            "resumed"
            if c["session_reused"]
            else ("offered, full handshake" if c["session_offered"] else "full handshake")
        )
        out.append(
            f"client: connection {i + 1} SYN frame {frame}, {c['version']} {state}, "
            f"TLS {c['tls_ms']} ms, request after {c['setup_ms']} ms"
        )
    return out


_M = __name__
register(
    Scenario(
        name="tls_no_reuse",
        summary="TLS 1.3, 3 sequential requests, each on a new connection, no session cache",
        what="3 requests, each on a new TCP + full TLS 1.3 handshake (no session offered); "
        "the client closes each connection and opens the next 200 ms later",
        expected=("connection_not_reused", "tls_resumption_missing"),
        pair="tls_reuse",
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
        name="tls_reuse",
        summary="TLS 1.3, the same 3 requests over one keep-alive connection (control)",
        what="the same 3 requests on one keep-alive connection: one handshake",
        expected=(),
        controls=("connection_not_reused", "tls_resumption_missing"),
        pair="tls_no_reuse",
        server=f"{_M}:server",
        client=f"{_M}:client",
        params={**PARAMS, "mode": "keepalive"},
        tls=True,
        ground_truth=ground_truth,
        validate=_validate,
    )
)
B_PARAMS = {
    **PARAMS,
    "tls_version": "1.2",
    "requests": 4,  # 4 connections: the TLS 1.2 key log has one line per connection
    "offer_session": True,
}
register(
    Scenario(
        name="tls_resumption_rejected",
        summary="TLS 1.2, 4 new connections offering the last session; a fresh server "
        "context per connection (unshared ticket keys) rejects it",
        what="the client offers its session (ID + ticket) on each new connection; the server "
        "(new ticket keys per connection) runs full 2-RTT TLS 1.2 handshakes",
        expected=("tls_resumption_missing",),
        incidental=("connection_not_reused",),
        pair="tls_resumed",
        server=f"{_M}:server",
        client=f"{_M}:client",
        params={**B_PARAMS, "server_ticket_keys": "per_connection"},
        tls=True,
        ground_truth=ground_truth,
        validate=_validate,
    )
)
register(
    Scenario(
        name="tls_resumed",
        summary="TLS 1.2, 4 new connections resuming the last session (control for resumption)",
        what="the same 4 connections with one server context: every repeat connection resumes "
        "(abbreviated 1-RTT handshake)",
        expected=(),
        controls=("tls_resumption_missing",),
        incidental=("connection_not_reused",),
        pair="tls_resumption_rejected",
        server=f"{_M}:server",
        client=f"{_M}:client",
        params=B_PARAMS,
        tls=True,
        ground_truth=ground_truth,
        validate=_validate,
    )
)
