"""sessions.http._record_lookup: a direction's records (offset, last frame, last time)
by binary search in the direction keys, equal to a mask over the table — on the table
as Trace.records gives it and on its rows shuffled (real lab captures)."""

from __future__ import annotations

from pathlib import Path

import pytest

import pcapkit
from pcapkit.sessions.http import _record_lookup

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


@pytest.mark.parametrize("name", ["tls_resumed/client.pcapng", "h2_hol_drop/middle.pcapng"])
@pytest.mark.parametrize("shuffled", [False, True])
def test_lookup_equals_a_mask(name, shuffled):
    with pcapkit.open(FIXTURES / name) as t:
        recs = t.records
    if shuffled:
        recs = recs.sample(frac=1.0, random_state=3).reset_index(drop=True)
    look = _record_lookup(recs)
    seen = 0
    for f in sorted(set(recs["flow"].tolist())) + [10**9]:
        for d in ("c2s", "s2c"):
            m = ((recs["flow"] == f) & (recs["dir"] == d)).to_numpy(bool)
            sub = recs[m].sort_values("offset", kind="stable")
            off, fr, ts = look(f, d)
            assert off.tolist() == sub["offset"].tolist()
            assert fr.tolist() == sub["last_frame"].tolist()
            assert ts.tolist() == sub["last_ts_ns"].tolist()
            seen += int(off.shape[0])
    assert seen == len(recs) > 0
