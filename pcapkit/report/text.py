"""Readable per-flow summary for the terminal (``pcapkit analyze``)."""

from __future__ import annotations

import collections
import functools
import math
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ..detect.counterfactual import summary_line as hol_summary_line
from ..rows import column_arrays, itertuples
from ..schema import is_missing as _na
from ..trace import Trace
from .coverage import coverage, coverage_line, unread

# Flows beyond this many are summarised in one line unless --all is given.
DEFAULT_MAX_FLOWS = 50
MAX_ANOMALIES_SHOWN = 20
MAX_REQUESTS_SHOWN = 10  # per flow in `analyze`; `pcapkit requests` lists them all


def _b(n: int) -> str:
    if n < 10_000:
        return f"{n} B"
    if n < 10_000_000:
        return f"{n / 1000:.1f} kB"
    return f"{n / 1e6:.1f} MB"


def _ms(v: Any) -> str:
    if v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v)):
        return "?"
    return f"{float(v):.2f} ms" if v < 100 else f"{float(v):.0f} ms"


def _n(k: int, one: str, many: str | None = None) -> str:
    return f"{k} {one if k == 1 else (many or one + 's')}"


CONTENT_TYPES = {
    20: "change_cipher_spec",
    21: "alert",
    22: "handshake",
    23: "application_data",
    24: "heartbeat",
}


def _split(s: Any) -> str:
    """ " (network …, server …, flights …, client …)" when the handshake could be split."""
    vals = (s.handshake_network_ms, s.handshake_server_ms, s.handshake_flight_ms)
    if any(_na(v) for v in vals) or _na(s.handshake_client_ms):
        return ""
    return (
        f" (network {_ms(s.handshake_network_ms)}, server {_ms(s.handshake_server_ms)}, "
        f"flights {_ms(s.handshake_flight_ms)}, client {_ms(s.handshake_client_ms)})"
    )


def tls_line(s: Any) -> str:
    parts = [str(s.version) if not _na(s.version) else "TLS (version not seen)"]
    if not _na(s.cipher):
        parts.append(str(s.cipher))
    if not _na(s.sni):
        parts.append(f"SNI {s.sni}")
    if not _na(s.alpn):
        parts.append(f"ALPN {s.alpn}")
    if s.resumption_accepted:
        parts.append(f"resumed ({s.resumption_kind})")
    if s.early_data_offered:
        parts.append("0-RTT " + ("accepted" if s.early_data_accepted is True else "offered"))
    if not _na(s.handshake_ms):
        parts.append(f"handshake {_ms(s.handshake_ms)}{_split(s)}")
    dec = (
        f"decrypted ({s.decrypted_records} protected records of {s.records})"
        if s.decrypted
        else f"not decrypted: {s.why_not}"
    )
    parts.append(dec)
    line = "    " + ", ".join(parts)
    if not _na(s.pct_psh_end):
        line += (
            f"\n    records: {s.pct_psh_end:.0f}% end at a PSH segment, "
            f"{s.pct_single_record_units:.0f}% of push units hold one record"
        )
    return line


def finding_lines(f: Any) -> list[str]:
    """One finding: headline with cost and severity, explanation, evidence frames, remedy."""
    cost = "" if _na(f.cost_ms) else f", {_ms(f.cost_ms)}"
    how = {
        "lower_bound": " (at least)",
        "upper_bound": " (at most)",
        "estimate": " (estimated)",
    }.get(f.cost_method, "")
    stream = "" if _na(f.stream) else f" stream {f.stream}"
    direction = "" if _na(f.dir) else str(f.dir)
    lines = [f"    ▶ {f.kind} [{f.severity}{cost}{how}] {direction}{stream}".rstrip()]
    lines += _wrap(str(f.explanation), "      ")
    roles: dict[str, list[str]] = {}
    for e in f.evidence:
        roles.setdefault(e["role"].replace("_", " "), []).append(str(e["frame"]))
    ev = "; ".join(
        f"{role} {', '.join(fr[:6])}{' …' if len(fr) > 6 else ''}" for role, fr in roles.items()
    )
    lines += _wrap(f"frames: {ev}", "      ")
    lines += _wrap(f"remedy: {f.remedy}", "      ")
    if f.display_filter:
        lines.append(f"      wireshark: {f.display_filter}")
    return lines


def grouped_finding_lines(group: list[Any]) -> list[str]:
    """Findings of one kind on one connection direction: the costliest in full, the
    others one line each (their frames and cost), with one explanation and one remedy."""
    lines = finding_lines(group[0])
    if len(group) > 1:
        lines.insert(1, f"      {len(group)} times on this connection; the costliest:")
        more = []
        for f in group[1:]:
            cost = "" if _na(f.cost_ms) else f" {_ms(f.cost_ms)}"
            frames = ", ".join(str(x) for x in list(f.frames)[:6])
            more.append(f"frames {frames}{' …' if len(f.frames) > 6 else ''}{cost}")
        lines += _wrap("also: " + "; ".join(more), "      ")
    return lines


def _groups(findings: list[Any]) -> list[list[Any]]:
    """Findings (worst first) grouped by (kind, dir), groups in worst-first order."""
    out: dict[tuple[Any, Any], list[Any]] = {}
    for f in findings:
        out.setdefault((f.kind, f.dir), []).append(f)
    return list(out.values())


# the columns of a finding the summary, the verdict and the time lost read
_COST_COLUMNS = ("kind", "severity", "flow", "dir", "cost_ms", "t_end_ns")
_FLOW_NAME_COLUMNS = ("flow", "proto", "stream", "server_ip", "server_port")


@functools.lru_cache(maxsize=64)
def _row_type(fields: tuple[str, ...]) -> Any:
    return collections.namedtuple("Pandas", fields, rename=True)  # noqa: PYI024


def _text_values(a: Any) -> list[Any]:
    """What iterating a column (its array, :func:`pcapkit.rows.column_arrays`) yields, as
    :func:`pcapkit.rows.itertuples` takes it — a column of text at once (iterating an
    Arrow string array is a Python call per value): its str values, and its missing
    value (NaN, or pd.NA) where it has none."""
    if isinstance(a, np.ndarray) and a.dtype.kind in "biufcO":
        return a.tolist()  # type: ignore[no-any-return]
    if isinstance(a, pd.api.extensions.ExtensionArray) and isinstance(a.dtype, pd.StringDtype):
        na: Any = a.dtype.na_value
        return a.to_numpy(dtype=object, na_value=na).tolist()  # type: ignore[no-any-return]
    if isinstance(a, np.ndarray):  # pragma: no cover - pandas wraps datetime64 blocks
        return list(pd.array(a))
    return list(a)


def _rows(df: pd.DataFrame, names: Sequence[str] | None = None) -> Iterator[Any]:
    """``rows.itertuples(df)`` (of ``df[names]`` when given): the same namedtuples of the
    same values, text columns converted at once (:func:`_text_values`)."""
    if names is not None and not len(df):
        return iter(())
    fields = [str(c) for c in df.columns]
    arrays = column_arrays(df)
    if names is not None:
        where = {f: i for i, f in enumerate(fields)}
        arrays = [arrays[where[n]] for n in names]
        fields = list(names)
    if not arrays or len(fields) >= 255 or len(set(fields)) < len(fields):
        return itertuples(df if names is None else df[list(names)])
    return map(_row_type(tuple(fields)), *[_text_values(a) for a in arrays])


def summary_lines(findings: Any, flows: Any) -> list[str]:
    """The connections with findings, worst first: Wireshark's stream, endpoints, and the
    kinds found with their count and cost (overlapping waits counted once)."""
    if findings.empty:
        return []
    return _summary_lines(list(_rows(findings, _COST_COLUMNS)), flows)


def _summary_lines(findings: list[Any], flows: Any) -> list[str]:
    """:func:`summary_lines` of the finding rows (:data:`_COST_COLUMNS` at least)."""
    # the rows grouped by flow in order of first appearance, as groupby("flow",
    # sort=False) groups them
    groups: dict[int, list[Any]] = {}
    for f in findings:
        if not _na(f.flow):
            groups.setdefault(int(f.flow), []).append(f)
    if not groups:
        return []
    # the names of the flows with findings (the last row of a flow, as a dict of all
    # rows keeps it)
    named = flows[flows.flow.isin(list(groups))]
    by_flow = {int(r.flow): r for r in _rows(named, _FLOW_NAME_COLUMNS)}
    rows = []
    for flow, g in groups.items():
        r = by_flow[flow]
        kinds = []
        for k in dict.fromkeys(f.kind for f in g):
            of_k = [f for f in g if f.kind == k]
            costly = any(f.severity != "info" for f in of_k)
            kinds.append(f"{k} ×{len(of_k)}" + (f" ({_ms(_time_lost(of_k))})" if costly else ""))
        lost = _time_lost([f for f in g if f.severity != "info"])
        rows.append((lost, flow, r, kinds))
    rows.sort(key=lambda x: (-x[0], x[1]))
    out = ["findings by connection, worst first:"]
    for lost, flow, r, kinds in rows:
        out += _wrap(
            f"flow {flow} ({wireshark_name(r.proto, r.stream)}) {r.server_ip}:{r.server_port}: "
            f"{_ms(lost) if lost else 'no time lost'} — " + ", ".join(kinds),
            "  ",
        )
    return out


_WRAPPED_SPACE = re.compile(r"[\t\n\x0b\x0c\r]")


def _wrap(text: str, indent: str, width: int = 100) -> list[str]:
    # a line that fits: textwrap would give it back as it is (no whitespace it rewrites,
    # none at the end it drops)
    if (
        len(indent) + len(text) <= width
        and not text.endswith(" ")
        and not _WRAPPED_SPACE.search(text)
    ):
        return [indent + text]
    import textwrap

    return textwrap.wrap(
        text, width=width, initial_indent=indent, subsequent_indent=indent + "  "
    ) or [indent]


def time_lost_ms(findings: Any) -> float:
    """What the findings cost together, in ms: each finding's cost is the wait ending at its
    ``t_end_ns``; waits of one flow direction that overlap in time (a record held behind a
    hole that a tcp_hol_blocking finding also prices, a Nagle hold and the records it
    coalesced) are counted once, waits of different connections add up."""
    return _time_lost(_rows(findings, _COST_COLUMNS))


def _time_lost(findings: Iterable[Any]) -> float:
    """:func:`time_lost_ms` of finding rows (``rows.itertuples`` of the table)."""
    spans: dict[tuple[Any, Any], list[tuple[int, int]]] = {}
    for f in findings:
        if _na(f.cost_ms) or float(f.cost_ms) <= 0:
            continue
        end = int(f.t_end_ns)
        spans.setdefault((f.flow, f.dir), []).append((end - round(float(f.cost_ms) * 1e6), end))
    total = 0
    for iv in spans.values():
        iv.sort()
        lo, hi = iv[0]
        for a, b in iv[1:]:
            if a > hi:
                total += hi - lo
                lo, hi = a, b
            else:
                hi = max(hi, b)
        total += hi - lo
    return total / 1e6


def verdict(findings: Any, cov: dict[str, Any] | None = None) -> str:
    """One line for the whole capture: the findings that cost time by kind, and the time
    they cost together (:func:`time_lost_ms`: overlapping waits counted once); it says what
    could not be read (``cov``: :func:`pcapkit.report.coverage.coverage`) instead of a
    clean bill for it."""
    return _verdict(len(findings), _rows(findings, _COST_COLUMNS), cov)


def _verdict(n: int, findings: Iterable[Any], cov: dict[str, Any] | None) -> str:
    """:func:`verdict` of ``n`` finding rows (:data:`_COST_COLUMNS` at least)."""
    n_unread = 0 if cov is None else unread(cov)
    blind = (
        f"{n_unread} TLS/QUIC connection(s) could not be decrypted, so delays inside them "
        "(server think time, HTTP/2 or HTTP/3 stalls, event batching) cannot be seen: give "
        "their key log (--keylog, SSLKEYLOGFILE) to look inside"
        if n_unread
        else ""
    )
    if n == 0:
        if blind:
            return "verdict: no latency pathology found in what could be read; " + blind
        return "verdict: no latency pathology found"
    costly = [f for f in findings if f.severity != "info"]
    if not costly:
        return f"verdict: {n} informational finding(s), nothing that cost time" + (
            f"; {blind}" if blind else ""
        )
    of_kind: dict[Any, list[Any]] = {}
    for f in costly:
        of_kind.setdefault(f.kind, []).append(f)
    by_kind = sorted(
        ((k, len(fs), _time_lost(fs)) for k, fs in of_kind.items()),
        key=lambda x: -x[2],
    )
    parts = [f"{k} ({n}×, {_ms(c)})" for k, n, c in by_kind]
    worst = costly[0]
    line = f"verdict: {len(costly)} finding(s) cost time — " + ", ".join(parts)
    total = _time_lost(costly)
    if len(costly) > 1:
        line += f"; {_ms(total)} in all (overlapping waits on a connection counted once)"
    line += f"; worst: {worst.kind} on flow {worst.flow}, {_ms(worst.cost_ms)}"
    return line + (f"; {blind}" if blind else "")


def wireshark_name(proto: Any, stream: Any) -> str:
    """How Wireshark names a connection: ``tcp.stream 3`` / ``udp.stream 0``."""
    return f"{proto}.stream {stream}"


def flow_lines(r: Any, t0: int, tls: Any = None) -> list[str]:
    arrow = "→"
    dur = (int(r.last_ts_ns) - int(r.first_ts_ns)) / 1e6
    head = (
        f"flow {r.flow:<3} {wireshark_name(r.proto, r.stream)}  {r.client_ip}:{r.client_port} "
        f"{arrow} {r.server_ip}:{r.server_port}"
        f"   frames {r.first_frame}–{r.last_frame}, +{(int(r.first_ts_ns) - t0) / 1e6:.1f} ms, {_ms(dur)}"
    )
    lines = [head]
    c2s = f"c2s {_b(r.c2s_bytes)} in {r.c2s_packets} pkts"
    if r.c2s_missing:
        c2s += f" ({_b(r.c2s_missing)} never captured)"
    s2c = f"s2c {_b(r.s2c_bytes)} in {r.s2c_packets} pkts"
    if r.s2c_missing:
        s2c += f" ({_b(r.s2c_missing)} never captured)"
    lines.append(f"    {c2s};  {s2c}")
    if r.proto == "tcp":
        if r.handshake:
            opts = []
            if not _na(r.c_mss) or not _na(r.s_mss):
                opts.append(
                    f"MSS {'' if _na(r.c_mss) else r.c_mss}/{'' if _na(r.s_mss) else r.s_mss}"
                )
            opts.append(f"wscale {r.c_wscale}/{r.s_wscale}")
            if r.sack_permitted:
                opts.append("SACK")
            if r.timestamps:
                opts.append("timestamps")
            lines.append(
                f"    handshake RTT {_ms(r.rtt_ms)} (server leg {_ms(r.server_leg_ms)}, client leg "
                f"{_ms(r.client_leg_ms)}) → {r.vantage}-side capture; {', '.join(opts)}"
            )
        else:
            lines.append(f"    no handshake in the capture (roles from {r.roles_from})")
        extra = []
        if r.retransmissions:
            extra.append(f"{r.retransmissions} retransmissions")
        if r.out_of_order:
            extra.append(f"{r.out_of_order} out-of-order")
        if r.rst:
            extra.append("reset")
        elif r.fin:
            extra.append("closed (FIN)")
        if extra:
            lines.append("    " + ", ".join(extra))
    if tls is not None:
        lines.append(tls_line(tls))
    return lines


def quic_line(x: Any) -> str:
    """One QUIC connection (a row of Trace.quic)."""
    parts = [f"QUIC {x.version_name or x.version}"]
    if not _na(x.sni):
        parts.append(f"SNI {x.sni}")
    if not _na(x.alpn):
        parts.append(f"ALPN {x.alpn}")
    if not _na(x.handshake_ms):
        parts.append(f"handshake {_ms(x.handshake_ms)}{_split(x)}")
    if x.retry:
        parts.append("Retry")
    if x.decrypted:
        parts.append(f"decrypted ({x.packets} packets)")
    else:
        why = "" if _na(x.why_not) else f": {x.why_not}"
        parts.append(f"{x.undecrypted_packets} of {x.packets} packets not decrypted{why}")
    return "    " + ", ".join(parts)


def request_line(q: Any) -> str:
    """One HTTP exchange: what was asked, the answer, and its timeline."""
    where = f"{'' if _na(q.authority) else q.authority}{'' if _na(q.path) else q.path}"
    stream = "" if _na(q.stream) else f"[stream {q.stream}] "
    status = "no response" if _na(q.status) else str(q.status)
    ctype = "" if _na(q.content_type) else f" {str(q.content_type).split(';')[0]}"
    parts = [f"TTFB {_ms(q.ttfb_ms)}"]
    if not _na(q.events):
        parts.append(f"TTFT {_ms(q.ttft_ms)}")
        parts.append(_n(int(q.events), "event"))
        if not _na(q.gap_max_ms):
            parts.append(
                f"gaps p50 {_ms(q.gap_p50_ms)} / p95 {_ms(q.gap_p95_ms)} / max {_ms(q.gap_max_ms)}"
            )
    if not _na(q.response_body_bytes):
        parts.append(_b(int(q.response_body_bytes)))
    frames = f"frames {'?' if _na(q.request_frame) else q.request_frame}→"
    head = getattr(q, "response_head_frame", None)
    if not _na(head) and not _na(q.response_frame) and head != q.response_frame:
        frames += f"{head} (headers), {q.response_frame} (complete)"
    else:
        frames += "?" if _na(q.response_frame) else str(q.response_frame)
    done = "" if q.complete or _na(q.status) else ", incomplete"
    return (
        f"    {stream}{q.method or '?'} {where} → {status}{ctype}: "
        + ", ".join(parts)
        + f" ({frames}{done})"
    )


def gap_line(g: Any) -> str:
    """Why one streamed response waited (a row of Trace.gaps)."""
    what = "first event" if g.event == 0 else f"event {g.event + 1}"
    parts = []
    if g.network_ms > 0 and g.findings:
        frames = ", ".join(str(x) for x in g.frames)
        parts.append(f"{g.findings[0]} {_ms(g.network_ms)} (frames {frames})")
    if g.path_ms > 0:
        parts.append(f"path {_ms(g.path_ms)}")
    if g.cadence_ms > 0:
        parts.append(f"normal spacing {_ms(g.cadence_ms)}")
    parts.append(f"server {_ms(g.server_ms)}")
    if g.unexplained_ms > 0:
        parts.append(
            f"unexplained {_ms(g.unexplained_ms)} (no finding, not shown to be the server)"
        )
    return f"      {what} waited {_ms(g.gap_ms)} (frame {g.frame}): " + ", ".join(parts)


def requests_text(trace: Trace, flow: int | None = None) -> str:
    """The table of ``pcapkit requests``: one block per HTTP exchange."""
    r = trace.requests
    if flow is not None:
        r = r[r.flow == flow]
    if r.empty:
        return "no HTTP requests (HTTP/1.1 and HTTP/2 need cleartext or TLS keys)\n"
    out = []
    gaps: dict[int, list[Any]] = {}
    for g in itertuples(trace.gaps):
        gaps.setdefault(int(g.request), []).append(g)
    for i, q in zip(r.index.tolist(), itertuples(r), strict=True):
        out.append(f"flow {q.flow} {q.protocol}")
        out.append(request_line(q))
        for g in gaps.get(i, []):
            out.append(gap_line(g))
        extra = [
            f"{k} {getattr(q, k)}"
            for k in ("request_id", "traceparent", "retry_after", "ratelimit", "content_encoding")
            if not _na(getattr(q, k))
        ]
        if extra:
            out.append("      " + "; ".join(extra))
    return "\n".join(out) + "\n"


def analysis_text(
    trace: Trace,
    *,
    max_flows: int | None = DEFAULT_MAX_FLOWS,
    findings: Any = None,
    only_flows: set[int] | None = None,
) -> str:
    """The report of ``pcapkit analyze``: header, a summary of the connections with
    findings, each connection (limited to ``only_flows`` when given) with its findings
    grouped by kind, coverage, verdict, anomalies."""
    cap = trace.capture_summary()
    flows = trace.flows
    anomalies = trace.anomalies
    out = [
        f"{cap['path']}: {cap['format']}{' (gzip)' if cap['compressed'] else ''}, {cap['frames']} frames, "
        f"{_ms(cap['duration_ms'])}, {_n(len(flows), 'flow')} "
        f"({int((flows.proto == 'tcp').sum())} TCP, {int((flows.proto == 'udp').sum())} UDP), "
        f"{_n(len(anomalies), 'anomaly', 'anomalies')}"
    ]
    if trace.key_sources:
        out.append(f"  keys from: {'; '.join(trace.key_sources)}")
    t0 = cap["first_ts_ns"] or 0
    findings = trace.findings if findings is None else findings
    # what the summary, the verdict and the grouping read, once; the whole rows only of
    # the findings shown (on a listed connection, or on none)
    costs = list(_rows(findings, _COST_COLUMNS))
    summary = _summary_lines(costs, flows) if costs else []
    if summary:
        out.append("")
        out.extend(summary)
    listed = flows if only_flows is None else flows[flows.flow.isin(sorted(only_flows))]
    shown = listed if max_flows is None else listed.head(max_flows)
    shown_flows = shown.flow.tolist()
    tls_rows, quic_rows = trace.tls, trace.quic
    tls = {int(x.flow): x for x in _rows(tls_rows[tls_rows.flow.isin(shown_flows)])}
    quic = {int(x.flow): x for x in _rows(quic_rows[quic_rows.flow.isin(shown_flows)])}
    reqs: dict[int, list[Any]] = {}
    for i, q in enumerate(itertuples(trace.requests)):
        reqs.setdefault(int(q.flow), []).append((i, q))
    gaps: dict[int, list[Any]] = {}
    for g in itertuples(trace.gaps):
        gaps.setdefault(int(g.request), []).append(g)
    hol: dict[int, list[Any]] = {}  # per connection: what QUIC saved / would have saved
    for h in itertuples(trace.hol_counterfactual):
        hol.setdefault(int(h.flow), []).append(h)
    per_flow: dict[int, list[Any]] = {}
    wanted = {int(f) for f in shown_flows}
    keep = [
        i for i, f in enumerate(costs) if _na(f.flow) or int(f.flow) in wanted
    ]  # in table order: each flow's findings in the order itertuples gives them
    for fnd in _rows(findings.iloc[keep]):
        per_flow.setdefault(-1 if _na(fnd.flow) else int(fnd.flow), []).append(fnd)
    for r in itertuples(shown):
        out.append("")
        out.extend(flow_lines(r, t0, tls.get(int(r.flow))))
        if int(r.flow) in quic:
            out.append(quic_line(quic[int(r.flow)]))
        flow_reqs = reqs.get(int(r.flow), [])
        for i, q in flow_reqs[:MAX_REQUESTS_SHOWN]:
            out.append(request_line(q))
            out.extend(gap_line(g) for g in gaps.get(i, []))
        if len(flow_reqs) > MAX_REQUESTS_SHOWN:
            out.append(
                f"    … {len(flow_reqs) - MAX_REQUESTS_SHOWN} more requests (pcapkit requests)"
            )
        for group in _groups(per_flow.get(int(r.flow), [])):
            out.extend(grouped_finding_lines(group))
        for h in hol.get(int(r.flow), []):
            out.extend(_wrap(hol_summary_line(h), "    "))
    for group in _groups(per_flow.get(-1, [])):
        out.append("")
        out.extend(grouped_finding_lines(group))
    if len(shown) < len(listed):
        out.append("")
        out.append(f"… {len(listed) - len(shown)} more flows (use --all, or --format json)")
    cov = coverage(trace)
    out.append("")
    out.append(coverage_line(cov))
    out.append(_verdict(len(findings), costs, cov))
    if len(anomalies):
        out.append("")
        out.append(f"anomalies ({len(anomalies)}):")
        for a in itertuples(anomalies.head(MAX_ANOMALIES_SHOWN)):
            where = f"frame {a.frame}" if not _na(a.frame) else "file"
            out.append(f"  {a.name:<26} {where:<12} {a.detail}")
        if len(anomalies) > MAX_ANOMALIES_SHOWN:
            out.append(f"  … {len(anomalies) - MAX_ANOMALIES_SHOWN} more (use --format json)")
    return "\n".join(out) + "\n"


def records_text(trace: Trace, flow: int | None = None) -> str:
    """The alignment table of ``pcapkit records``: one line per TLS record (the type column
    as wide as its longest name: names are never cut)."""
    r = trace.records
    if flow is not None:
        r = r[r.flow == flow]
    if r.empty:
        return "no TLS records\n"
    rows = []
    for x in itertuples(r):
        ct = CONTENT_TYPES.get(int(x.content_type), str(x.content_type))
        rows.append((x, str(x.handshake) if x.handshake else ct))
    w = max(17, *(len(ct) for _, ct in rows))
    head = (
        f"{'flow':>4} {'dir':<3} {'frames':>11} {'offset':>9} {'len':>6} {'type':<{w}} "
        f"{'plain':>6} {'segs':>4} {'psh':>3} {'unit':>5} {'n/u':>3}  status"
    )
    out = [head]
    for x, ct in rows:
        frames = (
            f"{x.first_frame}"
            if x.first_frame == x.last_frame
            else f"{x.first_frame}-{x.last_frame}"
        )
        plain = "" if _na(x.plaintext_len) else str(x.plaintext_len)
        out.append(
            f"{x.flow:>4} {x.dir:<3} {frames:>11} {x.offset:>9} {x.length:>6} {ct:<{w}} "
            f"{plain:>6} {x.segments:>4} {'yes' if x.psh_end else 'no':>3} {x.push_unit:>5} "
            f"{x.records_in_unit:>3}  {x.status}"
            + (" (retransmitted)" if x.retransmitted else "")
            + (f" ({x.missing_bytes} B missing)" if x.missing_bytes else "")
        )
    return "\n".join(out) + "\n"


def thresholds_text(rows: list[Any]) -> str:
    """``pcapkit thresholds``: one block per threshold (name = default unit, range, source)."""
    out = []
    for r in rows:
        hi = "" if r.maximum is None else f"{r.maximum:g}"
        rng = f"[{r.minimum:g}, {hi or '∞'}]"
        out.append(f"{r.name} = {r.default} {r.unit}  {rng}")
        out.extend(_wrap(r.source, "    "))
    return "\n".join(out) + "\n"


_SEVERITY_STYLE = {
    "high": {"fg": "red", "bold": True},
    "medium": {"fg": "yellow", "bold": True},
    "low": {"fg": "cyan"},
    "info": {"dim": True},
}
_HEADLINE = re.compile(r"^(\s*▶ )(\S+)( \[)(info|low|medium|high)(.*)$")


def colorize(text: str) -> str:
    """The report with finding headlines (kind bold, severity by colour) and the verdict
    styled (ANSI; the caller decides whether the output is a terminal)."""
    import click

    out = []
    for line in text.split("\n"):
        m = _HEADLINE.match(line)
        if m:
            line = (
                m.group(1)
                + click.style(m.group(2), bold=True)
                + m.group(3)
                + click.style(m.group(4), **_SEVERITY_STYLE[m.group(4)])  # type: ignore[arg-type]
                + m.group(5)
            )
        elif line.startswith("verdict:"):
            line = click.style(line, bold=True)
        out.append(line)
    return "\n".join(out)
