"""Every TLS byte pcapkit gives up on is an anomaly row with its flow, offset and count
(issue 15), and the record layer resynchronises where the framing allows.  SYNTHETIC
captures (``fuzz.build``): records of 0x4000…0xFFFF bytes (the issue's stream, scaled
down), bytes that are not a record header, a hole over a header; each with and without a
handshake (the session path and the header walk of connections that cannot decrypt)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import pcapkit
from fuzz.build import Tcp, write_pcap


def rec(ctype: int, n: int, fill: bytes = b"\xaa") -> bytes:
    return bytes([ctype, 3, 3, n >> 8, n & 255]) + fill * n


def _capture(
    tmp_path: Path, s2c: bytes, *, handshake: bool, hole: tuple[int, int] | None = None
) -> Path:
    c = Tcp().handshake()
    c.send(True, rec(22, 40, b"\x00") if handshake else rec(23, 40))
    first = rec(22, 50, b"\x00") if handshake else b""
    data = first + s2c
    if hole is None:
        c.send(False, data)
    else:
        at, n = hole
        at += len(first)
        c.send(False, data[:at]).hole(False, n).send(False, data[at + n :])
    p = tmp_path / f"tls-{int(handshake)}.pcap"
    write_pcap(p, c.frames)
    return p


LENGTHS = [0x4000 + k * (0xFFFF - 0x4000) // 59 for k in range(60)]


@pytest.mark.parametrize("handshake", [False, True], ids=["walk", "session"])
def test_oversize_records_are_framed_and_each_is_an_anomaly(
    tmp_path: Path, handshake: bool
) -> None:
    t = pcapkit.open(_capture(tmp_path, b"".join(rec(23, n) for n in LENGTHS), handshake=handshake))
    r = t.records
    s2c = r[(r.dir == "s2c") & (r.content_type == 23)]
    assert s2c["length"].tolist() == [n + 5 for n in LENGTHS]  # before: 1 of 60, then nothing
    over = t.anomalies[t.anomalies.name == "tls_record_overflow"]
    assert len(over) == sum(n > (1 << 14) + 2048 for n in LENGTHS)
    assert set(over["flow"]) == {0} and over["frame"].notna().all()
    assert set(over["offset"]) == set(s2c[s2c.length > (1 << 14) + 2048 + 5]["offset"])


@pytest.mark.parametrize("handshake", [False, True], ids=["walk", "session"])
def test_bytes_that_are_not_a_header_are_skipped_to_the_next_chain(
    tmp_path: Path, handshake: bool
) -> None:
    good = b"".join(rec(23, 100 + i) for i in range(6))
    junk = b"GARBAGE!" * 100
    t = pcapkit.open(_capture(tmp_path, good + junk + good, handshake=handshake))
    r = t.records
    assert (r[(r.dir == "s2c") & (r.content_type == 23)]["length"].tolist()) == [
        105 + i for i in range(6)
    ] * 2
    a = t.anomalies
    bad = a[a.name == "tls_record_malformed"]
    assert len(bad) == 1 and int(bad["flow"].iloc[0]) == 0
    start = (55 if handshake else 0) + len(good)
    assert int(bad["offset"].iloc[0]) == start
    assert (
        f"{len(junk)} bytes skipped, records resume at offset {start + len(junk)}"
        in bad["detail"].iloc[0]
    )


@pytest.mark.parametrize("handshake", [False, True], ids=["walk", "session"])
def test_a_hole_over_a_header_counts_the_captured_bytes_skipped(
    tmp_path: Path, handshake: bool
) -> None:
    good = b"".join(rec(23, 100 + i) for i in range(12))
    # the hole [150, 400) starts inside record 1 (its header was captured: incomplete) and
    # ends inside record 3: the headers of records 2 and 3 are lost; records resume at 4
    t = pcapkit.open(_capture(tmp_path, good, handshake=handshake, hole=(150, 250)))
    lost = t.anomalies[t.anomalies.name == "tls_record_sync_lost"]
    assert len(lost) == 1
    detail = lost["detail"].iloc[0]
    m = re.search(
        r"a hole of (\d+) bytes .*; (\d+) captured bytes skipped, records resume at offset (\d+)",
        detail,
    )
    assert m, detail
    base = 55 if handshake else 0
    hole, skipped, resume = (int(x) for x in m.groups())
    ends = [sum(105 + i for i in range(k)) for k in range(13)]
    assert int(lost["offset"].iloc[0]) == base + ends[2]  # the first header the hole hid
    assert resume == base + ends[4] and hole == 400 - ends[2] and skipped == ends[4] - 400
    r = t.records
    assert r[(r.dir == "s2c") & (r.content_type == 23)]["offset"].max() == base + ends[11]


def test_tls_anomalies_reach_the_table(tmp_path: Path) -> None:
    # before issue 15 the TLS layer's anomalies (tls_record_*, tls_handshake_*) were kept
    # on the sessions and never joined Trace.anomalies
    t = pcapkit.open(_capture(tmp_path, rec(23, 10) + b"\x00" * 40, handshake=True))
    a = t.anomalies
    assert a["name"].tolist() == ["tls_record_malformed"]
    assert "40 bytes skipped, no record header follows" in a["detail"].iloc[0]
