"""``client_timeout`` (A3): a fixed client deadline cutting streamed responses,
DETECTION.md §11.6 (issue 21).

Mechanism: clients abandon a response when a total deadline or an idle timer fires
(httpx: 5 s per read; aiohttp ``ClientTimeout(total=300)``, rounded up to the second;
openai-python 600 s per read, announced in ``x-stainless-read-timeout``; gRPC
``grpc-timeout``).  HTTP/1.1 cannot cancel a response but by closing the connection: a
``close()`` with unread data sends RST at once, with an empty receive queue a FIN and then
a RST when the next server segment arrives (RFC 2525 §2.17; Linux ``tcp_close``).  HTTP/2
cancels with RST_STREAM (CANCEL typical; ``h2`` defaults to NO_ERROR) or, like httpcore,
by closing the whole connection; HTTP/3 with RESET_STREAM / STOP_SENDING (RFC 9114
§4.1.1, H3_REQUEST_CANCELLED).

Signature: a *cancel* C of a response that had begun (its header block seen) and not yet
ended — the client's FIN or RST on the
connection (HTTP/1.1, or HTTP/2 streams still open) — a RST, or a FIN after which the server
still sent data or the client reset — a client RST_STREAM on the
stream (HTTP/2), a client RESET_STREAM or STOP_SENDING on it (HTTP/3) — while the server
had not closed first (a server or proxy timeout closes from the other side: not this).
Its elapsed time E from three anchors: (a) the request's first byte (a total deadline),
(b) the connection's SYN / first Initial (a deadline that includes connecting), (c) the
last server byte before C (an idle timer; at a capture point away from the client the
server's byte reaches the client d_C/2 later and C left it d_C/2 earlier: − d_C).  (a) and
(b) are client → server on both ends: unbiased at every vantage.  A finding needs
``min_cancels`` cancels to one origin whose E (median ≥ ``min_elapsed_ms``), from the anchor with the smallest spread,
agree within max(``agree_ms``, 1 % of E) plus the responses' median inter-event gap (a
deadline checked between reads fires at the first read after it) — or one cancel whose E
matches the deadline the request announced (``x-stainless-read-timeout``,
``grpc-timeout``).  A round E (1, 2, 5, 10, 30, 60, 120, 300, 600 s) raises confidence.

Cost (``measured_interval``): Σ E over the agreeing cancels — the time those calls ran for
nothing (the server's work for them was thrown away too: their body bytes are in the
details).  With SDK retries each cut call is paid again (see ``retry_amplification``).

A request cancelled before any response (a time-to-first-byte deadline) is not judged: on
the wire it is indistinguishable from a client half-closing after its requests.

What the wire cannot decide: *why* the client gave up — a deadline, a user pressing stop,
a crash — only that cancels agree on E; random user aborts do not.  Over TLS without keys
(HTTP/1.1) the same test runs on the connection's FIN/RST if the requests table has the
exchange; over HTTP/2 or HTTP/3 without keys nothing is seen (the cancel is encrypted).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..net.decode import FIN, RST
from ..rows import itertuples
from ..schema import is_missing as _na
from .base import Evidence, Finding, frame_filter
from .context import DetectContext
from .spec import DetectorSpec, Kind, Threshold

SPEC = DetectorSpec(
    kinds=(Kind("client_timeout", "A3", "DETECTION.md §11.6"),),
    thresholds=(
        Threshold(
            "min_cancels",
            "count",
            "DETECTION.md §11.6: two cancels at one elapsed time are a timer, one is an anecdote",
            minimum=2,
        ),
        Threshold(
            "min_elapsed_ms",
            "ms",
            "judgement: client deadlines are whole seconds (httpx 5 s, aiohttp 300 s, SDKs "
            "600 s); below half a second, cancels agreeing within agree_ms prove nothing "
            "(a player aborting range requests 4-37 ms after the last byte, netflix.pcap)",
        ),
        Threshold(
            "agree_ms",
            "ms",
            "DETECTION.md §11.6: cancels agree within max(50 ms, 1 % of E) + the median "
            "inter-event gap (lab to_prompt: 2.004, 2.044, 2.046 s for T = 2 s)",
        ),
    ),
)
KINDS = SPEC.kind_names

ROUND_S = (1, 2, 3, 5, 10, 15, 20, 30, 60, 120, 180, 300, 600)
ANCHORS = ("request", "connection", "idle")
# grpc-timeout (gRPC PROTOCOL-HTTP2.md): TimeoutValue (≤ 8 digits) + unit
GRPC_UNITS_S = {"H": 3600.0, "M": 60.0, "S": 1.0, "m": 1e-3, "u": 1e-6, "n": 1e-9}


@dataclass(frozen=True, slots=True)
class Cancel:
    request: int
    flow: int
    stream: int | None
    frame: int
    ts: int
    how: str
    elapsed: dict[str, int]  # anchor -> E in ns (vantage-corrected)
    request_frame: int | None
    announced_s: float | None
    gap_ms: float  # the response's median inter-event gap (0 without events)
    body_bytes: int | None
    target: str


def _announced_s(headers: Any) -> float | None:
    """The deadline a request announced: ``x-stainless-read-timeout`` (seconds) or
    ``grpc-timeout``."""
    if headers is None or _na(headers):
        return None
    for k, v in headers:
        k = str(k).lower()
        v = str(v).strip()
        try:
            if k == "x-stainless-read-timeout":
                return float(v)
            if k == "grpc-timeout" and len(v) >= 2 and v[-1] in GRPC_UNITS_S and v[:-1].isdigit():
                return int(v[:-1]) * GRPC_UNITS_S[v[-1]]
        except ValueError:
            return None
    return None


def _client_resets(ctx: DetectContext) -> dict[tuple[int, int], tuple[int, int, str]]:
    """(flow, stream) -> (frame, ts, what) of the client's first stream cancel."""
    out: dict[tuple[int, int], tuple[int, int, str]] = {}
    m = ctx.messages
    if not m.empty:
        rs = m[(m["protocol"] == "h2") & (m["type"] == "RST_STREAM") & (m["dir"] == "c2s")]
        for r in itertuples(rs):
            if _na(r.frame) or _na(r.ts_ns) or _na(r.stream):
                continue
            key = (int(r.flow), int(r.stream))
            if key not in out:
                out[key] = (int(r.frame), int(r.ts_ns), f"RST_STREAM ({r.detail})")
    qf = ctx.quic_frames
    if not qf.empty:
        rs = qf[qf["type"].isin(["RESET_STREAM", "STOP_SENDING"]) & qf["from_client"]]
        for r in itertuples(rs):
            if _na(r.stream_id):
                continue
            key = (int(r.flow), int(r.stream_id))
            if key not in out or int(r.ts_ns) < out[key][1]:
                out[key] = (int(r.frame), int(r.ts_ns), str(r.type))
    return out


def _cancels(ctx: DetectContext) -> list[Cancel]:
    r = ctx.requests
    out: list[Cancel] = []
    if r is None or r.empty:
        return out
    resets: dict[tuple[int, int], tuple[int, int, str]] | None = None  # when first needed
    gaps = {
        int(q.request): 0.0 if _na(q.gap_p50_ms) else float(q.gap_p50_ms) for q in itertuples(r)
    }
    tcp = set(ctx.tcp_flows())
    closes: dict[int, tuple[tuple[int, int] | None, tuple[int, int] | None]] = {}
    last_srv: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for q in itertuples(r):
        if _na(q.request_start_ts_ns) or bool(q.complete) or not ctx.has_flow(int(q.flow)):
            continue
        if _na(q.response_ts_ns):
            # no response yet: a client half-closing after its requests (FIN), a server
            # that never answered — not a stream cut (a TTFB deadline is not judged)
            continue
        f = int(q.flow)
        start = int(q.request_start_ts_ns)
        stream = None if _na(q.stream) else int(q.stream)
        hit = None
        if stream is not None and resets is None:
            resets = _client_resets(ctx)  # (scans the message and QUIC frame tables)
        if stream is not None and resets is not None and (f, stream) in resets:
            fr, ts, what = resets[(f, stream)]
            if ts >= start:
                hit = (fr, ts, what)
        if hit is None and f in tcp:
            if f not in closes:
                p = ctx.packets_of(f)
                fin_rst = (p.flags & (FIN | RST)) != 0
                cli = np.nonzero(fin_rst & (p.dir == 0))[0]
                srv = np.nonzero(fin_rst & (p.dir == 1))[0]
                closes[f] = (
                    (int(p.frame[cli[0]]), int(p.ts[cli[0]])) if cli.shape[0] else None,
                    (int(p.frame[srv[0]]), int(p.ts[srv[0]])) if srv.shape[0] else None,
                )
                data = np.nonzero((p.dir == 1) & (p.length > 0))[0]
                last_srv[f] = (p.ts[data], p.frame[data])
            cli_close, srv_close = closes[f]
            if cli_close is not None and cli_close[1] >= start:
                p = ctx.packets_of(f)
                i = int(np.searchsorted(p.frame, cli_close[0]))
                flag = "RST" if int(p.flags[i]) & RST else "FIN"
                # the server was still sending: payload from it after a FIN, or the client's
                # RST when that payload reached it (Linux abort-on-data) — a client that had
                # read everything and closes an idle connection sends a FIN nobody answers
                # with data; a capture that lost the response's tail leaves the exchange
                # incomplete without any cut (netflix.pcap)
                after = last_srv[f][0]
                rst_later = ((p.flags & RST) != 0) & (p.dir == 0) & (p.ts > cli_close[1])
                streaming = (
                    flag == "RST" or bool((after > cli_close[1]).any()) or bool(rst_later.any())
                )
                if streaming and (srv_close is None or srv_close[1] > cli_close[1]):
                    hit = (cli_close[0], cli_close[1], f"client {flag}")
        if hit is None:
            continue
        fr, ts, what = hit
        dc = ctx.legs_ns(f)[0] or 0
        elapsed = {"request": ts - start}
        if not _na(q.syn_ts_ns):
            elapsed["connection"] = ts - int(q.syn_ts_ns)
        srv_ts = last_srv.get(f)
        if srv_ts is not None and srv_ts[0].shape[0]:
            k = int(np.searchsorted(srv_ts[0], ts, side="left")) - 1
            idle = ts - int(srv_ts[0][k]) - dc if k >= 0 else 0
            # an idle timer longer than the stream's own cadence (else it would fire between
            # any two events): E ≥ 2 median gaps
            gap_ns = gaps.get(int(q.request), 0.0) * 1e6
            if k >= 0 and int(srv_ts[0][k]) >= start and idle > 2 * gap_ns:
                elapsed["idle"] = idle
        auth = "" if _na(q.authority) else str(q.authority)
        out.append(
            Cancel(
                request=int(q.request),
                flow=f,
                stream=stream,
                frame=fr,
                ts=ts,
                how=what,
                elapsed=elapsed,
                request_frame=None if _na(q.request_frame) else int(q.request_frame),
                announced_s=_announced_s(q.request_headers),
                gap_ms=gaps.get(int(q.request), 0.0),
                body_bytes=None if _na(q.response_body_bytes) else int(q.response_body_bytes),
                target=f"{'' if _na(q.method) else q.method} {auth}{'' if _na(q.path) else q.path}",
            )
        )
    return out


def _origin(ctx: DetectContext, c: Cancel) -> tuple[str, str, int]:
    fl = ctx.flow(c.flow)
    return (str(fl.client_ip), str(fl.server_ip), int(fl.server_port))


def _agreeing(cs: list[Cancel], anchor: str, agree_ms: float) -> list[Cancel]:
    """The largest set of cancels whose E (by ``anchor``) lie within the agreement window
    around one of them."""
    have = [c for c in cs if anchor in c.elapsed]
    best: list[Cancel] = []
    for c in have:
        e = c.elapsed[anchor]
        gap = float(np.median([x.gap_ms for x in have])) if have else 0.0
        win = max(agree_ms * 1e6, 0.01 * e) + gap * 1e6
        near = [x for x in have if abs(x.elapsed[anchor] - e) <= win]
        if len(near) > len(best):
            best = near
    return best


def detect(
    ctx: DetectContext,
    *,
    min_cancels: int = 2,
    min_elapsed_ms: float = 500.0,
    agree_ms: float = 50.0,
) -> list[Finding]:
    out: list[Finding] = []
    by_origin: dict[tuple[str, str, int], list[Cancel]] = {}
    for c in _cancels(ctx):
        by_origin.setdefault(_origin(ctx, c), []).append(c)
    for cs in by_origin.values():
        pick: tuple[str, list[Cancel]] | None = None
        best = (0, 0.0)
        for anchor in ANCHORS:
            group = _agreeing(cs, anchor, agree_ms)
            if len(group) < min_cancels:
                continue
            es = [c.elapsed[anchor] for c in group]
            if float(np.median(es)) < min_elapsed_ms * 1e6:
                continue
            # the anchor the cancels agree on best: most cancels, then the smallest spread
            # relative to E (a timer's jitter does not grow with its value)
            rel = (max(es) - min(es)) / max(float(np.median(es)), 1.0)
            if pick is None or (len(group), -rel) > best:
                pick, best = (anchor, group), (len(group), -rel)
        announced = False
        if pick is None:
            lone = [
                c
                for c in cs
                if c.announced_s
                and c.announced_s * 1e3 >= min_elapsed_ms
                and abs(c.elapsed["request"] / 1e9 - c.announced_s)
                <= max(agree_ms / 1e3, 0.01 * c.announced_s) + c.gap_ms / 1e3
            ]
            if not lone:
                continue
            pick, announced = ("request", lone), True
        anchor, group = pick
        group = sorted(group, key=lambda c: c.ts)
        es = np.asarray([c.elapsed[anchor] for c in group], np.float64) / 1e9
        med = float(np.median(es))
        gap_s = float(np.median([c.gap_ms for c in group])) / 1e3
        rnd = next((r for r in ROUND_S if abs(med - r) <= max(0.05, 0.01 * r) + gap_s), None)
        cost_ns = sum(c.elapsed[anchor] for c in group)
        evidence: list[Evidence] = []
        for c in group:
            if c.request_frame is not None:
                evidence.append(Evidence(c.request_frame, "request", None))
            evidence.append(
                Evidence(c.frame, f"cancel ({c.how}) after {c.elapsed[anchor] / 1e9:.3f} s", c.ts)
            )
        first = group[0]
        what = {
            "request": "after the request was sent (a total deadline)",
            "connection": "after the connection was opened (a deadline including the connect)",
            "idle": "after the last server byte (an idle / read timeout)",
        }[anchor]
        wasted = sum(c.body_bytes or 0 for c in group)
        conf = 0.9 if announced else (0.8 if rnd is not None else 0.6)
        out.append(
            Finding(
                kind="client_timeout",
                flow=first.flow,
                dir="c2s",
                stream=first.stream,
                t_start_ns=min(c.ts - c.elapsed[anchor] for c in group),
                t_end_ns=max(c.ts for c in group),
                cost_ms=cost_ns / 1e6,
                cost_method="measured_interval",
                evidence=evidence,
                explanation=(
                    f"The client cancelled {len(group)} responses still streaming "
                    f"({first.target}) {med:.3f} s {what}"
                    + (f" — a round {rnd} s" if rnd is not None else "")
                    + (" — the deadline the request announced" if announced else "")
                    + ": "
                    + ", ".join(f"{e:.3f}" for e in es)
                    + f" s, by {', '.join(sorted({c.how for c in group}))}. The calls ran "
                    f"{cost_ns / 1e9:.1f} s for nothing and {wasted} response body bytes "
                    "were thrown away."
                ),
                remedy=(
                    "Set the deadline from the observed p99 of complete responses, or use an "
                    "idle (read) timeout for streams instead of a total one (aiohttp "
                    "ClientTimeout(total=None, sock_read=…), httpx read timeout); propagate the "
                    "deadline (grpc-timeout) so the server stops; cancel with RST_STREAM CANCEL "
                    "/ H3_REQUEST_CANCELLED rather than by closing connections."
                ),
                display_filter=frame_filter([e.frame for e in evidence]),
                vantage=ctx.vantage(first.flow),
                confidence=conf,
                checks=[
                    "the response had not ended (no terminal chunk / END_STREAM / FIN)",
                    "the client closed or reset first (a server or proxy timeout closes from "
                    "the server side)",
                    f"E from the {anchor} anchor (smallest spread of "
                    + ", ".join(a for a in ANCHORS)
                    + ")",
                ],
                details={
                    "request": first.request,
                    "requests": [c.request for c in group],
                    "anchor": anchor,
                    "elapsed_s": [round(float(e), 4) for e in es],
                    "median_s": round(med, 4),
                    "round_s": rnd,
                    "announced": announced,
                    "body_bytes": wasted,
                },
            )
        )
    return out
