"""pcapkit.plot draws from the declared tables, one mark per row: the figures' artists
are counted against the tables of real fixtures."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import pcapkit

pytest.importorskip("matplotlib", reason="matplotlib is part of the [test] and [plot] extras")

from matplotlib.figure import Figure  # noqa: E402

from pcapkit import plot  # noqa: E402

FIX = Path(__file__).resolve().parents[1] / "fixtures"


def artists(fig: Figure, gid: str) -> list:
    return [a for a in fig.axes[0].get_children() if a.get_gid() == gid]


def marks(fig: Figure, gid: str) -> int:
    """Number of marks the layer ``gid`` drew (points, segments, rectangles, steps)."""
    (a,) = artists(fig, gid)
    if hasattr(a, "get_offsets") and a.__class__.__name__ == "PathCollection":
        return len(a.get_offsets())
    if hasattr(a, "get_segments"):
        return len(a.get_segments())
    if hasattr(a, "get_paths"):
        return len(a.get_paths())
    return len(a.get_xdata())


@pytest.fixture(scope="module")
def nagle():
    with pcapkit.open(FIX / "tls_sse_nagle/client.pcapng") as t:
        yield t


@pytest.fixture(scope="module")
def h2hol():
    with pcapkit.open(FIX / "h2_hol_drop/client.pcapng") as t:
        yield t


def test_token_timeline_one_mark_per_sse_event(nagle):
    fig = plot.token_timeline(nagle, 0)
    assert isinstance(fig, Figure)
    ev = nagle.messages[(nagle.messages.type == "event") & (nagle.messages.request == 0)]
    assert len(ev) == 20 and marks(fig, "events") == len(ev)
    # x positions: ms since the request, from the messages table
    r = nagle.requests.iloc[0]
    want = (ev.ts_ns.to_numpy(np.int64) - int(r.request_end_ts_ns)) / 1e6
    (pts,) = artists(fig, "events")
    assert np.allclose(pts.get_offsets()[:, 0], want)
    # the first wait is Nagle's: one gap rectangle, coloured as a finding
    g = nagle.gaps[nagle.gaps.request == 0]
    assert marks(fig, "gaps") == len(g) >= 1
    ch = fig.pcapkit_chart
    assert ch.layer("gaps").color[0] == plot.FINDING_COLOR
    # evidence: every evidence frame of the request's findings, once per finding
    f = nagle.findings[nagle.findings.request == 0]
    n = sum(len({e["frame"] for e in ev_}) for ev_ in f.evidence)
    assert marks(fig, "evidence") == n > 0
    assert all(fr in set(nagle.packets.frame) for (fr,) in ch.layer("evidence").frames)


def test_token_timeline_grpc_and_h3_units():
    with pcapkit.open(FIX / "grpc_stream/client.pcapng") as t:
        fig = plot.token_timeline(t, 0)
        assert marks(fig, "events") == int(t.requests.events.iloc[0]) == 20
    with pcapkit.open(FIX / "h3_sse_drop/client.pcapng") as t:
        ch = plot.token_timeline_chart(t, 0)
        assert len(ch.layer("events")) == int(t.requests.events.iloc[0])
        assert {c for c in ch.layer("gaps").color} >= {plot.FINDING_COLOR}
    with pytest.raises(KeyError, match="no request 99"):
        plot.token_timeline_chart(t, 99)


def test_time_sequence_marks_match_tables(h2hol):
    fig = plot.time_sequence(h2hol, 0, "s2c")
    s = h2hol.segments[(h2hol.segments.flow == 0) & (h2hol.segments.dir == "s2c")]
    new = s.kind.astype(str) == "new"
    assert marks(fig, "segments") == int(new.sum())
    assert marks(fig, "retransmissions") == int((~new).sum()) >= 1
    assert marks(fig, "psh") == int(s.psh.sum())
    holes = s[s.gap_before > 0]
    assert marks(fig, "holes") == len(holes) == 1
    (hole,) = fig.pcapkit_chart.layer("holes").frames
    assert hole == [int(holes.frame.iloc[0])]
    sb = h2hol.sack_blocks[(h2hol.sack_blocks.flow == 0) & (h2hol.sack_blocks.dir == "c2s")]
    assert marks(fig, "sack") == len(sb) >= 1
    r = h2hol.records[(h2hol.records.flow == 0) & (h2hol.records.dir == "s2c")]
    assert marks(fig, "records") == len(r)
    # the ACK line never passes the data sent (offsets are one coordinate)
    ack = fig.pcapkit_chart.layer("ack").y
    assert ack.max() <= s.end.max() + 1 and ack.min() >= 0  # + 1: the FIN
    # the SACK blocks lie above the cumulative ACK of the hole they report
    assert (fig.pcapkit_chart.layer("sack").y >= s[~new].offset.min()).all()


def test_alignment_strip(h2hol):
    fig = plot.alignment_strip(h2hol, 0, "s2c")
    r = h2hol.records[(h2hol.records.flow == 0) & (h2hol.records.dir == "s2c")]
    assert marks(fig, "records") == len(r)
    assert marks(fig, "push_units") == r.push_unit.nunique()
    ch = fig.pcapkit_chart
    spanning = (r.segments > 1).to_numpy()
    assert spanning.any()
    assert [c in ("#fb8c00", plot.SPLIT_COLOR) for c in ch.layer("records").color] == list(spanning)


def test_alignment_strip_marks_records_split_across_push_units():
    with pcapkit.open(FIX / "tls_record_split_write/client.pcapng") as t:
        ch = plot.alignment_strip_chart(t, 0, "s2c")
        r = t.records[(t.records.flow == 0) & (t.records.dir == "s2c")]
        split = {
            (int(a), int(b))
            for (a, b), c in zip(ch.layer("records").frames, ch.layer("records").color, strict=True)
            if c == plot.SPLIT_COLOR
        }
        f = t.findings[t.findings.kind == "tls_record_split_write"].iloc[0]
        named = {
            (a, b)
            for a, b in zip(r.first_frame, r.last_frame, strict=True)
            if {a, b} <= set(f.frames)
        }
        assert named and named <= split
        assert all(r.set_index("first_frame").loc[a, "segments"] >= 2 for a, _ in split)
    with pcapkit.open(FIX / "tls_record_whole_write/client.pcapng") as t:  # the control
        assert (
            plot.SPLIT_COLOR not in plot.alignment_strip_chart(t, 0, "s2c").layer("records").color
        )


def test_stream_waterfall_hol_and_stall(h2hol):
    fig = plot.stream_waterfall(h2hol, 0)
    m = h2hol.messages
    per_stream = m[(m.protocol == "h2") & (m.stream > 0)]
    assert marks(fig, "frames") == len(per_stream)
    streams = sorted(per_stream.stream.unique())
    assert [t for _, t in fig.pcapkit_chart.yticks] == [str(s) for s in streams]
    # tcp_hol_blocking names no stream: every stream active across it is shaded
    assert 1 <= marks(fig, "waiting") <= len(streams)
    with pcapkit.open(FIX / "h2_flow_control/client.pcapng") as t:
        fig = plot.stream_waterfall(t, 0)
        stalls = t.findings[t.findings.kind == "h2_flow_control_stall"]
        assert marks(fig, "stalls") == len(stalls) >= 1
    with pcapkit.open(FIX / "h3_streams_drop/client.pcapng") as t:
        ch = plot.stream_waterfall_chart(t, 0)
        assert {int(s) for _, s in ch.yticks} == {0, 4, 8, 12}
        assert len(ch.layer("waiting")) >= 1


def test_handshake_ladder_tls_and_quic(nagle):
    fig = plot.handshake_ladder(nagle, 0)
    h = nagle.tls_handshake.iloc[0]
    ch = fig.pcapkit_chart
    assert [f for (f,) in ch.layer("arrows").frames] == [
        int(h.client_hello_frame),
        int(h.server_hello_frame),
        int(h.server_flight_end_frame),
        int(h.client_answer_frame),
        int(h.client_finished_frame),
    ]
    tls = nagle.tls.iloc[0]
    sh = ch.layer("shares")
    assert sh.labels[0].startswith("network")
    assert sh.y2[0] - sh.y[0] == pytest.approx(tls.handshake_network_ms)
    assert sh.y2[-1] == pytest.approx(
        sum(
            tls[c]
            for c in (
                "handshake_network_ms",
                "handshake_server_ms",
                "handshake_flight_ms",
                "handshake_client_ms",
            )
        )
    )
    with pcapkit.open(FIX / "h3_sse_drop/client.pcapng") as t:
        ch = plot.handshake_ladder_chart(t, 0)
        assert ch.layer("arrows").labels[0].startswith("client Initial")
        assert int(t.quic_handshake.client_initial_frame.iloc[0]) == ch.layer("arrows").frames[0][0]
        assert len(ch.layer("shares")) >= 1


def test_downsampling_keeps_ends_and_says_so(h2hol):
    ch = plot.time_sequence_chart(h2hol, 0, "s2c", max_marks=10)
    seg = ch.layer("segments")
    assert len(seg) == 10 and seg.total > 10
    full = plot.time_sequence_chart(h2hol, 0, "s2c").layer("segments")
    assert seg.x[0] == full.x[0] and seg.x[-1] == full.x[-1]
    assert any(n.startswith("segments: 10 of") for n in ch.notes)


def test_a_quic_flow_has_no_tcp_picture_and_does_not_crash():
    with pcapkit.open(FIX / "h3_sse_drop/client.pcapng") as t:
        fig = plot.time_sequence(t, 0)  # a QUIC flow: no TCP segments
        assert len(fig.pcapkit_chart.layer("segments")) == 0 and not artists(fig, "segments")
        assert fig.axes[0].texts[0].get_text() == "nothing to draw"
        fig = plot.alignment_strip(t, 0)
        assert not fig.pcapkit_chart.has("records") and not artists(fig, "records")


def test_fit_shares_a_chart_budget_across_layers(h2hol):
    ch = plot.time_sequence_chart(h2hol, 0, "s2c")
    sizes = {ly.name: len(ly) for ly in ch.layers}
    assert sizes["retransmissions"] < 20 < sizes["records"]
    fitted = plot.fit(plot.time_sequence_chart(h2hol, 0, "s2c"), 120)
    got = {ly.name: len(ly) for ly in fitted.layers}
    assert sum(got.values()) <= 120
    assert got["retransmissions"] == sizes["retransmissions"]  # small layers kept whole
    assert got["records"] < sizes["records"]
    for ly in fitted.layers:
        assert ly.total == sizes[ly.name]
    assert any(
        n.startswith(f"records: {got['records']} of {sizes['records']}") for n in fitted.notes
    )
    assert plot.fit(ch, 10_000) is ch and not ch.notes  # under budget: untouched
    # thinned twice (per layer, then per chart): the total is still the table's, one note
    twice = plot.fit(plot.time_sequence_chart(h2hol, 0, "s2c", max_marks=40), 120)
    seg = twice.layer("segments")
    assert seg.total == sizes["segments"]
    assert len([n for n in twice.notes if n.startswith("segments:")]) == 1
