"""HTTP/2 send-buffer head-of-line blocking (H3, DETECTION.md §4.3).

Mechanism: an HTTP/2 server that writes a large response eagerly fills its kernel socket
buffer; bytes already there cannot be re-prioritised.  An urgent response (a small
request on another stream, a streaming event) written later leaves only after every
byte queued ahead of it — a wait of ≈ queued_bytes / delivery rate that no HTTP/2
priority can shorten.  Cloudflare's remedy: ``TCP_NOTSENT_LOWAT`` 16 KiB (with BBR), so
the application keeps the backlog and schedules by priority ("Optimizing HTTP/2
prioritization with BBR and tcp_notsent_lowat", 2018).

Signature (needs keys or h2c): for each stream s whose request header block was seen,
the bytes of *other* streams' DATA the server put on the wire after the request reached
it and before s's first response frame.  "After the request reached it" is read from the
server's own TCP acknowledgement field, which the kernel fills in when a segment is
*transmitted*: a segment acknowledging the request's last byte left the server after the
request arrived — at every vantage, unlike a time window, which bytes already queued in
the network would pollute.  Those bytes were in the server's socket buffer (or its
application queue) when the request arrived.

Counter-checks: ≥ ``min_queued_bytes`` ahead (more than a sender honouring the 16 KiB
low-water mark can hold: the mark plus one maximal frame record); the bytes flowed
continuously — no pause longer than ``max_idle_ms`` and ``idle_factor`` × their mean
packet spacing (a pause means the server was not sending, e.g. thinking, so the queue
did not hold the response back).  What stays unknown: the server's think time for s —
it may have answered late while its queue drained anyway — hence "possible", confidence
low-medium.

Cost (lower bound) = queued bytes / delivery rate measured over the same packets (first
to last carrying them): the time those bytes needed on the wire before the response could
follow.  Same-direction interval: the same at every vantage (DETECTION.md §1.1).
"""

from __future__ import annotations

import numpy as np

from ..rows import itertuples
from ..schema import is_missing as _na
from .base import Evidence, Finding, frame_filter
from .context import DetectContext
from .spec import DetectorSpec, Kind, Threshold

SPEC = DetectorSpec(
    kinds=(Kind("h2_send_buffer_hol", "H3", "DETECTION.md §4.3", holds=True),),
    thresholds=(
        Threshold(
            "min_queued_bytes",
            "bytes",
            "Cloudflare tcp_notsent_lowat 16 KiB + one maximal HTTP/2 frame in one TLS 1.3 record",
        ),
        Threshold("max_idle_ms", "ms", "the queued bytes flow without a longer pause [judgement]"),
        Threshold(
            "idle_factor",
            "ratio",
            "× the mean packet spacing (a rate-limited path spaces packets by serialisation time)",
        ),
    ),
)
KINDS = SPEC.kind_names

# Cloudflare's tcp_notsent_lowat 16 KiB plus one maximal HTTP/2 frame (RFC 9113 §4.2
# default SETTINGS_MAX_FRAME_SIZE 16 384, 9-byte header) in one TLS 1.3 record (22 bytes):
# what a sender honouring the low-water mark can still have unsent.
LOWAT_BYTES = 16_384
MIN_QUEUED_BYTES = LOWAT_BYTES + 16_384 + 9 + 22
# The queued bytes must flow without a pause longer than this and idle_factor × their mean
# packet spacing (a rate-limited path spaces packets by their serialisation time: 11.6 ms
# per 1 448-byte segment at 1 Mbit/s; an ACK-clocked sender sends them in pairs).
MAX_IDLE_MS = 5.0
IDLE_FACTOR = 3.0


def detect(
    ctx: DetectContext,
    *,
    min_queued_bytes: int = MIN_QUEUED_BYTES,
    max_idle_ms: float = MAX_IDLE_MS,
    idle_factor: float = IDLE_FACTOR,
) -> list[Finding]:
    req = ctx.requests
    msgs = ctx.messages
    if not len(req) or not len(msgs):
        return []
    req = req[req["protocol"] == "h2"]
    if not len(req):
        return []  # no HTTP/2 request: nothing to look for (and no message-table scan)
    h2 = msgs[(msgs["protocol"] == "h2") & (msgs["dir"] == "s2c") & msgs["frame"].notna()]
    # per flow, the server's frames as numpy columns, and each stream's first frame: one
    # pass, not a table scan per request (200,000 streams made that quadratic)
    by_flow: dict[int, dict[str, np.ndarray]] = {}
    first_of: dict[tuple[int, int], int] = {}  # (flow, stream) -> row in its flow's arrays
    if len(h2):
        cols = {
            "flow": h2["flow"].to_numpy(np.int64),
            "stream": h2["stream"].to_numpy(np.int64, na_value=-1),
            "frame": h2["frame"].to_numpy(np.int64),
            "ts_ns": h2["ts_ns"].to_numpy(np.int64, na_value=-1),
            "length": h2["length"].to_numpy(np.int64, na_value=0),
            "data": (h2["type"] == "DATA").to_numpy(bool),
        }
        order = np.lexsort((cols["frame"], cols["flow"]))
        cols = {k: v[order] for k, v in cols.items()}
        flows, starts = np.unique(cols["flow"], return_index=True)
        ends = [*starts[1:].tolist(), cols["flow"].shape[0]]
        for f, a, e in zip(flows.tolist(), starts.tolist(), ends, strict=True):
            g = {k: v[a:e] for k, v in cols.items()}
            by_flow[f] = g
            for i, s in enumerate(g["stream"].tolist()):  # frames are in frame order
                first_of.setdefault((f, s), i)
    out: list[Finding] = []
    for r in itertuples(req):
        flow = int(r.flow)
        if _na(r.stream) or _na(r.request_frame) or not ctx.has_flow(flow):
            continue
        sid, rframe = int(r.stream), int(r.request_frame)
        fm = by_flow.get(flow)
        i0 = first_of.get((flow, sid))
        if fm is None or i0 is None:
            continue
        resp_frame = int(fm["frame"][i0])
        first_ts = int(fm["ts_ns"][i0])
        pk = ctx.packets_of(flow)
        c2s = np.flatnonzero((pk.frame == rframe) & (pk.dir == 0))
        if not len(c2s):
            continue
        req_end = int(pk.end[c2s[0]])
        # server segments transmitted after the request reached the server, before the
        # response's first frame became readable
        after = (pk.dir == 1) & (pk.length > 0) & (pk.ack >= req_end) & (pk.frame <= resp_frame)
        frames_after = set(pk.frame[after].tolist())
        if not frames_after:
            continue
        other = (
            fm["data"]
            & (fm["stream"] != sid)
            & np.isin(fm["frame"], np.fromiter(frames_after, np.int64))
            & (fm["frame"] <= resp_frame)
        )
        queued = int(fm["length"][other].sum())
        if queued < min_queued_bytes:
            continue
        ts = pk.ts[after]
        lens = pk.length[after]
        if len(ts) < 3:
            continue
        span_ns = int(ts[-1] - ts[0])
        if span_ns <= 0:
            continue
        gaps = np.diff(ts) / 1e6
        pause_ms = max(max_idle_ms, idle_factor * span_ns / 1e6 / (len(ts) - 1))
        if float(gaps.max()) > pause_ms:
            continue  # a pause: the server was not draining a queue all along
        rate = float(lens[1:].sum()) / (span_ns / 1e9)  # bytes/s over these packets
        cost_ms = queued / rate * 1e3
        q = int(np.flatnonzero(other)[0])  # the first queued DATA frame (frame order)
        t_req = int(pk.ts[c2s[0]])
        ev = [
            Evidence(rframe, f"request on stream {sid}", t_req),
            Evidence(
                int(fm["frame"][q]),
                "first DATA of another stream queued ahead",
                int(fm["ts_ns"][q]),
            ),
            Evidence(resp_frame, f"first response frame of stream {sid}", first_ts),
        ]
        streams = sorted({int(s) for s in fm["stream"][other].tolist()})
        who = ctx.endpoint(flow, 1)
        out.append(
            Finding(
                kind="h2_send_buffer_hol",
                flow=flow,
                dir="s2c",
                stream=sid,
                t_start_ns=int(fm["ts_ns"][q]),
                t_end_ns=first_ts,
                cost_ms=cost_ms,
                cost_method="lower_bound",
                evidence=ev,
                explanation=(
                    f"HTTP/2 stream {sid} ({r.method} {r.path}): after the request reached "
                    f"the {who}, {queued} bytes of DATA of stream(s) "
                    f"{', '.join(map(str, streams))} left before the first frame of its "
                    f"response (frame {resp_frame}), flowing without pause at "
                    f"{rate * 8 / 1e6:.2f} Mbit/s: the response possibly waited "
                    f"≥ {cost_ms:.0f} ms behind data already queued in the sender's socket "
                    "buffer, which HTTP/2 priorities cannot reorder."
                ),
                remedy=(
                    f"Keep the backlog in the application, not the kernel ({who}): set "
                    "TCP_NOTSENT_LOWAT (e.g. 16 KiB, net.ipv4.tcp_notsent_lowat) so the "
                    "server writes only when little is unsent, schedule frames by HTTP/2 "
                    "priority / urgency (RFC 9218), write bulk responses in smaller pieces, "
                    "or serve urgent streams on a separate connection."
                ),
                display_filter=frame_filter([e.frame for e in ev]),
                confidence=0.4,
                checks=[
                    f"≥ {min_queued_bytes} B of other streams sent after the request arrived "
                    "(server ACK field covers the request)",
                    f"no pause > {pause_ms:.1f} ms in those bytes",
                    "server think time for the stream unknown: possible, lower bound",
                ],
                details={
                    "queued_bytes": queued,
                    "streams_ahead": streams,
                    "rate_bytes_per_s": round(rate, 1),
                    "request_frame": rframe,
                    "response_frame": resp_frame,
                    "max_pause_ms": round(float(gaps.max()), 3),
                },
            )
        )
    return out
