"""The two programs of a QUIC (HTTP/3) replay (issue 19): aioquic at both ends, scripted.

``pcapkit.replay.derive_quic`` reads a QUIC connection's decrypted STREAM data and writes a
script (JSON): each end's *units* — the new stream bytes it wrote together, as pieces
``[stream id, base64 bytes, fin]`` (or a STOP_SENDING / RESET_STREAM, see :func:`_write`)
over every stream (the HTTP/3 request and response
streams, and the control and QPACK streams, byte for byte as captured: the analysis of
the replay decodes them as it decoded the original) — each timed from its trigger as in
:mod:`pcapkit.lab.reenact` (``after: "peer"``: once the peer's ``needs`` stream bytes have
been read, ``delay_ms`` later; ``after: "self"``: ``delay_ms`` after this end's previous
write, or its handshake for the first).  The programs drive aioquic's QUIC layer directly
(``send_stream_data``), not its HTTP/3 layer: the bytes are the capture's, the stack
(congestion control, pacing, loss recovery, flow control, ACKs) is aioquic's, as in the
lab's h3 scenarios.  ``script["transport"][role]``: the end's receive limits from its
transport parameters (``max_data``, ``max_stream_data``, ``max_streams_bidi``).

Both ends write NSS key logs with QUIC's traffic secrets; the runner embeds them.  UDP port
as captured (443 on the lab fixtures: tshark decodes QUIC there).
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Callable
from typing import Any

from .apps import now_ns
from .certs import DEFAULT_HOSTNAME
from .reenact import ground_truth, load_script, realtime
from .scenarios import Scenario

H3_REQUEST_CANCELLED = 0x10C  # RFC 9114 §8.1

PARAMS: dict[str, Any] = {
    "script": "",
    "tls": True,
    "port": 443,
    "timeout_s": 60.0,
    "idle_timeout_s": 10.0,
    "realtime_apps": True,
    # the rest of what the peer wrote, after an end's last unit: waited for this long at most
    # (a stream the peer reset never completes)
    "drain_s": 3.0,
    # DNS names added to the server certificate (certs.make_self_signed): as large a
    # certificate as the capture's (its size decides the server's first flight)
    "cert_extra_sans": 0,
}


def _configure(cfg: Any, limits: dict[str, Any]) -> None:
    if limits.get("max_data"):
        cfg.max_data = int(limits["max_data"])
    if limits.get("max_stream_data"):
        cfg.max_stream_data = int(limits["max_stream_data"])


def _protocol(script: dict[str, Any], role: str) -> Any:
    from aioquic.asyncio.protocol import QuicConnectionProtocol
    from aioquic.quic.events import (
        ConnectionTerminated,
        HandshakeCompleted,
        StopSendingReceived,
        StreamDataReceived,
        StreamReset,
    )

    limits = script.get("transport", {}).get(role, {})

    class Player(QuicConnectionProtocol):
        def __init__(self, *a: Any, **kw: Any) -> None:
            super().__init__(*a, **kw)
            if role == "server" and limits.get("max_streams_bidi"):
                # aioquic 1.7.2 grants 128 (a private Limit): lowered before the handshake
                # so the transport parameter carries it (as scenarios/concurrency.py)
                lim = self._quic._local_max_streams_bidi
                lim.value = lim.sent = int(limits["max_streams_bidi"])
            # this end's unidirectional streams (HTTP/3 control, QPACK encoder and decoder)
            # exist from the start, as HTTP/3 stacks open them (aioquic's H3Connection in
            # its constructor): aioquic serves streams in creation order, and a request
            # stream of the peer's created first would send a response's HEADERS ahead of
            # the QPACK encoder-stream bytes it refers to (blocked at the peer)
            for sid in dict.fromkeys(
                int(x[0])
                for u in script["units"]
                if u["side"] == role
                for x in u.get("pieces", ())
                if int(x[0]) & 0x2 and (int(x[0]) & 0x1) == (role == "server")
            ):
                self._quic.send_stream_data(sid, b"")  # opens it, sends nothing
            # HTTP/3 mode (--remedy http3): aioquic's HTTP/3 layer writes the actions
            self.h3 = None
            if script.get("h3"):
                from aioquic.h3.connection import H3Connection

                self.h3 = H3Connection(self._quic)
            self.received = 0
            self.arrivals: list[tuple[int, int]] = []  # (bytes received in all, when)
            self.handshake_ns = 0
            self.changed = asyncio.Event()
            self.connected = asyncio.Event()
            self.closed = asyncio.Event()
            self.log: list[dict[str, Any]] = []
            self.task: asyncio.Task[None] | None = None

        def quic_event_received(self, event: Any) -> None:
            if isinstance(event, HandshakeCompleted):
                self.handshake_ns = now_ns()
                self.connected.set()
                if role == "server":
                    self.task = asyncio.ensure_future(self.play())
            elif isinstance(event, StreamDataReceived) and self.h3 is not None:
                self._count_h3(event)
            elif isinstance(event, StreamDataReceived):
                if event.data:
                    self.received += len(event.data)
                    self.arrivals.append((self.received, now_ns()))
                    self.changed.set()
            elif isinstance(event, (StreamReset, StopSendingReceived)):
                # the script counts each as one byte of the peer's (see derive_quic)
                self.received += 1
                self.arrivals.append((self.received, now_ns()))
                self.changed.set()
            elif isinstance(event, ConnectionTerminated):
                self.closed.set()
                self.changed.set()

        def _count_h3(self, event: Any) -> None:
            """HTTP/3 mode: a header block counts 1, DATA its bytes (as the script)."""
            from aioquic.h3.events import DataReceived, HeadersReceived

            assert self.h3 is not None
            n = 0
            for ev in self.h3.handle_event(event):
                if isinstance(ev, HeadersReceived):
                    n += 1
                elif isinstance(ev, DataReceived):
                    n += len(ev.data)
            if n:
                self.received += n
                self.arrivals.append((self.received, now_ns()))
                self.changed.set()

        async def until(self, need: int, timeout_s: float | None = None) -> bool:
            loop = asyncio.get_running_loop()
            end = None if timeout_s is None else loop.time() + timeout_s
            while self.received < need and not self.closed.is_set():
                self.changed.clear()
                left = None if end is None else end - loop.time()
                if left is not None and left <= 0:
                    return False
                try:
                    await asyncio.wait_for(self.changed.wait(), left)
                except asyncio.TimeoutError:
                    return False
            return self.received >= need

        async def play(self) -> None:
            units = script["units"]
            last = self.handshake_ns
            for i, u in enumerate(units):
                if u["side"] != role:
                    continue
                await self.until(int(u.get("needs", 0)))
                need = int(u.get("needs", 0))
                # "peer": timed from when the bytes it waited for had come, not from a
                # later read (the peer's QPACK or control-stream bytes)
                reached = next((t for n, t in self.arrivals if n >= need), last)
                base = reached if u["after"] == "peer" else last
                due = base + round(float(u["delay_ms"]) * 1e6)
                wait = (due - now_ns()) / 1e9
                woke_late = None
                if wait > 0:
                    await asyncio.sleep(wait)
                    woke_late = (now_ns() - due) / 1e6
                for piece in u.get("pieces", ()):
                    _write(self._quic, piece)
                for action in u.get("actions", ()):
                    _act(self.h3, self._quic, action)
                self.transmit()
                last = due
                self.log.append(
                    {
                        "unit": i,
                        "due_ns": due,
                        "write_ns": now_ns(),
                        "len": int(u["len"]),
                        "woke_late_ms": woke_late,
                    }
                )

    return Player


def _write(quic: Any, piece: list[Any]) -> None:
    """One piece: ``[stream, base64 bytes, fin]``, or with a 4th element
        ``{"stop": code}`` (STOP_SENDING: the end gave up reading the stream) or
        ``{"reset": code}`` (RESET_STREAM); each counts as one byte in the script's totals (the
    receiving end counts the StreamReset / StopSendingReceived event as one)."""
    sid = int(piece[0])
    extra = piece[3] if len(piece) > 3 else None
    try:
        if extra and "stop" in extra:
            quic.stop_stream(sid, int(extra["stop"]))
        elif extra and "reset" in extra:
            quic.reset_stream(sid, int(extra["reset"]))
        else:
            quic.send_stream_data(sid, base64.b64decode(piece[1]), bool(piece[2]))
    except (ValueError, AssertionError, KeyError):
        pass  # the stream is gone already (aioquic resets a stream on STOP_SENDING itself)


def _act(h3: Any, quic: Any, action: list[Any]) -> None:
    """HTTP/3 mode: ``["headers", stream, [[name, value] …] (base64), end]``,
    ``["data", stream, base64 bytes, end]`` or ``["reset", stream, code]``."""
    kind, sid = action[0], int(action[1])
    steps: list[Callable[[], None]] = []
    if kind == "headers":
        headers = [(base64.b64decode(n), base64.b64decode(v)) for n, v in action[2]]
        steps.append(lambda: h3.send_headers(sid, headers, end_stream=bool(action[3])))
    elif kind == "data":
        body = base64.b64decode(action[2])
        steps.append(lambda: h3.send_data(sid, body, end_stream=bool(action[3])))
    elif kind == "reset":  # HTTP/2's RST_STREAM ends both directions: both frames
        steps.append(lambda: quic.reset_stream(sid, H3_REQUEST_CANCELLED))
        steps.append(lambda: quic.stop_stream(sid, H3_REQUEST_CANCELLED))
    for step in steps:
        try:
            step()
        except (ValueError, AssertionError, KeyError):
            pass  # the stream is gone already (or that half of it is)


def server(p: dict[str, Any], ready: Callable[[], None]) -> dict[str, Any]:
    return asyncio.run(_server(p, ready))


async def _server(p: dict[str, Any], ready: Callable[[], None]) -> dict[str, Any]:
    from aioquic.asyncio.server import serve
    from aioquic.quic.configuration import QuicConfiguration

    script = load_script(p)
    rt = realtime(p)
    # several connections (a resumed one after the first): the k-th accepted plays the
    # k-th script; the server keeps the tickets it issued, as the lab's h3 server does
    scripts = [c["script"] for c in script["connections"]] if "connections" in script else [script]
    players = [_protocol(x, "server") for x in scripts]
    conns: list[Any] = []
    tickets: dict[bytes, Any] = {}

    def create(*a: Any, **kw: Any) -> Any:
        c = players[min(len(conns), len(players) - 1)](*a, **kw)
        conns.append(c)
        return c

    with open(p["keylog_server"], "a", encoding="ascii") as keylog:
        cfg = QuicConfiguration(
            is_client=False,
            alpn_protocols=[script.get("alpn") or "h3"],
            secrets_log_file=keylog,
            idle_timeout=float(p["idle_timeout_s"]),
        )
        _configure(cfg, scripts[0].get("transport", {}).get("server", {}))
        cfg.load_cert_chain(p["cert"], p["key"])
        srv = await serve(
            p["server_ip"],
            int(p["port"]),
            configuration=cfg,
            create_protocol=create,
            session_ticket_fetcher=lambda label: tickets.get(label),
            session_ticket_handler=lambda t: tickets.__setitem__(t.ticket, t),
        )
        ready()
        try:
            loop = asyncio.get_running_loop()
            end = loop.time() + float(p["timeout_s"])
            while len(conns) < len(scripts) and loop.time() < end:
                if conns and conns[-1].closed.is_set() and len(conns) == len(scripts):
                    break
                await asyncio.sleep(0.01)
            for c in conns:
                await asyncio.wait_for(c.closed.wait(), max(0.1, end - loop.time()))
        finally:
            srv.close()
    return {"socket": None, "units": [u for c in conns for u in c.log], "realtime": rt}


def client(p: dict[str, Any]) -> dict[str, Any]:
    return asyncio.run(_client(p))


async def _ticket(tickets: list[Any], had: int, p: dict[str, Any]) -> None:
    """Wait, at most ``drain_s``, until ``tickets`` holds more than ``had`` entries."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + float(p["drain_s"])
    while len(tickets) <= had and loop.time() < deadline:
        await asyncio.sleep(0.005)


async def _client(p: dict[str, Any]) -> dict[str, Any]:
    from aioquic.asyncio.client import connect
    from aioquic.quic.configuration import QuicConfiguration

    script = load_script(p)
    rt = realtime(p)
    # several connections, one after another at their offsets: a resumed one offers the
    # ticket the one before left, in 0-RTT (its first writes before the handshake ends)
    # where the capture's did
    conns = script.get("connections") or [{"script": script, "start_ms": 0.0}]
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    tickets: list[Any] = []
    log: list[dict[str, Any]] = []
    complete = True
    with open(p["keylog_client"], "a", encoding="ascii") as keylog:
        for i, c in enumerate(conns):
            one = c["script"]
            await asyncio.sleep(max(0.0, t0 + float(c["start_ms"]) / 1000 - loop.time()))
            cfg = QuicConfiguration(
                is_client=True,
                alpn_protocols=[one.get("alpn") or "h3"],
                secrets_log_file=keylog,
                server_name=DEFAULT_HOSTNAME,
                idle_timeout=float(p["idle_timeout_s"]),
            )
            _configure(cfg, one.get("transport", {}).get("client", {}))
            cfg.load_verify_locations(cafile=p["cert"])
            if c.get("resume") and tickets:
                cfg.session_ticket = tickets[-1]
            early = bool(c.get("early_data")) and cfg.session_ticket is not None
            peer_total = sum(int(u["len"]) for u in one["units"] if u["side"] != "client")
            before = len(tickets)
            async with connect(
                p["server_ip"],
                int(p["port"]),
                configuration=cfg,
                create_protocol=_protocol(one, "client"),
                session_ticket_handler=tickets.append,
                wait_connected=not early,
            ) as proto:
                conn: Any = proto
                if early:  # its first writes go now, in 0-RTT packets
                    conn.handshake_ns = now_ns()
                await conn.play()
                complete = await conn.until(peer_total, float(p["drain_s"])) and complete
                log += conn.log
                if i + 1 < len(conns) and conns[i + 1].get("resume"):
                    # the next one resumes: its ticket (sent after the handshake) must be
                    # here before this connection closes, however loaded the machine
                    await _ticket(tickets, before, p)
            await asyncio.sleep(0.05)  # the close goes out, a ticket may still come
    return {
        "socket": None,
        "tls": {"version": "TLSv1.3", "cipher": None, "alpn": script.get("alpn") or "h3"},
        "units": log,
        "received_all": complete,
        "realtime": rt,
    }


def scenario() -> Scenario:
    """The (unregistered) QUIC replay scenario: run with ``runner.run_scenario``."""
    return Scenario(
        name="replay_quic",
        summary="socket-level replay of a captured QUIC connection (pcapkit replay)",
        what="a captured QUIC exchange re-enacted by scripted aioquic ends",
        expected=(),
        pair=None,
        server=f"{__name__}:server",
        client=f"{__name__}:client",
        params=PARAMS,
        tls=True,
        ground_truth=ground_truth,
    )
