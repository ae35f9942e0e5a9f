"""Gap attribution for streamed responses (issue 6): why did the tokens wait?

For every response with events (SSE events; gRPC messages with HTTP/2) the wait
before each event is split into its causes:

* the wait for the **first** event (TTFT, from the request's header block at the
  capture point) always: ``path_ms`` — the round trip between the capture point
  and the server (the flow's server leg, DETECTION.md §1.1), ``network_ms`` — time
  inside TCP/TLS findings of the response direction that overlap the wait (a Nagle
  hold, a retransmission wait, a zero window, …), and ``server_ms`` — the rest:
  no network cause, the server sent late (thinking, queueing, upstream);
* every later gap longer than ``max(GAP_FACTOR × median gap, median + MIN_EXTRA_MS)``:
  ``cadence_ms`` — the stream's normal spacing (its median gap), ``network_ms`` and
  ``server_ms`` as above for the excess (the path delay cancels between two events
  of one stream).

When the costliest overlapping finding *released* the event (the event arrived
within its interval: a retransmission that filled the hole, the ACK that freed a
Nagle-held segment), the whole excess is the network's: the finding's own cost may
measure a different part of the same wait (e.g. tcp_hol_blocking prices the wait of
the bytes *behind* a hole, while the lost event itself waited from its first
transmission).

``cause`` names the largest share: a finding kind, ``server`` or ``path``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from .. import schema
from .http import overlapping

# A gap is "long" when it exceeds twice the stream's median gap and the median by
# 20 ms (one perceptible frame at 50 Hz, as base.MEDIUM_COST_MS): a steady token
# stream has gaps close to its median.
GAP_FACTOR = 2.0
MIN_EXTRA_MS = 20.0
# An event that arrives within 1 ms after a finding's interval ends was released by it
# (the releasing frame and the event's frame can be consecutive captures).
RELEASE_SLACK_NS = 1_000_000
# filled only with two vantages (pcapkit.vantage.split_gaps): missing here
TWO_VANTAGE_COLUMNS = ("client_ms", "c2s_ms", "server_side_ms", "s2c_ms")


def _union_ms(intervals: list[tuple[int, int]]) -> float:
    tot = 0
    end = None
    for a, b in sorted(intervals):
        if end is None or a > end:
            tot += b - a
            end = b
        elif b > end:
            tot += b - end
            end = b
    return tot / 1e6


def attribute(
    requests: pd.DataFrame,
    messages: pd.DataFrame,
    flows: pd.DataFrame,
    findings: list[Any],
    *,
    gap_factor: float = GAP_FACTOR,
    min_extra_ms: float = MIN_EXTRA_MS,
    server_legs: dict[int, float] | None = None,
) -> pd.DataFrame:
    """``server_legs`` supplies the capture ↔ server round trip (ms) of flows the flows
    table has none for (QUIC: from ACK timing, :func:`pcapkit.sessions.quic.server_leg_ms`)."""
    rows: dict[str, list[Any]] = {
        c: [] for c in schema.columns("gaps") if c not in TWO_VANTAGE_COLUMNS
    }
    if messages.empty or requests.empty:
        return _frame(rows)
    ev = messages[messages["type"].isin(["event", "message"]) & messages["request"].notna()]
    legs = {
        int(r.flow): (None if pd.isna(r.server_leg_ms) else float(r.server_leg_ms))
        for r in flows.itertuples(index=False)
    }
    for f, ms in (server_legs or {}).items():
        if legs.get(f) is None:
            legs[f] = ms
    for req_id, grp in ev.groupby("request"):
        q = requests.iloc[int(req_id)]
        ts = grp["ts_ns"].to_numpy(np.int64, na_value=-1)
        fr = grp["frame"].to_numpy(np.int64, na_value=-1)
        if (ts < 0).any() or pd.isna(q.request_start_ts_ns):
            continue
        flow = int(q.flow)
        # the first event's wait counts from the end of the request (else its start)
        t_req = int(q.request_start_ts_ns if pd.isna(q.request_end_ts_ns) else q.request_end_ts_ns)
        gaps = np.diff(ts) / 1e6
        med = float(np.median(gaps)) if gaps.shape[0] else 0.0
        limit = max(gap_factor * med, med + min_extra_ms)
        todo = [0] + [i + 1 for i in np.nonzero(gaps > limit)[0].tolist()]
        for k in todo:
            t0 = t_req if k == 0 else int(ts[k - 1])
            t1 = int(ts[k])
            if t1 < t0:
                continue
            gap = (t1 - t0) / 1e6
            hits = overlapping(findings, flow, "s2c", t0, t1)
            net = _union_ms([(max(f.t_start_ns, t0), min(f.t_end_ns, t1)) for f in hits])
            path = (legs.get(flow) or 0.0) if k == 0 else 0.0
            cadence = min(med, gap) if k > 0 else 0.0
            if hits and hits[0].t_start_ns <= t1 <= hits[0].t_end_ns + RELEASE_SLACK_NS:
                net = max(net, gap - path - cadence)  # the finding released this event
            net = min(net, max(gap - cadence, 0.0))
            path = min(path, max(gap - net - cadence, 0.0))
            server = max(gap - net - path - cadence, 0.0)
            shares = {"server": server, "path": path, "cadence": cadence}
            if hits:
                shares[hits[0].kind] = net
            cause = max(shares, key=lambda s: shares[s])
            rows["request"].append(int(req_id))
            rows["flow"].append(flow)
            rows["stream"].append(None if pd.isna(q.stream) else int(q.stream))
            rows["event"].append(k)
            rows["frame"].append(int(fr[k]) if fr[k] >= 0 else None)
            rows["from_ts_ns"].append(t0)
            rows["to_ts_ns"].append(t1)
            rows["gap_ms"].append(round(gap, 3))
            rows["path_ms"].append(round(path, 3))
            rows["cadence_ms"].append(round(cadence, 3))
            rows["network_ms"].append(round(net, 3))
            rows["server_ms"].append(round(server, 3))
            rows["cause"].append(cause)
            rows["findings"].append([f.kind for f in hits])
            rows["frames"].append(hits[0].frames if hits else [])
    return _frame(rows)


def _frame(rows: dict[str, list[Any]]) -> pd.DataFrame:
    n = len(rows["request"])
    data: dict[str, Any] = dict(rows)
    for c in ("stream", "frame"):
        data[c] = pd.array(rows[c], dtype="Int64")
    return schema.frame("gaps", data, n)
