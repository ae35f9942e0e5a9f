"""The middle vantage: the forwarder's tap halfway along the path (issue 4 item 2).

Without root: the split of each one-way delay around the tap, on the virtual clock (exact
times), what the tap sees of drops, reordering and the rate limit, the pcap it writes, and
the option's plumbing.  With root (``lab``): ``nagle_wwr`` run with ``middle=True`` gives a
``middle.pcapng`` that pcapkit classifies as a middle vantage with both RTT legs about half
the RTT, while the end captures stay client- and server-side; every packet passes the middle
after its sender's capture and before its receiver's, about half a one-way delay later.
"""

from __future__ import annotations

import json
import statistics
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from test_lab_forwarder import drain, tcp

import pcapkit
from pcapkit.io import read_capture
from pcapkit.lab.cli import lab
from pcapkit.lab.forwarder import (
    C2S,
    LINKTYPE_RAW,
    S2C,
    DirectionConfig,
    Forwarder,
    ForwarderConfig,
    MemoryPort,
    MiddleTap,
    VirtualClock,
    main,
    parse_packet,
)
from pcapkit.lab.runner import _path_summary, forwarder_config

MS = 1_000_000
Doc = dict[str, Any]


class ListTap:
    """Collects what passes the middle: (wall-clock ns, packet)."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, bytes]] = []

    def write(self, ts_ns: int, pkt: bytes) -> None:
        self.seen.append((ts_ns, pkt))


def make_middle(
    c2s: DirectionConfig, s2c: DirectionConfig | None = None, *, middle: bool = True
) -> tuple[Forwarder, VirtualClock, MemoryPort, MemoryPort, ListTap]:
    clock = VirtualClock(start_ns=0)
    cport, sport = MemoryPort(clock), MemoryPort(clock)
    cfg = ForwarderConfig(c2s=c2s, s2c=s2c or DirectionConfig(), middle=middle)
    tap = ListTap()
    return Forwarder((cport, sport), cfg, clock, tap=tap), clock, cport, sport, tap


def mono(clock: VirtualClock, wall_ns: int) -> int:
    return wall_ns - clock.wall_offset


# --------------------------------------------------------------------------- pure logic


def test_delay_is_split_in_halves_around_the_tap() -> None:
    fwd, clock, cport, sport, tap = make_middle(DirectionConfig(delay_ns=10 * MS))
    cport.inject(0, tcp(1, b"a"))
    cport.inject(2 * MS, tcp(2, b"b"))
    drain(fwd, cport, sport)
    assert [mono(clock, t) for t, _ in tap.seen] == [5 * MS, 7 * MS]
    assert [t for t, _ in sport.sent] == [10 * MS, 12 * MS]  # end to end: unchanged
    assert [parse_packet(p).seq for _, p in tap.seen] == [1, 2]
    assert fwd.result()["stats"]["middle_tapped"] == 2


def test_odd_delay_and_each_direction_split_separately() -> None:
    fwd, clock, cport, sport, tap = make_middle(
        DirectionConfig(delay_ns=7), DirectionConfig(delay_ns=20 * MS)
    )
    cport.inject(0, tcp(1, b"q"))
    sport.inject(0, tcp(9, b"r", src=bytes([10, 77, 0, 2]), dst=bytes([10, 77, 0, 1])))
    drain(fwd, cport, sport)
    assert fwd.impairment.config.delay_split_ns(C2S) == (3, 4)
    assert fwd.impairment.config.delay_split_ns(S2C) == (10 * MS, 10 * MS)
    assert sorted(mono(clock, t) for t, _ in tap.seen) == [3, 10 * MS]
    assert [t for t, _ in sport.sent] == [7] and [t for t, _ in cport.sent] == [20 * MS]


def test_without_the_tap_the_delay_is_not_split() -> None:
    fwd, clock, cport, sport, tap = make_middle(DirectionConfig(delay_ns=10 * MS), middle=False)
    cport.inject(0, tcp(1, b"a"))
    drain(fwd, cport, sport)
    assert tap.seen == [] and [t for t, _ in sport.sent] == [10 * MS]
    assert fwd.impairment.config.delay_split_ns(C2S) == (10 * MS, 0)


def test_drop_happens_before_the_tap_and_reorder_is_visible_at_it() -> None:
    fwd, clock, cport, sport, tap = make_middle(
        DirectionConfig(delay_ns=10 * MS, drop=(2,), reorder=(3,), reorder_extra_ns=4 * MS)
    )
    for i in range(5):
        cport.inject(i * MS, tcp(100 + i, b"x"))
    drain(fwd, cport, sport)
    tapped = [parse_packet(p).seq for _, p in tap.seen]
    assert tapped == [100, 103, 104, 102]  # 101 dropped, 102 held back 4 ms
    assert [parse_packet(p).seq for _, p in sport.sent] == tapped
    assert [mono(clock, t) for t, _ in tap.seen] == [5 * MS, 8 * MS, 9 * MS, 11 * MS]
    assert [t for t, _ in sport.sent] == [10 * MS, 13 * MS, 14 * MS, 16 * MS]


def test_rate_limit_spacing_is_seen_at_the_middle() -> None:
    # 8 Mbit/s: a 1000-byte packet takes 1 ms on the link
    fwd, clock, cport, sport, tap = make_middle(
        DirectionConfig(delay_ns=4 * MS, rate_bps=8_000_000)
    )
    for _ in range(3):
        cport.inject(0, tcp(1, b"y" * (1000 - 40)))
    drain(fwd, cport, sport)
    assert [mono(clock, t) for t, _ in tap.seen] == [3 * MS, 4 * MS, 5 * MS]
    assert [t for t, _ in sport.sent] == [5 * MS, 6 * MS, 7 * MS]


def test_middle_tap_writes_a_nanosecond_raw_ip_pcap(tmp_path: Path) -> None:
    path = tmp_path / "middle.pcap"
    tap = MiddleTap(str(path))
    pkts = [tcp(1, b"abc"), tcp(4, b"defg")]
    stamps = [1_700_000_000_123_456_789, 1_700_000_000_123_456_790]
    for ts, pkt in zip(stamps, pkts, strict=True):
        tap.write(ts, pkt)
    tap.close()
    cap = read_capture(path)
    try:
        assert cap.frames == 2
        assert cap.interfaces[0].linktype == LINKTYPE_RAW
        assert cap.ts_ns.tolist() == stamps  # exact to the nanosecond
        assert [cap.frame_bytes(i + 1) for i in range(2)] == pkts
    finally:
        cap.close()
    assert tap.result() == {
        "file": str(path),
        "packets": 2,
        "bytes": path.stat().st_size,
        "truncated": False,
    }


def test_middle_tap_stops_at_its_cap(tmp_path: Path) -> None:
    tap = MiddleTap(str(tmp_path / "m.pcap"), max_bytes=24 + 16 + 60)
    pkt = tcp(1, b"z" * 20)  # 60 bytes
    tap.write(1, pkt)
    tap.write(2, pkt)
    tap.close()
    assert tap.result()["packets"] == 1 and tap.result()["truncated"] is True
    assert (tmp_path / "m.pcap").stat().st_size == 24 + 16 + 60


def test_forwarder_process_refuses_a_split_without_a_tap_file(tmp_path: Path) -> None:
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps(ForwarderConfig(middle=True).to_dict()))
    with pytest.raises(SystemExit) as exc:
        main(["--fds", "0,1", "--config", str(cfg), "--log", str(tmp_path / "log.json")])
    assert exc.value.code == 2


def test_config_round_trip_and_scenario_path_record_the_split() -> None:
    cfg = ForwarderConfig(c2s=DirectionConfig(delay_ns=15 * MS), middle=True)
    assert ForwarderConfig.from_dict(cfg.to_dict()) == cfg
    assert ForwarderConfig.from_dict({}).middle is False  # logs of older runs
    path = _path_summary(cfg)
    assert path["middle"] == {
        "c2s": {"before_ms": 7.5, "after_ms": 7.5},
        "s2c": {"before_ms": 0.0, "after_ms": 0.0},
    }
    assert _path_summary(forwarder_config({"delay_ms": 5.0}))["middle"] is None


def test_lab_run_has_a_middle_option() -> None:
    result = CliRunner().invoke(lab, ["run", "--help"])
    assert result.exit_code == 0
    assert "--middle" in result.output and "middle.pcapng" in result.output


# --------------------------------------------------------------------------- lab run (root)


def _key(row: Any) -> tuple[Any, ...]:
    """One transmission of one packet: the same at every vantage (TSval differs per send)."""
    return (row.src, row.sport, row.tcp_seq, row.tcp_ack, row.tcp_flags, row.payload_len, row.tsval)


def _times(path: Path) -> dict[tuple[Any, ...], int]:
    with pcapkit.open(path) as t:
        p = t.packets[t.packets.proto == "tcp"]
        out: dict[tuple[Any, ...], int] = {}
        for row in p.itertuples():
            out.setdefault(_key(row), int(row.ts_ns))
        return out


@pytest.mark.lab
@pytest.mark.usefixtures("lab_ready")
def test_nagle_with_middle_vantage(lab_run: Callable[..., tuple[Path, Doc]]) -> None:
    out, doc = lab_run("nagle_wwr", middle=True)
    rtt_ms = doc["path"]["rtt_ms"]
    half_delay_ns = doc["path"]["c2s"]["delay_ms"] / 2 * MS
    assert doc["path"]["middle"]["c2s"] == {"before_ms": rtt_ms / 4, "after_ms": rtt_ms / 4}
    assert doc["captures"]["middle"]["file"] == "middle.pcapng"
    assert doc["captures"]["middle"]["truncated"] is False
    for name, vantage in (("client", "client"), ("middle", "middle"), ("server", "server")):
        with pcapkit.open(out / f"{name}.pcapng") as t:
            tcp_flows = t.flows[t.flows.proto == "tcp"]
            assert len(tcp_flows) == 1
            f = tcp_flows.iloc[0]
            assert f.vantage == vantage, name
            if name == "middle":
                assert t.frames == doc["captures"]["middle"]["packets"]
                assert f.client_leg_ms == pytest.approx(rtt_ms / 2, rel=0.25)
                assert f.server_leg_ms == pytest.approx(rtt_ms / 2, rel=0.25)
                assert f.rtt_ms == pytest.approx(rtt_ms, rel=0.25)
    cli, mid, srv = (_times(out / f"{n}.pcapng") for n in ("client", "middle", "server"))
    assert set(mid) == set(cli) == set(srv)  # no drops: every packet at every vantage
    to_mid = []
    for k, t_mid in mid.items():
        sender, receiver = (cli, srv) if k[0] == "10.77.0.1" else (srv, cli)
        assert sender[k] < t_mid < receiver[k], k  # the middle is between the ends
        to_mid.append(t_mid - sender[k])
    assert statistics.median(to_mid) == pytest.approx(half_delay_ns, rel=0.25)


@pytest.mark.lab
@pytest.mark.usefixtures("lab_ready")
def test_middle_capture_carries_the_same_streams(
    lab_run: Callable[..., tuple[Path, Doc]],
) -> None:
    out, _ = lab_run("nagle_wwr", middle=True)
    with pcapkit.open(out / "client.pcapng") as a, pcapkit.open(out / "middle.pcapng") as m:
        for d in ("c2s", "s2c"):
            assert bytes(a.stream(0, d)) == bytes(m.stream(0, d)) != b""
    head = (out / "middle.pcapng").read_bytes()[:4]
    assert struct.unpack("<I", head)[0] == 0x0A0D0D0A  # pcapng, like the end captures
