"""Every failure the fuzzers found, with its reproducer (issue 15): none fails again.

Captures are in ``reproducers/`` (listed with their origin in ``reproducers/MANIFEST.md``);
dissector reproducers are inline (SYNTHETIC bytes found by ``fuzz.run dissectors``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fuzz.files import check
from fuzz.targets import TARGETS, run_one

HERE = Path(__file__).resolve().parent / "reproducers"
CAPTURES = sorted(HERE.glob("*.pcap*"))

# (target, input, what failed before): the dissector entry points' reproducers
DISSECTOR_REPRODUCERS: list[tuple[str, bytes, str]] = []


def test_every_reproducer_is_listed() -> None:
    manifest = (HERE / "MANIFEST.md").read_text()
    assert CAPTURES
    for p in CAPTURES:
        assert f"`{p.name}`" in manifest, p.name


@pytest.mark.parametrize("path", CAPTURES, ids=[p.name for p in CAPTURES])
def test_capture_reproducer(path: Path) -> None:
    assert [(f.where, f.text[-300:]) for f in check(str(path))] == []


def test_dissector_reproducers() -> None:
    for target, data, was in DISSECTOR_REPRODUCERS:
        assert run_one(TARGETS[target], data) is None, (target, was)
