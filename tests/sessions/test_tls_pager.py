"""The TLS header walk drops the capture's mapped pages every few distinct 2 MiB regions
it read (issue 16: a page fault on a file mapping maps a whole large folio, so a walk
over headers scattered through a big capture made most of the file resident).  Dropping
is advisory: the records must not depend on it.  SYNTHETIC captures (``fuzz.build``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import pcapkit
from fuzz.build import T0_NS, Tcp, write_pcap
from pcapkit.sessions import tls

REGION = 1 << tls._REGION_SHIFT


def test_pager_drops_after_so_many_distinct_regions(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    monkeypatch.setattr(tls, "drop_pages", lambda buf: calls.append(1))
    monkeypatch.setattr(tls, "PAGER_REGIONS", 3)
    pg = tls._Pager(np.zeros(1, np.uint8))
    for pos in (0, 5, REGION, 0, 2 * REGION + 1, REGION + 7):  # regions 0, 1, 2 (revisited)
        pg.touch(pos)
    assert calls == [] and pg.seen == {0, 1, 2}
    pg.touch(3 * REGION)  # a fourth region: what was read is dropped first
    assert calls == [1] and pg.seen == {3}
    for pos in (0, REGION, 2 * REGION):
        pg.touch(pos)
    assert calls == [1, 1] and pg.seen == {2}
    # a big capture keeps up to a quarter of its regions between drops (fewer re-faults)
    huge = np.lib.stride_tricks.as_strided(np.zeros(1, np.uint8), (1000 * REGION,), (0,))
    assert tls._Pager(huge).limit == 1000 // tls.PAGER_SHARE


def _bulk_capture(tmp_path: Path) -> Path:
    """Two connections, each ~3 MiB of 16 KiB application-data records server → client,
    no handshake (the header walk), the second one's records cut by a 200-byte hole."""
    frames: list[tuple[int, bytes]] = []
    t_ns = T0_NS
    for k in range(2):
        c = Tcp(cport=40000 + k, t_ns=t_ns).handshake()
        c.send(True, bytes([23, 3, 3, 0, 40]) + b"\x01" * 40)
        body = b"".join(bytes([23, 3, 3, 0x40, 0]) + bytes([k + 2]) * 0x4000 for _ in range(190))
        if k:
            c.send(False, body[:1_000_000]).hole(False, 200).send(False, body[1_000_200:])
        else:
            c.send(False, body)
        frames += c.frames
        t_ns = c.t_ns
    p = tmp_path / "bulk.pcap"
    write_pcap(p, frames)
    assert p.stat().st_size > 3 * REGION  # the walk crosses several regions
    return p


def test_records_do_not_depend_on_dropping(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = _bulk_capture(tmp_path)
    calls: list[int] = []
    drop = tls.drop_pages

    def counted(buf: np.ndarray) -> None:
        calls.append(1)
        drop(buf)

    monkeypatch.setattr(tls, "drop_pages", counted)
    monkeypatch.setattr(tls, "PAGER_REGIONS", 10**9)
    with pcapkit.open(p) as t:
        kept, kept_anomalies = t.records, t.anomalies
    assert calls == []
    monkeypatch.setattr(tls, "PAGER_REGIONS", 1)  # drop at every new region
    with pcapkit.open(p) as t:
        dropped, dropped_anomalies = t.records, t.anomalies
    assert len(calls) >= 2
    s2c = dropped[(dropped.dir == "s2c") & (dropped.content_type == 23)]
    assert len(s2c) > 300  # both connections walked, the second resumed after its hole
    assert dropped.equals(kept)
    assert dropped_anomalies.equals(kept_anomalies)


def test_speculation_samples_are_read_a_window_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """SYNTHETIC: speculate()'s first look at each direction (are its first pieces
    aligned on record headers?) reads in file order and drops the mapping between
    windows — read at once, the samples faulted in a ~2 MiB folio per direction and kept
    them (bulk-1M analyze: peak RSS 0.81 → 1.16 GB, 2026-12-02)."""
    from pcapkit.net.tcp import DirectionIndex

    buf = np.zeros(8 * REGION, np.uint8)
    idxs = []
    for d in range(8):  # direction d's 16 pieces in region (7 - d): against file order
        bo = (7 - d) * REGION + 1000 * np.arange(16, dtype=np.int64)
        if d % 2 == 0:  # even directions start every piece with an application-data header
            buf[bo], buf[bo + 1] = 23, 3
        st = 1000 * np.arange(16, dtype=np.int64)
        idxs.append(DirectionIndex(st, st + 1000, st + 1000, st + 1, st, bo))
    events: list[object] = []
    rows_at = tls.rows_at

    def logged(b: np.ndarray, pos: np.ndarray, n: int) -> np.ndarray:
        events.append(set((pos >> tls._REGION_SHIFT).tolist()))
        return rows_at(b, pos, n)

    monkeypatch.setattr(tls, "rows_at", logged)
    monkeypatch.setattr(tls, "drop_pages", lambda b: events.append("drop"))
    monkeypatch.setattr(tls, "PAGER_REGIONS", 1)
    pg = tls._Pager(buf)
    assert pg.limit == 2  # a quarter of the 8 regions
    got = tls._aligned(buf, idxs, [0] * 8, np.full(8, 16, np.int64), pg)
    assert got.tolist() == [d % 2 == 0 for d in range(8)]
    assert events.count("drop") == 4
    seen: set[int] = set()
    for e in events:  # never more regions read between two drops than the pager keeps
        if e == "drop":
            seen = set()
        else:
            assert isinstance(e, set)
            seen |= e
            assert len(seen) <= pg.limit
