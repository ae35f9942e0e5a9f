"""HTTP/2 over TLS with the ``h2`` library at both ends: TCP HoL (H1) and flow-control stalls (H2).

Both ends: Python ``ssl`` (TLS 1.3, ALPN ``h2``, key logs embedded), TCP_NODELAY (so no
Nagle hold muddies the HTTP/2 timing, DETECTION.md §8.1a), port 443, ``h2`` driving a
blocking socket.  The client opens ``streams`` GET streams at once; the server answers
each with ``body_len`` bytes, sending DATA frames round-robin (one frame of ``frame_len``
bytes per stream per round, each frame its own ``SSL_write`` and so its own TLS record)
whenever flow control allows; when every stream is out of credit it blocks reading the
socket until a WINDOW_UPDATE arrives (a *stall*, logged with its times).

* ``h2_hol_drop`` (DETECTION.md §4.1): 8 streams × 8 KiB in 1 KiB frames, large windows
  (no flow-control effect), the forwarder drops one server→client segment in the middle of
  the DATA: TCP delivers nothing behind the hole, so *every* stream stops until the
  retransmission lands.  ``h2_hol_nodrop``: the same without the drop.
* ``h2_flow_control`` (§4.2): one stream, a 160 KiB body in 16 375-byte frames (one full
  16 KiB record each), the client's default 65 535-byte stream and connection windows (h2
  sends WINDOW_UPDATE when half a window was consumed).  The server runs out of credit and
  idles until each WINDOW_UPDATE.  ``h2_flow_control_large``: the client advertises
  SETTINGS_INITIAL_WINDOW_SIZE 16 MiB and a connection WINDOW_UPDATE to 16 MiB; the
  transfer is cwnd-bound only.  DETECTION.md's lab used 1 MB; 160 KiB keeps each capture
  under 200 KB and still shows ≥ 2 stalls of ≈ one-way delay + client turnaround each.

Both pairs carry DATA in TLS records that span segments (1 KiB frames straddle 1 448-byte
segments; 16 KiB frames span 12), and some span a flight boundary (the first 16 KiB record
is not complete before the second round trip) or a retransmission: DETECTION.md §5.2's T2
rule can fire in both variants, so ``tls_record_spanning`` is listed as ``incidental``.

Ground truth: every write of each end with the HTTP/2 frames it carried (type, stream,
length, WINDOW_UPDATE increment), the TLS record layout those writes imply on the wire (so
the dropped segment's frames and streams are known), the client's DATA arrival times per
stream, the server's stalls, and the drop with its retransmission from the forwarder.
"""

from __future__ import annotations

import socket
import ssl
import struct
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

TLS13_RECORD_OVERHEAD = 22
TLS_MAX_PLAINTEXT = 16_384
DEFAULT_WINDOW = 65_535  # RFC 9113 §6.9.2
FRAME_TYPES = {
    0x0: "DATA",
    0x1: "HEADERS",
    0x3: "RST_STREAM",
    0x4: "SETTINGS",
    0x6: "PING",
    0x7: "GOAWAY",
    0x8: "WINDOW_UPDATE",
}

HOL_PARAMS: dict[str, Any] = {
    "delay_ms": 15.0,
    "port": 443,
    "streams": 8,
    "body_len": 8_192,
    "frame_len": 1_024,
    "client_window": 1_048_576,  # stream + connection windows; None: RFC defaults (65 535)
    # s2c payload packets: 1 handshake flight, 2 tickets, 1 SETTINGS (+ACK), 1 HEADERS,
    # then ≈ 51 segments of DATA; #20 is the 15th DATA segment (mid-transfer: ≥ 3 later
    # segments trigger a fast retransmit, no RTO)
    "drop_s2c": [20],
    "server_nodelay": True,
    "client_nodelay": True,
}

FC_PARAMS: dict[str, Any] = {
    **HOL_PARAMS,
    "streams": 1,
    "body_len": 163_840,
    "frame_len": 16_375,  # + 9-byte frame header = one full 16 KiB TLS record per frame
    "client_window": None,
    "drop_s2c": [],
}


def frames_in(data: bytes) -> list[dict[str, Any]]:
    """The HTTP/2 frames in one write (whole frames only; the preface is skipped)."""
    out = []
    if data.startswith(b"PRI * HTTP/2.0"):
        data = data[24:]
    i = 0
    while i + 9 <= len(data):
        length = int.from_bytes(data[i : i + 3], "big")
        ftype, flags = data[i + 3], data[i + 4]
        sid = struct.unpack_from("!I", data, i + 5)[0] & 0x7FFFFFFF
        f: dict[str, Any] = {"type": FRAME_TYPES.get(ftype, str(ftype)), "stream": sid}
        f["len"] = length
        if ftype == 0x8 and length == 4:
            f["increment"] = struct.unpack_from("!I", data, i + 9)[0] & 0x7FFFFFFF
        if flags & 0x1 and ftype in (0x0, 0x1):
            f["end_stream"] = True
        out.append(f)
        i += 9 + length
    return out


class Writer:
    """Sends what the h2 connection has queued as one ``SSL_write``; logs each write."""

    def __init__(self, sock: ssl.SSLSocket, conn: Any) -> None:
        self.sock, self.conn = sock, conn
        self.log: list[dict[str, Any]] = []

    def flush(self) -> None:
        data = self.conn.data_to_send()
        if not data:
            return
        t = now_ns()
        self.sock.sendall(data)
        self.log.append({"t_ns": t, "len": len(data), "frames": frames_in(data)})


def server(p: dict[str, Any], ready: Callable[[], None]) -> dict[str, Any]:
    import h2.config
    import h2.connection
    import h2.events

    ctx = tls_server_context(p["cert"], p["key"], p["keylog_server"], alpn="h2")
    ls = listen(p["server_ip"], p["port"], cc=p["cc"], nodelay=p["server_nodelay"])
    ready()
    raw, _ = ls.accept()
    raw.settimeout(IO_TIMEOUT_S)
    opts = tcp_options(raw)
    sock = ctx.wrap_socket(raw, server_side=True)
    if sock.selected_alpn_protocol() != "h2":
        raise ConnectionError(f"ALPN gave {sock.selected_alpn_protocol()!r}, not h2")
    conn = h2.connection.H2Connection(
        h2.config.H2Configuration(client_side=False, header_encoding="utf-8")
    )
    w = Writer(sock, conn)
    conn.initiate_connection()
    w.flush()
    requests: dict[int, str] = {}
    ended: set[int] = set()
    window_updates: list[dict[str, Any]] = []

    def pump() -> None:
        data = sock.recv(65_536)
        if not data:
            raise ConnectionError("client closed early")
        t = now_ns()
        for ev in conn.receive_data(data):
            if isinstance(ev, h2.events.RequestReceived):
                requests[ev.stream_id] = dict(ev.headers).get(":path", "")
            elif isinstance(ev, h2.events.StreamEnded):
                ended.add(ev.stream_id)
            elif isinstance(ev, h2.events.WindowUpdated):
                window_updates.append({"t_ns": t, "stream": ev.stream_id, "increment": ev.delta})
        w.flush()  # SETTINGS ACK, PING ACK

    while len(ended) < p["streams"]:
        pump()
    t_requests = now_ns()
    body = bytes(range(256)) * (p["body_len"] // 256 + 1)
    for sid in sorted(requests):
        conn.send_headers(
            sid,
            [
                (":status", "200"),
                ("content-type", "application/octet-stream"),
                ("content-length", str(p["body_len"])),
            ],
        )
    w.flush()
    sent = {sid: 0 for sid in requests}
    stalls = []
    last_data_ns = None
    while any(n < p["body_len"] for n in sent.values()):
        progressed = False
        for sid in sorted(sent):  # round-robin: one frame per stream per round
            left = p["body_len"] - sent[sid]
            n = min(p["frame_len"], left, conn.local_flow_control_window(sid))
            if left <= 0 or n <= 0:
                continue
            conn.send_data(sid, body[sent[sid] : sent[sid] + n], end_stream=n == left)
            sent[sid] += n
            w.flush()
            last_data_ns = w.log[-1]["t_ns"]
            progressed = True
        if not progressed:  # every stream out of credit: wait for WINDOW_UPDATE
            t_block = now_ns()
            n_wu = len(window_updates)
            stream_win = {sid: conn.local_flow_control_window(sid) for sid in sent}
            conn_win = conn.outbound_flow_control_window
            while not any(
                conn.local_flow_control_window(sid) > 0 for sid in sent if sent[sid] < p["body_len"]
            ):
                pump()
            stalls.append(
                {
                    "last_data_ns": last_data_ns,
                    "blocked_ns": t_block,
                    "window_update_ns": window_updates[n_wu]["t_ns"]
                    if len(window_updates) > n_wu
                    else None,
                    "bytes_sent": sum(sent.values()),
                    "stream_windows": stream_win,
                    "connection_window": conn_win,
                }
            )
    t_done = now_ns()
    try:  # wait for the client's GOAWAY / close_notify / FIN
        while True:
            data = sock.recv(65_536)
            if not data:
                break
            conn.receive_data(data)
            w.flush()
    except (OSError, ssl.SSLError):
        pass
    try:
        sock.unwrap().close()
    except (OSError, ssl.SSLError):
        sock.close()
    ls.close()
    return {
        "socket": opts,
        "requests": {str(k): v for k, v in requests.items()},
        "requests_done_ns": t_requests,
        "data_done_ns": t_done,
        "writes": w.log,
        "stalls": stalls,
        "window_updates_received": window_updates,
    }


def client(p: dict[str, Any]) -> dict[str, Any]:
    import h2.config
    import h2.connection
    import h2.events
    import h2.settings

    ctx = tls_client_context(p["cert"], p["keylog_client"], alpn="h2")
    raw = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    apply_tcp_options(raw, cc=p["cc"], nodelay=p["client_nodelay"])
    raw.settimeout(CONNECT_TIMEOUT_S)
    t_connect = now_ns()
    raw.connect((p["server_ip"], p["port"]))
    sock = ctx.wrap_socket(raw, server_hostname=DEFAULT_HOSTNAME)
    t_hs = now_ns()
    sock.settimeout(IO_TIMEOUT_S)
    opts = tcp_options(sock)
    info = tls_info(sock)
    conn = h2.connection.H2Connection(
        h2.config.H2Configuration(client_side=True, header_encoding="utf-8")
    )
    win = p["client_window"]
    if win:
        conn.local_settings = h2.settings.Settings(
            client=True,
            initial_values={  # h2's defaults plus the window
                h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: 100,
                h2.settings.SettingCodes.MAX_HEADER_LIST_SIZE: conn.DEFAULT_MAX_HEADER_LIST_SIZE,
                h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: win,
            },
        )
    conn.initiate_connection()
    if win:
        conn.increment_flow_control_window(win - DEFAULT_WINDOW)  # connection window
    w = Writer(sock, conn)
    w.flush()
    for i in range(p["streams"]):
        sid = conn.get_next_available_stream_id()
        conn.send_headers(
            sid,
            [
                (":method", "GET"),
                (":scheme", "https"),
                (":authority", DEFAULT_HOSTNAME),
                (":path", f"/blob/{i}"),
            ],
            end_stream=True,
        )
    w.flush()
    t_get = w.log[-1]["t_ns"]
    data_events: list[list[int]] = []  # [t_ns, stream, bytes]
    ended: set[int] = set()
    while len(ended) < p["streams"]:
        data = sock.recv(65_536)
        t = now_ns()
        if not data:
            raise ConnectionError("server closed early")
        for ev in conn.receive_data(data):
            if isinstance(ev, h2.events.DataReceived):
                data_events.append([t, ev.stream_id, len(ev.data)])
                conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            elif isinstance(ev, h2.events.StreamEnded):
                ended.add(ev.stream_id)
        w.flush()  # WINDOW_UPDATEs, SETTINGS ACK
    t_done = now_ns()
    conn.close_connection()
    w.flush()
    try:
        sock.unwrap().close()
    except (OSError, ssl.SSLError):
        sock.close()
    return {
        "socket": opts,
        "tls": info,
        "connect_ns": t_connect,
        "handshake_done_ns": t_hs,
        "get_write_ns": t_get,
        "done_ns": t_done,
        "data": data_events,
        "writes": w.log,
    }


def wire_layout(writes: list[dict[str, Any]], start: int) -> list[dict[str, Any]]:
    """Where each HTTP/2 frame of the logged writes sits in the TCP stream (rel. seq).

    One ``SSL_write`` of n bytes → ⌈n / 16 384⌉ records, each plaintext + 22 bytes on the
    wire (TLS 1.3 AES-GCM); frames are placed proportionally inside their write's records.
    Returns one row per frame: type, stream, rel_seq of the record(s) that carry it.
    """
    out = []
    off = start
    for wr in writes:
        n = wr["len"]
        recs = []
        left = n
        while left > 0:
            k = min(left, TLS_MAX_PLAINTEXT)
            recs.append((off, k))
            off += k + TLS13_RECORD_OVERHEAD
            left -= k
        pos = 0  # plaintext position inside this write
        for f in wr["frames"]:
            size = 9 + f["len"]
            first = pos // TLS_MAX_PLAINTEXT
            last = (pos + size - 1) // TLS_MAX_PLAINTEXT
            out.append(
                {
                    **f,
                    "t_ns": wr["t_ns"],
                    "wire_start": recs[first][0],
                    "wire_end": recs[last][0] + recs[last][1] + TLS13_RECORD_OVERHEAD,
                }
            )
            pos += size
    return out


def _stream_gaps(data: list[list[int]]) -> dict[str, float]:
    """Per stream: the longest time between two DATA arrivals at the client application."""
    last: dict[int, int] = {}
    gaps: dict[int, int] = {}
    for t, sid, _ in data:
        if sid in last:
            gaps[sid] = max(gaps.get(sid, 0), t - last[sid])
        last[sid] = t
    return {str(k): truth.ms(v) or 0.0 for k, v in sorted(gaps.items())}


def ground_truth(run: RunData) -> dict[str, Any]:
    p, srv, cli = run.params, run.server, run.client
    pkts = truth.packets(run.forwarder)
    # the response starts with the first server write after all requests were read; the
    # forwarder's first s2c payload packet at or after that write gives its stream offset
    resp_writes = [w for w in srv["writes"] if w["t_ns"] >= srv["requests_done_ns"]]
    s2c = truth.data_packets(pkts, "s2c")
    first = next((x for x in s2c if resp_writes and x.t_in_ns >= resp_writes[0]["t_ns"]), None)
    layout = [] if first is None else wire_layout(resp_writes, first.rel_seq or 0)
    drops = truth.tcp_drops(pkts, run.forwarder)
    for d in drops:
        lo, hi = d["rel_seq"], d["rel_seq"] + d["len"]
        hit = [f for f in layout if f["wire_start"] < hi and lo < f["wire_end"]]
        d["frames_hit"] = [{"type": f["type"], "stream": f["stream"], "len": f["len"]} for f in hit]
        d["streams_hit"] = sorted({f["stream"] for f in hit if f["type"] == "DATA"})
        retx = d["retransmissions"]
        fill = retx[0]["t_out_ns"] if retx else None
        # streams whose DATA was complete at the client side behind the hole: everything
        # the client application got right after the fill was stuck in TCP's OOO queue
        after = [e for e in cli["data"] if fill is not None and e[0] >= fill]
        burst = [e for e in after if e[0] - after[0][0] < 2_000_000] if after else []
        d["streams_released_by_fill"] = sorted({e[1] for e in burst})
        d["app_idle_ms"] = None
        if fill is not None:
            before = [e[0] for e in cli["data"] if e[0] < fill]
            if before and after:
                d["app_idle_ms"] = truth.ms(after[0][0] - max(before))
    stalls = []
    for s in srv["stalls"]:
        resume = next((w["t_ns"] for w in srv["writes"] if w["t_ns"] > s["blocked_ns"]), None)
        # was everything the server had sent ACKed before the WINDOW_UPDATE reached it?
        sent_end = max(
            (x.rel_seq + x.len for x in s2c if x.t_in_ns <= s["blocked_ns"]),  # type: ignore[operator]
            default=0,
        )
        acked = next(
            (
                x.t_out_ns
                for x in pkts
                if x.dir == "c2s"
                and x.rel_ack is not None
                and x.rel_ack >= sent_end
                and x.t_out_ns is not None
                and x.t_out_ns >= s["blocked_ns"] - 50_000_000
            ),
            None,
        )
        stalls.append(
            {
                **s,
                "resume_ns": resume,
                "idle_ms": truth.ms(resume - s["last_data_ns"])
                if resume and s["last_data_ns"]
                else None,
                "resume_after_wu_ms": truth.ms(resume - s["window_update_ns"])
                if resume and s["window_update_ns"]
                else None,
                "all_acked_ns": acked,
            }
        )
    wus = [
        {"t_ns": w["t_ns"], "stream": f["stream"], "increment": f["increment"]}
        for w in cli["writes"]
        for f in w["frames"]
        if f["type"] == "WINDOW_UPDATE"
    ]
    settings = [
        f for w in cli["writes"] for f in w["frames"] if f["type"] == "SETTINGS" and f["len"]
    ]
    data = cli["data"]
    per_stream: dict[str, int] = {}
    for _, sid, n in data:
        per_stream[str(sid)] = per_stream.get(str(sid), 0) + n
    first_data = min((e[0] for e in data), default=None)
    return {
        "handshake": list(truth.handshake(pkts)),
        "client_window": p["client_window"] or DEFAULT_WINDOW,
        "client_settings_frames": len(settings),
        "response_rel_seq": None if first is None else first.rel_seq,
        "drops": drops,
        "stalls": stalls,
        "client_window_updates": wus,
        "stream_bytes": per_stream,
        "stream_max_gap_ms": _stream_gaps(data),
        "summary": {
            "streams": len(per_stream),
            "bytes": sum(per_stream.values()),
            "data_frames_sent": sum(
                1 for w in srv["writes"] for f in w["frames"] if f["type"] == "DATA"
            ),
            "stalls": len(stalls),
            "stall_idle_ms": [s["idle_ms"] for s in stalls],
            "window_updates_sent": len(wus),
            "transfer_ms": truth.ms(cli["done_ns"] - cli["get_write_ns"]),
            "first_data_ms": None
            if first_data is None
            else truth.ms(first_data - cli["get_write_ns"]),
            "drop_streams_hit": drops[0]["streams_hit"] if drops else None,
            "streams_released_by_fill": drops[0]["streams_released_by_fill"] if drops else None,
            "retransmit_after_ms": drops[0]["retransmit_after_ms"] if drops else None,
            "app_idle_ms": drops[0]["app_idle_ms"] if drops else None,
        },
    }


def _validate_hol(doc: dict[str, Any]) -> list[str]:
    gt, p = doc["ground_truth"], doc["params"]
    s = gt["summary"]
    problems = []
    if s["streams"] != p["streams"] or s["bytes"] != p["streams"] * p["body_len"]:
        problems.append(f"incomplete transfer: {s}")
    if p["drop_s2c"]:
        if len(gt["drops"]) != 1 or not gt["drops"][0]["streams_hit"]:
            problems.append(f"the drop did not land in DATA: {gt['drops']}")
        elif len(s["streams_released_by_fill"]) < p["streams"] - 1:
            problems.append(f"the fill did not release most streams: {s}")
    return problems


def _validate_fc(doc: dict[str, Any]) -> list[str]:
    s = doc["ground_truth"]["summary"]
    if doc["params"]["client_window"] is None:
        return [] if s["stalls"] >= 2 else [f"positive with < 2 flow-control stalls: {s}"]
    return [] if s["stalls"] == 0 else [f"control stalled on flow control: {s}"]


_M = __name__
register(
    Scenario(
        name="h2_hol_drop",
        summary="HTTP/2 over TLS, 8 streams round-robin, one s2c segment dropped: all streams wait",
        what="8 h2 streams × 8 KiB round-robin; one dropped segment stalls every stream until its retransmission",
        expected=("tcp_hol_blocking",),
        pair="h2_hol_nodrop",
        server=f"{_M}:server",
        client=f"{_M}:client",
        params=HOL_PARAMS,
        tls=True,
        ground_truth=ground_truth,
        validate=_validate_hol,
        incidental=("tls_record_spanning",),
    )
)
register(
    Scenario(
        name="h2_hol_nodrop",
        summary="HTTP/2 over TLS, 8 streams round-robin, no drop (control for TCP HoL)",
        what="the same 8 streams without a drop: DATA arrives continuously",
        expected=(),
        controls=("tcp_hol_blocking",),
        pair="h2_hol_drop",
        server=f"{_M}:server",
        client=f"{_M}:client",
        params={**HOL_PARAMS, "drop_s2c": []},
        tls=True,
        ground_truth=ground_truth,
        validate=_validate_hol,
        incidental=("tls_record_spanning",),
    )
)
register(
    Scenario(
        name="h2_flow_control",
        summary="HTTP/2 over TLS, 160 KiB on one stream with 64 KiB windows: sender stalls on credit",
        what="64 KiB h2 windows: the server idles with no credit until each WINDOW_UPDATE",
        expected=("h2_flow_control_stall",),
        pair="h2_flow_control_large",
        server=f"{_M}:server",
        client=f"{_M}:client",
        params=FC_PARAMS,
        tls=True,
        ground_truth=ground_truth,
        validate=_validate_fc,
        fixture_middle=False,  # 180 KB per capture: no room in the fixture budget
        incidental=("tls_record_spanning",),
    )
)
register(
    Scenario(
        name="h2_flow_control_large",
        summary="same transfer with 16 MiB stream and connection windows (control for FC stalls)",
        what="16 MiB windows: no stall, the transfer is cwnd-bound only",
        expected=(),
        controls=("h2_flow_control_stall",),
        pair="h2_flow_control",
        server=f"{_M}:server",
        client=f"{_M}:client",
        params={**FC_PARAMS, "client_window": 16_777_216},
        tls=True,
        ground_truth=ground_truth,
        validate=_validate_fc,
        fixture_middle=False,  # 180 KB per capture: no room in the fixture budget
        incidental=("tls_record_spanning",),
    )
)
