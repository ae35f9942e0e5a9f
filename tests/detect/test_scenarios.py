"""Every lab fixture against its own ground truth (scenario.json).

* a positive scenario's expected pathologies are found at every vantage;
* a control scenario yields none of the pathologies it controls for;
* the vantages of one run agree on what they found (DETECTION.md §1.1).

Kinds that belong to later issues (HTTP/2, SSE, QUIC) are skipped with that
reason until their detectors exist; kinds of this issue must be implemented.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import pcapkit
from pcapkit.detect import IMPLEMENTED_KINDS, KINDS

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
SCENARIOS = sorted(p.parent for p in FIXTURES.glob("*/scenario.json"))
LATER: dict[str, str] = {}  # kinds whose detector comes with a later issue

_cache: dict[Path, pcapkit.Trace] = {}


class _Found:
    """What the tests read of a trace (its findings), kept without the open capture: one
    open capture per fixture vantage for the whole session exhausts select()'s 1024 fds
    before the lab's own tests run."""

    def __init__(self, findings):
        self.findings = findings


def trace(path: Path):
    if path not in _cache:
        with pcapkit.open(path) as t:
            _cache[path] = _Found(t.findings)
    return _cache[path]


def vantages(folder: Path) -> list[Path]:
    return [
        folder / f"{v}.pcapng"
        for v in ("client", "server", "middle")
        if (folder / f"{v}.pcapng").exists()
    ]


def cases(key: str) -> list[tuple[Path, str]]:
    out = []
    for folder in SCENARIOS:
        sc = json.loads((folder / "scenario.json").read_text())
        for kind in sc.get(key) or []:
            out.append((folder, kind))
    return out


def _check_kind(kind: str) -> None:
    if kind in LATER:
        pytest.skip(f"{kind} is detected from {LATER[kind]}")
    assert kind in KINDS, f"scenario names an unknown kind {kind}"
    assert kind in IMPLEMENTED_KINDS, f"no registered detector emits {kind}"


@pytest.mark.parametrize(
    "folder,kind", cases("expected"), ids=lambda x: x.name if isinstance(x, Path) else x
)
def test_positive_is_detected(folder, kind):
    """… at every vantage where the wire shows it; where it cannot (``unseen``: a SYN lost
    before the server's capture point), the detector stays silent."""
    _check_kind(kind)
    unseen = set(
        (json.loads((folder / "scenario.json").read_text()).get("unseen") or {}).get(kind, [])
    )
    for path in vantages(folder):
        found = trace(path).findings
        if path.stem in unseen:
            assert kind not in set(found.kind), f"{kind} where the wire cannot show it: {path.name}"
            continue
        assert kind in set(found.kind), (
            f"{kind} not found in {path.name}: {sorted(set(found.kind))}"
        )


@pytest.mark.parametrize(
    "folder,kind", cases("controls"), ids=lambda x: x.name if isinstance(x, Path) else x
)
def test_control_is_clean(folder, kind):
    _check_kind(kind)
    for path in vantages(folder):
        found = trace(path).findings
        assert kind not in set(found.kind), found[found.kind == kind][
            ["kind", "cost_ms", "frames"]
        ].to_dict("records")


@pytest.mark.parametrize("folder", SCENARIOS, ids=lambda p: p.name)
def test_vantages_agree(folder):
    sc = json.loads((folder / "scenario.json").read_text())
    incidental = set(sc.get("incidental") or []) | set(sc.get("unseen") or {})
    kinds = []
    for path in vantages(folder):
        f = trace(path).findings
        kinds.append(set(f.kind) - incidental - {"write_coalescing"})
    assert all(k == kinds[0] for k in kinds), dict(
        zip([p.name for p in vantages(folder)], kinds, strict=True)
    )
