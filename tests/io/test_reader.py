"""Reader: pcap/pcapng variants, gzip by magic, bad input → anomalies or one clear error."""

from __future__ import annotations

import gzip
import io
import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pcapkit
from pcapkit import schema
from pcapkit.errors import CaptureTooBroken, NotACapture, PcapkitError
from pcapkit.io import read_capture
from pcapkit.io.writer import PcapngWriter, PcapWriter, inject_secrets

from synth import Conn, udp_frame

T0 = 1_700_000_000_123_456_789
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def _packets(k: int = 5) -> list[tuple[int, bytes]]:
    c = Conn()
    c.handshake()
    for i in range(k):
        c.c2s(30_000 + i * 1000, b"x" * (i + 1))
    return c.frames


@pytest.mark.parametrize("big_endian", [False, True])
@pytest.mark.parametrize("ns", [False, True])
def test_pcap_byte_orders_and_resolutions(tmp_path, big_endian, ns):
    pk = _packets()
    p = tmp_path / "a.pcap"
    with open(p, "wb") as f:
        w = PcapWriter(f, 1, nanosecond=ns, big_endian=big_endian)
        for ts, data in pk:
            w.write(ts, data)
    cap = read_capture(p)
    assert cap.format == "pcap"
    assert cap.frames == len(pk)
    expect = np.array([ts if ns else ts // 1000 * 1000 for ts, _ in pk])
    assert (cap.ts_ns == expect).all()
    for i, (_, data) in enumerate(pk):
        assert cap.frame_bytes(i + 1) == data
    assert cap.interfaces[0].linktype == 1


def test_modified_pcap_header(tmp_path):
    pk = _packets(2)
    buf = io.BytesIO()
    buf.write(struct.pack("<IHHiIII", 0xA1B2CD34, 2, 4, 0, 0, 65535, 1))
    for ts, data in pk:
        s, us = divmod(ts // 1000, 1_000_000)
        buf.write(struct.pack("<IIII", s, us, len(data), len(data)))
        buf.write(struct.pack("<IHBB", 0, 0, 0, 0))  # ifindex, protocol, pkt_type, pad
        buf.write(data)
    p = tmp_path / "m.pcap"
    p.write_bytes(buf.getvalue())
    cap = read_capture(p)
    assert cap.frames == len(pk)
    assert cap.frame_bytes(2) == pk[1][1]


def _pcapng_multi(tmp_path):
    """Two sections (LE then BE), three interfaces with different resolutions."""
    pk = _packets(3)
    u = udp_frame(b"hello")
    buf = io.BytesIO()
    w = PcapngWriter(buf)
    w.add_interface(1, tsresol=6)  # µs
    w.add_interface(1, tsresol=9)  # ns
    w.write_raw_block(4, b"\x00\x00\x00\x00")  # NRB (only end-of-records)
    w.write(0, pk[0][0] // 1000, pk[0][1])
    w.write_secrets(b"CLIENT_RANDOM aa bb\n")
    w.write(1, pk[1][0], pk[1][1])
    w.write_raw_block(5, struct.pack("<III", 0, 0, 0))  # ISB
    w.write_raw_block(0x00000BAD, struct.pack("<I", 32473) + b"custom")
    w.write_simple(pk[2][1])  # SPB: no timestamp, interface 0
    # obsolete Packet Block on interface 1
    data = pk[3][1]
    body = (
        struct.pack("<HHIIII", 1, 0, pk[3][0] >> 32, pk[3][0] & 0xFFFFFFFF, len(data), len(data))
        + data
    )
    w.write_raw_block(2, body)
    w.write_raw_block(9, b"__REALTIME_TIMESTAMP=1\n")  # systemd journal entry: a frame in Wireshark
    w2 = PcapngWriter(buf, big_endian=True)  # second section, other byte order
    w2.add_interface(1, tsresol=0x80 | 20)  # 2^-20 s
    ticks = (pk[4][0] * (1 << 20)) // 1_000_000_000
    w2.write(0, ticks, pk[4][1])
    w2.write(0, ticks + 1, u)
    p = tmp_path / "multi.pcapng"
    p.write_bytes(buf.getvalue())
    return p, pk, ticks, u


def test_pcapng_sections_interfaces_blocks(tmp_path):
    p, pk, ticks, u = _pcapng_multi(tmp_path)
    cap = read_capture(p)
    assert cap.format == "pcapng"
    # EPB, EPB, SPB, PB, journal, EPB, EPB
    assert cap.frames == 7
    assert len(cap.interfaces) == 3
    assert cap.iface.tolist() == [0, 1, 0, 1, -1, 2, 2]
    assert cap.ts_ns[0] == pk[0][0] // 1000 * 1000
    assert cap.ts_ns[1] == pk[1][0]
    assert cap.ts_ns[2] == cap.ts_ns[1]  # SPB inherits the previous timestamp
    assert cap.ts_ns[3] == pk[3][0]
    expect = (ticks >> 20) * 1_000_000_000 + ((ticks & ((1 << 20) - 1)) * 1_000_000_000 >> 20)
    assert cap.ts_ns[5] == expect
    assert abs(int(cap.ts_ns[5]) - pk[4][0]) < 1000  # 2^-20 s resolution ≈ 954 ns
    assert cap.frame_bytes(3) == pk[2][1]
    assert cap.frame_bytes(7) == u
    assert len(cap.secrets) == 1
    assert cap.secrets[0].frames_before == 1
    assert cap.secrets[0].data.startswith(b"CLIENT_RANDOM")
    assert "CLIENT_RANDOM" not in repr(cap.secrets[0])
    # the whole pipeline decodes every packet frame
    t = pcapkit.open(p)
    pk_tab = t.packets
    assert pk_tab["frame"].tolist() == list(range(1, 8))
    assert pk_tab["proto"].tolist()[:4] == ["tcp"] * 4
    assert pk_tab["proto"].iloc[6] == "udp"
    assert pd_isna(pk_tab["proto"].iloc[4])


def pd_isna(v):
    import pandas as pd

    return bool(pd.isna(v))


def test_pcapng_tsoffset(tmp_path):
    buf = io.BytesIO()
    w = PcapngWriter(buf)
    # IDB with if_tsresol=9 and if_tsoffset=100 s, written by hand
    opts = (
        struct.pack("<HHB3x", 9, 1, 9) + struct.pack("<HHq", 14, 8, 100) + struct.pack("<HH", 0, 0)
    )
    w.write_raw_block(1, struct.pack("<HHI", 1, 0, 65535) + opts)
    w.write(0, 5, udp_frame(b"x"))
    p = tmp_path / "off.pcapng"
    p.write_bytes(buf.getvalue())
    cap = read_capture(p)
    assert cap.ts_ns.tolist() == [100_000_000_005]


def test_gzip_recognised_by_magic_not_name(tmp_path):
    pk = _packets(3)
    raw = tmp_path / "a.pcap"
    with open(raw, "wb") as f:
        w = PcapWriter(f, 1)
        for ts, d in pk:
            w.write(ts, d)
    gz = tmp_path / "no-extension"
    gz.write_bytes(gzip.compress(raw.read_bytes()))
    cap = read_capture(gz)
    assert cap.compressed
    assert cap.frames == len(pk)
    assert cap.frame_bytes(1) == pk[0][1]
    # a plain file named .gz is read as plain
    plain = tmp_path / "x.pcap.gz"
    plain.write_bytes(raw.read_bytes())
    assert not read_capture(plain).compressed


def test_truncated_last_record_is_an_anomaly(tmp_path):
    pk = _packets(4)
    p = tmp_path / "t.pcap"
    with open(p, "wb") as f:
        w = PcapWriter(f, 1)
        for ts, d in pk:
            w.write(ts, d)
    data = p.read_bytes()
    p.write_bytes(data[:-10])
    t = pcapkit.open(p)
    assert t.frames == len(pk) - 1
    an = t.anomalies
    assert an["name"].tolist() == ["truncated_record"]
    assert int(an["frame"].iloc[0]) == len(pk)
    assert len(t.flows) == 1  # the rest of the analysis goes on


def test_absurd_caplen_stops_with_anomaly(tmp_path):
    pk = _packets(3)
    buf = io.BytesIO()
    w = PcapWriter(buf, 1)
    for ts, d in pk[:2]:
        w.write(ts, d)
    buf.write(struct.pack("<IIII", 1, 0, 50_000_000, 60))
    buf.write(b"\x00" * 64)
    p = tmp_path / "c.pcap"
    p.write_bytes(buf.getvalue())
    t = pcapkit.open(p)
    assert t.frames == 2
    assert "absurd_caplen" in t.anomalies["name"].tolist()


# issue 15: a classic pcap whose *first* record is cut or claims an absurd caplen has
# zero complete frames; the walk had gathered a head row for that record, and the
# decoder's head_rows(0, 0) found no block to concatenate (ValueError).  SYNTHETIC.
_HDR = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)
FIRST_RECORD_CUT = _HDR + struct.pack("<IIII", 1, 0, 100, 100) + b"\x00" * 50
FIRST_RECORD_ABSURD = _HDR + struct.pack("<IIII", 1, 0, 1 << 30, 100) + b"\x00" * 50


@pytest.mark.parametrize(
    "data,name",
    [
        (FIRST_RECORD_CUT, "truncated_record"),
        (FIRST_RECORD_ABSURD, "absurd_caplen"),
        (gzip.compress(FIRST_RECORD_ABSURD), "absurd_caplen"),
    ],
    ids=["cut", "absurd", "absurd-gzip"],
)
def test_zero_complete_frames_is_an_anomaly_not_a_crash(tmp_path, data, name):
    p = tmp_path / "first.pcap"
    p.write_bytes(data)
    with pcapkit.open(p) as t:
        assert t.frames == 0 and t.raw.head_parts == []
        assert len(t.packets) == 0 and len(t.flows) == 0
        assert t.anomalies["name"].tolist() == [name]
        assert int(t.anomalies["frame"].iloc[0]) == 1


def test_head_rows_follow_the_frames_kept(tmp_path):
    pk = _packets(3)
    buf = io.BytesIO()
    w = PcapWriter(buf, 1)
    for ts, d in pk:
        w.write(ts, d)
    buf.write(struct.pack("<IIII", 1, 0, 500, 500) + b"\x00" * 10)  # a cut last record
    p = tmp_path / "c.pcap"
    p.write_bytes(buf.getvalue())
    cap = read_capture(p)
    assert cap.frames == len(pk)
    assert sum(h.shape[0] for h in cap.head_parts) == len(pk)
    assert cap.head_rows(0, 0).shape == (0, cap.head_parts[0].shape[1])
    cap.close()


@pytest.mark.parametrize(
    "content,exc",
    [
        (b"", NotACapture),
        (b"hello world, not a capture at all", NotACapture),
        (b"\xd4\xc3\xb2\xa1\x02\x00", CaptureTooBroken),
        (gzip.compress(b"plain text inside gzip"), NotACapture),
        (b"\x1f\x8b\x08\x00garbage", NotACapture),
    ],
)
def test_whole_file_errors(tmp_path, content, exc):
    p = tmp_path / "bad"
    p.write_bytes(content)
    with pytest.raises(exc) as ei:
        pcapkit.open(p)
    assert str(p) in str(ei.value)
    assert "\n" not in str(ei.value)


def test_unknown_linktype_is_whole_file_error(tmp_path):
    p = tmp_path / "u.pcap"
    with open(p, "wb") as f:
        w = PcapWriter(f, 147)  # LINKTYPE_USER0
        w.write(T0, b"\x01\x02\x03")
    with pytest.raises(pcapkit.UnsupportedLinkType):
        pcapkit.open(p)


def test_unknown_linktype_on_one_interface_is_an_anomaly(tmp_path):
    buf = io.BytesIO()
    w = PcapngWriter(buf)
    w.add_interface(147)
    w.add_interface(1)
    w.write(0, T0, b"\x01\x02")
    w.write(1, T0 + 1, udp_frame(b"abc"))
    p = tmp_path / "mixed.pcapng"
    p.write_bytes(buf.getvalue())
    t = pcapkit.open(p)
    assert t.anomalies["name"].tolist() == ["unsupported_linktype"]
    assert len(t.flows) == 1


def test_inject_secrets_roundtrip(tmp_path):
    pk = _packets(3)
    src = tmp_path / "s.pcap"
    with open(src, "wb") as f:
        w = PcapWriter(f, 1)
        for ts, d in pk:
            w.write(ts, d)
    dst = tmp_path / "d.pcapng"
    keylog = b"# comment\nCLIENT_RANDOM 00 11\n"
    inject_secrets(src, dst, keylog)
    a, b = read_capture(src), read_capture(dst)
    assert b.format == "pcapng"
    assert a.frames == b.frames
    assert (a.ts_ns == b.ts_ns).all()
    assert [a.frame_bytes(i) for i in range(1, a.frames + 1)] == [
        b.frame_bytes(i) for i in range(1, b.frames + 1)
    ]
    assert [s.data for s in b.secrets] == [keylog]
    assert b.secrets[0].frames_before == 0


# ---- property tests ---------------------------------------------------------

frames_st = st.lists(
    st.tuples(st.integers(0, 2**62 // 1000), st.binary(min_size=0, max_size=300)),
    min_size=0,
    max_size=30,
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(frames=frames_st, ng=st.booleans(), be=st.booleans(), tmp=st.just(None))
def test_writer_reader_roundtrip(tmp_path_factory, frames, ng, be, tmp):
    p = tmp_path_factory.mktemp("rt") / "x"
    buf = io.BytesIO()
    if ng:
        w = PcapngWriter(buf, big_endian=be)
        w.add_interface(1)
        for ts, d in frames:
            w.write(0, ts, d)
    else:
        w2 = PcapWriter(buf, 1, big_endian=be)
        for ts, d in frames:
            w2.write(ts % (2**32 * 10**9), d)
    p.write_bytes(buf.getvalue())
    cap = read_capture(p)
    assert cap.frames == len(frames)
    for i, (ts, d) in enumerate(frames):
        assert cap.frame_bytes(i + 1) == d
        assert int(cap.ts_ns[i]) == (ts if ng else ts % (2**32 * 10**9))
    assert not cap.anomalies


def _valid_capture_bytes() -> bytes:
    c = Conn()
    c.handshake()
    c.c2s(30_000, b"GET / HTTP/1.1\r\n\r\n")
    c.ack_s(30_100)
    c.s2c(31_000, b"HTTP/1.1 200 OK\r\n\r\n" + b"a" * 500)
    c.s2c(31_010, b"b" * 300)
    c.ack_c(31_100)
    buf = io.BytesIO()
    w = PcapngWriter(buf)
    w.add_interface(1)
    for ts, d in c.frames:
        w.write(0, ts, d)
    w.write_secrets(b"CLIENT_RANDOM 00 11\n")
    w.write(0, T0, udp_frame(b"q"))
    return buf.getvalue()


VALID = _valid_capture_bytes()


def _corrupted(tmp_path_factory, name: str, data: bytes, flips: list[tuple[int, int]]):
    """``data`` with the byte at each position set to the value (past the end: ignored), as a file."""
    b = bytearray(data)
    for pos, val in flips:
        if pos < len(b):
            b[pos] = val
    p = tmp_path_factory.mktemp("cor") / name
    p.write_bytes(bytes(b))
    return p


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    flips=st.lists(st.tuples(st.integers(0, len(VALID) - 1), st.integers(0, 255)), max_size=8),
    cut=st.integers(0, len(VALID)),
)
def test_corruption_never_crashes(tmp_path_factory, flips, cut):
    p = _corrupted(tmp_path_factory, "c.pcapng", VALID[:cut] if cut else VALID, flips)
    try:
        t = pcapkit.open(p)
    except PcapkitError as exc:
        assert "\n" not in str(exc)
        return
    with t:
        assert len(t.packets) == t.frames
        flows = t.flows
        assert list(flows.columns) == schema.columns("flows")
        assert list(t.segments.columns) == schema.columns("segments")
        assert (t.anomalies["name"].str.len() > 0).all()
        for f in range(len(flows)):
            assert len(t.stream(f, "c2s")) == flows.c2s_bytes.iloc[f]
            assert len(t.stream(f, "s2c")) == flows.s2c_bytes.iloc[f]


# --- the forked second-half walk of big classic pcaps (SYNTHETIC frames) ---------


def _pcap(path, frames, tail=b""):
    with open(path, "wb") as f:
        w = PcapWriter(f, 1)
        for i, fr in enumerate(frames):
            w.write(T0 + i * 1000, fr)
        f.write(tail)
    return path


def _walked(path, progress=None):
    c = read_capture(path, progress=progress)
    out = (
        c.data_off.copy(),
        c.caplen.copy(),
        c.origlen.copy(),
        c.ts_ns.copy(),
        c.anomalies,
        None if c.frames == 0 else c.head_rows(0, c.frames).copy(),
    )
    c.close()
    return out


def _same(a, b):
    for x, y in zip(a, b, strict=True):
        if isinstance(x, np.ndarray):
            assert np.array_equal(x, y)
        else:
            assert x == y


@pytest.fixture
def split_spy(monkeypatch):
    """Split every file (SPLIT_MIN_BYTES = 0) and count joins and abandons."""
    import sys

    import pcapkit.io.reader as R

    if not sys.platform.startswith("linux"):
        pytest.skip("the forked record walk runs on Linux only")

    monkeypatch.setattr(R, "SPLIT_MIN_BYTES", 0)
    calls = {"join": 0, "abandon": 0, "failed": 0}
    join, abandon = R._SplitWalk.join, R._SplitWalk.abandon

    def spy_join(self):
        calls["join"] += 1
        try:
            return join(self)
        except OSError:
            calls["failed"] += 1
            raise

    def spy_abandon(self):
        calls["abandon"] += bool(self.pid)
        return abandon(self)

    monkeypatch.setattr(R._SplitWalk, "join", spy_join)
    monkeypatch.setattr(R._SplitWalk, "abandon", spy_abandon)
    return calls


def _serial(monkeypatch, path):
    monkeypatch.setenv("PCAPKIT_THREADS", "1")
    got = _walked(path)
    monkeypatch.setenv("PCAPKIT_THREADS", "2")
    return got


def test_split_walk_joins_and_equals_the_serial_walk(tmp_path, monkeypatch, split_spy):
    frames = [udp_frame(b"p" * ((i * 37) % 1400)) for i in range(400)]
    p = _pcap(tmp_path / "s.pcap", frames, tail=b"\x01\x02\x03")  # trailing junk: an anomaly
    serial = _serial(monkeypatch, p)
    assert split_spy["join"] == 0
    _same(_walked(p), serial)
    assert split_spy == {"join": 1, "abandon": 0, "failed": 0}
    assert serial[4][0]["name"] == "truncated_record"


def test_split_walk_started_off_the_chain_is_abandoned(tmp_path, monkeypatch, split_spy):
    # one big frame over the split point whose payload is a chain of fake pcap
    # records: resynchronisation picks a start inside it, the serial walk never
    # lands there, and the child's offsets are thrown away
    unit = struct.pack("<IIII", T0 // 10**9, 0, 100, 100) + b"\x00" * 100
    fake = udp_frame(unit * 430)
    small = [udp_frame(b"s" * 60) for _ in range(20)]
    p = _pcap(tmp_path / "f.pcap", small + [fake] + small)
    serial = _serial(monkeypatch, p)
    got = _walked(p)
    _same(got, serial)
    assert len(got[0]) == 41
    assert split_spy == {"join": 0, "abandon": 1, "failed": 0}


def test_split_walk_child_failure_falls_back(tmp_path, monkeypatch, split_spy):

    frames = [udp_frame(b"q" * ((i * 53) % 1300)) for i in range(300)]
    p = _pcap(tmp_path / "c.pcap", frames)
    serial = _serial(monkeypatch, p)
    from pcapkit.io import prefetch

    real_array = prefetch.array

    def child_breaks(typecode, *init):  # only the child builds its array with an initialiser
        if init and init[0] == [0]:
            raise RuntimeError("child walk fails")
        return real_array(typecode, *init)

    monkeypatch.setattr(prefetch, "array", child_breaks)
    _same(_walked(p), serial)
    assert split_spy == {"join": 1, "abandon": 0, "failed": 1}


@pytest.mark.parametrize("variant", ["le-us", "be-ns", "modified"])
def test_split_walk_byte_orders_and_record_headers(tmp_path, monkeypatch, split_spy, variant):
    frames = [udp_frame(b"v" * ((i * 41) % 1200)) for i in range(350)]
    p = tmp_path / f"{variant}.pcap"
    if variant == "modified":  # Kuznetzov: 24-byte record headers
        buf = io.BytesIO()
        buf.write(struct.pack("<IHHiIII", 0xA1B2CD34, 2, 4, 0, 0, 65535, 1))
        for i, fr in enumerate(frames):
            s, us = divmod(T0 // 1000 + i * 7, 1_000_000)
            buf.write(struct.pack("<IIII", s, us, len(fr), len(fr)) + b"\x00" * 8 + fr)
        p.write_bytes(buf.getvalue())
    else:
        with open(p, "wb") as f:
            w = PcapWriter(f, 1, nanosecond=variant == "be-ns", big_endian=variant == "be-ns")
            for i, fr in enumerate(frames):
                w.write(T0 + i * 7000, fr)
    serial = _serial(monkeypatch, p)
    seen: list[float] = []
    got = _walked(p, progress=seen.append)
    _same(got, serial)
    assert len(got[0]) == len(frames)
    assert split_spy == {"join": 1, "abandon": 0, "failed": 0}
    assert seen and seen == sorted(seen) and seen[-1] == 1.0


def _pcap_bytes() -> bytes:
    buf = io.BytesIO()
    w = PcapWriter(buf, 1)
    for i in range(60):
        w.write(T0 + i * 1000, udp_frame(b"z" * ((i * 29) % 700)))
    return buf.getvalue()


PCAP = _pcap_bytes()


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    flips=st.lists(st.tuples(st.integers(24, len(PCAP) - 1), st.integers(0, 255)), max_size=6),
    cut=st.integers(24, len(PCAP)),
)
def test_split_walk_equals_serial_on_corrupt_pcaps(tmp_path_factory, flips, cut):
    """Whatever the bytes, the forked walk's result is the serial walk's (or no split)."""
    import os

    import pcapkit.io.reader as R

    p = _corrupted(tmp_path_factory, "c.pcap", PCAP[:cut], flips)
    old_env, old_min = os.environ.get("PCAPKIT_THREADS"), R.SPLIT_MIN_BYTES
    try:
        R.SPLIT_MIN_BYTES = 0
        os.environ["PCAPKIT_THREADS"] = "1"
        serial = _walked(p)
        os.environ["PCAPKIT_THREADS"] = "2"
        _same(_walked(p), serial)
    finally:
        R.SPLIT_MIN_BYTES = old_min
        if old_env is None:
            os.environ.pop("PCAPKIT_THREADS", None)
        else:
            os.environ["PCAPKIT_THREADS"] = old_env


# --- timestamps past 2^63 ns (issue 15): an anomaly row, the values as before ---------


def _late(cap):
    return [a for a in cap.anomalies if a["name"] == "timestamp_out_of_range"]


def test_timestamp_past_2to63_ns_reproducer_is_an_anomaly():
    """The file fuzzer's reproducer (seed 20261204, h3_sse_drop, a byte mutation): frame
    45's EPB timestamp is 14982545096748569754 µs ticks — past 2^63 ns."""
    from pathlib import Path

    p = Path(__file__).parent.parent / "fuzz/reproducers/slice-timestamp-past-2to63-ns.pcapng"
    cap = read_capture(p)
    (row,) = _late(cap)
    assert row["frame"] == 45
    assert row["offset"] == 9208  # the EPB's byte offset
    assert row["detail"].startswith("1 record(s) of interface 0 ")
    assert "14982545096748569754 ticks" in row["detail"]
    assert int(cap.ts_ns[44]) < 0  # the value is kept as it was (it wraps)
    t = pcapkit.open(p)
    a = t.anomalies
    assert a.loc[a["name"] == "timestamp_out_of_range", "frame"].tolist() == [45]


def _ts_capture(tmp_path, tsresol: int, ticks: list[int], tsoffset: int = 0):
    """Synthetic: one interface of the given raw if_tsresol (and if_tsoffset, seconds),
    one UDP frame per tick value."""
    buf = io.BytesIO()
    w = PcapngWriter(buf)
    opts = struct.pack("<HHB3x", 9, 1, tsresol)
    if tsoffset:
        opts += struct.pack("<HHq", 14, 8, tsoffset)
    w.write_raw_block(1, struct.pack("<HHI", 1, 0, 65535) + opts + struct.pack("<HH", 0, 0))
    for tk in ticks:
        w.write(0, tk, udp_frame(b"x"))
    p = tmp_path / f"ts-{tsresol}-{tsoffset}.pcapng"
    p.write_bytes(buf.getvalue())
    return read_capture(p)


MAX = (1 << 63) - 1


@pytest.mark.parametrize(
    ("tsresol", "offset", "last_fit"),
    [
        (6, 0, MAX // 1000),  # µs: ticks * 1000
        (9, 0, MAX),  # ns: ticks as they are
        (9, -100, MAX + 100 * 10**9),  # ns with a negative if_tsoffset: more ticks fit
        (9, 100, MAX - 100 * 10**9),
        (12, 0, None),  # ps: ticks // 1000 always fits
        (0x80 | 0, 0, MAX // 10**9),  # 2^0 s: whole seconds
        (0x80 | 20, 0, None),  # 2^-20 s: computed below
    ],
)
def test_timestamp_out_of_range_boundary(tmp_path, tsresol, offset, last_fit):
    """Synthetic captures: the last tick value that fits gives no anomaly, the next one
    is counted (one row: first frame, how many); ts_ns of the fitting ones are exact."""
    from pcapkit.io.reader import _max_ticks, _ts_ns_exact

    pow2 = tsresol & 0x7F if tsresol & 0x80 else -1
    num, den = (10 ** (9 - tsresol), 1) if tsresol <= 9 else (1, 10 ** (tsresol - 9))
    clock = (pow2, num, den, offset)
    if last_fit is None:
        last_fit = _max_ticks(clock)
    else:
        assert _max_ticks(clock) == last_fit
    assert _ts_ns_exact(clock, last_fit) <= MAX
    top = (1 << 64) - 1
    if last_fit == top:  # every 64-bit tick value fits
        cap = _ts_capture(tmp_path, tsresol, [0, top], offset)
        assert _late(cap) == []
        assert int(cap.ts_ns[1]) == _ts_ns_exact(clock, top)
        return
    assert _ts_ns_exact(clock, last_fit + 1) > MAX
    cap = _ts_capture(tmp_path, tsresol, [5, last_fit, last_fit + 1, 7, top], offset)
    assert int(cap.ts_ns[1]) == _ts_ns_exact(clock, last_fit)  # exact at the edge
    (row,) = _late(cap)
    assert row["frame"] == 3
    assert row["detail"].startswith("2 record(s) of interface 0 ")
    assert f"frame: {last_fit + 1} ticks)" in row["detail"]
    ok = _ts_capture(tmp_path, tsresol, [5, last_fit], offset)
    assert _late(ok) == []


def test_timestamp_out_of_range_in_windows():
    """The streaming reader (shards) reports it too, with the file's frame number."""
    from pathlib import Path

    from pcapkit.io.reader import iter_windows

    p = Path(__file__).parent.parent / "fuzz/reproducers/slice-timestamp-past-2to63-ns.pcapng"
    rows = [a for w in iter_windows(p, 2000) for a in _late(w.cap)]
    assert [r["frame"] for r in rows] == [45]


@pytest.mark.parametrize("at", [0, 1, 2])
def test_gzip_members_read_whole_when_one_ends_at_a_read(tmp_path, monkeypatch, at):
    """SYNTHETIC: a capture gzip'd as two members (``cat a.gz b.gz``, RFC 1952 §2.2)
    read with the input's chunk ending exactly where the first member ends (and one or
    two bytes into the second's magic): the second member used to be dropped there."""
    from pcapkit.io import reader

    raw = (FIXTURES / "tls_sse_nagle" / "client.pcapng").read_bytes()
    first, second = gzip.compress(raw[:3000]), gzip.compress(raw[3000:])
    path = tmp_path / "two.pcapng.gz"
    path.write_bytes(first + second)
    monkeypatch.setattr(reader, "SPOOL_CHUNK", len(first) + at)
    cap = read_capture(path)
    whole = read_capture(FIXTURES / "tls_sse_nagle" / "client.pcapng")
    assert cap.frames == whole.frames == 56
    assert [a["name"] for a in cap.anomalies] == []
    streamed = sum(w.cap.frames for w in reader.iter_windows(path, 1 << 12))
    assert streamed == 56
    cap.close()
    whole.close()
