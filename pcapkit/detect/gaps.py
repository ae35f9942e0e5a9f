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

Server time must be shown, not assumed (issue 22): a residual wait above
:data:`UNEXPLAINED_MIN_MS` counts as ``server_ms`` only where the wire shows the server
sent late — the capture point is at the server (what it sees leave is what the server
sent), or the server's TCP timestamps (RFC 7323: TSval is its clock when it sent the
segment) advanced with the wait.  Whatever part of it the path held instead (the
segment's arrival gap exceeds its sending gap) and no finding explains, and all of it
where neither proof exists (no timestamps, a QUIC or keyless middle vantage), is
``unexplained_ms`` — never silently the server's.

``cause`` names the largest share: a finding kind, ``server``, ``path``, ``cadence`` or
``unexplained``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from .. import schema
from ..rows import itertuples
from .http import overlapping
from .waits import tsval_rate

# A gap is "long" when it exceeds twice the stream's median gap and the median by
# 20 ms (one perceptible frame at 50 Hz, as base.MEDIUM_COST_MS): a steady token
# stream has gaps close to its median.
GAP_FACTOR = 2.0
MIN_EXTRA_MS = 20.0
# An event that arrives within 1 ms after a finding's interval ends was released by it
# (the releasing frame and the event's frame can be consecutive captures).
RELEASE_SLACK_NS = 1_000_000
# A residual wait above this must be shown to be the server's (module doc); below it, a
# wait is within the jitter of one perceptible frame (as MIN_EXTRA_MS).
UNEXPLAINED_MIN_MS = 20.0
# filled only with two vantages (pcapkit.vantage.split_gaps): missing here
TWO_VANTAGE_COLUMNS = ("client_ms", "c2s_ms", "server_side_ms", "s2c_ms")


class _ServerClock:
    """The server's TSvals per flow (s2c packets), to tell what it sent late from what the
    path held: ``held_ms(flow, frame, t0)`` is how much longer the server's packet in
    ``frame`` took to arrive after the server's last packet seen by ``t0`` than the server
    took to send it (its TSval gap), None when the timestamps cannot say."""

    def __init__(self, packets: pd.DataFrame | None) -> None:
        self.packets = packets
        self._flows: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray, float | None]] = {}
        self._index: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None

    def _of(self, flow: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, float | None] | None:
        if self.packets is None or self.packets.empty:
            return None
        if self._index is None:
            # the server's packets with a TSval, sorted by (flow, frame): one pass, then a
            # binary search per flow
            p = self.packets
            m = (
                (p["dir"] == "s2c").to_numpy(bool)
                & p["tsval"].notna().to_numpy(bool)
                & p["flow"].notna().to_numpy(bool)
            )
            fl = p["flow"].to_numpy(np.int64, na_value=-1)[m]
            fr = p["frame"].to_numpy(np.int64)[m]
            o = np.lexsort((fr, fl))
            self._index = (
                fl[o],
                fr[o],
                p["ts_ns"].to_numpy(np.int64)[m][o],
                p["tsval"].to_numpy(np.int64, na_value=-1)[m][o],
            )
        if flow not in self._flows:
            fl, fr, ts, tv = self._index
            a = int(np.searchsorted(fl, flow, side="left"))
            b = int(np.searchsorted(fl, flow, side="right"))
            fr, ts, tv = fr[a:b], ts[a:b], tv[a:b]
            self._flows[flow] = (fr, ts, tv, tsval_rate(ts, tv) if fr.shape[0] else None)
        return self._flows[flow]

    def held_ms(self, flow: int, frame: int, t0: int) -> float | None:
        got = self._of(flow)
        if got is None:
            return None
        fr, ts, tv, rate = got
        if rate is None:
            return None
        i = int(np.searchsorted(fr, frame))
        if i >= fr.shape[0] or fr[i] != frame:
            return None
        j = int(np.searchsorted(ts, t0, side="right")) - 1
        if j < 0 or j >= i:
            return None
        dv = (int(tv[i]) - int(tv[j])) & 0xFFFFFFFF
        if dv >= 0x80000000:
            return None
        sent = dv / rate
        return max(0.0, (int(ts[i]) - int(ts[j])) / 1e6 - sent - 1.0 / rate)


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
    packets: pd.DataFrame | None = None,
    unexplained_min_ms: float = UNEXPLAINED_MIN_MS,
) -> pd.DataFrame:
    """``server_legs`` supplies the capture ↔ server round trip (ms) of flows the flows
    table has none for (QUIC: from ACK timing, :func:`pcapkit.sessions.quic.server_leg_ms`);
    ``packets`` (the TCP timestamps) lets a residual wait be shown to be the server's."""
    rows: dict[str, list[Any]] = {
        c: [] for c in schema.columns("gaps") if c not in TWO_VANTAGE_COLUMNS
    }
    if messages.empty or requests.empty:
        return _frame(rows)
    ev = messages[messages["type"].isin(["event", "message"]) & messages["request"].notna()]
    legs = {
        int(r.flow): (None if pd.isna(r.server_leg_ms) else float(r.server_leg_ms))
        for r in itertuples(flows)
    }
    for f, ms in (server_legs or {}).items():
        if legs.get(f) is None:
            legs[f] = ms
    at_server = {int(r.flow) for r in itertuples(flows) if r.vantage == "server"}
    clock = _ServerClock(packets)
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
            unexplained = 0.0
            if server > unexplained_min_ms and flow not in at_server:
                # shown to be the server's only by its own clock: what the path held beyond
                # the findings, or all of it without timestamps, is unexplained
                held = None if fr[k] < 0 else clock.held_ms(flow, int(fr[k]), t0)
                unexplained = server if held is None else min(server, max(0.0, held - net))
                server -= unexplained
            shares = {
                "server": server,
                "path": path,
                "cadence": cadence,
                "unexplained": unexplained,
            }
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
            rows["unexplained_ms"].append(round(unexplained, 3))
            rows["cause"].append(cause)
            rows["findings"].append([f.kind for f in hits])
            rows["frames"].append(hits[0].frames if hits else [])
    return _frame(rows)


def _frame(rows: dict[str, list[Any]]) -> pd.DataFrame:
    n = len(rows["request"])
    if n == 0:  # the schema's empty table (a copy of one built once): the same dtypes
        return schema.frame("gaps", n=0)
    data: dict[str, Any] = dict(rows)
    for c in ("stream", "frame"):
        data[c] = pd.array(rows[c], dtype="Int64")
    return schema.frame("gaps", data, n)
