"""Pictures of a capture, built only from the declared tables (``pcapkit.schema``).

Each picture is first a :class:`Chart` — plain arrays in named layers, one mark per table
row (``Chart.layer("events")`` has one point per SSE event of the request) — and then a
matplotlib ``Figure`` (:func:`figure`, needs the ``pcapkit[plot]`` extra).  The HTML
report (``pcapkit report``) draws the same charts as inline SVG, so the notebook picture
and the report's agree mark for mark.

* :func:`token_timeline` — the events of one request against time since the request, the
  waits between them coloured by their attributed cause (``Trace.gaps``), the findings'
  evidence frames marked;
* :func:`time_sequence` — a TCP direction Stevens/tcptrace style (as Wireshark's
  *Stream Graphs › Time Sequence*): segments, retransmissions, PSH, the ACK line, the
  receive window, SACK blocks, TLS record ends;
* :func:`alignment_strip` — TLS records over the TCP segments that carried them, by
  stream offset: push units, records spanning segments, records coalesced in one unit;
* :func:`stream_waterfall` — an HTTP/2 or HTTP/3 connection, one row per stream, frames
  over time, shaded while a head-of-line finding held the stream, flow-control stalls;
* :func:`handshake_ladder` — the TLS or QUIC handshake as a ladder between client and
  server, with the network / server / client shares of its time.

Every matplotlib artist carries the layer's name as its ``gid`` so tests (and readers)
can find the marks: ``[a for a in fig.axes[0].get_children() if a.get_gid() == "events"]``.

A layer longer than ``max_marks`` is downsampled (:func:`downsample`): evenly spaced rows
are kept, always including the first and the last, and ``Chart.notes`` says how many
were drawn of how many.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from .trace import Trace

__all__ = [
    "Chart",
    "Layer",
    "alignment_strip",
    "alignment_strip_chart",
    "downsample",
    "figure",
    "fit",
    "handshake_ladder",
    "handshake_ladder_chart",
    "stream_waterfall",
    "stream_waterfall_chart",
    "time_sequence",
    "time_sequence_chart",
    "token_timeline",
    "token_timeline_chart",
]

# A chart is for looking at: past this many marks in one layer the picture is a smear
# and the HTML file grows by ~100 bytes a mark; rows are thinned evenly (see downsample).
MAX_MARKS = 4000

# cause → colour of a wait in the token timeline (gaps.cause: a finding kind or these)
CAUSE_COLORS = {"path": "#9e9e9e", "cadence": "#64b5f6", "server": "#1e88e5"}
FINDING_COLOR = "#e53935"  # a wait inside a network/TLS finding
SPLIT_COLOR = "#c62828"  # a TLS record that left in two push units
KIND_COLORS = {
    "new": "#1565c0",
    "retransmission": "#e53935",
    "spurious_retransmission": "#fb8c00",
    "out_of_order": "#8e24aa",
}


@dataclass
class Layer:
    """One kind of mark: ``points`` (x, y), ``segs`` ((x, y) → (x2, y2)), ``rects``
    (x..x2 × y..y2) or ``step`` (a line through x, y, held until the next x)."""

    name: str
    kind: str
    x: np.ndarray
    y: np.ndarray
    x2: np.ndarray | None = None
    y2: np.ndarray | None = None
    color: str | list[str] = "#1565c0"
    frames: list[list[int]] = field(default_factory=list)  # evidence frames per mark
    labels: list[str] = field(default_factory=list)  # hover text per mark (captured text!)
    legend: str = ""
    marker: str = "o"
    total: int = 0  # rows before downsampling
    scale: bool = (
        True  # part of the default view (the receive window is not: it would dwarf the data)
    )

    def __len__(self) -> int:
        return int(len(self.x))


@dataclass
class Chart:
    kind: str
    title: str
    xlabel: str
    ylabel: str
    layers: list[Layer] = field(default_factory=list)
    yticks: list[tuple[float, str]] = field(default_factory=list)
    invert_y: bool = False
    notes: list[str] = field(default_factory=list)

    def layer(self, name: str) -> Layer:
        for ly in self.layers:
            if ly.name == name:
                return ly
        raise KeyError(f"no layer {name!r} in {self.kind}; layers: {[x.name for x in self.layers]}")

    def has(self, name: str) -> bool:
        return any(ly.name == name for ly in self.layers)


def _arr(v: Any) -> np.ndarray:
    return np.asarray(v, dtype=float)


def _add(
    chart: Chart,
    name: str,
    kind: str,
    x: Any,
    y: Any,
    x2: Any = None,
    y2: Any = None,
    *,
    max_marks: int = MAX_MARKS,
    **kw: Any,
) -> None:
    ly = Layer(
        name=name,
        kind=kind,
        x=_arr(x),
        y=_arr(y),
        x2=None if x2 is None else _arr(x2),
        y2=None if y2 is None else _arr(y2),
        **kw,
    )
    ly.total = len(ly)
    chart.layers.append(downsample(ly, max_marks, chart.notes))


def downsample(layer: Layer, max_marks: int, notes: list[str] | None = None) -> Layer:
    """``layer`` with at most ``max_marks`` evenly spaced rows (first and last kept); a
    ``step`` line is never thinned below its shape's changes but evenly too."""
    n = len(layer)
    if n <= max_marks or max_marks <= 0:
        return layer
    rows = max(n, layer.total)  # the table's rows, if an earlier pass thinned it already
    keep = np.unique(np.linspace(0, n - 1, max_marks).round().astype(np.int64))

    def pick(a: Any) -> Any:
        if a is None:
            return None
        if isinstance(a, np.ndarray):
            return a[keep]
        if isinstance(a, list) and len(a) == n:
            return [a[i] for i in keep]
        return a

    out = Layer(
        name=layer.name,
        kind=layer.kind,
        x=pick(layer.x),
        y=pick(layer.y),
        x2=pick(layer.x2),
        y2=pick(layer.y2),
        color=pick(layer.color),
        frames=pick(layer.frames),
        labels=pick(layer.labels),
        legend=layer.legend,
        marker=layer.marker,
        total=rows,
        scale=layer.scale,
    )
    if notes is not None:
        notes.append(f"{layer.name}: {len(keep)} of {rows} marks drawn (evenly spaced rows)")
    return out


def fit(chart: Chart, budget: int) -> Chart:
    """``chart`` with at most ``budget`` marks in all (at least 10 a layer): the budget is
    shared out smallest layer first — a layer under its fair share (retransmissions, SACK
    blocks, stalls) is kept whole, the big ones split what is left — and thinned by
    :func:`downsample`."""
    total = sum(len(ly) for ly in chart.layers)
    if total <= budget:
        return chart
    keep: dict[int, int] = {}
    left, order = budget, sorted(range(len(chart.layers)), key=lambda i: len(chart.layers[i]))
    for k, i in enumerate(order):
        share = max(10, left // (len(order) - k))
        keep[i] = min(len(chart.layers[i]), share)
        left = max(0, left - keep[i])
    thinned = {chart.layers[i].name for i in keep if keep[i] < len(chart.layers[i])}
    chart.notes = [n for n in chart.notes if n.split(":", 1)[0] not in thinned]
    chart.layers = [downsample(ly, keep[i], chart.notes) for i, ly in enumerate(chart.layers)]
    return chart


def _ms(ts: Any, t0: int) -> np.ndarray:
    return (np.asarray(ts, dtype=np.float64) - t0) / 1e6


def _frame_ts(trace: Trace) -> pd.Series:
    p = trace.packets
    return pd.Series(p["ts_ns"].to_numpy(np.int64), index=p["frame"].to_numpy(np.int64))


def _findings_for(
    trace: Trace, *, flow: int | None = None, request: int | None = None
) -> pd.DataFrame:
    f = trace.findings
    if request is not None:
        f = f[f["request"].astype("Int64").eq(request).fillna(False).astype(bool)]
    if flow is not None:
        f = f[f["flow"].astype("Int64").eq(flow).fillna(False).astype(bool)]
    return f


# -- token timeline ------------------------------------------------------------------


def request_units(trace: Trace, request: int) -> pd.DataFrame:
    """The streamed units of one request's response, as ``Trace.messages`` rows: its SSE
    events or gRPC messages, else its HTTP/2 DATA frames, else its QUIC STREAM frames."""
    req = trace.requests
    row = req[req["request"] == request]
    if row.empty:
        raise KeyError(f"no request {request}; requests: 0..{len(req) - 1}")
    r = row.iloc[0]
    m = trace.messages
    m = m[m["ts_ns"].notna()]
    mine = m[m["request"].astype("Int64").eq(request).fillna(False).astype(bool)]
    for types in (("event", "message"), ("DATA",)):
        u = mine[mine["type"].isin(types) & (mine["dir"] == "s2c")]
        if len(u):
            return u
    if not pd.isna(r["stream"]):
        u = m[
            (m["flow"] == r["flow"])
            & (m["protocol"] == "quic")
            & (m["type"] == "STREAM")
            & (m["dir"] == "s2c")
            & m["stream"].astype("Int64").eq(int(r["stream"])).fillna(False).astype(bool)
        ]
        return u
    return mine.iloc[0:0]


def token_timeline_chart(trace: Trace, request: int = 0, *, max_marks: int = MAX_MARKS) -> Chart:
    """Every event of ``request`` (one point each, ``events`` layer) against ms since the
    request was sent; each wait before an event the gap table attributed (``gaps``
    layer, coloured by cause); the evidence frames of the findings that delayed this
    request (``evidence`` layer, one tick per frame)."""
    units = request_units(trace, request)
    r = trace.requests.set_index("request").loc[request]
    t0 = r["request_end_ts_ns"]
    if pd.isna(t0):
        t0 = r["request_start_ts_ns"]
    if pd.isna(t0):
        t0 = int(units["ts_ns"].min()) if len(units) else 0
    t0 = int(t0)
    what = "events" if len(units) and units["type"].iloc[0] in ("event", "message") else "frames"
    c = Chart(
        "token_timeline",
        f"request {request}: {r['method']} {r['path']} — {len(units)} {what}",
        "ms since the request",
        f"{what} received",
    )
    ts = units["ts_ns"].to_numpy(np.int64)
    xs = _ms(ts, t0)
    ys = np.arange(1, len(units) + 1)
    fr = units["frame"].to_numpy(np.int64, na_value=-1)
    det = [str(d) for d in units["detail"].tolist()]
    _add(
        c,
        "events",
        "points",
        xs,
        ys,
        frames=[[int(f)] for f in fr],
        labels=[
            f"#{i} frame {f} at {x:.1f} ms: {d}" for i, f, x, d in zip(ys, fr, xs, det, strict=True)
        ],
        legend=what,
        color="#212121",
        max_marks=max_marks,
    )
    g = trace.gaps
    g = g[g["request"] == request]
    if len(g):
        causes = g["cause"].astype(str).tolist()
        colors = [CAUSE_COLORS.get(k, FINDING_COLOR) for k in causes]
        ev = g["event"].to_numpy(np.int64) + 1
        _add(
            c,
            "gaps",
            "rects",
            _ms(g["from_ts_ns"], t0),
            ev - 0.35,
            _ms(g["to_ts_ns"], t0),
            ev + 0.35,
            color=colors,
            frames=[[int(x)] if not pd.isna(x) else [] for x in g["frame"]],
            labels=[
                f"wait before #{e}: {gm:.1f} ms, cause {k} (path {p:.1f}, network {n:.1f}, server {s:.1f} ms)"
                for e, gm, k, p, n, s in zip(
                    ev,
                    g["gap_ms"],
                    causes,
                    g["path_ms"],
                    g["network_ms"],
                    g["server_ms"],
                    strict=True,
                )
            ],
            legend="waits by cause",
            max_marks=max_marks,
        )
    f = _findings_for(trace, request=request)
    ft = _frame_ts(trace)
    ex, ef, el = [], [], []
    for row in f.itertuples():
        for fr_ in sorted({int(e["frame"]) for e in (row.evidence or []) if "frame" in e}):
            if fr_ in ft.index:
                ex.append((ft[fr_] - t0) / 1e6)
                ef.append([fr_])
                el.append(f"{row.kind}: frame {fr_}")
    if ex:
        top = float(len(units) + 1)
        _add(
            c,
            "evidence",
            "points",
            ex,
            [top] * len(ex),
            frames=ef,
            labels=el,
            legend="evidence frames",
            color=FINDING_COLOR,
            marker="v",
            max_marks=max_marks,
        )
    return c


# -- time–sequence graph ---------------------------------------------------------------


def time_sequence_chart(
    trace: Trace, flow: int = 0, direction: str = "s2c", *, max_marks: int = MAX_MARKS
) -> Chart:
    """One TCP direction: a vertical bar per segment from its first to its last stream
    offset (``segments`` new data, ``retransmissions`` everything else), ``holes``: the
    bytes missing below a segment that arrived past them (``segments.gap_before``), ``psh`` dots at
    the end of PSH segments, the reverse direction's cumulative ``ack`` and ``ack`` +
    receive window (``rwnd``) as steps, its ``sack`` blocks as bars, and ``records``: the
    end offset of each TLS record at the time it became readable."""
    fl = trace.flows.set_index("flow").loc[flow]
    t0 = int(fl["first_ts_ns"])
    rev = "c2s" if direction == "s2c" else "s2c"
    c = Chart(
        "time_sequence",
        f"flow {flow} {direction}: time–sequence",
        "ms since the connection's first frame",
        "stream offset (bytes)",
    )
    s = trace.segments
    s = s[(s["flow"] == flow) & (s["dir"] == direction)]
    kinds = s["kind"].astype(str)
    for name, sel, color in (
        ("segments", kinds == "new", KIND_COLORS["new"]),
        ("retransmissions", kinds != "new", KIND_COLORS["retransmission"]),
    ):
        ss = s[sel.to_numpy()]
        x = _ms(ss["ts_ns"], t0)
        _add(
            c,
            name,
            "segs",
            x,
            ss["offset"],
            x,
            ss["end"],
            color=color
            if name == "segments"
            else [KIND_COLORS.get(k, "#e53935") for k in kinds[sel]],
            frames=[[int(f)] for f in ss["frame"]],
            labels=[
                f"frame {f} {k}: {o}–{e}" + (" PSH" if p else "")
                for f, k, o, e, p in zip(
                    ss["frame"], kinds[sel], ss["offset"], ss["end"], ss["psh"], strict=True
                )
            ],
            legend="data" if name == "segments" else "retransmitted / out of order",
            max_marks=max_marks,
        )
    hs = s[s["gap_before"].to_numpy(np.int64) > 0]
    if len(hs):
        x = _ms(hs["ts_ns"], t0)
        _add(
            c,
            "holes",
            "segs",
            x,
            hs["offset"] - hs["gap_before"],
            x,
            hs["offset"],
            frames=[[int(f)] for f in hs["frame"]],
            labels=[
                f"hole of {g} B ({o - g}–{o}) seen at frame {f}"
                for f, o, g in zip(hs["frame"], hs["offset"], hs["gap_before"], strict=True)
            ],
            legend="holes (bytes not seen yet)",
            color="#d81b60",
            max_marks=max_marks,
        )
    ps = s[s["psh"].to_numpy(bool)]
    _add(
        c,
        "psh",
        "points",
        _ms(ps["ts_ns"], t0),
        ps["end"],
        frames=[[int(f)] for f in ps["frame"]],
        labels=[f"PSH frame {f} ends at {e}" for f, e in zip(ps["frame"], ps["end"], strict=True)],
        legend="PSH",
        color="#2e7d32",
        marker=".",
        max_marks=max_marks,
    )
    p = trace.packets
    p = p[p["flow"].to_numpy(np.int64, na_value=-1) == flow]  # numpy: cheap on 1M rows
    syn = (p["tcp_flags"].to_numpy(np.int64, na_value=0) & 2) != 0
    a = p[((p["dir"] == rev) & p["rel_ack"].notna()).to_numpy(bool) & ~syn]
    ack = a["rel_ack"].to_numpy(np.int64) - 1
    xa = _ms(a["ts_ns"], t0)
    fa = [[int(f)] for f in a["frame"]]
    _add(
        c,
        "ack",
        "step",
        xa,
        ack,
        frames=fa,
        labels=[f"ACK frame {f}: {v}" for f, v in zip(a["frame"], ack, strict=True)],
        legend="ACK",
        color="#6d4c41",
        max_marks=max_marks,
    )
    w = a["window"].to_numpy(np.float64, na_value=np.nan)
    ok = ~np.isnan(w)
    if ok.any():
        _add(
            c,
            "rwnd",
            "step",
            xa[ok],
            ack[ok] + w[ok],
            frames=[fa[i] for i in np.nonzero(ok)[0]],
            labels=[
                f"window frame {f}: {int(v)} B" for f, v in zip(a["frame"][ok], w[ok], strict=True)
            ],
            legend="ACK + receive window",
            color="#bdbdbd",
            scale=False,
            max_marks=max_marks,
        )
    sb = trace.sack_blocks
    sb = sb[(sb["flow"] == flow) & (sb["dir"] == rev)]
    if len(sb):
        x = _ms(sb["ts_ns"], t0)
        _add(
            c,
            "sack",
            "segs",
            x,
            sb["left"],
            x,
            sb["right"],
            frames=[[int(f)] for f in sb["frame"]],
            labels=[
                f"SACK frame {f}: {lft}–{rgt}"
                for f, lft, rgt in zip(sb["frame"], sb["left"], sb["right"], strict=True)
            ],
            legend="SACK blocks",
            color="#f9a825",
            max_marks=max_marks,
        )
    recs = (
        trace.records
        if trace.flows.loc[trace.flows["flow"] == flow, "proto"].eq("tcp").all()
        else None
    )
    if recs is not None and len(recs):
        rr = recs[(recs["flow"] == flow) & (recs["dir"] == direction)]
        if len(rr):
            _add(
                c,
                "records",
                "points",
                _ms(rr["last_ts_ns"], t0),
                rr["offset"] + rr["length"],
                frames=[
                    [int(a_), int(b_)]
                    for a_, b_ in zip(rr["first_frame"], rr["last_frame"], strict=True)
                ],
                labels=[
                    f"TLS record {o}–{o + n} (type {ct}) readable at frame {lf}"
                    for o, n, ct, lf in zip(
                        rr["offset"],
                        rr["length"],
                        rr["content_type"],
                        rr["last_frame"],
                        strict=True,
                    )
                ],
                legend="TLS record ends",
                color="#8e24aa",
                marker="_",
                max_marks=max_marks,
            )
    return c


# -- record ↔ segment alignment ---------------------------------------------------------


def alignment_strip_chart(
    trace: Trace, flow: int = 0, direction: str = "s2c", *, max_marks: int = MAX_MARKS
) -> Chart:
    """By stream offset: ``segments`` (row 0, PSH segments darker), ``push_units`` (row 1:
    PSH to PSH), ``records`` (row 2: green when whole in one segment, red when split across
    push units — a PSH segment ends inside it —, orange when spanning several segments,
    purple when coalesced with others in one push unit)."""
    c = Chart(
        "alignment_strip",
        f"flow {flow} {direction}: TLS records over TCP segments",
        "stream offset (bytes)",
        "",
        yticks=[(0, "segments"), (1, "push units"), (2, "TLS records")],
    )
    s = trace.segments
    s = s[(s["flow"] == flow) & (s["dir"] == direction)]
    s = s[(s["kind"] == "new").to_numpy(bool)]
    psh = s["psh"].to_numpy(bool)
    _add(
        c,
        "segments",
        "rects",
        s["offset"],
        np.full(len(s), -0.35),
        s["end"],
        np.full(len(s), 0.35),
        color=["#1565c0" if v else "#90caf9" for v in psh],
        frames=[[int(f)] for f in s["frame"]],
        labels=[
            f"frame {f}: {o}–{e}" + (" PSH" if p_ else "")
            for f, o, e, p_ in zip(s["frame"], s["offset"], s["end"], psh, strict=True)
        ],
        legend="segments (dark: PSH)",
        max_marks=max_marks,
    )
    r = trace.records
    r = r[(r["flow"] == flow) & (r["dir"] == direction)]
    if len(r):
        u = (
            r.assign(end=r["offset"] + r["length"])
            .groupby("push_unit")
            .agg(
                lo=("offset", "min"),
                hi=("end", "max"),
                n=("offset", "size"),
                lf=("last_frame", "max"),
            )
        )
        _add(
            c,
            "push_units",
            "rects",
            u["lo"],
            np.full(len(u), 0.65),
            u["hi"],
            np.full(len(u), 1.35),
            color=["#ab47bc" if n > 1 else "#cfd8dc" for n in u["n"]],
            frames=[[int(f)] for f in u["lf"]],
            labels=[
                f"push unit {i}: {n} record(s), {lo}–{hi}, ends frame {lf}"
                for i, n, lo, hi, lf in zip(u.index, u["n"], u["lo"], u["hi"], u["lf"], strict=True)
            ],
            legend="push units (purple: several records)",
            max_marks=max_marks,
        )
        spans = r["segments"].to_numpy(np.int64) > 1
        coal = r["records_in_unit"].to_numpy(np.int64) > 1
        # split: a PSH segment ends inside the record — it left in two push units
        pe = np.sort(s.loc[s["psh"].to_numpy(bool), "end"].to_numpy(np.int64))
        lo = r["offset"].to_numpy(np.int64)
        hi = lo + r["length"].to_numpy(np.int64)
        split = np.searchsorted(pe, lo, side="right") < np.searchsorted(pe, hi, side="left")
        colors = [
            SPLIT_COLOR if sl else ("#fb8c00" if sp else ("#ab47bc" if co else "#43a047"))
            for sl, sp, co in zip(split, spans, coal, strict=True)
        ]
        _add(
            c,
            "records",
            "rects",
            r["offset"],
            np.full(len(r), 1.65),
            r["offset"] + r["length"],
            np.full(len(r), 2.35),
            color=colors,
            frames=[
                [int(a), int(b)] for a, b in zip(r["first_frame"], r["last_frame"], strict=True)
            ],
            labels=[
                f"record {o}–{o + n}, type {ct}, {sg} segment(s), frames {a}–{b}"
                + (", split across push units" if sl else "")
                + (", spanning" if sp else "")
                + (", coalesced" if co else "")
                for o, n, ct, sg, a, b, sl, sp, co in zip(
                    r["offset"],
                    r["length"],
                    r["content_type"],
                    r["segments"],
                    r["first_frame"],
                    r["last_frame"],
                    split,
                    spans,
                    coal,
                    strict=True,
                )
            ],
            legend="records (red: split across push units, orange: spanning, purple: coalesced)",
            max_marks=max_marks,
        )
    return c


# -- stream waterfall ---------------------------------------------------------------------

HOL_KINDS = (
    "tcp_hol_blocking",
    "quic_stream_hol",
    "h3_single_stream_hol",
    "h2_send_buffer_hol",
    "qpack_blocked_stream",
)
STALL_KINDS = ("h2_flow_control_stall", "quic_flow_control_stall", "zero_window")


def stream_frames(trace: Trace, flow: int) -> pd.DataFrame:
    """The per-stream frames of an HTTP/2 connection (``messages`` rows with a stream
    id > 0) or an HTTP/3 one (QUIC STREAM frames on client-initiated bidirectional
    streams, RFC 9000 §2.1)."""
    m = trace.messages
    m = m[(m["flow"] == flow) & m["stream"].notna() & m["ts_ns"].notna()]
    h2 = m[
        (m["protocol"].isin(["h2", "grpc"]))
        & (m["stream"].astype("Int64") > 0)
        & (m["protocol"] == "h2")
    ]
    if len(h2):
        return h2
    q = m[(m["protocol"] == "quic") & (m["type"] == "STREAM")]
    return q[(q["stream"].astype("Int64") % 4 == 0).fillna(False).astype(bool)]


def stream_waterfall_chart(trace: Trace, flow: int = 0, *, max_marks: int = MAX_MARKS) -> Chart:
    """One row per stream: each frame a point at its time (``frames``), ``waiting``
    rectangles while a head-of-line finding held the stream (its own stream, or every
    stream active in its interval when the finding names none), ``stalls`` crosses at the
    start of each flow-control stall."""
    fl = trace.flows.set_index("flow").loc[flow]
    t0 = int(fl["first_ts_ns"])
    m = stream_frames(trace, flow)
    streams = sorted({int(v) for v in m["stream"]})
    row = {s: i for i, s in enumerate(streams)}
    c = Chart(
        "stream_waterfall",
        f"flow {flow}: {len(streams)} streams",
        "ms since the connection's first frame",
        "stream",
        yticks=[(i, str(s)) for s, i in row.items()],
        invert_y=True,
    )
    sid = m["stream"].astype("int64").to_numpy()
    types = m["type"].astype(str).tolist()
    _add(
        c,
        "frames",
        "points",
        _ms(m["ts_ns"], t0),
        [row[s] for s in sid],
        frames=[[int(f)] for f in m["frame"]],
        labels=[
            f"stream {s} {ty} {d} frame {f}: {det}"
            for s, ty, d, f, det in zip(sid, types, m["dir"], m["frame"], m["detail"], strict=True)
        ],
        color=["#1565c0" if d == "s2c" else "#43a047" for d in m["dir"]],
        legend="frames (blue: server, green: client)",
        marker="|",
        max_marks=max_marks,
    )
    f = _findings_for(trace, flow=flow)
    span = (
        m.groupby(sid)["ts_ns"].agg(["min", "max"])
        if len(m)
        else pd.DataFrame(columns=["min", "max"])
    )
    wx, wx2, wy, wl, wf = [], [], [], [], []
    sx, sy, sl, sf = [], [], [], []
    for r in f.itertuples():
        ids: list[int]
        if not pd.isna(r.stream) and int(r.stream) in row:
            ids = [int(r.stream)]
        else:
            ids = [
                s
                for s in streams
                if span.loc[s, "min"] <= r.t_end_ns and span.loc[s, "max"] >= r.t_start_ns
            ]
        frames_ = [int(x) for x in (r.frames or [])]
        if r.kind in HOL_KINDS:
            for s in ids:
                wx.append((r.t_start_ns - t0) / 1e6)
                wx2.append((r.t_end_ns - t0) / 1e6)
                wy.append(row[s])
                wl.append(f"stream {s} waited {r.cost_ms:.1f} ms: {r.kind}")
                wf.append(frames_)
        elif r.kind in STALL_KINDS:
            for s in ids or streams[:1]:
                sx.append((r.t_start_ns - t0) / 1e6)
                sy.append(row[s])
                sl.append(f"stream {s}: {r.kind} {r.cost_ms:.1f} ms")
                sf.append(frames_)
    if wx:
        wy_ = np.asarray(wy, float)
        _add(
            c,
            "waiting",
            "rects",
            wx,
            wy_ - 0.4,
            wx2,
            wy_ + 0.4,
            color="#ef9a9a",
            frames=wf,
            labels=wl,
            legend="held behind a lost packet",
            max_marks=max_marks,
        )
    if sx:
        _add(
            c,
            "stalls",
            "points",
            sx,
            sy,
            frames=sf,
            labels=sl,
            legend="flow-control stall",
            color="#6a1b9a",
            marker="x",
            max_marks=max_marks,
        )
    return c


# -- handshake ladder ---------------------------------------------------------------------


def handshake_ladder_chart(trace: Trace, flow: int = 0) -> Chart:
    """Client (x = 0) and server (x = 1) lines, time downwards; an ``arrows`` segment per
    handshake milestone drawn at its capture time from sender to receiver; a ``shares``
    bar split as ``Trace.tls`` / ``Trace.quic`` split the handshake's time: network (one
    round trip), server, flights on the wire, client."""
    c = Chart(
        "handshake_ladder",
        f"flow {flow}: handshake",
        "",
        "ms since the first message",
        yticks=[],
        invert_y=True,
    )
    steps: list[tuple[str, str, Any, Any]] = []  # (label, sender, frame, ts)
    q = trace.quic_handshake
    q = q[q["flow"] == flow] if len(q) else q
    h = trace.tls_handshake
    h = h[h["flow"] == flow]
    if len(h):
        r = h.iloc[0]
        for lab, who, col in (
            ("ClientHello", "c", "client_hello"),
            ("ServerHello", "s", "server_hello"),
            ("server flight end", "s", "server_flight_end"),
            ("client answer", "c", "client_answer"),
            ("client Finished", "c", "client_finished"),
        ):
            steps.append((lab, who, r[f"{col}_frame"], r[f"{col}_ts_ns"]))
    elif len(q):
        r = q.iloc[0]
        for lab, who, col in (
            ("client Initial", "c", "client_initial"),
            ("Retry", "s", "retry"),
            ("server Initial", "s", "server_initial"),
            ("server Finished", "s", "server_finished"),
            ("client Finished", "c", "client_finished"),
            ("HANDSHAKE_DONE", "s", "handshake_done"),
            ("client 1-RTT", "c", "client_first_1rtt"),
        ):
            steps.append((lab, who, r[f"{col}_frame"], r[f"{col}_ts_ns"]))
    steps = [s for s in steps if not pd.isna(s[3])]
    if not steps:
        c.notes.append("no handshake seen on this flow")
        return c
    t0 = int(min(int(s[3]) for s in steps))
    ys = [(int(s[3]) - t0) / 1e6 for s in steps]
    _add(
        c,
        "arrows",
        "segs",
        [0.0 if s[1] == "c" else 1.0 for s in steps],
        ys,
        [1.0 if s[1] == "c" else 0.0 for s in steps],
        ys,
        frames=[[int(s[2])] for s in steps],
        labels=[f"{s[0]}: frame {int(s[2])} at {y:.2f} ms" for s, y in zip(steps, ys, strict=True)],
        color=["#43a047" if s[1] == "c" else "#1565c0" for s in steps],
        legend="messages (green: client, blue: server)",
    )
    sess = trace.tls if len(h) else trace.quic
    sess = sess[sess["flow"] == flow]
    shares: list[tuple[str, float, str]] = []
    if len(sess):
        x = sess.iloc[0]
        for name, col, color in (
            ("network", "handshake_network_ms", "#9e9e9e"),
            ("server", "handshake_server_ms", "#1565c0"),
            ("flights", "handshake_flight_ms", "#90caf9"),
            ("client", "handshake_client_ms", "#43a047"),
        ):
            if not pd.isna(x[col]):
                shares.append((name, float(x[col]), color))
    if shares:
        lo = np.cumsum([0.0] + [s[1] for s in shares[:-1]])
        _add(
            c,
            "shares",
            "rects",
            [1.3] * len(shares),
            lo,
            [1.45] * len(shares),
            lo + np.asarray([s[1] for s in shares]),
            color=[s[2] for s in shares],
            frames=[[] for _ in shares],
            labels=[f"{n}: {v:.2f} ms" for n, v, _ in shares],
            legend="shares: network / server / flights / client",
        )
    c.yticks = []
    return c


# -- matplotlib ---------------------------------------------------------------------------


def figure(chart: Chart) -> Figure:
    """Draw ``chart`` with matplotlib (the ``pcapkit[plot]`` extra); one artist per layer
    with the layer's name as its ``gid``."""
    try:
        from matplotlib.collections import LineCollection, PatchCollection
        from matplotlib.figure import Figure
        from matplotlib.patches import Rectangle
    except ImportError as e:  # pragma: no cover - exercised only without the extra
        raise ImportError(
            "pcapkit.plot needs matplotlib: pip install 'pcapkit-forensics[plot]'"
        ) from e

    height = 4.0
    if chart.kind == "handshake_ladder":
        height = 5.5
    elif chart.kind == "stream_waterfall":  # a row per stream
        height = min(8.0, 1.6 + 0.45 * max(1, len(chart.yticks)))
    fig = Figure(figsize=(9, height), layout="constrained")
    ax = fig.add_subplot()
    for ly in chart.layers:
        if len(ly) == 0:
            continue
        col = ly.color
        if ly.kind == "points":
            art: Any = ax.scatter(
                ly.x,
                ly.y,
                c=col,
                marker=ly.marker,
                s=28 if ly.marker != "|" else 60,
                label=ly.legend,
                zorder=3,
            )
        elif ly.kind == "segs":
            assert ly.x2 is not None and ly.y2 is not None
            segs = np.stack([np.c_[ly.x, ly.y], np.c_[ly.x2, ly.y2]], axis=1)
            art = LineCollection(
                segs,
                colors=col,
                linewidths=2 if chart.kind != "handshake_ladder" else 1.5,
                label=ly.legend,
                zorder=2,
            )
            ax.add_collection(art)
        elif ly.kind == "rects":
            assert ly.x2 is not None and ly.y2 is not None
            rects = [
                Rectangle((a, b), c_ - a, d - b)
                for a, b, c_, d in zip(ly.x, ly.y, ly.x2, ly.y2, strict=True)
            ]
            art = PatchCollection(
                rects, facecolors=col, edgecolors="white", linewidths=0.3, label=ly.legend, zorder=1
            )
            ax.add_collection(art)
        elif ly.kind == "step":
            (art,) = ax.step(
                ly.x, ly.y, where="post", color=col, linewidth=1.2, label=ly.legend, zorder=2
            )
        else:  # pragma: no cover
            raise ValueError(ly.kind)
        art.set_gid(ly.name)
    if chart.kind == "handshake_ladder":
        ax.axvline(0, color="#43a047")
        ax.axvline(1, color="#1565c0")
        ax.set_xticks([0, 1], ["client", "server"])
        ax.set_xlim(-0.2, 1.6)
    ax.autoscale_view()
    focus = [ly for ly in chart.layers if ly.scale and len(ly)]
    if len(focus) < sum(1 for ly in chart.layers if len(ly)):  # zoom to the data, not the window
        ys = np.concatenate([np.r_[ly.y, ly.y2 if ly.y2 is not None else []] for ly in focus])
        if len(ys):
            pad = max(1.0, float(ys.max() - ys.min()) * 0.05)
            ax.set_ylim(float(ys.min()) - pad, float(ys.max()) + pad)
    if chart.yticks:
        ax.set_yticks([p for p, _ in chart.yticks], [t for _, t in chart.yticks])
    if chart.invert_y:
        ax.invert_yaxis()
    ax.set_title(chart.title, fontsize=10)
    ax.set_xlabel(chart.xlabel)
    ax.set_ylabel(chart.ylabel)
    if any(len(ly) for ly in chart.layers):
        ax.legend(fontsize=7, loc="best")
    else:
        ax.text(0.5, 0.5, "nothing to draw", transform=ax.transAxes, ha="center")
    if chart.notes:
        fig.text(0.01, 0.005, "; ".join(chart.notes), fontsize=6, color="#616161")
    fig.pcapkit_chart = chart  # type: ignore[attr-defined]
    return fig


def token_timeline(trace: Trace, request: int = 0, **kw: Any) -> Figure:
    """:func:`token_timeline_chart` drawn: a matplotlib Figure."""
    return figure(token_timeline_chart(trace, request, **kw))


def time_sequence(trace: Trace, flow: int = 0, direction: str = "s2c", **kw: Any) -> Figure:
    """:func:`time_sequence_chart` drawn: a matplotlib Figure."""
    return figure(time_sequence_chart(trace, flow, direction, **kw))


def alignment_strip(trace: Trace, flow: int = 0, direction: str = "s2c", **kw: Any) -> Figure:
    """:func:`alignment_strip_chart` drawn: a matplotlib Figure."""
    return figure(alignment_strip_chart(trace, flow, direction, **kw))


def stream_waterfall(trace: Trace, flow: int = 0, **kw: Any) -> Figure:
    """:func:`stream_waterfall_chart` drawn: a matplotlib Figure."""
    return figure(stream_waterfall_chart(trace, flow, **kw))


def handshake_ladder(trace: Trace, flow: int = 0) -> Figure:
    """:func:`handshake_ladder_chart` drawn: a matplotlib Figure."""
    return figure(handshake_ladder_chart(trace, flow))
