"""Stalls (issue 22): lost handshakes, retransmission timeouts, a dead path, a delivery stall.

One plain HTTP/1.1 exchange over TCP (no TLS: the captures stay a few kB, the request's
name is readable at every vantage), one-way delay 15 ms (RTT 30 ms), CUBIC, both ends
TCP_NODELAY.  The client connects, sends ``GET /…`` and reads the answer; the server
answers one response (``mode="response"``: a head and a body in one write) or an SSE
stream (``mode="sse"``: an event every ``interval_ms``, the server may think
``think_ms`` before event ``think_before``), then waits for the client's close.

The forwarder makes each stall (:mod:`pcapkit.lab.forwarder`):

* ``syn_lost``: the client's first SYN is dropped — its SYN timer (1 s) resends it.  Only
  the client's capture shows it: the drop is before the middle tap and the server, which
  see one SYN and a normal handshake (the wire there cannot show it; ``unseen``).
  ``synack_lost``: the server's first SYN/ACK is dropped — every vantage sees a repeated
  SYN or SYN/ACK; the server's capture shows that its SYN/ACK was the one lost.
  Control ``handshake_ok``: the same exchange, nothing dropped.
* ``rto_lost_retransmission``: a 6-segment response loses its 4th segment *and* its fast
  retransmission (RACK repairs the first loss ~1 RTT later; nothing is sent after the
  lost copy, so only the RTO repairs it): a hole at the receiver filled only after the
  timer.  ``rto_tail_loss``: the response's last segment and its tail-loss probe are lost:
  nothing follows them, so only the server's capture can tell a loss from a late write
  (``unseen`` at the client and the middle, where the bytes arrive late as new data).
  Controls: ``fast_retransmit`` (the 4th segment alone is lost: repaired in about one
  round trip) and ``tail_ok`` (nothing dropped).
* ``black_hole``: after the request, everything from the client is dropped; the server
  retransmits its unacknowledged response with exponential backoff and gives up
  (``net.ipv4.tcp_retries2 = 4`` in its namespace: ~7 s instead of ~15 min).  At the
  client the copies arrive as retransmissions of data it had acknowledged.  Control
  ``ack_stall``: the client's packets are held for 1.5 s and then delivered — the server
  backs off twice (spuriously), then the connection recovers.
* ``delivery_stall``: an SSE stream (an event every 20 ms); after the 11th server payload
  packet every server packet is held 150 ms and released in order — nothing is lost,
  everything is late (a radio outage, a buffering middlebox).  Control ``server_think``:
  the server itself pauses 150 ms before event 11; nothing is outstanding.  Only the
  captures downstream of the stall (the client, the middle) show it: at the server the
  events leave on time and only the ACKs pause, for less than a delayed-ACK timer plus a
  round trip (``unseen``); a longer stall would make the server's RTO fire.

Ground truth (``scenario.json``): the forwarder's drops, holds and black hole with their
times, the client's reads and the server's writes, and each stall's cost as the scenario
defines it (the same interval the detector prices, taken at the forwarder).
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
    tcp_info,
    tcp_options,
    tcp_socket,
)
from . import RunData, Scenario, register

PARAMS: dict[str, Any] = {
    "delay_ms": 15.0,
    "port": 80,  # Wireshark decodes HTTP on 80 without "decode as"
    "mode": "response",  # "response" | "sse"
    "body_len": 8000,  # 6 segments of 1448 B (with the head)
    "events": 30,
    "interval_ms": 20.0,
    "think_before": 0,  # sse: pause think_ms before this event (1-based; 0: none)
    "think_ms": 0.0,
    "server_nodelay": True,
    "client_nodelay": True,
    "client_linger_s": 0.0,  # keep the connection open this long after the response
}
REQUEST = b"GET /%s HTTP/1.1\r\nHost: pcapkit.lab\r\nUser-Agent: pcapkit-lab\r\n\r\n"


def _read_head(conn: socket.socket) -> bytes:
    req = b""
    while b"\r\n\r\n" not in req:
        data = conn.recv(4096)
        if not data or len(req) > 16_384:
            raise ConnectionError("no complete request")
        req += data
    return req


def server(p: dict[str, Any], ready: Callable[[], None]) -> dict[str, Any]:
    ls = listen(p["server_ip"], p["port"], cc=p["cc"], nodelay=p["server_nodelay"])
    ready()
    conn, _ = ls.accept()
    conn.settimeout(IO_TIMEOUT_S)
    opts = tcp_options(conn)
    _read_head(conn)
    t_request = now_ns()
    writes: list[dict[str, Any]] = []
    if p["mode"] == "sse":
        conn.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
            b"Connection: close\r\n\r\n"
        )
        start = time.monotonic()
        extra = 0.0
        for i in range(1, p["events"] + 1):
            if i == p["think_before"]:
                extra = p["think_ms"] / 1000
            due = start + (i - 1) * p["interval_ms"] / 1000 + extra
            if due > time.monotonic():
                time.sleep(due - time.monotonic())
            t = now_ns()
            conn.sendall(b"data: token %d\n\n" % i)
            writes.append({"event": i, "t_ns": t})
        conn.shutdown(socket.SHUT_WR)  # the stream ends: the client reads to the close
    else:
        body = b"x" * p["body_len"]
        head = (
            b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
            b"Content-Length: %d\r\n\r\n" % len(body)
        )
        t = now_ns()
        conn.sendall(head + body)
        writes.append({"t_ns": t, "bytes": len(head) + len(body)})
    # wait for the client's close (or for our TCP to give up on a dead path)
    error = None
    t_end = None
    try:
        while conn.recv(4096):
            pass
    except OSError as e:  # ETIMEDOUT after tcp_retries2: the connection was given up
        error = type(e).__name__ + (f" errno {e.errno}" if e.errno else "")
    t_end = now_ns()
    info = tcp_info(conn)
    conn.close()
    ls.close()
    return {
        "socket": opts,
        "request_read_ns": t_request,
        "writes": writes,
        "end_ns": t_end,
        "error": error,
        "tcp_info": info,
    }


def client(p: dict[str, Any]) -> dict[str, Any]:
    s = tcp_socket(cc=p["cc"], nodelay=p["client_nodelay"])
    s.settimeout(CONNECT_TIMEOUT_S)
    t_connect = now_ns()
    s.connect((p["server_ip"], p["port"]))
    t_established = now_ns()
    s.settimeout(IO_TIMEOUT_S)
    opts = tcp_options(s)
    path = b"events" if p["mode"] == "sse" else b"object"
    t_req = now_ns()
    s.sendall(REQUEST % path)
    reads: list[dict[str, int]] = []
    got = 0
    want = None
    buf = b""
    while True:
        data = s.recv(65_536)
        t = now_ns()
        if not data:
            break
        got += len(data)
        reads.append({"t_ns": t, "bytes": got})
        if want is None:
            buf += data
            if b"\r\n\r\n" in buf and b"Content-Length:" in buf:
                head, _, _ = buf.partition(b"\r\n\r\n")
                n = int(head.split(b"Content-Length:")[1].split(b"\r\n")[0])
                want = len(head) + 4 + n
        if want is not None and got >= want:
            break
    if p["client_linger_s"]:
        time.sleep(p["client_linger_s"])
    s.close()
    return {
        "socket": opts,
        "connect_ns": t_connect,
        "established_ns": t_established,
        "request_write_ns": t_req,
        "reads": reads,
        "bytes": got,
    }


# --------------------------------------------------------------------------- ground truth


def _handshake_truth(pkts: list[truth.TracePacket], rtt_ms: float) -> dict[str, Any]:
    """First SYN → the client's handshake-completing ACK, at the forwarder (both c2s: the
    interval the client and every capture point see), less one configured round trip."""
    syns = [x for x in pkts if x.dir == "c2s" and x.flags & 0x02 and not x.flags & 0x10]
    sas = [x for x in pkts if x.dir == "s2c" and x.flags & 0x12 == 0x12]
    done = next(
        (
            x
            for x in pkts
            if x.dir == "c2s" and not x.flags & 0x02 and x.flags & 0x10 and x.rel_ack == 0
        ),
        None,
    )
    if not syns or done is None:
        return {}
    return {
        "syns": len(syns),
        "syn_acks": len(sas),
        "syns_dropped": sum(1 for x in syns if x.action == "drop"),
        "syn_acks_dropped": sum(1 for x in sas if x.action == "drop"),
        "first_syn_ns": syns[0].t_in_ns,
        "handshake_done_ns": done.t_in_ns,
        "handshake_ms": truth.ms(done.t_in_ns - syns[0].t_in_ns),
        "cost_ms": truth.ms(done.t_in_ns - syns[0].t_in_ns - round(rtt_ms * 1e6)),
    }


def _rto_truth(pkts: list[truth.TracePacket], fwd: Any) -> dict[str, Any]:
    """The dropped response bytes: original → the copy that got through (forwarder ingress,
    the sender's own clock of the repair: what every vantage's same-direction interval
    measures)."""
    drops = truth.tcp_drops(pkts, fwd)
    if not drops:
        return {}
    first = drops[0]
    seq = first["rel_seq"]
    copies = [
        x
        for x in truth.data_packets(pkts, "s2c")
        if x.rel_seq is not None and x.rel_seq <= seq < x.rel_seq + x.len
    ]
    delivered = next((x for x in copies if x.action == "fwd" and x.t_in_ns > first["t_ns"]), None)
    return {
        "drops": drops,
        "lost_rel_seq": seq,
        "copies": [
            {"t_in_ns": x.t_in_ns, "action": x.action, "len": x.len, "idx": x.idx} for x in copies
        ],
        "repaired_ns": None if delivered is None else delivered.t_in_ns,
        "cost_ms": None if delivered is None else truth.ms(delivered.t_in_ns - first["t_ns"]),
    }


def _dead_truth(pkts: list[truth.TracePacket], server: Any) -> dict[str, Any]:
    """The server's unacknowledged data: first send → when its TCP gave up (the server
    application's read failed), or the end of its run."""
    data = truth.data_packets(pkts, "s2c")
    if not data:
        return {}
    acked = max(
        (x.rel_ack for x in pkts if x.dir == "c2s" and x.rel_ack is not None and x.action == "fwd"),
        default=0,
    )
    stuck = [x for x in data if x.rel_seq is not None and x.rel_seq + x.len > acked]
    if not stuck:
        return {"error": server.get("error")}
    h = min(x.rel_seq for x in stuck if x.rel_seq is not None)
    first = min((x for x in data if x.rel_seq == h), key=lambda x: x.t_in_ns)
    copies = [x for x in data if x.rel_seq == h]
    return {
        "unacked_rel_seq": h,
        "first_send_ns": first.t_in_ns,
        "copies": len(copies),
        "copy_ns": [x.t_in_ns for x in copies],
        "gave_up_ns": server["end_ns"],
        "error": server.get("error"),
        "cost_ms": truth.ms(server["end_ns"] - first.t_in_ns),
    }


def _stall_truth(pkts: list[truth.TracePacket], fwd: Any, p: dict[str, Any]) -> dict[str, Any]:
    held = [x for x in pkts if x.action == "stalled"]
    ev = [e for e in fwd.get("events", []) if e["event"] == "stall"]
    return {
        "stall_ms": p["stall_ms"],
        "held_packets": len(held),
        "held_payload_packets": sum(1 for x in held if x.len > 0),
        "stall_start_ns": ev[0]["t_ns"] if ev else None,
        # the first held packet waited the whole window: the data's lateness
        "cost_ms": p["stall_ms"] if held else 0.0,
        "retransmissions": sum(
            1
            for x in truth.data_packets(pkts, "s2c")
            if sum(1 for y in truth.data_packets(pkts, "s2c") if y.rel_seq == x.rel_seq) > 1
        ),
    }


def ground_truth(run: RunData) -> dict[str, Any]:
    p = dict(run.params)
    pkts = truth.packets(run.forwarder)
    rtt = float(p["delay_ms"]) * 2
    out: dict[str, Any] = {
        "handshake": list(truth.handshake(pkts)),
        "syn": _handshake_truth(pkts, rtt),
        "rto": _rto_truth(pkts, run.forwarder),
        "server": {
            "writes": run.server["writes"],
            "error": run.server.get("error"),
            "end_ns": run.server["end_ns"],
            "tcp_info": run.server.get("tcp_info"),
        },
        "client": {"reads": len(run.client["reads"]), "bytes": run.client["bytes"]},
    }
    if p.get("blackhole_c2s_after") is not None or p.get("stall_c2s_after") is not None:
        out["dead"] = _dead_truth(pkts, run.server)
    if p.get("stall_s2c_after") is not None or p.get("stall_c2s_after") is not None:
        out["stall"] = _stall_truth(pkts, run.forwarder, p)
    return out


# --------------------------------------------------------------------------- validation


def _validate_syn(doc: dict[str, Any]) -> list[str]:
    gt, p = doc["ground_truth"]["syn"], doc["params"]
    if not gt:
        return ["no handshake in the forwarder's trace"]
    dropped = gt["syns_dropped"] + gt["syn_acks_dropped"]
    want = len(p["drop_syn_c2s"]) + len(p["drop_syn_s2c"])
    if dropped != want:
        return [f"dropped {dropped} handshake packets, wanted {want}: {gt}"]
    if want and not 900 <= gt["cost_ms"] <= 1300:
        return [f"a lost SYN/SYN-ACK should cost the 1 s SYN timer: {gt}"]
    if not want and gt["cost_ms"] > 5:
        return [f"the healthy handshake took {gt['handshake_ms']} ms"]
    return []


def _validate_rto(doc: dict[str, Any]) -> list[str]:
    gt, p = doc["ground_truth"]["rto"], doc["params"]
    if not p["drop_s2c"]:
        return [] if not gt else [f"unexpected drop: {gt}"]
    if not gt or gt["cost_ms"] is None:
        return [f"the dropped bytes were never repaired: {gt}"]
    drops = gt["drops"]
    if len(drops) != len(p["drop_s2c"]):
        return [f"dropped {len(drops)} packets, wanted {len(p['drop_s2c'])}"]
    if len(p["drop_s2c"]) == 1:  # fast recovery: about one round trip
        return [] if gt["cost_ms"] < 150 else [f"fast recovery took {gt['cost_ms']} ms"]
    # both drops hit the same bytes (the original and its first copy), then a timeout
    if len({d["rel_seq"] for d in drops}) != 1:
        return [f"the second drop was not a copy of the first: {drops}"]
    return [] if gt["cost_ms"] >= 200 else [f"the repair took only {gt['cost_ms']} ms"]


def _validate_dead(doc: dict[str, Any]) -> list[str]:
    gt = doc["ground_truth"]
    dead = gt.get("dead") or {}
    if doc["params"]["blackhole_c2s_after"] is not None:
        if dead.get("error") is None or dead.get("copies", 0) < 4:
            return [f"the server did not retransmit into the black hole and give up: {dead}"]
        return []
    if gt["server"]["error"] is not None:
        return [f"the control's connection died: {gt['server']}"]
    if not dead.get("copies", 0) and (gt.get("stall") or {}).get("held_packets", 0) == 0:
        return [f"the control held nothing: {gt}"]
    return []


def _validate_stall(doc: dict[str, Any]) -> list[str]:
    gt = doc["ground_truth"]
    st = gt.get("stall")
    if doc["params"]["stall_s2c_after"] is None:
        return [] if st is None else [f"unexpected stall: {st}"]
    if not st or st["held_payload_packets"] < 4:
        return [f"the stall held too little: {st}"]
    if st["retransmissions"]:
        return [f"the stall caused retransmissions (a timer fired): {st}"]
    return []


_SERVER = f"{__name__}:server"
_CLIENT = f"{__name__}:client"
SSE = {"mode": "sse", "events": 30, "interval_ms": 20.0}


def _pair(
    pos: str,
    ctl: str,
    kind: str,
    *,
    pos_params: dict[str, Any],
    ctl_params: dict[str, Any],
    validate: Callable[[dict[str, Any]], list[str]],
    pos_what: str,
    ctl_what: str,
    incidental: tuple[str, ...] = (),
    unseen: dict[str, tuple[str, ...]] | None = None,
) -> None:
    register(
        Scenario(
            name=pos,
            summary=pos_what.split(":")[0],
            what=pos_what,
            expected=(kind,),
            pair=ctl,
            server=_SERVER,
            client=_CLIENT,
            params={**PARAMS, **pos_params},
            ground_truth=ground_truth,
            validate=validate,
            incidental=incidental,
            unseen=unseen or {},
        )
    )
    register(
        Scenario(
            name=ctl,
            summary=ctl_what.split(":")[0],
            what=ctl_what,
            expected=(),
            controls=(kind,),
            pair=pos,
            server=_SERVER,
            client=_CLIENT,
            params={**PARAMS, **ctl_params},
            ground_truth=ground_truth,
            validate=validate,
            incidental=incidental,
        )
    )


_pair(
    "synack_lost",
    "handshake_ok",
    "syn_retransmission",
    pos_params={"drop_syn_s2c": [1], "body_len": 1000},
    ctl_params={"body_len": 1000},
    validate=_validate_syn,
    pos_what="the server's first SYN/ACK is lost: the client's SYN timer (1 s) resends the SYN; "
    "GET /object waits for the handshake",
    ctl_what="the same exchange with nothing lost: the handshake takes one round trip",
)
_pair(
    "syn_lost",
    "syn_ok",
    "syn_retransmission",
    pos_params={"drop_syn_c2s": [1], "body_len": 1000},
    ctl_params={"body_len": 1000},
    validate=_validate_syn,
    pos_what="the client's first SYN is lost before the middle of the path: only the client's "
    "capture shows the repeat (the server and the middle see one SYN)",
    ctl_what="the same exchange with nothing lost (and the client's SYN timer never fires)",
    unseen={"syn_retransmission": ("server", "middle")},
)
_pair(
    "rto_lost_retransmission",
    "fast_retransmit",
    "rto_stall",
    # s2c payload packets: 1–6 the response, 7 the fast (RACK) retransmission of #4
    pos_params={"drop_s2c": [4, 7]},
    ctl_params={"drop_s2c": [4]},
    validate=_validate_rto,
    pos_what="the response's 4th segment and its fast retransmission are lost: nothing follows "
    "the lost copy, so only the retransmission timer repairs the hole",
    ctl_what="the 4th segment alone is lost: SACK/RACK repair it about one round trip later",
    # the fast repair of a loss in the only response in flight (loss_recovery; no other
    # request waited, so not tcp_hol_blocking)
    incidental=("tcp_hol_blocking", "loss_recovery"),
)
_pair(
    "rto_tail_loss",
    "tail_ok",
    "rto_stall",
    # s2c payload packets: 1–6 the response, 7 the tail-loss probe (a copy of #6)
    pos_params={"drop_s2c": [6, 7]},
    ctl_params={},
    validate=_validate_rto,
    pos_what="the response's last segment and its tail-loss probe are lost: the RTO repairs it; "
    "only the server's capture can tell (elsewhere the bytes arrive late, as new data)",
    ctl_what="the same response with nothing lost",
    unseen={"rto_stall": ("client", "middle")},
)
_pair(
    "black_hole",
    "ack_stall",
    "connection_dead",
    pos_params={
        "blackhole_c2s_after": 1,
        "body_len": 5000,
        "sysctl_srv": {"net.ipv4.tcp_retries2": 4},
    },
    ctl_params={
        "body_len": 5000,
        "stall_c2s_after": 1,
        "stall_ms": 1500.0,
        "sysctl_srv": {"net.ipv4.tcp_retries2": 4},
    },
    validate=_validate_dead,
    pos_what="after the request everything from the client is lost: the server retransmits its "
    "response with exponential backoff and gives up (tcp_retries2 = 4)",
    ctl_what="the client's packets are held 1.5 s, then delivered: the server backs off "
    "(spuriously) and the connection recovers",
    incidental=("delivery_stall",),
)
_pair(
    "delivery_stall",
    "server_think",
    "delivery_stall",
    # s2c payload packets: 1 the response head, then one per event: after event 10
    pos_params={**SSE, "stall_s2c_after": 11, "stall_ms": 150.0},
    ctl_params={**SSE, "think_before": 11, "think_ms": 150.0},
    validate=_validate_stall,
    pos_what="SSE events every 20 ms; after event 10 the path holds the server's packets 150 ms "
    "and delivers them in order: nothing lost, everything late",
    ctl_what="the server itself pauses 150 ms before event 11: nothing is outstanding",
    incidental=("sse_batching",),
    # upstream of the stall the events leave on time and only the ACKs pause — shorter than
    # a delayed-ACK timer plus a round trip: the sender's capture cannot tell it from a
    # slow ACK (delivery.py)
    unseen={"delivery_stall": ("server",)},
)
