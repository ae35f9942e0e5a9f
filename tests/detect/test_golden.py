"""Findings on every fixture equal the golden ones checked in beside it (make golden)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pcapkit.report.golden import COST_ABS_TOLERANCE_MS, COST_REL_TOLERANCE, VANTAGES, findings_of

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
CASES = [
    (p.parent, v)
    for p in sorted(FIXTURES.glob("*/expected.json"))
    for v in VANTAGES
    if (p.parent / f"{v}.pcapng").exists()
]


def test_every_fixture_has_a_golden_file():
    folders = {p.parent for p in FIXTURES.glob("*/scenario.json")}
    assert folders and all((f / "expected.json").exists() for f in folders)


@pytest.mark.parametrize(
    "folder,vantage", CASES, ids=lambda x: x.name if isinstance(x, Path) else x
)
def test_findings_match_golden(folder, vantage):
    golden = json.loads((folder / "expected.json").read_text())["vantages"][vantage]
    now = findings_of(folder / f"{vantage}.pcapng")
    key = lambda r: (r["kind"], r["flow"], r["dir"], r["stream"], tuple(r["frames"]))  # noqa: E731
    assert [key(r) for r in now] == [key(r) for r in golden], (
        "findings changed: review and run `make golden`"
    )
    for a, b in zip(now, golden, strict=True):
        if a["cost_ms"] is None or b["cost_ms"] is None:
            assert a["cost_ms"] == b["cost_ms"]
        else:
            assert abs(a["cost_ms"] - b["cost_ms"]) <= max(
                COST_ABS_TOLERANCE_MS, COST_REL_TOLERANCE * b["cost_ms"]
            )
