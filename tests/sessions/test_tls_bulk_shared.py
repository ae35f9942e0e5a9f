"""Header-walked records are kept once (issue 16, memory): after the records table is
built, each direction's ``BulkRecords`` arrays are views of the table's columns, not a
second copy of every record beside it — same values as the walk gave, same table.

SYNTHETIC: the SSE-like capture of test_tls_speculate (three connections without a
handshake, a hole over a header, a bad header). Real: lab fixtures opened without their
embedded keys (tls_tiny_records: 108 walked records; connection_pool_queueing_control:
16 walked directions), and shared captures without their key logs (illustrated-tls13: one TLS 1.3 session; nDPI's dnscrypt-v2-doh: 68 walked
directions), where a direction is dissected by the session up to its first record it
cannot decrypt and header-walked from there (two parts in one direction).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from test_tls_speculate import _sse_capture

import pcapkit
from pcapkit.sessions import tls

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
LAB = ["tls_tiny_records/client.pcapng", "connection_pool_queueing_control/client.pcapng"]
SHARED = Path(__file__).resolve().parents[3] / "shared"
REAL = ["corpus/illustrated-tls13/capture.pcap", "realworld/ndpi/pcap/dnscrypt-v2-doh.pcap"]

# BulkRecords field → records table column holding the same values
COLUMNS = {
    "offset": "offset",
    "length": "length",
    "content_type": "outer_content_type",
    "version": "version",
}


def _walked(t: pcapkit.Trace) -> dict[tuple[int, str], tls.BulkRecords]:
    return {(tf.flow, d): b for tf in t._tls for d, b in tf.bulk.items()}


def _copies(walked: dict[tuple[int, str], tls.BulkRecords]) -> dict[tuple[int, str], dict]:
    return {k: {f: getattr(b, f).copy() for f in COLUMNS} for k, b in walked.items()}


def _check(p: Path, monkeypatch: pytest.MonkeyPatch) -> int:
    with pcapkit.open(p, embedded_keys=False) as t:
        before = _copies(_walked(t))  # the walk's own arrays, before the table
        rec = t.records
        after = _walked(t)
        assert after.keys() == before.keys()
        n = 0
        for k, b in after.items():
            for f, col in COLUMNS.items():
                v = getattr(b, f)
                # (an empty walk has nothing to share)
                assert not v.size or np.shares_memory(v, rec[col].to_numpy()), (k, f)
                assert v.dtype == before[k][f].dtype and np.array_equal(v, before[k][f]), (k, f)
            n += b.offset.shape[0]
    # the same table when the walk's arrays are left alone
    monkeypatch.setattr(tls, "_share_bulk", lambda *a: None)
    with pcapkit.open(p, embedded_keys=False) as t:
        ref = t.records
        assert not any(
            np.shares_memory(b.offset, ref["offset"].to_numpy()) for b in _walked(t).values()
        )
    assert rec.equals(ref) and list(rec.dtypes) == list(ref.dtypes)
    return n


def test_synthetic_sse_walked_records_are_the_table_columns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _check(_sse_capture(tmp_path), monkeypatch) > 1500


@pytest.mark.parametrize("name", LAB)
def test_lab_fixture_without_keys_walked_records_are_the_table_columns(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = FIXTURES / name
    with pcapkit.open(p, embedded_keys=False) as t:
        assert any(tf.results and tf.bulk for tf in t._tls)  # dissected, then walked
    assert _check(p, monkeypatch) > 100


@pytest.mark.parametrize("name", REAL)
def test_real_capture_without_keys_walked_records_are_the_table_columns(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = SHARED / name
    if not p.is_file():
        pytest.skip(f"../shared/{name} absent")
    with pcapkit.open(p, embedded_keys=False) as t:
        parts = [(tf.flow, d) for tf in t._tls for d in tf.bulk if tf.results]
    assert parts  # a dissected handshake, then a walked part in the same direction
    assert _check(p, monkeypatch) > 0
