"""Two vantages, one timeline (issue 18): ``pcapkit merge`` and ``pcapkit.open([c, s])``.

The lab's fixtures hold a client and a server capture of one run on one clock.  Each
test moves the server capture onto a clock of its own — an offset of seconds, a drift
of tens of ppm and jitter, rewritten in a temporary copy — and checks that the merge
finds the planted clock within the uncertainty it states, and that everything built
on the merged timeline (one-way delays, losses, the split of each wait) is what the
true clock gives.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

import pcapkit
from pcapkit import vantage
from pcapkit.cli import cli
from pcapkit.io.reader import read_capture
from pcapkit.io.writer import write_frames
from pcapkit.vantage import (
    CapturesSwapped,
    ClockFit,
    NoCommonTraffic,
    TwoVantageTrace,
    fit_clock,
    gap_holds,
    match,
    split_gaps,
    wire_keys,
)

FIX = Path(__file__).resolve().parent.parent / "fixtures"
PAIRS = sorted(p.parent.name for p in FIX.glob("*/server.pcapng"))

# the planted server clock: 3.2 s behind, 40 ppm slow, up to 20 µs of timestamp jitter
OFFSET_NS = 3_217_345_678
DRIFT_PPM = 40.0
JITTER_NS = 20_000


def shift(src: Path, dst: Path, *, offset_ns: int, ppm: float, jitter_ns: int, seed: int) -> int:
    """Rewrite ``src``'s timestamps as a clock ``offset_ns`` behind that runs ``ppm``
    slow, plus uniform jitter in [0, jitter_ns) (kept in file order); returns t0, the
    true time where the two clocks' rates are compared from."""
    raw = read_capture(src)
    try:
        ts = raw.ts_ns.astype(np.int64)
        t0 = int(ts.min())
        jit = np.random.default_rng(seed).integers(0, max(jitter_ns, 1), ts.shape[0])
        moved = t0 + np.rint((ts - t0) * (1 - ppm * 1e-6)).astype(np.int64) - offset_ns + jit
        raw.ts_ns = np.maximum.accumulate(moved)
        secrets = [(s.secrets_type, s.data) for s in raw.secrets]
        write_frames(raw, range(raw.frames), dst, secrets)
    finally:
        raw.close()
    return t0


def true_offset_ms(ref_ns: int, t0: int, *, offset_ns: int, ppm: float) -> float:
    """What to add to the shifted clock's reading ``ref_ns`` to get the true time."""
    true = t0 + (ref_ns + offset_ns - t0) / (1 - ppm * 1e-6)
    return (true - ref_ns) / 1e6


def true_drift_ppm(ppm: float) -> float:
    return ppm / (1 - ppm * 1e-6)


@dataclass(frozen=True)
class Planted:
    client: Path
    server: Path  # the shifted copy
    t0: int
    base: ClockFit  # the fit of the unshifted pair (one clock: the truth is 0)
    asym_ms: float  # the middle of the true clock's bounds (the paths' asymmetry)
    jitter_ms: float


def planted(name: str, tmp_path: Path, seed: int = 1) -> Planted:
    """A fixture pair with its server capture on a planted clock.  Jitter stays below a
    tenth of the pair's smallest one-way delay (the veth pair's are microseconds)."""
    client, server = FIX / name / "client.pcapng", FIX / name / "server.pcapng"
    ra, rb = read_capture(client), read_capture(server)
    try:
        ka, kb = wire_keys(ra), wire_keys(rb)
        base = fit_clock(ka, kb)
    finally:
        ra.close()
        rb.close()
    # the true clock's own NTP bounds, computed here: on one clock the offset is 0, and
    # the middle of the bounds is off by the paths' residual asymmetry
    ia, ib = match(ka, kb)
    x = ka.ts_ns[ia] - kb.ts_ns[ib]
    up = ka.dir[ia] == 0
    asym_ms = (int(x[up].max()) + int(x[~up].min())) / 2 / 1e6
    jitter = int(min(JITTER_NS, base.uncertainty_ms * 1e6 / 10))
    moved = tmp_path / f"{name}-server.pcapng"
    t0 = shift(server, moved, offset_ns=OFFSET_NS, ppm=DRIFT_PPM, jitter_ns=jitter, seed=seed)
    return Planted(client, moved, t0, base, asym_ms, jitter / 1e6)


@pytest.mark.parametrize("name", PAIRS)
def test_merge_recovers_a_planted_clock_within_its_stated_uncertainty(
    name: str, tmp_path: Path
) -> None:
    p = planted(name, tmp_path)
    client, moved, t0, jitter_ms = p.client, p.server, p.t0, p.jitter_ms
    out = tmp_path / "both.pcapng"
    r = CliRunner().invoke(
        cli, ["merge", str(client), str(moved), "-o", str(out), "--format", "json"]
    )
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert {"offset_ms", "drift_ppm", "uncertainty_ms"} <= set(doc)
    want = true_offset_ms(doc["reference_ts_ns"], t0, offset_ns=OFFSET_NS, ppm=DRIFT_PPM)
    assert abs(doc["offset_ms"] - want) <= doc["uncertainty_ms"]
    assert abs(doc["drift_ppm"] - true_drift_ppm(DRIFT_PPM)) <= doc["drift_uncertainty_ppm"]
    # the lab's paths are symmetric (the same delay each way), so the error is what the
    # true clock's own fit shows (the paths' residual asymmetry), moved at most by the
    # jitter and by the drift a short capture does not fit (40 ppm over its span)
    slack = jitter_ms + DRIFT_PPM * 1e-6 * doc["span_ms"] + 0.001
    assert abs(doc["offset_ms"] - want - p.asym_ms) <= slack
    # every packet of both captures matched (the lab's captures see the same packets)
    with pcapkit.open(client) as a, pcapkit.open(moved) as b:
        assert doc["matched"] == min(len(a.packets), len(b.packets))


def test_a_long_capture_pins_the_drift_down(monkeypatch: pytest.MonkeyPatch) -> None:
    """A short capture cannot tell 40 ppm from none (tens of µs over a second, below the
    timing noise): its drift interval says so.  Sixty copies of one fixture pair's
    packets, ten seconds apart (ten minutes), give the drift to a fraction of a ppm."""
    ra = read_capture(FIX / "tls_sse_drop" / "client.pcapng")
    rb = read_capture(FIX / "tls_sse_drop" / "server.pcapng")
    try:
        a0, b0 = wire_keys(ra), wire_keys(rb)
    finally:
        ra.close()
        rb.close()
    short = fit_clock(a0, b0)
    assert short.drift_uncertainty_ppm > DRIFT_PPM  # says it cannot see tens of ppm

    def copies(k: object, n: int) -> tuple[np.ndarray, np.ndarray]:
        assert isinstance(k, type(a0))
        i = np.repeat(np.arange(n, dtype=np.int64), len(k))
        ts = np.tile(k.ts_ns, n) + i * 10_000_000_000
        key = np.tile(k.key, n) ^ (i.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15))
        return ts, key

    n = 300  # 17,400 matched packets: enough for fit_clock to prune (PRUNE_BINS)
    ta, ka = copies(a0, n)
    tb, kb = copies(b0, n)
    t0 = int(tb.min())
    tb = t0 + np.rint((tb - t0) * (1 - DRIFT_PPM * 1e-6)).astype(np.int64) - OFFSET_NS

    def tile(k: object, ts: np.ndarray, key: np.ndarray) -> object:
        assert isinstance(k, type(a0))
        return replace(
            k,
            ts_ns=ts,
            key=key,
            frame=np.tile(k.frame, n),
            flow=np.tile(k.flow, n),
            dir=np.tile(k.dir, n),
            proto=np.tile(k.proto, n),
        )

    long = fit_clock(tile(a0, ta, ka), tile(b0, tb, kb))  # type: ignore[arg-type]
    assert long.span_ms > 2_990_000
    monkeypatch.setattr(vantage, "PRUNE_BINS", 10**9)  # no pruning
    assert fit_clock(tile(a0, ta, ka), tile(b0, tb, kb)) == long  # type: ignore[arg-type]
    want = true_drift_ppm(DRIFT_PPM)
    assert abs(long.drift_ppm - want) <= long.drift_uncertainty_ppm < 1.0
    off = true_offset_ms(long.reference_ts_ns, t0, offset_ns=OFFSET_NS, ppm=DRIFT_PPM)
    assert abs(long.offset_ms - off) <= long.uncertainty_ms


def test_the_merged_pcapng_has_both_vantages_on_the_client_clock(tmp_path: Path) -> None:
    p = planted("tls_sse_drop", tmp_path)
    client, moved = p.client, p.server
    out = tmp_path / "both.pcapng"
    r = CliRunner().invoke(cli, ["merge", str(client), str(moved), "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert "offset_ms" in r.output and "uncertainty_ms" in r.output and "drift_ppm" in r.output
    truth = FIX / "tls_sse_drop" / "server.pcapng"
    with (
        pcapkit.open(out) as m,
        pcapkit.open(client) as a,
        pcapkit.open(truth) as s,
        pcapkit.open([client, moved]) as two,
    ):
        assert [i.name for i in m.raw.interfaces] == ["client", "server"]
        assert m.frames == a.frames + s.frames
        ts = m.raw.ts_ns
        assert (np.diff(ts) >= 0).all()  # one timeline, in time order
        mine = m.raw.iface == 0
        assert ts[mine].tolist() == a.raw.ts_ns.tolist()
        # the server's frames: the shifted clock mapped back, within the fit's error
        err = np.abs(ts[~mine] - s.raw.ts_ns) / 1e6
        assert err.max() <= two.clock.uncertainty_ms
        assert m.raw.secrets  # the key logs travel


def test_open_two_captures_gives_one_timeline(tmp_path: Path) -> None:
    p = planted("h2_hol_drop", tmp_path)
    client, moved = p.client, p.server
    with pcapkit.open([client, moved]) as t:
        assert isinstance(t, TwoVantageTrace) and isinstance(t, pcapkit.Trace)
        assert "TwoVantageTrace" in repr(t)
        with pcapkit.open(FIX / "h2_hol_drop" / "server.pcapng") as truth:
            # the server's tables are on the client's clock: its packets where the true
            # clock has them, to within the fit's uncertainty
            d = (t.server.packets.ts_ns - truth.packets.ts_ns).abs().max() / 1e6
            assert d <= t.clock.uncertainty_ms
            assert t.server.findings.kind.tolist() == truth.findings.kind.tolist()
        with pcapkit.open(client) as one:
            assert len(t.findings) and t.requests.equals(one.requests)


def test_one_way_delays_and_the_lost_segment(tmp_path: Path) -> None:
    """h2_hol_drop (fixtures/README.md): the forwarder drops s2c seq 18348 len 1448 =
    server frame 32, retransmitted in server frame 69, which fills the client's hole in
    frame 71; both directions have a 15 ms one-way delay."""
    p = planted("h2_hol_drop", tmp_path)
    client, moved = p.client, p.server
    with pcapkit.open([client, moved]) as t:
        ow = t.one_way
    lost = ow[ow.status == "lost"]
    assert len(lost) == 1
    row = lost.iloc[0]
    assert (row.dir, row.seq, row.length, row.server_frame) == ("s2c", 18348, 1448, 32)
    assert pd.isna(row.client_frame) and pd.isna(row.one_way_ms)
    again = ow[(ow.seq == 18348) & (ow.dir == "s2c") & (ow.status == "delivered")]
    assert again[["server_frame", "client_frame"]].values.tolist() == [[69, 71]]
    assert bool(again.retransmission.iloc[0]) and not bool(again.spurious.iloc[0])
    assert again.original.tolist() == ["lost"]  # between the two capture points
    ok = ow[ow.status == "delivered"]
    assert set(ok.dir) == {"c2s", "s2c"}
    # 15 ms each way plus the forwarder's and the stacks' own time: never less
    assert ok.one_way_ms.min() >= 15.0 - t.clock.uncertainty_ms
    assert (ok.received_ts_ns > ok.sent_ts_ns).all()
    assert set(ow.status) == {"delivered", "lost"}


def test_a_loss_neither_capture_saw_is_placed_inside_the_sender(tmp_path: Path) -> None:
    """Remove the dropped segment (server frame 32) from h2_hol_drop's server capture too:
    now neither capture saw the first transmission — as when the sending host drops it
    before its capture point — and its retransmission says so."""
    src = FIX / "h2_hol_drop" / "server.pcapng"
    cut = tmp_path / "server-cut.pcapng"
    raw = read_capture(src)
    try:
        rows = [i for i in range(raw.frames) if i != 31]
        write_frames(raw, rows, cut, [(s.secrets_type, s.data) for s in raw.secrets])
    finally:
        raw.close()
    with pcapkit.open([FIX / "h2_hol_drop" / "client.pcapng", cut]) as t:
        ow = t.one_way
    assert "lost" not in set(ow.status)
    rt = ow[ow.retransmission.fillna(False).astype(bool)]
    assert rt[["seq", "server_frame", "client_frame"]].values.tolist() == [[18348, 68, 71]]
    assert rt.original.tolist() == ["unseen"] and not rt.spurious.any()


def test_a_spurious_retransmission_is_named(tmp_path: Path) -> None:
    """zero_window: the server resends s2c seq 24677 that had reached the client's
    capture point (the client's window was closed): the original arrived."""
    with pcapkit.open(
        [FIX / "zero_window" / "client.pcapng", FIX / "zero_window" / "server.pcapng"]
    ) as t:
        ow = t.one_way
    rt = ow[ow.retransmission.fillna(False).astype(bool)]
    assert rt.seq.tolist() == [24677] and rt.original.tolist() == ["delivered"]
    assert rt.spurious.all()


def test_one_capture_has_an_empty_one_way_table() -> None:
    with pcapkit.open(FIX / "h2_hol_drop" / "client.pcapng") as t:
        assert t.one_way.empty
        assert list(t.one_way.columns) == pcapkit.schema.columns("one_way")
        assert t.gaps["s2c_ms"].isna().all()


GAP_PAIRS = ["tls_sse_drop", "tls_sse_nagle", "tls_sse_think", "h2_sse_drop", "grpc_stream"]


@pytest.mark.parametrize("name", GAP_PAIRS)
def test_gap_attribution_is_the_true_clocks(name: str, tmp_path: Path) -> None:
    """Each wait split into client, c2s, server and s2c time adds up to the wait, and is
    the split the true clock gives, to within the recovered clock's error."""
    p = planted(name, tmp_path)
    client, moved = p.client, p.server
    with (
        pcapkit.open([client, moved]) as t,
        pcapkit.open(FIX / name / "server.pcapng") as truth,
    ):
        g = t.gaps
        assert len(g) and g["s2c_ms"].notna().all()
        parts = g[["client_ms", "c2s_ms", "server_side_ms", "s2c_ms"]].sum(axis=1)
        assert np.allclose(parts.to_numpy(float), g.gap_ms.to_numpy(float), atol=0.005)
        holds = gap_holds(t.finding_objects, truth.finding_objects, t.flow_map)
        base = pcapkit.open(client)
        ref = split_gaps(base.gaps, t.requests, truth.requests, truth.messages, t.flow_map, holds)
        base.close()
        # the recovered clock's largest error over the capture (jitter included)
        clock_err_ms = float(np.abs(t.server.raw.ts_ns - truth.raw.ts_ns).max()) / 1e6
        assert clock_err_ms <= t.clock.uncertainty_ms
        cols = ["c2s_ms", "server_side_ms", "s2c_ms", "client_ms"]
        diff = (g[cols].astype(float) - ref[cols].astype(float)).abs().max().max()
        assert diff <= clock_err_ms + 0.002  # rounding to µs
        assert g.cause.tolist() == ref.cause.tolist()
        assert g[["request", "event", "gap_ms"]].equals(ref[["request", "event", "gap_ms"]])


def test_tls_sse_drop_waits_split_where_the_scenario_says(tmp_path: Path) -> None:
    """tls_sse_drop: the first event waits one path each way (15 ms) and the server's
    own ~1 ms; event 10's segment is lost: its wait is the server's 50 ms cadence
    (less the previous event's trip) and a retransmission's worth of s2c time."""
    p = planted("tls_sse_drop", tmp_path)
    client, moved = p.client, p.server
    with pcapkit.open([client, moved]) as t:
        g = t.gaps.set_index("event")
    first = g.loc[0]
    assert 15.0 <= first.c2s_ms <= 16.0 and 15.0 <= first.s2c_ms <= 16.0
    assert first.server_side_ms < 5.0 and first.cause == "network_c2s"
    late = g.loc[9]
    assert late.cause == "tcp_hol_blocking"
    assert 80.0 <= late.s2c_ms <= 100.0  # 15 ms path + the ~80 ms retransmission wait
    assert 30.0 <= late.server_side_ms <= 40.0  # 50 ms cadence − the previous 15 ms trip


def test_captures_without_common_traffic_are_one_line_and_exit_1(tmp_path: Path) -> None:
    out = tmp_path / "x.pcapng"
    a = FIX / "tls_sse_drop" / "client.pcapng"
    b = FIX / "nagle_wwr" / "server.pcapng"
    r = CliRunner().invoke(cli, ["merge", str(a), str(b), "-o", str(out)])
    assert r.exit_code == 1
    assert r.output.count("\n") == 1 and "share no traffic" in r.output
    assert str(a) in r.output and str(b) in r.output
    assert not out.exists()
    with pytest.raises(NoCommonTraffic, match="share no traffic"):
        pcapkit.open([a, b])
    junk = tmp_path / "junk.pcapng"
    junk.write_bytes(b"not a capture at all")
    r = CliRunner().invoke(cli, ["merge", str(a), str(junk), "-o", str(out)])
    assert r.exit_code == 1 and r.output.startswith("pcapkit: error:")
    assert r.output.count("\n") == 1
    r = CliRunner().invoke(cli, ["merge", str(a), str(tmp_path / "missing"), "-o", str(out)])
    assert r.exit_code == 1 and r.output.count("\n") == 1
    with pytest.raises(ValueError, match="two captures"):
        pcapkit.open([a])


@pytest.mark.parametrize("name", ["tls_sse_drop", "bulk_veth_gso_tls", "h3_sse_drop"])
def test_the_server_capture_given_first_is_refused(name: str, tmp_path: Path) -> None:
    """Given the other way round, no clock fits (every packet would arrive before it
    left): one line that says to swap them, exit 1, nothing written — on the 30 ms
    paths, the veth pair's microseconds and QUIC."""
    out = tmp_path / "x.pcapng"
    server, client = FIX / name / "server.pcapng", FIX / name / "client.pcapng"
    r = CliRunner().invoke(cli, ["merge", str(server), str(client), "-o", str(out)])
    assert r.exit_code == 1 and r.output.count("\n") == 1
    assert "looks like the server's" in r.output and not out.exists()
    with pytest.raises(CapturesSwapped):
        pcapkit.open([server, client])


def _segments(rows: list[tuple[int, str, int, int, int, int, str]]) -> pd.DataFrame:
    """A segments table: (flow, dir, frame, ts_ns, offset, length, kind) per row."""
    from pcapkit import schema

    cols = ["flow", "dir", "frame", "ts_ns", "offset", "length", "kind"]
    data = {c: [r[i] for r in rows] for i, c in enumerate(cols)}
    return schema.frame("segments", data, len(rows))


def test_a_segment_cut_in_pieces_on_the_way_is_one_row() -> None:
    """Segmentation offload: the server's capture holds one 2896-byte segment, the
    client's the two 1448-byte pieces the NIC made of it — one row, resegmented, timed
    by its first piece; the lone 100-byte segment the client never got is lost."""
    server = _segments(
        [(0, "s2c", 5, 80_000_000, 0, 2896, "new"), (0, "s2c", 6, 90_000_000, 2896, 100, "new")]
    )
    client = _segments(
        [
            (0, "s2c", 10, 95_000_000, 0, 1448, "new"),
            (0, "s2c", 11, 95_100_000, 1448, 1448, "new"),
        ]
    )
    pairs = pd.DataFrame({"client_frame": [], "server_frame": []}, dtype="int64")
    ow = vantage.one_way_table(client, server, pairs, {0: 0})
    assert ow[["seq", "length", "status", "server_frame", "client_frame"]].values.tolist() == [
        [1, 2896, "resegmented", 5, 10],
        [2897, 100, "lost", 6, pd.NA],
    ]
    assert ow.one_way_ms.tolist()[0] == 15.0


def test_the_split_names_who_held_the_bytes(tmp_path: Path) -> None:
    """tls_sse_nagle: event 1 leaves the server 71 ms after it was written, held by
    Nagle until the client's delayed ACK (scenario.json): that time is the client's.
    tls_sse_think: the server thinks 400 ms before event 11: the server's."""
    p = planted("tls_sse_nagle", tmp_path)
    with pcapkit.open([p.client, p.server]) as t:
        first = t.gaps.set_index("event").loc[0]
    assert 65.0 <= first.client_ms <= 75.0 and first.server_side_ms < 5.0
    assert first.cause == "nagle_delayed_ack"
    p = planted("tls_sse_think", tmp_path)
    with pcapkit.open([p.client, p.server]) as t:
        think = t.gaps.set_index("event").loc[10]
    assert think.cause == "server" and think.client_ms == 0.0
    assert 400.0 <= think.server_side_ms <= 450.0 and 15.0 <= think.s2c_ms <= 16.0


def test_a_nat_between_the_ends_does_not_hide_the_match(tmp_path: Path) -> None:
    """The server sees the client behind a NAT: its capture has another client address.
    Addresses are not part of the match, so every packet still pairs up and the one-way
    table joins the two views' connections."""
    src = FIX / "tls_sse_drop" / "server.pcapng"
    natted = tmp_path / "server-nat.pcapng"
    raw = read_capture(src)
    try:
        buf = np.array(raw.buf)  # a private copy to rewrite
        inside, outside = bytes([10, 77, 0, 1]), bytes([192, 0, 2, 7])
        for off in raw.data_off.tolist():  # raw IPv4: source at +12, destination at +16
            for at in (off + 12, off + 16):
                if buf[at : at + 4].tobytes() == inside:
                    buf[at : at + 4] = np.frombuffer(outside, np.uint8)
        raw.buf = buf
        write_frames(
            raw, range(raw.frames), natted, [(s.secrets_type, s.data) for s in raw.secrets]
        )
    finally:
        raw.close()
    client = FIX / "tls_sse_drop" / "client.pcapng"
    with pcapkit.open([client, natted]) as t:
        assert t.server.flows.client_ip.tolist() == ["192.0.2.7"]
        assert t.flows.client_ip.tolist() == ["10.77.0.1"]
        assert t.clock.matched == len(t.packets)
        assert t.flow_map == {0: 0}
        assert set(t.one_way.status) == {"delivered", "lost"}
        assert t.gaps["s2c_ms"].notna().all()


@pytest.mark.parametrize("name", PAIRS)
def test_the_losses_are_the_planted_drops(name: str, tmp_path: Path) -> None:
    """The lab's forwarder drops the n-th payload packet of a direction (scenario.json
    path.<dir>.drop): on the merged timeline exactly those are lost between the capture
    points — TCP segments and QUIC datagrams alike — and nothing else is."""
    scenario = json.loads((FIX / name / "scenario.json").read_text())
    planted_drops = {
        (d, n)
        for d in ("c2s", "s2c")
        for n in (scenario.get("path") or {}).get(d, {}).get("drop", [])
    }
    p = planted(name, tmp_path)
    with pcapkit.open([p.client, p.server]) as t:
        ow = t.one_way
        found = set()
        for row in ow[ow.status == "lost"].itertuples(index=False):
            sender = t.server.packets if row.dir == "s2c" else t.packets
            frame = row.server_frame if row.dir == "s2c" else row.client_frame
            mine = sender[(sender.dir == row.dir) & (sender.payload_len > 0)]
            found.add((row.dir, int((mine.frame <= frame).sum())))
    assert found == planted_drops
    assert "receiver_only" not in set(ow.status)
    delivered = ow[ow.status == "delivered"]
    assert len(delivered) and (delivered.one_way_ms > 0).all()


def test_both_views_measure_each_half_of_a_nagle_hold_where_it_happens(tmp_path: Path) -> None:
    """tls_sse_nagle (scenario.json): the client's delayed ACK of the 2nd ticket took
    41.3 ms, and the server's held event left right after that ACK arrived.  With both
    views, each half is measured at its own end: the delayed ACK at the receiver, the
    release at the sender — no leg estimate, on a planted clock.  nagle_wwr is the
    mirror image (the client holds, the server delays its ACK)."""
    p = planted("tls_sse_nagle", tmp_path)
    with pcapkit.open([p.client, p.server]) as t:
        f = t.findings
        (hold,) = [
            d["both_views"]
            for k, d in zip(f.kind, f.details, strict=True)
            if k == "nagle_delayed_ack"
        ]
    assert 41.0 <= hold["receiver_ack_delay_ms"] <= 41.6  # scenario.json: 41.3 ms
    assert 0.0 <= hold["sender_release_lag_ms"] < 1.0
    roles = {e["role"]: e for e in hold["evidence"]}
    assert (
        roles["held_segment"]["client_frame"] == 12 and roles["held_segment"]["server_frame"] == 12
    )
    # the held segment's trip is the path's 15 ms, on the merged clock
    trip = roles["held_segment"]["client_ts_ns"] - roles["held_segment"]["server_ts_ns"]
    assert 15.0 <= trip / 1e6 <= 15.5
    p = planted("nagle_wwr", tmp_path)
    with pcapkit.open([p.client, p.server]) as t:
        f = t.findings
        holds = [
            d["both_views"]
            for k, d in zip(f.kind, f.details, strict=True)
            if k == "nagle_delayed_ack"
        ]
    assert len(holds) == 7
    assert all(40.0 <= h["receiver_ack_delay_ms"] <= 45.0 for h in holds)
    assert all(h["sender_release_lag_ms"] < 1.0 for h in holds)
