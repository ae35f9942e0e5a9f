"""pcapkit.align.align_all finds most pieces without a search (issue 16: a record inside
one piece, a piece no PSH end falls inside); the records table must be the one the
reference (every record searched, tests/reference_align16.py) gives.  Lab fixtures with
loss, retransmissions and reordering, and a SYNTHETIC capture with records straddling
segments, holes inside records and over headers, and records many to a segment."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import pcapkit
import pcapkit.align as align
from fuzz.build import _REC, ACK, PSH, T0_NS, Tcp, pcap_header
from tests import reference_align16

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
CASES = [
    "tls_sse_drop/client.pcapng",
    "tls_small_records_drop/middle.pcapng",
    "tls_large_record_drop/server.pcapng",
    "h2_sse_drop/client.pcapng",
    "h2_send_buffer_lowat/server.pcapng",
    "h2_hol_drop/middle.pcapng",
]


def _records_both(p: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    with pcapkit.open(p) as t:
        new = t.records
    monkeypatch.setattr(align, "align_all", reference_align16.align_all)
    with pcapkit.open(p) as t:
        ref = t.records
    monkeypatch.undo()
    return new, ref


@pytest.mark.parametrize("case", CASES)
def test_fixtures_as_the_reference(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    new, ref = _records_both(FIXTURES / case, monkeypatch)
    assert len(ref) > 0
    assert new.equals(ref)


def _synthetic(tmp_path: Path) -> Path:
    rng = np.random.default_rng(7)
    frames: list[tuple[int, bytes]] = []
    t_ns = T0_NS
    for k in range(2):
        c = Tcp(cport=42000 + k, t_ns=t_ns).handshake()
        c.send(True, bytes([23, 3, 3, 0, 20]) + bytes(20))
        for i in range(120):
            sizes = rng.choice([10, 40, 300, 2000, 5000], size=1 + i % 5)
            body = b"".join(bytes([23, 3, 3, s >> 8, s & 0xFF]) + bytes(int(s)) for s in sizes)
            if i in (30, 70):  # a hole inside a record
                c.send(False, body[:7]).hole(False, 50).send(False, body[57:])
            elif i == 90:  # a hole over a header
                c.send(False, body[:-3]).hole(False, 3)
                c.send(False, bytes([23, 3, 3, 0, 30]) + bytes(30))
            elif i in (50, 100):
                # small records in segments that overlap: [0, 300), then [600, 1000)
                # out of order, then [0, 800) with PSH (its end falls inside a piece)
                small = b"".join(bytes([23, 3, 3, 0, 15]) + bytes(15) for _ in range(50))
                o, a = c.sisn + 1 + c.s_next, c.cisn + 1 + c.c_next
                c._frame(False, o, a, ACK, small[:300])
                c._frame(False, o + 600, a, ACK | PSH, small[600:])
                c._frame(False, o, a, ACK | PSH, small[:800])
                c.s_next += len(small)
                c.send(False, body)
            else:
                c.send(False, body)
        frames += c.frames
        t_ns = c.t_ns
    p = tmp_path / "align.pcap"
    with open(p, "wb") as f:  # a few data frames cut by a 70-byte snaplen
        f.write(pcap_header())
        for n, (t, fr) in enumerate(frames):
            incl = 70 if n % 37 == 5 and len(fr) > 200 else len(fr)
            sec, sub = divmod(t, 1_000_000_000)
            f.write(_REC.pack(sec, sub, incl, len(fr)) + fr[:incl])
    return p


def test_synthetic_as_the_reference(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    new, ref = _records_both(_synthetic(tmp_path), monkeypatch)
    s2c = ref[ref.dir == "s2c"]
    # both paths of align_all: records inside one piece and across pieces, some cut by a hole
    assert (s2c.segments == 1).sum() > 300 and (s2c.segments > 1).sum() > 100
    assert (s2c.missing_bytes > 0).sum() >= 4
    assert s2c.psh_end.sum() > 100 and (~s2c.psh_end).sum() > 100
    assert new.equals(ref)


@pytest.mark.parametrize("case", CASES[:3])
def test_records_aligned_in_slices_on_threads(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """records_table aligns a slice of directions at a time, the slices on threads, each
    writing its rows: the table of a slice per direction on two threads = the table of
    one slice."""
    from thread_spy import spy_threads

    with pcapkit.open(FIXTURES / case) as t:
        whole = t.records
    calls = spy_threads(monkeypatch, align)
    monkeypatch.setattr(align, "ALIGN_CHUNK", 1)  # a slice per direction
    with pcapkit.open(FIXTURES / case) as t:
        sliced = t.records
    assert calls and calls[0] >= 2  # the slices, one per direction, went to the threads
    assert sliced.equals(whole)
    assert (sliced.dtypes == whole.dtypes).all()


@pytest.mark.parametrize(
    "name", ["connection_pool_queueing/client.pcapng", "tls_resumed/client.pcapng"]
)
def test_alignment_kpis_in_slices_equal_one_pass(name, monkeypatch):
    """alignment_kpis_by_flow cuts a flow-sorted records table into passes of whole
    flows (KPI_SLICE records), run on threads; with passes of a few records the KPIs
    (and their order) are those of one pass over the table (real lab captures)."""
    with pcapkit.open(FIXTURES / name) as t:
        r = t.records
    cols = (
        r["flow"].to_numpy(np.int64),
        r["dir"].cat.codes.to_numpy(),
        r["content_type"].to_numpy(np.int16),
        r["psh_end"].to_numpy(bool),
        r["push_unit"].to_numpy(),
    )
    from thread_spy import spy_threads

    whole = align._alignment_kpis(*cols)
    monkeypatch.setattr(align, "KPI_SLICE", 3)
    calls = spy_threads(monkeypatch, align)
    assert align.alignment_kpis_by_flow(*cols) == whole
    assert calls and calls[0] >= 2  # the passes went to the threads
    assert list(align.alignment_kpis_by_flow(*cols)) == list(whole)
    assert len(whole) >= 2 and all(k["records"] > 0 for k in whole.values())


@pytest.mark.parametrize("order", ["sorted", "shuffled"])
def test_record_counts_as_groupby(order: str) -> None:
    """Records and decrypted records per flow (synthetic columns): a table sorted by
    flow is counted from its runs, any other through np.unique — both as pandas'
    groupby counts them, a flow with no decrypted record absent from the second."""
    import pandas as pd

    rng = np.random.default_rng(7)
    flow = np.sort(rng.integers(0, 300, 50_000)).astype(np.int32)
    flow[flow == 17] = 18  # a gap in the flow numbers
    decrypted = rng.random(flow.shape[0]) < 0.01
    decrypted[flow == 5] = False  # a flow without decrypted records
    decrypted[-1] = True  # the last row of the last run
    if order == "shuffled":
        o = rng.permutation(flow.shape[0])
        flow, decrypted = flow[o], decrypted[o]
    counts, dec = align._record_counts(flow, decrypted)
    df = pd.DataFrame({"flow": flow, "dec": decrypted})
    assert counts == df.groupby("flow").size().to_dict()
    want = df[df["dec"]].groupby("flow").size().to_dict()
    assert dec == want and 5 not in dec and len(dec) > 100
