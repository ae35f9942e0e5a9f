"""Helpers shared by the stall detectors (issue 22): :mod:`.syn`, :mod:`.rto`,
:mod:`.delivery` — what they all need to say about a wait, not a detector (no ``SPEC``).

* :func:`request_waiting` — the HTTP request that a connection-level wait delayed (the
  first request whose header block was not complete before the wait ended);
* :class:`TcpOptions` — TSval/TSecr and SACK counts of any frame (the per-flow packet
  arrays do not carry them);
* :func:`tsval_rate` — the sender's timestamp clock in ticks per ms (RFC 7323 §5.4: 1 ms
  to 1 s per tick), estimated from the flow itself (also used by :mod:`.gaps`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..rows import itertuples
from ..schema import is_missing as _na
from .context import DetectContext


class TcpOptions:
    """TSval, TSecr and the SACK block count of any frame (−1 / 0 when absent)."""

    def __init__(self, packets: pd.DataFrame) -> None:
        frame = packets["frame"].to_numpy(np.int64)
        # the packets table is in frame order: no permuted copies then
        order = None if bool((frame[1:] >= frame[:-1]).all()) else np.argsort(frame, kind="stable")

        def col(name: str, missing: int) -> np.ndarray:
            v = packets[name].to_numpy(np.int64, na_value=missing)
            return v if order is None else v[order]

        self.frame = frame if order is None else frame[order]
        self.tsval = col("tsval", -1)
        self.tsecr = col("tsecr", -1)
        self.sack_n = col("sack_n", 0)

    def _idx(self, frames: np.ndarray) -> np.ndarray:
        return np.searchsorted(self.frame, np.asarray(frames, np.int64))

    def ts(self, frames: np.ndarray) -> np.ndarray:
        return self.tsval[self._idx(frames)]

    def ecr(self, frames: np.ndarray) -> np.ndarray:
        return self.tsecr[self._idx(frames)]

    def sack(self, frames: np.ndarray) -> np.ndarray:
        return self.sack_n[self._idx(frames)]


def tcp_options(ctx: DetectContext) -> TcpOptions:
    return ctx.memo(("waits.TcpOptions",), lambda: TcpOptions(ctx.packets))  # type: ignore[no-any-return]


# TSval clocks seen in the wild, ticks per ms (RFC 7323 §5.4 allows 1 ms … 1 s per tick):
# Linux ≥ 4.13, Windows, macOS, FreeBSD 1 kHz; older Linux HZ 250/100; old Windows 10 Hz.
TS_CLOCKS = (0.01, 0.1, 0.25, 1.0)
TS_MIN_SPAN_NS = 250_000_000  # a slope over less is timer granularity and jitter
TS_SLOPE_SPAN_NS = 1_000_000_000  # over this much, the measured slope itself …
TS_RATE_RANGE = (0.005, 1100.0)  # … when it is a plausible clock (ticks per ms)
TS_CLOCK_FIT = 0.1  # under TS_SLOPE_SPAN_NS: a usual clock within this fraction


def tsval_rate(ts_ns: np.ndarray, tsval: np.ndarray) -> float | None:
    """Ticks per ms of a sender's TCP timestamp clock from its first and last packets with a
    TSval (capture time, TSval): the measured slope over a span of ≥ 1 s (a 200 Hz clock is
    neither 1 kHz nor 250 Hz); over 250 ms … 1 s only a usual clock (:data:`TS_CLOCKS`)
    within 10 %; None with fewer than two, a shorter span, or no fit."""
    ok = np.nonzero(tsval >= 0)[0]
    if ok.shape[0] < 2:
        return None
    a, b = int(ok[0]), int(ok[-1])
    span = int(ts_ns[b]) - int(ts_ns[a])
    if span < TS_MIN_SPAN_NS:
        return None
    dv = (int(tsval[b]) - int(tsval[a])) & 0xFFFFFFFF
    if dv == 0 or dv >= 0x80000000:
        return None
    rate = dv / (span / 1e6)
    if span >= TS_SLOPE_SPAN_NS and TS_RATE_RANGE[0] <= rate <= TS_RATE_RANGE[1]:
        return rate
    for c in TS_CLOCKS:
        if abs(rate - c) <= TS_CLOCK_FIT * c:
            return c
    return None


def request_waiting(ctx: DetectContext, f: int, t_end_ns: int) -> dict[str, Any] | None:
    """The first HTTP request of flow ``f`` whose header block was not complete at the
    capture point before ``t_end_ns`` (the request a wait ending then delayed), or the
    first request of the flow when all of them came later; None without requests."""
    r = ctx.requests
    if r is None or r.empty:
        return None
    rows = r[r["flow"] == f]
    if rows.empty:
        return None
    pick = None
    for q in itertuples(rows):
        ts = getattr(q, "request_start_ts_ns", None)
        if _na(ts) or int(ts) >= t_end_ns - 1 or pick is None:
            pick = q
            if not _na(ts) and int(ts) >= t_end_ns - 1:
                break
    if pick is None:
        return None
    frame = None if _na(pick.request_frame) else int(pick.request_frame)
    method = "" if _na(pick.method) else str(pick.method)
    path = "" if _na(pick.path) else str(pick.path)
    authority = "" if _na(pick.authority) else str(pick.authority)
    rid = getattr(pick, "request", None)  # requests.request: the join key of findings.request
    return {
        "id": None if _na(rid) else int(rid),
        "method": method,
        "path": path,
        "authority": authority,
        "frame": frame,
    }


def request_words(req: dict[str, Any] | None) -> str:
    if not req:
        return ""
    what = f"{req['method']} {req['path']}".strip() or "the request"
    where = f" (frame {req['frame']})" if req["frame"] is not None else ""
    return f"{what}{where}"
