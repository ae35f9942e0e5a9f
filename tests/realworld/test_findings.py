"""The TCP/TLS findings on real captures nobody here made, locked after review (issue 13).

Every TCP/TLS finding pcapkit raises on ``../shared/realworld`` (nDPI's test captures) and
``../shared/corpus`` was reviewed against the frames with tshark beside it; the verdicts,
reasons and the fixes they led to are in ``REVIEW.md`` next to this file.  What the
detectors find now is locked in ``expected_findings.json`` — per capture: kind, flow,
direction, evidence frames, severity and cost (within the golden tolerance,
``pcapkit.report.golden``).  A finding that appears or disappears fails, as does a capture
that starts raising findings: review it, then ``python tests/realworld/test_findings.py``
rewrites the file (and REVIEW.md must say why).

Every kind is compared (the QUIC and handshake-split findings were reviewed too, see
REVIEW.md).  The tests skip cleanly when ``../shared`` (relative to the repository
root) is absent.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from shared_captures import ROOT, SHARED, captures

EXPECTED = Path(__file__).with_name("expected_findings.json")
# every kind is reviewed and compared
NOT_HERE: tuple[str, ...] = ()


def findings_of(path: Path, keylog: Path | None) -> list[dict[str, Any]]:
    import pcapkit

    with pcapkit.open(path, keylog=keylog) as t:
        f = t.findings
    rows = [
        {
            "kind": str(r.kind),
            "flow": None if str(r.flow) == "<NA>" else int(r.flow),
            "dir": None if r.dir is None else str(r.dir),
            "frames": [int(x) for x in r.frames],
            "severity": str(r.severity),
            "cost_ms": None if str(r.cost_ms) == "<NA>" else round(float(r.cost_ms), 3),
        }
        for r in f.itertuples(index=False)
        if not str(r.kind).startswith(NOT_HERE)
    ]
    rows.sort(key=lambda x: (x["kind"], x["flow"] or -1, x["dir"] or "", x["frames"]))
    return rows


def _key(r: dict[str, Any]) -> tuple[Any, ...]:
    return (r["kind"], r["flow"], r["dir"], tuple(r["frames"]), r["severity"])


def _expected() -> dict[str, list[dict[str, Any]]]:
    return json.loads(EXPECTED.read_text())["captures"] if EXPECTED.exists() else {}


needs_shared = pytest.mark.skipif(
    not (SHARED / "realworld").is_dir(), reason=f"{SHARED / 'realworld'} absent"
)


@needs_shared
def test_every_capture_has_reviewed_findings():
    """A capture added to ../shared must be reviewed before it is locked here."""
    names = {n for n, _, _ in captures()}
    assert names == set(_expected()), sorted(names ^ set(_expected()))


@needs_shared
@pytest.mark.parametrize("name", sorted(_expected()))
def test_findings_match_the_review(name):
    from pcapkit.report.golden import COST_ABS_TOLERANCE_MS, COST_REL_TOLERANCE

    case = {n: (p, k) for n, p, k in captures()}.get(name)
    if case is None:
        pytest.skip(f"{name} is not in ../shared")
    want = _expected()[name]
    got = findings_of(*case)
    assert [_key(r) for r in got] == [_key(r) for r in want], (
        "findings changed: review them (tests/realworld/REVIEW.md), then rewrite "
        "expected_findings.json (python tests/realworld/test_findings.py)"
    )
    for a, b in zip(got, want, strict=True):
        if a["cost_ms"] is None or b["cost_ms"] is None:
            assert a["cost_ms"] == b["cost_ms"], a
        else:
            assert abs(a["cost_ms"] - b["cost_ms"]) <= max(
                COST_ABS_TOLERANCE_MS, COST_REL_TOLERANCE * b["cost_ms"]
            ), (a, b)


def write() -> None:
    """Rewrite expected_findings.json from what the detectors find now."""
    data = {
        "generated_by": "python tests/realworld/test_findings.py (after review: REVIEW.md)",
        "captures": {name: findings_of(p, k) for name, p, k in captures()},
    }
    EXPECTED.write_text(json.dumps(data, indent=1) + "\n")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    write()
    print(EXPECTED)
