"""The two programs of a socket-level replay (issue 19): a script of writes, re-enacted.

``pcapkit.replay`` derives a *script* from a capture (one JSON file) and runs
:func:`scenario` through the lab runner: the server below in the server namespace, the
client in the client namespace, the forwarder between them with the capture's path.  Each
end plays its own units (one unit = one application write: one ``SSL_write``, hence one
TLS record, with TLS; one ``send()`` without) in the capture's order, each timed from its
trigger:

* ``after: "peer"`` — the unit answers the peer: the end first reads every byte the peer
  wrote before it (the script's running total), then waits ``delay_ms`` (the think time
  the capture shows, path removed);
* ``after: "self"`` — the unit follows the end's own previous write (or, for the first
  unit, the end of the handshake) by ``delay_ms``.

``script["pauses"]``: a reader that stopped reading — ``{"side", "after_bytes",
"pause_ms"}``: once that end has read ``after_bytes`` from its peer, it reads nothing for
``pause_ms`` (the receive window fills and closes, as the capture showed).

Socket behaviour per end (``script["sides"][role]``): ``nodelay`` (TCP_NODELAY), ``cork``
(TCP_CORK set before the first unit and never cleared), ``sndbuf`` (SO_SNDBUF),
``notsent_lowat`` (TCP_NOTSENT_LOWAT), ``rcvbuf`` (SO_RCVBUF, before the handshake),
``split_records`` (each TLS
record's 5-byte header and its body handed to TCP with two ``send()`` calls, as
``tls_record_split_write`` shows), ``coalesce_ms`` (units of this end written within this
many ms of the previous one are buffered and handed over as one write: the remedy for
tiny records and split writes), ``record_size`` (with ``coalesce_ms``: the buffered bytes
go out as records of at most this many bytes).

TLS runs through ``ssl.SSLObject`` + ``MemoryBIO`` at both ends (the program, not OpenSSL,
decides which bytes go into which ``send()``), TLS 1.3 (or 1.2 when the script says so),
ALPN as the capture's; OpenSSL's own records (handshake, NewSessionTickets, close_notify)
are OpenSSL's.  Unit payloads are the capture's decrypted bytes (``data``, base64) or
same-size filler.  Both ends write NSS key logs; the runner embeds them in both captures.
Stdlib and the lab only: this file runs by path in the namespaces (see apps.py).
"""

from __future__ import annotations

import base64
import json
import os
import socket
import ssl
import threading
import time
from collections.abc import Callable
from typing import Any

from .apps import (
    CONNECT_TIMEOUT_S,
    IO_TIMEOUT_S,
    apply_tcp_options,
    listen,
    now_ns,
    tcp_options,
    tls_client_context,
    tls_server_context,
)
from .certs import DEFAULT_HOSTNAME
from .scenarios import RunData, Scenario

TLS_HEADER = 5  # RFC 8446 §5.1: type, legacy version, length
RECV_CHUNK = 65_536
APP_PRIORITY = 5  # SCHED_FIFO: above normal tasks, below the forwarder's (forwarder.py: 10)
FILLER = b"pcapkit replay filler\n"  # same-size stand-in when the capture has no keys

# The replay scenario's parameters: the lab's common path parameters plus these.
PARAMS: dict[str, Any] = {
    "script": "",  # path of the script JSON (written by pcapkit.replay)
    "tls": True,
    "port": 443,
    "client_nodelay": True,  # read back into scenario.json like every scenario's sockets
    "server_nodelay": True,
    "timeout_s": 60.0,
    "realtime_apps": True,  # both programs at SCHED_FIFO APP_PRIORITY (see realtime)
}


def unit_bytes(unit: dict[str, Any]) -> bytes:
    """A unit's payload: the capture's bytes, or ``len`` bytes of filler."""
    if unit.get("data") is not None:
        return base64.b64decode(unit["data"])
    n = int(unit["len"])
    return (FILLER * (n // len(FILLER) + 1))[:n]


def records(ct: bytes) -> list[tuple[int, int]]:
    """(offset, length) of each whole TLS record in ``ct``."""
    out, off = [], 0
    while off + TLS_HEADER <= len(ct):
        n = TLS_HEADER + int.from_bytes(ct[off + 3 : off + 5], "big")
        out.append((off, n))
        off += n
    return out


class _End:
    """One end's connection: plain TCP or TLS through a memory BIO, with its write policy."""

    def __init__(
        self,
        sock: socket.socket,
        ctx: ssl.SSLContext | None,
        *,
        server: bool,
        session: ssl.SSLSession | None = None,
    ) -> None:
        self.sock = sock
        self.server = server
        self.received = 0  # application bytes read from the peer
        self.read_done_ns = 0  # when the last read that advanced ``received`` returned
        self.sends: list[dict[str, int]] = []
        self.pauses: list[tuple[int, float]] = []
        self.pace: tuple[int, float] | None = None  # (bytes per read, ms between reads)
        self.obj: ssl.SSLObject | None = None
        # a server's NewSessionTickets held back until their time (see hold_tickets)
        self._tickets = b""
        self._tickets_lock = threading.Lock()
        if ctx is not None:
            self.inc, self.out = ssl.MemoryBIO(), ssl.MemoryBIO()
            self.obj = ctx.wrap_bio(
                self.inc,
                self.out,
                server_side=server,
                server_hostname=None if server else DEFAULT_HOSTNAME,
                session=session,
            )

    # -- raw I/O ----------------------------------------------------------------
    def hold_tickets(self, delay_ms: float) -> None:
        """Send the NewSessionTickets the handshake made ``delay_ms`` after it, one
        segment each (a server that wrote them late, as the capture shows), or before
        anything this end sends sooner: they come first in the record sequence."""
        if self.obj is None:
            return
        if delay_ms <= 0:  # at once (what handshake() does without ``hold``)
            self._flush(per_record=True)
            return
        self._tickets = self.out.read()
        if self._tickets:
            timer = threading.Timer(delay_ms / 1000, self._send_tickets)
            timer.daemon = True
            timer.start()

    def _send_tickets(self) -> None:
        with self._tickets_lock:
            data, self._tickets = self._tickets, b""
            try:
                for off, n in records(data):
                    self.sock.sendall(data[off : off + n])
            except OSError:
                pass  # the connection is gone: the main thread reports it

    def _flush(self, *, per_record: bool = False) -> None:
        if self._tickets:
            self._send_tickets()
        if self.obj is not None:
            data = self.out.read()
            if data and not per_record:
                self.sock.sendall(data)
            elif data:
                for off, n in records(data):
                    self.sock.sendall(data[off : off + n])

    def _feed(self) -> bool:
        if self.pace is not None:  # a slow reader: one small read, then a pause
            time.sleep(self.pace[1] / 1000)
        data = self.sock.recv(RECV_CHUNK if self.pace is None else self.pace[0])
        if not data:
            return False
        if self.obj is None:
            self.received += len(data)
            self.read_done_ns = now_ns()
        else:
            self.inc.write(data)
        return True

    def handshake(self, *, hold: bool = False) -> None:
        """The TLS handshake; ``hold``: leave what it wrote last (a server's
        NewSessionTickets) in the BIO for :meth:`hold_tickets`."""
        if self.obj is None:
            return
        while True:
            try:
                self.obj.do_handshake()
                break
            except ssl.SSLWantReadError:
                self._flush()
                if not self._feed():
                    raise ConnectionError("peer closed during the handshake") from None
        # a server's last handshake step makes its NewSessionTickets: OpenSSL over a
        # socket writes each with its own write (one segment each, as the captures show)
        if not hold:
            self._flush(per_record=self.server)

    def _drain_tls(self) -> bool:
        """Read what plaintext the BIO holds; False at close_notify."""
        assert self.obj is not None
        while True:
            try:
                data = self.obj.read(RECV_CHUNK)
            except ssl.SSLWantReadError:
                self._flush(per_record=self.server)  # NewSessionTickets, key updates
                return True
            except ssl.SSLZeroReturnError:
                return False
            if not data:
                return False
            self.received += len(data)
            self.read_done_ns = now_ns()

    def read_until(self, total: int) -> None:
        """Read until ``total`` application bytes have come from the peer, stopping for
        each read pause (``self.pauses``: (after_bytes, ms), in order) on the way."""
        while self.received < total:
            if self.pauses and self.received >= self.pauses[0][0]:
                time.sleep(self.pauses.pop(0)[1] / 1000)  # the reader stops reading
            if self.obj is not None and not self._drain_tls():
                raise ConnectionError(f"peer closed after {self.received} of {total} bytes")
            if self.received >= total:
                break
            if not self._feed():
                raise ConnectionError(f"peer closed after {self.received} of {total} bytes")
            if self.obj is not None:
                self._drain_tls()

    def read_for(self, seconds: float) -> None:
        """Read whatever comes for ``seconds`` (a client's deadline), then stop."""
        deadline = time.monotonic() + seconds
        try:
            while (left := deadline - time.monotonic()) > 0:
                self.sock.settimeout(left)
                if not self._feed():
                    break
                if self.obj is not None and not self._drain_tls():
                    break
        except (TimeoutError, OSError):
            pass
        self.sock.settimeout(IO_TIMEOUT_S)

    # -- writes -------------------------------------------------------------------
    def write(self, data: bytes, *, split_records: bool, record_size: int | None) -> None:
        """One application write: one SSL_write per record-size piece (TLS) or one send()."""
        if self.obj is None:
            self._send(data)
            return
        self._flush()
        pieces = [data]
        if record_size:
            pieces = [data[i : i + record_size] for i in range(0, len(data), record_size)]
        ct = b""
        for piece in pieces:
            self.obj.write(piece)
            ct += self.out.read()
        if not split_records:
            self._send(ct)
            return
        for off, n in records(ct):
            self._send(ct[off : off + TLS_HEADER])
            self._send(ct[off + TLS_HEADER : off + n])

    def _send(self, data: bytes) -> None:
        if self._tickets:
            self._send_tickets()
        self.sends.append({"t_ns": now_ns(), "len": len(data)})
        self.sock.sendall(data)

    def close(self, *, first: bool) -> None:
        """Orderly close.  The client closes first (close_notify, FIN) and reads to EOF; the
        server reads until the client's close, then sends its own (as the lab's servers)."""
        try:
            if first:
                self._unwrap()
                self.sock.shutdown(socket.SHUT_WR)
            while self._feed():
                if self.obj is not None:
                    try:
                        self.obj.read(RECV_CHUNK)
                    except ssl.SSLWantReadError:
                        continue
                    except (ssl.SSLError, ValueError):
                        break  # close_notify (SSLZeroReturnError) or after it
                    else:
                        continue
            if not first:
                self._unwrap()
        except OSError:
            pass
        self.sock.close()

    def _unwrap(self) -> None:
        if self.obj is not None:
            try:
                self.obj.unwrap()
            except (ssl.SSLWantReadError, ssl.SSLError):
                pass
            self._flush()


def play(role: str, script: dict[str, Any], end: _End) -> list[dict[str, Any]]:
    """Re-enact ``role``'s units of ``script`` on ``end``; one log entry per unit."""
    side = script["sides"][role]
    coalesce_ns = round(float(side.get("coalesce_ms") or 0.0) * 1e6)
    record_size = side.get("record_size")
    split = bool(side.get("split_records"))
    units = script["units"]
    end.pauses = sorted(
        (int(x["after_bytes"]), float(x["pause_ms"]))
        for x in script.get("pauses", ())
        if x["side"] == role
    )
    if side.get("read_pace"):
        end.pace = (int(side["read_pace"]["bytes"]), float(side["read_pace"]["every_ms"]))
    peer_total = 0
    last_write_ns = now_ns()  # the handshake's end: the base of a first "self" unit
    log: list[dict[str, Any]] = []
    pending = b""
    pending_due = 0
    for i, u in enumerate(units):
        if u["side"] != role:
            peer_total += int(u["len"])
            continue
        # the peer's bytes this unit waits for: all the peer's earlier units, or fewer
        # where the script says (a unit that crossed the peer's in flight)
        need = int(u.get("needs", peer_total))
        if need > end.received:
            if pending:
                end.write(pending, split_records=split, record_size=record_size)
                pending = b""
            end.read_until(need)
        base = end.read_done_ns if u["after"] == "peer" else last_write_ns
        due = base + round(float(u["delay_ms"]) * 1e6)
        wait = (due - now_ns()) / 1e9
        woke_late: float | None = None  # only a unit that slept can wake late; the others
        if wait > 0:  # were behind their due time already (a blocking write, a read)
            time.sleep(wait)
            woke_late = (now_ns() - due) / 1e6
        data = unit_bytes(u)
        # the next "self" unit is timed from this one's due time (an absolute schedule,
        # as applications keep one): scheduling lateness does not accumulate
        last_write_ns = due
        log.append(
            {
                "unit": i,
                "due_ns": due,
                "write_ns": now_ns(),
                "len": len(data),
                "woke_late_ms": woke_late,
            }
        )
        nxt = next((v for v in units[i + 1 :] if v["side"] == role), None)
        if (
            coalesce_ns
            and nxt is not None
            and nxt["after"] == "self"
            and (round(float(nxt["delay_ms"]) * 1e6) <= coalesce_ns)
        ):
            pending += data  # the next write follows at once: buffer, hand over together
            pending_due = due
            continue
        if pending:
            data, pending = pending + data, b""
            log[-1]["coalesced_from_ns"] = pending_due
        end.write(data, split_records=split, record_size=record_size)
    if pending:
        end.write(pending, split_records=split, record_size=record_size)
    close = script.get("client_close") if role == "client" else None
    if close is not None:  # the client gives up: reads until then, whatever is left
        end.read_for((last_write_ns + round(float(close["delay_ms"]) * 1e6) - now_ns()) / 1e9)
        return log
    end.read_until(sum(int(u["len"]) for u in units if u["side"] != role))
    return log


def realtime(p: dict[str, Any]) -> bool:
    """SCHED_FIFO just below the forwarder's: a replay is about *when* each write happens,
    and on a busy host a normal task can wake 10–30 ms late (measured: one replayed SSE
    event 28 ms late beside other lab runs).  The programs sleep between writes and never
    spin, so they cannot starve the host.  False when the kernel refuses."""
    if not p.get("realtime_apps"):
        return False
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(APP_PRIORITY))
    except (OSError, AttributeError):
        return False
    return True


def load_script(p: dict[str, Any]) -> dict[str, Any]:
    with open(p["script"], encoding="utf-8") as f:
        return json.load(f)  # type: ignore[no-any-return]


def _contexts(p: dict[str, Any], script: dict[str, Any], role: str) -> ssl.SSLContext | None:
    if not script["tls"]:
        return None
    alpn = script.get("alpn") or "http/1.1"
    if role == "server":
        ctx = tls_server_context(p["cert"], p["key"], p["keylog_server"], alpn=alpn)
    else:
        ctx = tls_client_context(p["cert"], p["keylog_client"], alpn=alpn)
    if script.get("tls_version") == "TLSv1.2":
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    return ctx


TCP_NOTSENT_LOWAT = getattr(socket, "TCP_NOTSENT_LOWAT", 25)  # linux/tcp.h


def _sockopts(s: socket.socket, side: dict[str, Any]) -> dict[str, Any]:
    """TCP_CORK, SO_SNDBUF and TCP_NOTSENT_LOWAT as the script says; read back."""
    if side.get("cork"):
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 1)
    if side.get("sndbuf"):
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, int(side["sndbuf"]))
    if side.get("notsent_lowat"):
        s.setsockopt(socket.IPPROTO_TCP, TCP_NOTSENT_LOWAT, int(side["notsent_lowat"]))
    return {
        "TCP_CORK": bool(s.getsockopt(socket.IPPROTO_TCP, socket.TCP_CORK)),
        "SO_SNDBUF": s.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF),
        "TCP_NOTSENT_LOWAT": s.getsockopt(socket.IPPROTO_TCP, TCP_NOTSENT_LOWAT),
    }


# several connections (a per-capture replay): the client's connection k comes from this
# source port, so that the server knows which script an accepted connection plays
MULTI_PORT_BASE = 41_000


def _serve_one(raw: socket.socket, ctx: ssl.SSLContext | None, script: dict[str, Any]) -> Any:
    side = script["sides"]["server"]
    raw.settimeout(IO_TIMEOUT_S)
    end = _End(raw, ctx, server=True)
    end.handshake(hold=True)
    end.hold_tickets(float(script.get("tickets_delay_ms") or 0.0))
    opts = {**tcp_options(raw), **_sockopts(raw, side)}
    try:
        log = play("server", script, end)
    except OSError:  # ConnectionError included
        if script.get("client_close") is None:
            raise
        log = []  # the client gave up and went: the server's writes after it failed
    end.close(first=False)
    resumed = bool(end.obj.session_reused) if end.obj is not None else None
    return {"socket": opts, "units": log, "sends": end.sends, "resumed": resumed}


def _start(results: dict[int, Any], k: int, fn: Callable[[], Any]) -> threading.Thread:
    """Run connection ``k``'s end in a thread; its result (or its error: one connection's
    failure is reported, the others go on) lands in ``results[k]``."""

    def run() -> None:
        try:
            results[k] = fn()
        except Exception as e:  # noqa: BLE001 - one connection's failure is reported
            results[k] = {"error": f"{type(e).__name__}: {e}"}

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def _gather(
    threads: list[threading.Thread], results: dict[int, Any], n: int, timeout_s: float
) -> list[dict[str, Any]]:
    for t in threads:
        t.join(timeout_s)
    return [results.get(k, {"error": "no result"}) for k in range(n)]


def server(p: dict[str, Any], ready: Callable[[], None]) -> dict[str, Any]:
    script = load_script(p)
    rt = realtime(p)
    conns = script.get("connections")
    first = conns[0]["script"] if conns else script
    side = first["sides"]["server"]
    ctx = _contexts(p, first, "server")
    ls = listen(p["server_ip"], p["port"], cc=p["cc"], nodelay=bool(side["nodelay"]))
    if side.get("rcvbuf"):  # accepted sockets inherit it (and the window scale from it)
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, int(side["rcvbuf"]))
    ready()
    if not conns:
        raw, _ = ls.accept()
        res = _serve_one(raw, ctx, script)
        ls.close()
        return {**res, "realtime": rt}
    # one thread per connection; a connection whose resumption the capture's server
    # refused gets a context of its own (other ticket keys: the offered ticket fails)
    results: dict[int, Any] = {}
    threads = []
    for _ in conns:
        raw, peer = ls.accept()
        k = int(peer[1]) - MULTI_PORT_BASE
        c = conns[k]
        own = ctx if c.get("server_resumes", True) else _contexts(p, first, "server")

        def run(k: int = k, raw: socket.socket = raw, own: Any = own) -> Any:
            return _serve_one(raw, own, conns[k]["script"])

        threads.append(_start(results, k, run))
    out = _gather(threads, results, len(conns), float(p["timeout_s"]))
    ls.close()
    return {
        "socket": out[0].get("socket"),
        "units": [u for r in out for u in r.get("units", ())],
        "sends": [x for r in out for x in r.get("sends", ())],
        "connections": out,
        "realtime": rt,
    }


def _connect_one(
    p: dict[str, Any],
    script: dict[str, Any],
    ctx: ssl.SSLContext | None,
    *,
    port: int | None = None,
    session: Any = None,
    started: Callable[[_End], None] | None = None,
) -> dict[str, Any]:
    side = script["sides"]["client"]
    raw = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    apply_tcp_options(raw, cc=p["cc"], nodelay=bool(side["nodelay"]))
    if side.get("rcvbuf"):  # before connect: the window scale is chosen from it
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, int(side["rcvbuf"]))
    if port is not None:
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        raw.bind((p["client_ip"], port))
    raw.settimeout(CONNECT_TIMEOUT_S)
    raw.connect((p["server_ip"], p["port"]))
    raw.settimeout(IO_TIMEOUT_S)
    end = _End(raw, ctx, server=False, session=session)
    end.handshake()
    if started is not None:
        started(end)
    opts = {**tcp_options(raw), **_sockopts(raw, side)}
    log = play("client", script, end)
    gave_up = script.get("client_close") is not None
    info: dict[str, Any] = {}
    if end.obj is not None:
        c = end.obj.cipher()
        info = {
            "version": end.obj.version(),
            "cipher": c[0] if c else None,
            "alpn": end.obj.selected_alpn_protocol(),
            "resumed": bool(end.obj.session_reused),
        }
    if gave_up:  # no close_notify, no reading to the end: the socket just goes
        end.sock.close()
    else:
        end.close(first=True)
    return {"socket": opts, "units": log, "sends": end.sends, "tls": info}


def client(p: dict[str, Any]) -> dict[str, Any]:
    script = load_script(p)
    rt = realtime(p)
    conns = script.get("connections")
    if not conns:
        ctx = _contexts(p, script, "client")
        res = _connect_one(p, script, ctx)
        return {**res, "realtime": rt}
    # connection k starts start_ms after the first (as in the capture), from its own port;
    # "resume": it offers the session of the latest connection that has one (the tickets
    # it has read so far: a hedge resumes the session of the connection still running)
    ctx = _contexts(p, conns[0]["script"], "client")
    t0 = time.monotonic()
    results: dict[int, Any] = {}
    live: list[_End] = []
    threads = []
    for k, c in enumerate(conns):
        time.sleep(max(0.0, t0 + float(c["start_ms"]) / 1000 - time.monotonic()))

        def run(k: int = k, c: dict[str, Any] = c) -> dict[str, Any]:
            session = None
            if c.get("resume"):
                have = [e.obj.session for e in live if e.obj is not None]
                have = [x for x in have if x is not None and x.has_ticket]
                session = have[-1] if have else None
            return _connect_one(
                p,
                c["script"],
                ctx,
                port=MULTI_PORT_BASE + k,
                session=session,
                started=live.append,
            )

        threads.append(_start(results, k, run))
    out = _gather(threads, results, len(conns), float(p["timeout_s"]))
    return {
        "socket": out[0].get("socket"),
        "units": [u for r in out for u in r.get("units", ())],
        "sends": [x for r in out for x in r.get("sends", ())],
        "tls": out[0].get("tls", {}),
        "connections": out,
        "realtime": rt,
    }


def ground_truth(run: RunData) -> dict[str, Any]:
    """Each end's units: when due, when written (the replay's own scheduling error)."""
    out: dict[str, Any] = {}
    for role, res in (("client", run.client), ("server", run.server)):
        units = list(res.get("units", ()))
        late = sorted(u["woke_late_ms"] for u in units if u.get("woke_late_ms") is not None)
        out[role] = {
            "realtime": res.get("realtime"),
            "units": units,
            "sends": list(res.get("sends", ())),
            # how late the program woke for a timed write: the host's scheduling, not TCP
            "woke_late_ms_p50": late[len(late) // 2] if late else None,
            "woke_late_ms_max": late[-1] if late else None,
        }
    return out


def scenario(*, tls: bool) -> Scenario:
    """The (unregistered) replay scenario: run with ``runner.run_scenario``."""
    return Scenario(
        name="replay",
        summary="socket-level replay of a captured exchange (pcapkit replay)",
        what="a captured exchange re-enacted by a scripted client and server",
        expected=(),
        pair=None,
        server=f"{__name__}:server",
        client=f"{__name__}:client",
        params=PARAMS,
        tls=tls,
        ground_truth=ground_truth,
    )
