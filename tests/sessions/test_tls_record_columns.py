"""record_columns without a per-record group column (issue 16, memory): each group's
rows come as ``group_start`` offsets; rows are in (group, offset) order, re-sorted only
when a direction's walk gave them out of order.

SYNTHETIC labelled directions of header-walked records (no session records): groups
whose offsets restart at 0 (in order: no sort), a direction out of order (sorted,
stably), an empty walk (no group), a single record.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

from pcapkit.sessions import tls


def _bulk(off: list[int]) -> tls.BulkRecords:
    n = len(off)
    return tls.BulkRecords(
        offset=np.asarray(off, np.int64),
        length=np.arange(10, 10 + n, dtype=np.int32),
        content_type=np.full(n, 23, np.int16),
        version=np.full(n, 0x0303, np.int32),
        status="missing_key",
        epoch="application",
        key_generation=0,
    )


def _flows(spec: dict[int, dict[str, list[int]]]) -> list[tls.TlsFlow]:
    return [
        tls.TlsFlow(f, [], None, [], False, {d: _bulk(o) for d, o in dirs.items()})  # type: ignore[arg-type]
        for f, dirs in spec.items()
    ]


def _expected(spec: dict[int, dict[str, list[int]]]) -> tuple[pd.DataFrame, list[int]]:
    """The oracle: every record with its group, stably sorted by (group, offset)."""
    rows: list[dict[str, Any]] = []
    sizes: list[int] = []
    for f, dirs in spec.items():
        for d in ("c2s", "s2c"):
            off = dirs.get(d, [])
            if not off:
                continue
            g = len(sizes)
            sizes.append(len(off))
            rows += [
                {"g": g, "flow": f, "dir": tls.DIRS.index(d), "offset": o, "length": 10 + i}
                for i, o in enumerate(off)
            ]
    df = pd.DataFrame(rows).sort_values(["g", "offset"], kind="stable")
    return df.reset_index(drop=True), [0, *np.cumsum(sizes).tolist()]


CASES = {
    "restarting offsets, in order": {1: {"c2s": [0, 5, 9], "s2c": [0, 3]}, 2: {"s2c": [0, 7]}},
    "one direction out of order": {1: {"c2s": [0, 5]}, 3: {"s2c": [20, 0, 10, 10, 30]}},
    "an empty walk": {1: {"c2s": [], "s2c": [4, 8]}, 2: {"c2s": [0]}},
    "one record": {7: {"s2c": [42]}},
}


@pytest.mark.parametrize("name", list(CASES))
def test_rows_and_group_starts(name: str) -> None:
    spec = CASES[name]
    rc = tls.record_columns(_flows(spec))
    exp, starts = _expected(spec)
    assert rc.group_start.tolist() == starts
    assert len(rc.groups) == len(starts) - 1
    for c in ("flow", "dir", "offset", "length"):
        assert rc.data[c].tolist() == exp[c].tolist(), c
    assert "_group" not in rc.data
    for g, (f, d) in enumerate(rc.groups):
        lo, hi = starts[g], starts[g + 1]
        assert set(rc.data["flow"][lo:hi].tolist()) == {f}
        assert set(rc.data["dir"][lo:hi].tolist()) == {d}


def test_walked_arrays_are_shared_only_when_in_order() -> None:
    flows = _flows(CASES["restarting offsets, in order"])
    rc = tls.record_columns(flows)
    assert all(np.shares_memory(b.offset, rc.data["offset"]) for b in flows[0].bulk.values())
    flows = _flows(CASES["one direction out of order"])
    rc = tls.record_columns(flows)
    assert not any(
        np.shares_memory(b.offset, rc.data["offset"]) for tf in flows for b in tf.bulk.values()
    )
    assert flows[1].bulk["s2c"].offset.tolist() == [20, 0, 10, 10, 30]  # the walk's, as it was


def _sliced(spec: dict[int, dict[str, list[int]]], cut: int = 0) -> list[tls.TlsFlow]:
    """The directions of ``spec`` as finish_walks gives them: slices, in order, of one
    array per field (``cut`` rows of those arrays left out at the end)."""
    walks = [dirs.get(d, []) for dirs in spec.values() for d in ("c2s", "s2c")]
    off = np.asarray([o for w in walks for o in w] + [0] * cut, np.int64)
    ln = np.asarray([10 + i for w in walks for i in range(len(w))] + [0] * cut, np.int32)
    ct, ver = np.full(off.shape[0], 23, np.int16), np.full(off.shape[0], 0x0303, np.int32)
    out, at = [], 0
    for f, dirs in spec.items():
        bulk = {}
        for d in ("c2s", "s2c"):
            k = len(dirs.get(d, []))
            if d in dirs:
                sl = slice(at, at + k)
                bulk[d] = tls.BulkRecords(
                    offset=off[sl],
                    length=ln[sl],
                    content_type=ct[sl],
                    version=ver[sl],
                    status="missing_key",
                    epoch="application",
                    key_generation=0,
                )
            at += k
        out.append(tls.TlsFlow(f, [], None, [], False, bulk))  # type: ignore[arg-type]
    return out


@pytest.mark.parametrize("cut", [0, 2])
def test_walk_arrays_taken_whole_when_adjacent(cut: int) -> None:
    """Directions walked in one go are adjacent slices of one array per field: the
    columns are those arrays (no copy) when the slices cover them, in order — one
    column each (the two content types, one array: one of them a copy) — and copies
    when rows of them are left out; the values are the oracle's either way."""
    spec = CASES["restarting offsets, in order"]
    flows = _sliced(spec, cut)
    whole = flows[0].bulk["c2s"].offset.base
    whole_len = flows[0].bulk["c2s"].length.base
    rc = tls.record_columns(flows)
    exp, _ = _expected(spec)
    for c in ("offset", "length"):
        assert rc.data[c].tolist() == exp[c].tolist(), c
    assert (rc.data["offset"] is whole) == (cut == 0)
    assert (rc.data["length"] is whole_len) == (cut == 0)
    assert not np.shares_memory(rc.data["content_type"], rc.data["outer_content_type"])
    assert rc.data["content_type"].tolist() == [23] * len(exp)
