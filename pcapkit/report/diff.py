"""Before and after: did the fix help?  (``pcapkit diff BEFORE AFTER``, ``pcapkit.diff``)

Two captures of the same workload — before and after a change, or the two ends of one
run — are compared request by request and overall.

Requests are matched by ``x-request-id``, else by ``traceparent`` (both when present on
both sides and unique), else by method, authority and path in order of their start
(the k-th ``GET /v1/stream`` before with the k-th after).  For each matched pair: TTFB,
TTFT, the whole response (``response_ms``: the request's first byte to the response's
last), the p50/p95/max gap between events, the delivery rate (events/s — the tokens/s of
an LLM stream — and response body bytes/s from the response head to its last byte).

Connections without HTTP (or whose TLS could not be read) are compared by their
*turns*: a run of one side's new payload bytes answered by the other's; a turn's
``exchange_ms`` runs from the client's first byte of the run to the server's first byte
of the answer, as the capture point saw them (the wait an application protocol's request
sees, whatever the protocol).

Overall metrics are the median over the requests (matched ones when any matched), plus
handshakes, connections, resumptions and the cost of the findings.  Findings are paired
by kind in time order: the extra ones after ``appeared``, the extra ones before are
``gone``.

A metric changed when it moved by more than the noise band: ``noise_pct`` of its before
value and at least ``noise_ms`` (for times) — both settable.  The verdict is
``regressed`` if a judged metric got worse beyond the band, else ``improved`` if one got
better, else ``unchanged``.  Counts (connections, handshakes) are judged only when every
request matched both ways (the same workload); otherwise they are shown, not judged.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..rows import column_arrays, column_values, itertuples
from ..trace import Trace
from .gates import as_float
from .names import METRICS as METRICS  # re-exported

REQUEST_METRICS = (
    "ttfb_ms",
    "ttft_ms",
    "response_ms",
    "gap_p50_ms",
    "gap_p95_ms",
    "gap_max_ms",
    "events_per_s",
    "bytes_per_s",
)
VERDICTS = ("improved", "regressed", "unchanged")


def _median(values: Any) -> float | None:
    xs = [x for x in (as_float(v) for v in values) if x is not None]
    return float(np.median(xs)) if xs else None


def _float64(a: Any) -> tuple[np.ndarray, np.ndarray]:
    """(values, missing) of a column array as ``astype("Float64")`` holds them (missing
    values are NaN in ``values``)."""
    f = pd.array(a, dtype="Float64") if a.dtype != "Float64" else a
    return f.to_numpy(dtype=np.float64, na_value=np.nan), np.asarray(f.isna(), bool)


def request_metrics(requests: pd.DataFrame) -> pd.DataFrame:
    """The per-request metrics of a requests table (adds ``bytes_per_s``).

    The Float64 arithmetic is done on the columns' values and masks with numpy (pandas'
    masked operations are the same numpy float operations, with the masks or-ed): the
    same values and missing values, without a Series per step."""
    q = requests
    arrays = dict(zip(q.columns.tolist(), column_arrays(q), strict=True))
    last, last_na = _float64(arrays["last_byte_ts_ns"])
    resp, resp_na = _float64(arrays["response_ts_ns"])
    start, start_na = _float64(arrays["request_start_ts_ns"])
    body, body_na = _float64(arrays["response_body_bytes"])
    with np.errstate(all="ignore"):
        span = (last - resp) / 1e9
        bps = body / span
        took = (last - start) / 1e6
    bps_na = body_na | last_na | resp_na | ~(span > 0)  # .where(span > 0): NA elsewhere
    out: dict[str, Any] = {
        c: q[c] for c in ("request", "flow", "stream", "method", "authority", "path")
    }
    for c in REQUEST_METRICS:
        if c in arrays:
            out[c] = pd.array(arrays[c], dtype="Float64", copy=True)
    out["response_ms"] = pd.arrays.FloatingArray(took, last_na | start_na)
    out["bytes_per_s"] = pd.arrays.FloatingArray(bps, bps_na)
    cols = ["request", "flow", "stream", "method", "authority", "path", *REQUEST_METRICS]
    return pd.DataFrame({c: out[c] for c in cols}, index=q.index)  # one construction


def tcp_turns(trace: Trace) -> pd.DataFrame:
    """The turns of the TCP connections that carry no HTTP exchange: one row per client
    run of new payload answered by a server run (``flow``, ``turn``, ``request_ts_ns``,
    ``response_ts_ns``, ``exchange_ms``)."""
    cols = ["flow", "turn", "request_ts_ns", "response_ts_ns", "exchange_ms"]
    seg = trace.segments
    if len(seg) == 0:
        return pd.DataFrame({c: pd.Series(dtype="float64") for c in cols})
    http = set(trace.requests.flow.tolist())
    # numpy on the columns' arrays: the rows with new payload off the HTTP connections,
    # in (flow, ts_ns, frame) order (a stable lexsort, as sort_values(kind="stable"))
    a = dict(zip(seg.columns.tolist(), column_arrays(seg), strict=True))
    flow = np.asarray(a["flow"], np.int64)
    keep = (np.asarray(a["new_bytes"]) > 0) & ~np.isin(flow, list(http))
    ts = np.asarray(a["ts_ns"], np.int64)[keep]
    frame = np.asarray(a["frame"])[keep]
    c2s = np.asarray(a["dir"][keep] == "c2s", bool)
    flow = flow[keep]
    order = np.lexsort((frame, ts, flow))
    flow, c2s, ts = flow[order], c2s[order], ts[order]
    if len(flow) == 0:
        return pd.DataFrame({c: pd.Series(dtype="float64") for c in cols})
    start = np.ones(len(flow), bool)
    start[1:] = (flow[1:] != flow[:-1]) | (c2s[1:] != c2s[:-1])
    idx = np.flatnonzero(start)  # first segment of each run
    r_flow, r_c2s, r_ts = flow[idx], c2s[idx], ts[idx]
    # a client run followed, on the same connection, by a server run
    pair = r_c2s[:-1] & ~r_c2s[1:] & (r_flow[:-1] == r_flow[1:])
    i = np.flatnonzero(pair)
    t_flow = r_flow[i]  # sorted: a turn's number is its place in its flow's run
    first = np.ones(len(t_flow), bool)
    first[1:] = t_flow[1:] != t_flow[:-1]
    pos = np.arange(len(t_flow), dtype=np.int64)
    turn = pos - np.maximum.accumulate(np.where(first, pos, 0)) if len(t_flow) else pos
    return pd.DataFrame(
        {
            "flow": t_flow,
            "turn": turn,
            "request_ts_ns": r_ts[i],
            "response_ts_ns": r_ts[i + 1],
            "exchange_ms": (r_ts[i + 1] - r_ts[i]) / 1e6,
        }
    )


@dataclass
class Side:
    """What one capture says, reduced for the comparison."""

    path: str
    requests: pd.DataFrame
    full_requests: pd.DataFrame
    turns: pd.DataFrame
    findings: pd.DataFrame
    handshakes: pd.DataFrame  # flow, proto, handshake_ms, resumed
    connections: int

    @classmethod
    def of(cls, trace: Trace) -> Side:
        hs = []
        for proto, table in (("tls", trace.tls), ("quic", trace.quic)):
            if len(table) == 0:
                continue
            resumed = (
                table.resumption_accepted.fillna(False).astype(bool)
                if "resumption_accepted" in table
                else pd.Series(False, index=table.index)
            )
            hs.append(
                pd.DataFrame(
                    {
                        "flow": table.flow.to_numpy(),
                        "proto": proto,
                        "handshake_ms": table.handshake_ms.astype("Float64").to_numpy(),
                        "resumed": resumed.to_numpy(bool),
                    }
                )
            )
        handshakes = (
            pd.concat(hs, ignore_index=True)
            if hs
            else pd.DataFrame(columns=["flow", "proto", "handshake_ms", "resumed"])
        )
        f = trace.flows
        used = f[(f.c2s_bytes > 0) | (f.s2c_bytes > 0)]
        return cls(
            trace.path,
            request_metrics(trace.requests),
            trace.requests,
            tcp_turns(trace),
            trace.findings,
            handshakes,
            int(len(used)),
        )


def _missing(v: Any) -> bool:
    """What ``Series.notna()`` calls missing, of one value of a column."""
    return v is None or v is pd.NA or v is pd.NaT or (isinstance(v, float) and v != v)


def _unique_keys(q: pd.DataFrame, col: str, keep: set[int]) -> dict[Any, int]:
    """key → request of the requests in ``keep`` whose ``col`` is present, not empty and
    held by no other of them."""
    rows = [
        (v, r)
        for r, v in zip(q.request.tolist(), column_values(q[col]), strict=True)
        if r in keep and not _missing(v) and str(v) != ""
    ]
    seen = Counter(v for v, _ in rows)
    return {v: int(r) for v, r in rows if seen[v] == 1}


def _keyed(q: pd.DataFrame, keep: set[int]) -> dict[tuple[str, str, str], list[int]]:
    """(method, authority, path) → the requests in ``keep`` of that key, in order of their
    start (missing starts last), then of their number."""
    cols = ("request", "request_start_ts_ns", "method", "authority", "path")
    rows = [r for r in zip(*(column_values(q[c]) for c in cols), strict=True) if r[0] in keep]
    rows.sort(key=lambda r: (_missing(r[1]), 0 if _missing(r[1]) else r[1], r[0]))
    out: dict[tuple[str, str, str], list[int]] = {}
    for req, _, method, authority, path in rows:
        k = (str(method or ""), str(authority or ""), str(path or ""))
        out.setdefault(k, []).append(int(req))
    return out


def match_requests(a: pd.DataFrame, b: pd.DataFrame) -> list[tuple[int, int, str]]:
    """Pairs (request before, request after, matched by) of two requests tables."""
    pairs: list[tuple[int, int, str]] = []
    left = set(a.request.tolist())
    right = set(b.request.tolist())
    for col, how in (("request_id", "x-request-id"), ("traceparent", "traceparent")):
        ua, ub = _unique_keys(a, col, left), _unique_keys(b, col, right)
        for key, ra in ua.items():
            if key in ub:
                rb = ub[key]
                pairs.append((ra, rb, how))
                left.discard(ra)
                right.discard(rb)
    ka2, kb2 = _keyed(a, left), _keyed(b, right)
    for k, xs in ka2.items():
        for ra, rb in zip(xs, kb2.get(k, []), strict=False):
            pairs.append((ra, rb, "order"))
    return sorted(pairs)


def pair_findings(a: pd.DataFrame, b: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(appeared, gone): per kind, findings in time order paired one to one; the extra
    ones after appeared, the extra ones before are gone."""
    appeared, gone = [], []
    for kind in sorted(set(a.kind) | set(b.kind)):
        fa = a[a.kind == kind].sort_values("t_start_ns")
        fb = b[b.kind == kind].sort_values("t_start_ns")
        n = min(len(fa), len(fb))
        gone.append(fa.iloc[n:])
        appeared.append(fb.iloc[n:])
    cols = list(a.columns)
    return (
        pd.concat(appeared, ignore_index=True) if appeared else a.iloc[0:0][cols],
        pd.concat(gone, ignore_index=True) if gone else a.iloc[0:0][cols],
    )


def _costly(findings: pd.DataFrame) -> float:
    c = findings.cost_ms.astype("Float64").dropna()
    return float(c.sum()) if len(c) else 0.0


def _change(metric: str, before: float | None, after: float | None, pct: float, ms: float) -> str:
    lower_better, unit, _ = METRICS[metric]
    if before is None or after is None:
        return "not comparable"
    delta = after - before
    band = abs(before) * pct / 100.0
    if unit == "ms":
        band = max(band, ms)
    elif unit == "":
        band = max(band, 0.5)  # counts: at least one
    if abs(delta) <= band:
        return "unchanged"
    worse = delta > 0 if lower_better else delta < 0
    return "regressed" if worse else "improved"


@dataclass
class Diff:
    """The comparison of two captures (:func:`diff`)."""

    before: str
    after: str
    requests: pd.DataFrame  # one row per matched request pair, <metric>_before/_after
    unmatched_before: pd.DataFrame
    unmatched_after: pd.DataFrame
    metrics: pd.DataFrame  # metric, before, after, change_pct, change, judged
    appeared: pd.DataFrame  # findings only after
    gone: pd.DataFrame  # findings only before
    verdict: str
    noise_pct: float
    noise_ms: float
    notes: list[str] = field(default_factory=list)

    def regressions(self, pct: float, metrics: list[str] | None = None) -> pd.DataFrame:
        """The metrics (of ``metrics``, default the judged ones) that got worse by more
        than ``pct`` percent of their before value."""
        m = self.metrics
        rows = []
        for r in itertuples(m):
            if metrics is not None and r.metric not in metrics:
                continue
            if metrics is None and not r.judged:
                continue
            b, a = as_float(r.before), as_float(r.after)
            if b is None or a is None:
                continue
            lower_better = METRICS[r.metric][0]
            worse = (a - b) if lower_better else (b - a)
            if worse > 0 and (b == 0 or worse / abs(b) * 100.0 > pct):
                rows.append(r)
        return pd.DataFrame(rows, columns=m.columns)


def diff(
    before: Trace | str | os.PathLike[str],
    after: Trace | str | os.PathLike[str],
    *,
    noise_pct: float = 10.0,
    noise_ms: float = 1.0,
    keylog: str | None = None,
) -> Diff:
    """Compare two captures (paths or open traces): matched requests with their metrics
    before and after, overall metrics, findings that appeared or are gone, a verdict."""
    with _opened(before, keylog) as ta, _opened(after, keylog) as tb:
        a, b = Side.of(ta), Side.of(tb)
    pairs = match_requests(a.full_requests, b.full_requests)
    rows = []
    ma, mb = _by_request(a.requests), _by_request(b.requests)
    for ra, rb, how in pairs:
        x, y = ma[ra], mb[rb]
        row: dict[str, Any] = {
            "method": x.method,
            "authority": x.authority,
            "path": x.path,
            "matched_by": how,
            "request_before": ra,
            "request_after": rb,
            "flow_before": int(x.flow),
            "flow_after": int(y.flow),
        }
        for c in REQUEST_METRICS:
            row[f"{c}_before"] = as_float(getattr(x, c))
            row[f"{c}_after"] = as_float(getattr(y, c))
        rows.append(row)
    req_cols = [
        "method",
        "authority",
        "path",
        "matched_by",
        "request_before",
        "request_after",
        "flow_before",
        "flow_after",
    ] + [f"{c}_{s}" for c in REQUEST_METRICS for s in ("before", "after")]
    requests = pd.DataFrame(rows, columns=req_cols)
    done_a = {p[0] for p in pairs}
    done_b = {p[1] for p in pairs}
    un_a = a.requests[~a.requests.request.isin(list(done_a))]
    un_b = b.requests[~b.requests.request.isin(list(done_b))]
    same_workload = len(un_a) == 0 and len(un_b) == 0

    notes: list[str] = []
    values: dict[str, tuple[float | None, float | None]] = {}
    for c in REQUEST_METRICS:
        if pairs:
            values[c] = (_median(requests[f"{c}_before"]), _median(requests[f"{c}_after"]))
        else:
            values[c] = (_median(a.requests[c]), _median(b.requests[c]))
    if not pairs and (len(a.requests) or len(b.requests)):
        notes.append("no request matched: request metrics compare all requests of each side")
    values["exchange_ms"] = (_median(a.turns.exchange_ms), _median(b.turns.exchange_ms))
    values["handshake_ms"] = (
        _median(a.handshakes.handshake_ms),
        _median(b.handshakes.handshake_ms),
    )
    values["findings_cost_ms"] = (_costly(a.findings), _costly(b.findings))
    values["connections"] = (float(a.connections), float(b.connections))
    values["handshakes"] = (float(len(a.handshakes)), float(len(b.handshakes)))
    values["resumed_handshakes"] = (
        float(a.handshakes.resumed.sum()),
        float(b.handshakes.resumed.sum()),
    )
    rpc = []
    for s in (a, b):
        n_conn = s.full_requests.flow.nunique()
        rpc.append(len(s.full_requests) / n_conn if n_conn else None)
    values["requests_per_connection"] = (rpc[0], rpc[1])

    mrows = []
    for metric, (vb, va) in values.items():
        judged = METRICS[metric][2] == "always" or same_workload
        change = _change(metric, vb, va, noise_pct, noise_ms)
        pct = None if vb is None or va is None or vb == 0 else round((va - vb) / abs(vb) * 100.0, 1)
        mrows.append(
            {
                "metric": metric,
                "unit": METRICS[metric][1],
                "before": vb,
                "after": va,
                "change_pct": pct,
                "change": change,
                "judged": judged,
            }
        )
    metrics = pd.DataFrame(mrows)
    judged = metrics[metrics.judged]
    if (judged.change == "regressed").any():
        verdict = "regressed"
    elif (judged.change == "improved").any():
        verdict = "improved"
    else:
        verdict = "unchanged"
    appeared, gone = pair_findings(a.findings, b.findings)
    return Diff(
        a.path,
        b.path,
        requests,
        un_a,
        un_b,
        metrics,
        appeared,
        gone,
        verdict,
        noise_pct,
        noise_ms,
        notes,
    )


def _by_request(q: pd.DataFrame) -> dict[Any, Any]:
    """request → its row (``q.set_index("request").loc[request]``'s values)."""
    return {r.request: r for r in itertuples(q)}


@contextmanager
def _opened(x: Trace | str | os.PathLike[str], keylog: str | None) -> Iterator[Trace]:
    if isinstance(x, Trace):
        yield x
        return
    with ExitStack() as stack:
        t = stack.enter_context(Trace(x, keylog))
        yield t


def _finding_obj(r: Any) -> dict[str, Any]:
    return {
        "kind": r.kind,
        "severity": r.severity,
        "cost_ms": as_float(r.cost_ms),
        "flow": None if as_float(r.flow) is None else int(r.flow),
        "frames": [int(x) for x in r.frames],
        "explanation": r.explanation,
    }


def diff_json(d: Diff) -> dict[str, Any]:
    """The stable JSON of ``pcapkit diff --format json``."""
    from .json import to_jsonable

    reqs = []
    for r in d.requests.to_dict("records"):
        reqs.append({k: to_jsonable(v) for k, v in r.items()})
    return {
        "verdict": d.verdict,
        "before": d.before,
        "after": d.after,
        "noise": {"pct": d.noise_pct, "ms": d.noise_ms},
        "metrics": [
            {k: to_jsonable(v) for k, v in r.items()} for r in d.metrics.to_dict("records")
        ],
        "requests": reqs,
        "unmatched": {
            "before": [int(x) for x in d.unmatched_before.request],
            "after": [int(x) for x in d.unmatched_after.request],
        },
        "findings": {
            "appeared": [_finding_obj(r) for r in itertuples(d.appeared)],
            "gone": [_finding_obj(r) for r in itertuples(d.gone)],
        },
        "notes": d.notes,
    }


def _fmt(v: float | None, unit: str) -> str:
    if v is None:
        return "–"
    if unit == "ms":
        return f"{v:.1f} ms"
    if unit in ("1/s", "B/s"):
        return f"{v:,.1f} {unit}"
    return f"{v:g}"


def diff_text(d: Diff) -> str:
    """The comparison for people: verdict, metrics, requests, findings."""
    out = [f"before: {d.before}", f"after:  {d.after}", ""]
    out.append(
        f"{'metric':<24} {'before':>14} {'after':>14} {'change':>9}  "
        f"(noise band ±{d.noise_pct:g}%, ≥ {d.noise_ms:g} ms)"
    )
    for r in itertuples(d.metrics):
        if as_float(r.before) is None and as_float(r.after) is None:
            continue
        pct = "" if as_float(r.change_pct) is None else f"{r.change_pct:+.1f}%"
        mark = r.change if r.judged else f"{r.change}, not judged"
        out.append(
            f"{r.metric:<24} {_fmt(as_float(r.before), r.unit):>14} "
            f"{_fmt(as_float(r.after), r.unit):>14} {pct:>9}  {mark}"
        )
    if len(d.requests):
        out += ["", f"requests matched: {len(d.requests)}"]
        for r in itertuples(d.requests):
            ttft_b, ttft_a = as_float(r.ttft_ms_before), as_float(r.ttft_ms_after)
            gap_b, gap_a = as_float(r.gap_p95_ms_before), as_float(r.gap_p95_ms_after)
            out.append(
                f"  {r.method} {r.authority or ''}{r.path or ''} (by {r.matched_by}): "
                f"TTFT {_fmt(ttft_b, 'ms')} → {_fmt(ttft_a, 'ms')}, "
                f"gap p95 {_fmt(gap_b, 'ms')} → {_fmt(gap_a, 'ms')}"
            )
    if len(d.unmatched_before) or len(d.unmatched_after):
        out.append(
            f"requests not matched: {len(d.unmatched_before)} before, "
            f"{len(d.unmatched_after)} after"
        )
    for title, rows in (("findings gone", d.gone), ("findings appeared", d.appeared)):
        if len(rows):
            out += ["", f"{title}: {len(rows)}"]
            for r in itertuples(rows):
                cost = as_float(r.cost_ms)
                out.append(
                    f"  {r.kind} ({r.severity}) on flow {r.flow}"
                    + ("" if cost is None else f", {cost:.1f} ms")
                )
    for n in d.notes:
        out.append(f"note: {n}")
    out += ["", f"verdict: {d.verdict}"]
    return "\n".join(out) + "\n"
