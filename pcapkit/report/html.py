"""The HTML report of ``pcapkit report CAPTURE -o report.html`` (and ``pcapkit analyze
--format html``): one self-contained file that works offline.

* Summary (capture facts, what could be read) and the verdict, the findings worst first —
  each with its evidence frames and their roles, explanation, remedy, the checks it passed
  and a copy-able Wireshark display filter — then one card per connection with its TLS /
  QUIC session, its requests and its charts (:mod:`pcapkit.plot`: the token timeline of
  each request a finding delayed or that streamed events, time–sequence graph and
  record↔segment strip of the server's direction, stream waterfall of an HTTP/2 or
  HTTP/3 connection, handshake ladder).
* Charts are SVG drawn in the page by ~100 lines (8 KB) of inline JavaScript from the
  :class:`pcapkit.plot.Chart` data embedded as JSON (no library, no CDN): zoom with the
  wheel (shift: the y axis), drag to pan, double-click to reset, hover for the frame
  numbers.  One SVG element per mark, so a chart has as many marks as its table has rows
  — until a chart passes ``max_marks`` in all: then each layer keeps a proportional share
  of evenly spaced rows (:func:`pcapkit.plot.fit`; the chart says so under it).
* Big captures: cards for the ``max_connections`` connections with the costliest
  findings first, then the busiest; token timelines for ``max_requests`` requests; the
  ``max_findings`` worst findings in full, the others one line each (kind, cost, flow,
  frames, display filter).
* Everything from a capture is attacker-controlled.  Text goes through
  :func:`html.escape` (quotes too: every attribute is quoted), the JSON of the charts has
  ``<``, ``>``, ``&`` and U+2028/9 as ``\\u`` escapes (it cannot close its ``<script>``),
  the script builds the charts with ``textContent`` and ``createElementNS`` only, no
  capture string ever becomes a URL, and a Content-Security-Policy lets only this page's
  own script run (defence in depth: an escaping bug would still not execute).
"""

from __future__ import annotations

import html
import json
import math
import secrets
from typing import Any

import numpy as np
import pandas as pd

from .. import plot
from ..detect.counterfactual import summary_line as hol_summary_line
from ..trace import Trace
from .coverage import coverage, coverage_line
from .escape import printable
from .text import verdict

MAX_CONNECTIONS = 50  # cards beyond this are listed by name only (a card is ~5–50 KB)
MAX_REQUESTS = 20  # token timelines drawn (requests with findings first, then streamed ones)
MAX_MARKS = 1000  # per chart in the page (~100 bytes each: 1000 marks ≈ 100 KB of JSON)
MAX_REQUEST_ROWS = 100  # rows of a card's request table (pcapkit requests has them all)
MAX_FINDINGS = 200  # shown in full (worst first); the rest as one line each with the filter


def esc(v: Any) -> str:
    """Text from anywhere (a capture, above all) as HTML text or a quoted attribute value;
    terminal controls as visible escapes too."""
    if v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v)):
        return ""
    return html.escape(printable(str(v)), quote=True)


def json_for_script(doc: Any) -> str:
    """JSON that cannot end its ``<script type="application/json">`` element or start a
    comment or CDATA in it (HTML §4.12.1.3)."""
    s = json.dumps(doc, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return (
        s.replace("&", "\\u0026")
        .replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def _num(a: np.ndarray | None) -> list[float | None] | None:
    if a is None:
        return None
    out: list[float | None] = []
    for v in np.asarray(a, dtype=float).tolist():
        out.append(None if math.isnan(v) or math.isinf(v) else round(v, 3))
    return out


def chart_json(ch: plot.Chart, cid: str) -> dict[str, Any]:
    return {
        "id": cid,
        "kind": ch.kind,
        "title": ch.title,
        "xlabel": ch.xlabel,
        "ylabel": ch.ylabel,
        "yticks": [[p, t] for p, t in ch.yticks],
        "invert_y": ch.invert_y,
        "notes": ch.notes,
        "layers": [
            {
                "name": ly.name,
                "kind": ly.kind,
                "marker": ly.marker,
                "legend": ly.legend,
                "total": ly.total,
                "scale": ly.scale,
                "x": _num(ly.x),
                "y": _num(ly.y),
                "x2": _num(ly.x2),
                "y2": _num(ly.y2),
                "color": ly.color,
                "frames": [[int(f) for f in fr] for fr in ly.frames],
                "labels": [printable(str(s)) for s in ly.labels],
            }
            for ly in ch.layers
        ],
    }


def _ms(v: Any) -> str:
    return "" if v is None or pd.isna(v) else f"{float(v):.1f} ms"


def _bytes(n: Any) -> str:
    n = int(n)
    for unit, k in (("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= k:
            return f"{n / k:.1f} {unit}"
    return f"{n} B"


def _pick_flows(trace: Trace, limit: int) -> list[int]:
    fl = trace.flows
    if fl.empty:
        return []
    f = trace.findings
    cost = (
        f.groupby(f["flow"].astype("Int64"))["cost_ms"].sum() if len(f) else pd.Series(dtype=float)
    )
    score = pd.DataFrame(
        {
            "flow": fl["flow"],
            "cost": fl["flow"].map(cost).astype(float).fillna(0.0),
            "bytes": fl["c2s_bytes"] + fl["s2c_bytes"],
        }
    ).sort_values(["cost", "bytes", "flow"], ascending=[False, False, True])
    return [int(x) for x in score["flow"].head(limit)]


def _charts_for_flow(
    trace: Trace, flow: int, requests: set[int], max_marks: int
) -> list[plot.Chart]:
    out: list[plot.Chart] = []
    keep = max_marks
    max_marks = plot.MAX_MARKS  # per layer while building; the chart's budget is applied below
    fl = trace.flows.set_index("flow").loc[flow]
    q = trace.requests
    for r in q[q["flow"] == flow]["request"]:
        if int(r) in requests:
            ch = plot.token_timeline_chart(trace, int(r), max_marks=max_marks)
            if len(ch.layer("events")):
                out.append(ch)
    if fl["proto"] == "tcp" and int(fl["s2c_bytes"]) > 0:
        out.append(plot.time_sequence_chart(trace, flow, "s2c", max_marks=max_marks))
        if (trace.records["flow"] == flow).any():
            out.append(plot.alignment_strip_chart(trace, flow, "s2c", max_marks=max_marks))
    if len(plot.stream_frames(trace, flow)):
        out.append(plot.stream_waterfall_chart(trace, flow, max_marks=max_marks))
    hs = plot.handshake_ladder_chart(trace, flow)
    if hs.has("arrows"):
        out.append(hs)
    return [plot.fit(ch, keep) for ch in out]


def _finding_html(i: int, f: Any, t0: int) -> str:
    ev = f.evidence if isinstance(f.evidence, list) else []
    ev_rows = "".join(
        f'<li><span class="frame">frame {int(e["frame"])}</span> {esc(e.get("role", ""))}'
        + (
            f" <span class=dim>+{(int(e['ts_ns']) - t0) / 1e6:.3f} ms</span>"
            if e.get("ts_ns") is not None
            else ""
        )
        + "</li>"
        for e in ev
        if "frame" in e
    )
    checks = f.checks if isinstance(f.checks, list) else []
    chk = "".join(f"<li>{esc(c)}</li>" for c in checks)
    flow = "" if pd.isna(f.flow) else int(f.flow)
    stream = "" if pd.isna(f.stream) else f", stream {int(f.stream)}"
    where = f'<a href="#flow-{flow}">flow {flow}</a>{stream}' if flow != "" else "capture"
    return (
        f'<section class="finding sev-{esc(f.severity)}" id="finding-{i}" data-kind="{esc(f.kind)}">'
        f'<h3><span class="kind">{esc(f.kind)}</span> <span class="sev">{esc(f.severity)}</span> '
        f'<span class="cost">{esc(_ms(f.cost_ms))}</span> <span class="where">{where} '
        f"{esc(f.dir)}</span></h3>"
        f'<p class="explanation">{esc(f.explanation)}</p>'
        f'<p class="remedy"><b>Remedy:</b> {esc(f.remedy)}</p>'
        f'<div class="filterbox"><label>Wireshark display filter</label>'
        f'<input class="filter" readonly value="{esc(f.display_filter)}">'
        f'<button type="button" class="copy">copy</button></div>'
        f"<details><summary>evidence: {len(ev)} frame(s); {len(checks)} check(s)</summary>"
        f'<ul class="evidence">{ev_rows}</ul><ul class="checks">{chk}</ul></details>'
        "</section>"
    )


def _finding_line(i: int, f: Any) -> str:
    flow = "" if pd.isna(f.flow) else int(f.flow)
    where = f'<a href="#flow-{flow}">flow {flow}</a>' if flow != "" else "capture"
    frames = " ".join(str(int(x)) for x in (f.frames if isinstance(f.frames, list) else []))
    return (
        f'<section class="finding brief sev-{esc(f.severity)}" id="finding-{i}" '
        f'data-kind="{esc(f.kind)}"><span class="kind">{esc(f.kind)}</span> '
        f'<span class="sev">{esc(f.severity)}</span> <span class="cost">{esc(_ms(f.cost_ms))}</span> '
        f"{where} {esc(f.dir)} · frames {esc(frames)} "
        f'<input class="filter" readonly value="{esc(f.display_filter)}">'
        '<button type="button" class="copy">copy</button></section>'
    )


def requests_html(q: pd.DataFrame, limit: int = MAX_REQUEST_ROWS) -> str:
    if q.empty:
        return ""
    more = len(q) - limit
    q = q.head(limit)
    rows = "".join(
        "<tr>"
        f"<td>{int(r.request)}</td><td>{esc(r.protocol)}</td>"
        f"<td>{'' if pd.isna(r.stream) else int(r.stream)}</td>"
        f"<td>{esc(r.method)}</td><td class=host>{esc(r.authority)}</td>"
        f"<td class=path>{esc(r.path)}</td>"
        f"<td>{'' if pd.isna(r.status) else int(r.status)}</td>"
        f"<td>{esc(_ms(r.ttfb_ms))}</td><td>{esc(_ms(r.ttft_ms))}</td>"
        f"<td>{'' if pd.isna(r.events) else int(r.events)}</td>"
        f"<td>{esc(_ms(r.gap_max_ms))}</td>"
        "</tr>"
        for r in q.itertuples()
    )
    return (
        '<table class="requests"><thead><tr><th>req</th><th>proto</th><th>stream</th>'
        "<th>method</th><th>authority</th><th>path</th><th>status</th><th>TTFB</th>"
        "<th>TTFT</th><th>events</th><th>max gap</th></tr></thead>"
        f"<tbody>{rows}</tbody></table>"
        + (
            f'<p class="more">{more} more request(s) on this connection: '
            "<code>pcapkit requests --flow N</code> lists them all.</p>"
            if more > 0
            else ""
        )
    )


def _session_html(trace: Trace, flow: int) -> str:
    out = []
    t = trace.tls[trace.tls["flow"] == flow]
    for s in t.itertuples():
        version = "" if pd.isna(s.version) else str(s.version)
        if not version.startswith(("TLS", "SSL")):
            version = f"TLS {version}".rstrip()
        parts = [f"{esc(version)} {esc(s.cipher)}".rstrip()]
        if not pd.isna(s.sni) and s.sni:
            parts.append(f'SNI <span class="sni">{esc(s.sni)}</span>')
        if not pd.isna(s.alpn) and s.alpn:
            parts.append(f"ALPN {esc(s.alpn)}")
        if not pd.isna(s.handshake_ms):
            parts.append(f"handshake {esc(_ms(s.handshake_ms))}")
        parts.append("decrypted" if s.decrypted else f"not decrypted ({esc(s.why_not)})")
        out.append(f'<p class="session">{" · ".join(parts)}</p>')
    qq = trace.quic[trace.quic["flow"] == flow] if len(trace.quic) else trace.quic
    for s in qq.itertuples():
        out.append(
            f'<p class="session">QUIC {esc(getattr(s, "version", ""))} · SNI '
            f'<span class="sni">{esc(getattr(s, "sni", ""))}</span> · ALPN '
            f"{esc(getattr(s, 'alpn', ''))} · "
            f"{'decrypted' if getattr(s, 'decrypted', False) else 'not decrypted'}</p>"
        )
    hol = trace.hol_counterfactual
    for h in hol[hol["flow"] == flow].itertuples(index=False):  # what QUIC saved (§11.7)
        out.append(f'<p class="session">{esc(hol_summary_line(h))}</p>')
    return "".join(out)


def analysis_html(
    trace: Trace,
    *,
    max_connections: int = MAX_CONNECTIONS,
    max_requests: int = MAX_REQUESTS,
    max_marks: int = MAX_MARKS,
    max_findings: int = MAX_FINDINGS,
    findings: pd.DataFrame | None = None,
    only_flows: set[int] | None = None,
) -> str:
    """The whole report as one HTML document (str): ``findings`` (default: all of
    ``trace.findings``, e.g. narrowed as ``pcapkit analyze`` narrows them) and cards for
    ``only_flows`` when given."""
    summ = trace.capture_summary()
    cov = coverage(trace)
    if findings is None:
        findings = trace.findings
    t0 = int(summ["first_ts_ns"] or 0)
    fl = trace.flows
    shown = _pick_flows(trace, max_connections)
    if only_flows is not None:
        shown = [f for f in shown if f in only_flows] + sorted(
            f for f in only_flows if f not in shown and f in set(fl["flow"])
        )
    q = trace.requests
    fr = findings["request"].dropna().astype(int).tolist() if len(findings) else []
    streamed = q[q["events"].fillna(0).astype(int) > 0]["request"].astype(int).tolist()
    # token timelines: the requests findings delayed, then the streamed ones (SSE, gRPC)
    flow_of = dict(zip(q["request"].astype(int), q["flow"].astype(int), strict=True))
    shown_set = set(shown)
    want: dict[int, None] = {}
    for r in [*fr, *streamed]:
        if len(want) >= max_requests:
            break
        if r in flow_of and flow_of[r] in shown_set:
            want[r] = None
    req_set = set(want)

    charts: list[dict[str, Any]] = []
    cards = []
    for flow in shown:
        f = fl.set_index("flow").loc[flow]
        chs = _charts_for_flow(trace, flow, req_set, max_marks)
        figs = []
        for ch in chs:
            cid = f"c{len(charts)}"
            charts.append(chart_json(ch, cid))
            figs.append(
                f'<figure class="chart" id="{cid}" data-kind="{esc(ch.kind)}" data-flow="{flow}">'
                f"<figcaption>{esc(ch.title)}</figcaption>"
                '<div class="plot"></div><div class="legend"></div><div class="notes"></div>'
                "</figure>"
            )
        nf = (
            int(findings["flow"].astype("Int64").eq(flow).fillna(False).sum())
            if len(findings)
            else 0
        )
        cards.append(
            f'<section class="conn" id="flow-{flow}" data-flow="{flow}">'
            f"<h3>flow {flow} · {esc(f['proto'])}.stream {int(f['stream'])} · "
            f"<span class=addr>{esc(f['client_ip'])}:{int(f['client_port'])} → "
            f"{esc(f['server_ip'])}:{int(f['server_port'])}</span></h3>"
            f'<p class="facts">c2s {_bytes(f["c2s_bytes"])} in {int(f["c2s_packets"])} pkts · '
            f"s2c {_bytes(f['s2c_bytes'])} in {int(f['s2c_packets'])} pkts · RTT "
            f"{esc(_ms(f['rtt_ms']))} · vantage {esc(f['vantage'])} · "
            f"{int(f['retransmissions'])} retransmission(s) · {nf} finding(s)</p>"
            + _session_html(trace, flow)
            + requests_html(q[q["flow"] == flow])
            + "".join(figs)
            + "</section>"
        )
    hidden = len(fl) - len(shown) if only_flows is None else 0
    more = (
        f'<p class="more">{hidden} more connection(s) without cards (fewest findings and '
        "bytes); <code>pcapkit analyze --flow N</code> or "
        "<code>pcapkit report --max-connections</code> shows them.</p>"
        if hidden > 0
        else ""
    )
    v = verdict(findings, cov)
    nonce = secrets.token_urlsafe(16)
    find_html = "".join(
        _finding_html(i, f, t0) if i < max_findings else _finding_line(i, f)
        for i, f in enumerate(findings.itertuples())
    )
    if len(findings) > max_findings:
        find_html = find_html.replace(
            '<section class="finding brief',
            f'<p class="more">{len(findings) - max_findings} more finding(s), one line each '
            "(the explanation and remedy of each kind are above):</p>"
            '<section class="finding brief',
            1,
        )
    title = f"pcapkit report — {summ['path']}"
    facts = (
        f"{summ['frames']} frames · {summ['duration_ms']:.1f} ms · {summ['flows']} flows · "
        f"{summ['tcp_packets']} TCP / {summ['udp_packets']} UDP packets · "
        f"{summ['anomalies']} anomalies · {len(findings)} findings"
    )
    return (
        "<!doctype html>\n<html lang=en><head><meta charset=utf-8>"
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        f"style-src 'unsafe-inline'; script-src 'nonce-{nonce}'; img-src data:; "
        "base-uri 'none'; form-action 'none'\">"
        '<meta name=viewport content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{CSS}</style></head><body>"
        f'<header><h1>pcapkit report</h1><p class="file">{esc(summ["path"])}</p>'
        f'<p class="facts">{esc(facts)}</p>'
        f'<p class="coverage">{esc(coverage_line(cov))}</p>'
        f'<p class="verdict" id="verdict">{esc(v)}</p></header>'
        f'<nav><a href="#findings">findings ({len(findings)})</a> · '
        f'<a href="#connections">connections ({len(shown)} of {len(fl)})</a></nav>'
        f'<h2 id="findings">Findings</h2>'
        + (find_html or '<p class="none">No finding.</p>')
        + f'<h2 id="connections">Connections</h2>{"".join(cards)}{more}'
        + '<div id="tip" role="tooltip" hidden></div>'
        + f'<script type="application/json" id="pcapkit-charts">{json_for_script(charts)}</script>'
        + f'<script nonce="{nonce}">{JS}</script></body></html>\n'
    )


CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1100px;padding:0 16px 40px;color:#212121}
header{border-bottom:2px solid #e0e0e0;margin-bottom:8px}h1{margin:12px 0 0}
.file{font-family:monospace;color:#555;word-break:break-all}.verdict{font-weight:600;font-size:15px}
.finding{border-left:5px solid #9e9e9e;background:#fafafa;margin:10px 0;padding:6px 12px}
.sev-high{border-color:#c62828}.sev-medium{border-color:#ef6c00}.sev-low{border-color:#f9a825}
.finding h3{margin:4px 0;font-size:15px}.brief{margin:2px 0;padding:2px 8px;font-size:12px;display:flex;gap:6px;align-items:center}.kind{font-family:monospace}.sev{font-weight:400;
text-transform:uppercase;font-size:11px;background:#eee;padding:1px 5px;border-radius:3px}
.cost{color:#c62828}.where{font-weight:400;color:#555}
.filterbox{display:flex;gap:6px;align-items:center;margin:4px 0}.filterbox label{color:#555;font-size:12px}
.filter{flex:1;font-family:monospace;font-size:12px;padding:2px 4px}
.conn{border:1px solid #e0e0e0;border-radius:6px;margin:14px 0;padding:6px 12px}
.conn h3{margin:6px 0;font-size:15px}.addr{font-family:monospace}.facts,.session{margin:2px 0;color:#333}
table.requests{border-collapse:collapse;font-size:12px;margin:6px 0;width:100%}
table.requests td,table.requests th{border-bottom:1px solid #eee;padding:2px 6px;text-align:left}
td.path,td.host{font-family:monospace;word-break:break-all}
figure.chart{margin:10px 0;border-top:1px dashed #ddd}figcaption{font-weight:600;font-size:13px;word-break:break-all}
.plot svg{width:100%;height:auto;cursor:crosshair;user-select:none}
.legend{font-size:12px;display:flex;flex-wrap:wrap;gap:12px}.legend i{display:inline-block;width:10px;height:10px;margin-right:4px}
.notes{font-size:11px;color:#757575}.dim{color:#888}
#tip{position:fixed;pointer-events:none;background:#263238;color:#fff;font-size:12px;padding:4px 7px;
border-radius:4px;max-width:480px;white-space:pre-wrap;word-break:break-all;z-index:9}
"""

# The chart renderer: data in, DOM out, never innerHTML (captured labels stay text).
JS = r"""
(function(){
"use strict";
var NS="http://www.w3.org/2000/svg";
var W=860,H=300,ML=64,MR=14,MT=10,MB=38;
var data=JSON.parse(document.getElementById("pcapkit-charts").textContent);
var tip=document.getElementById("tip");
function el(n,a,p){var e=document.createElementNS(NS,n);for(var k in a)e.setAttribute(k,a[k]);if(p)p.appendChild(e);return e;}
function ext(ch){var x0=Infinity,x1=-Infinity,y0=Infinity,y1=-Infinity;
 ch.layers.forEach(function(l){if(!l.scale&&ch.layers.some(function(z){return z.scale&&z.x.length;}))return;[l.x,l.x2].forEach(function(a){if(a)a.forEach(function(v){if(v!==null){x0=Math.min(x0,v);x1=Math.max(x1,v);}});});
  [l.y,l.y2].forEach(function(a){if(a)a.forEach(function(v){if(v!==null){y0=Math.min(y0,v);y1=Math.max(y1,v);}});});});
 if(ch.kind==="handshake_ladder"){x0=-0.2;x1=1.6;}
 ch.yticks.forEach(function(t){y0=Math.min(y0,t[0]-0.6);y1=Math.max(y1,t[0]+0.6);});
 if(!isFinite(x0)){x0=0;x1=1;}if(!isFinite(y0)){y0=0;y1=1;}
 if(x1===x0){x0-=1;x1+=1;}if(y1===y0){y0-=1;y1+=1;}
 var px=(x1-x0)*0.03,py=(y1-y0)*0.05;return [x0-px,x1+px,y0-py,y1+py];}
function ticks(a,b,n){var s=(b-a)/n,m=Math.pow(10,Math.floor(Math.log10(s))),r=s/m;
 s=(r<1.5?1:r<3?2:r<7?5:10)*m;var out=[];for(var v=Math.ceil(a/s)*s;v<=b;v+=s)out.push(+v.toPrecision(12));return out;}
function col(l,i){return Array.isArray(l.color)?l.color[i]:l.color;}
function fmt(v){var a=Math.abs(v);return a>=1e6?(v/1e6)+"M":a>=1e4?(v/1e3)+"k":String(+v.toPrecision(6));}
function draw(fig,ch,dom){
 var box=fig.querySelector(".plot");while(box.firstChild)box.removeChild(box.firstChild);
 var svg=el("svg",{viewBox:"0 0 "+W+" "+H,"data-chart":ch.kind,role:"img"},box);
 var x0=dom[0],x1=dom[1],y0=dom[2],y1=dom[3];
 function X(v){return ML+(v-x0)/(x1-x0)*(W-ML-MR);}
 function Y(v){var f=(v-y0)/(y1-y0);return ch.invert_y?MT+f*(H-MT-MB):H-MB-f*(H-MT-MB);}
 var clip="clip-"+fig.id;var cp=el("clipPath",{id:clip},el("defs",{},svg));
 el("rect",{x:ML,y:MT,width:W-ML-MR,height:H-MT-MB},cp);
 var ax=el("g",{"class":"axes"},svg);
 el("rect",{x:ML,y:MT,width:W-ML-MR,height:H-MT-MB,fill:"#fff",stroke:"#bdbdbd"},ax);
 if(ch.kind!=="handshake_ladder"){ticks(x0,x1,8).forEach(function(v){var x=X(v);
  el("line",{x1:x,x2:x,y1:MT,y2:H-MB,stroke:"#f0f0f0"},ax);
  var t=el("text",{x:x,y:H-MB+14,"text-anchor":"middle","font-size":10,fill:"#555"},ax);t.textContent=fmt(v);});}
 else{[[0,"client"],[1,"server"]].forEach(function(p){var t=el("text",{x:X(p[0]),y:H-MB+14,"text-anchor":"middle","font-size":11},ax);t.textContent=p[1];
  el("line",{x1:X(p[0]),x2:X(p[0]),y1:MT,y2:H-MB,stroke:p[0]?"#1565c0":"#43a047","stroke-width":2},ax);});}
 var yt=ch.yticks.length?ch.yticks:ticks(y0,y1,6).map(function(v){return [v,fmt(v)];});
 yt.forEach(function(p){var y=Y(p[0]);if(y<MT-1||y>H-MB+1)return;el("line",{x1:ML,x2:W-MR,y1:y,y2:y,stroke:"#f0f0f0"},ax);
  var t=el("text",{x:ML-4,y:y+3,"text-anchor":"end","font-size":10,fill:"#555"},ax);t.textContent=p[1];});
 var xl=el("text",{x:(ML+W-MR)/2,y:H-4,"text-anchor":"middle","font-size":11},ax);xl.textContent=ch.xlabel;
 var yl=el("text",{x:12,y:(MT+H-MB)/2,"text-anchor":"middle","font-size":11,transform:"rotate(-90 12 "+((MT+H-MB)/2)+")"},ax);yl.textContent=ch.ylabel;
 var plotg=el("g",{"clip-path":"url(#"+clip+")"},svg);
 var ORDER={rects:0,step:1,segs:2,points:3};
 ch.layers.slice().sort(function(a,b){return ORDER[a.kind]-ORDER[b.kind];}).forEach(function(l){
  var g=el("g",{"class":"layer","data-layer":l.name,"data-total":l.total},plotg);
  var n=l.x.length,i,e,x,y,c;
  if(l.kind==="step"&&n){var pts=[];for(i=0;i<n;i++){if(i)pts.push(X(l.x[i])+","+Y(l.y[i-1]));pts.push(X(l.x[i])+","+Y(l.y[i]));}
   pts.push((W-MR)+","+Y(l.y[n-1]));el("polyline",{points:pts.join(" "),fill:"none",stroke:col(l,0),"stroke-width":1.3,"class":"line"},g);}
  for(i=0;i<n;i++){c=col(l,i);
   if(l.kind==="points"||l.kind==="step"){x=X(l.x[i]);y=Y(l.y[i]);var m=l.kind==="step"?".":l.marker;
    if(m==="v")e=el("path",{d:"M"+(x-5)+" "+(y-5)+"h10l-5 8z",fill:c},g);
    else if(m==="|")e=el("line",{x1:x,x2:x,y1:y-7,y2:y+7,stroke:c,"stroke-width":2},g);
    else if(m==="_")e=el("line",{x1:x-5,x2:x+5,y1:y,y2:y,stroke:c,"stroke-width":2},g);
    else if(m==="x")e=el("path",{d:"M"+(x-5)+" "+(y-5)+"l10 10m0 -10l-10 10",stroke:c,"stroke-width":2.5},g);
    else e=el("circle",{cx:x,cy:y,r:m==="."?(l.kind==="step"?1.6:2.5):3.5,fill:c},g);}
   else if(l.kind==="segs"){e=el("line",{x1:X(l.x[i]),y1:Y(l.y[i]),x2:X(l.x2[i]),y2:Y(l.y2[i]),stroke:c,"stroke-width":ch.kind==="handshake_ladder"?1.6:2.2},g);}
   else if(l.kind==="rects"){var a=X(l.x[i]),b=X(l.x2[i]),p=Y(l.y[i]),q=Y(l.y2[i]);
    e=el("rect",{x:Math.min(a,b),y:Math.min(p,q),width:Math.max(1,Math.abs(b-a)),height:Math.max(1,Math.abs(q-p)),fill:c,stroke:"#fff","stroke-width":0.3,opacity:0.85},g);}
   e.setAttribute("class","mark");e.setAttribute("data-frames",(l.frames[i]||[]).join(" "));
   e.setAttribute("data-i",i);
  }
 });
 svg.addEventListener("mousemove",function(ev){var t=ev.target;if(!t.classList||!t.classList.contains("mark")){tip.hidden=true;return;}
  var l=ch.layers.filter(function(z){return z.name===t.parentNode.getAttribute("data-layer");})[0];var i=+t.getAttribute("data-i");
  var fr=t.getAttribute("data-frames");tip.textContent=(l.labels[i]||l.name)+(fr?"\nframes: "+fr:"");
  tip.hidden=false;tip.style.left=Math.min(ev.clientX+12,window.innerWidth-490)+"px";tip.style.top=(ev.clientY+12)+"px";});
 svg.addEventListener("mouseleave",function(){tip.hidden=true;});
 return {svg:svg,X:X,Y:Y};
}
function mount(ch){
 var fig=document.getElementById(ch.id);if(!fig)return;var full=ext(ch),dom=full.slice();
 var leg=fig.querySelector(".legend");ch.layers.forEach(function(l){if(!l.x.length)return;var s=document.createElement("span");
  var i=document.createElement("i");i.style.background=Array.isArray(l.color)?(l.color[0]||"#999"):l.color;s.appendChild(i);
  s.appendChild(document.createTextNode(l.legend+" ("+l.x.length+(l.total>l.x.length?" of "+l.total:"")+")"));leg.appendChild(s);});
 var notes=fig.querySelector(".notes");notes.textContent=ch.notes.join("; ")+(ch.notes.length?" · ":"")+"wheel: zoom (shift: y) · drag: pan · double-click: reset";
 var cur=draw(fig,ch,dom),drag=null;
 function redraw(){cur=draw(fig,ch,dom);bind();}
 function bind(){var svg=cur.svg;
  svg.addEventListener("wheel",function(ev){ev.preventDefault();var r=svg.getBoundingClientRect(),k=ev.deltaY>0?1.25:0.8;
   if(ev.shiftKey){var fy=(ev.clientY-r.top)/r.height*H;fy=(fy-MT)/(H-MT-MB);if(!ch.invert_y)fy=1-fy;var cy=dom[2]+fy*(dom[3]-dom[2]);
    dom[2]=cy-(cy-dom[2])*k;dom[3]=cy+(dom[3]-cy)*k;}
   else{var fx=((ev.clientX-r.left)/r.width*W-ML)/(W-ML-MR),cx=dom[0]+fx*(dom[1]-dom[0]);dom[0]=cx-(cx-dom[0])*k;dom[1]=cx+(dom[1]-cx)*k;}
   redraw();},{passive:false});
  svg.addEventListener("mousedown",function(ev){drag={x:ev.clientX,y:ev.clientY,d:dom.slice()};});
  svg.addEventListener("mousemove",function(ev){if(!drag||!ev.buttons)return;var r=svg.getBoundingClientRect();
   var dx=(ev.clientX-drag.x)/r.width*W/(W-ML-MR)*(drag.d[1]-drag.d[0]);var dy=(ev.clientY-drag.y)/r.height*H/(H-MT-MB)*(drag.d[3]-drag.d[2]);
   if(!ch.invert_y)dy=-dy;dom=[drag.d[0]-dx,drag.d[1]-dx,drag.d[2]-dy,drag.d[3]-dy];redraw();});
  svg.addEventListener("mouseup",function(){drag=null;});
  svg.addEventListener("dblclick",function(){dom=full.slice();redraw();});}
 bind();
}
data.forEach(mount);
document.querySelectorAll("button.copy").forEach(function(b){b.addEventListener("click",function(){
 var inp=b.parentNode.querySelector("input.filter");inp.select();
 var done=function(){b.textContent="copied";setTimeout(function(){b.textContent="copy";},1200);};
 if(navigator.clipboard&&window.isSecureContext){navigator.clipboard.writeText(inp.value).then(done,function(){document.execCommand("copy");done();});}
 else{document.execCommand("copy");done();}});});
document.body.setAttribute("data-charts-ready",String(data.length));
})();
"""
