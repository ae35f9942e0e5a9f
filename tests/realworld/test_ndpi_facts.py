"""Differential test against nDPI's expected output on ../shared/realworld/ndpi (issue 13).

Per fact: the number of flows where nDPI asserts it (exactly) and where we read the same
value (a floor, so a regression fails); every miss must be explained in NDPI_FACTS.md and
every explained miss must still be one.  See ndpi_facts.py for what is compared."""

from __future__ import annotations

import pytest
from ndpi_facts import DOC, NDPI, compare_all, counts, documented

# fact: (matched, asserted by nDPI)
FLOORS = {
    "sni": (296, 311),
    "alpn_offered": (259, 260),
    "alpn": (38, 38),
    "tls_version": (173, 189),
    "versions_offered": (214, 214),
    "quic_version": (196, 213),
    "cipher": (155, 155),
}


@pytest.fixture(scope="module")
def outcomes() -> list:
    if not (NDPI / "result").is_dir():
        pytest.skip(f"{NDPI} not found (../shared/realworld)")
    return compare_all()


def test_matched_per_fact(outcomes: list) -> None:
    got = counts(outcomes)
    for fact, (n, m) in FLOORS.items():
        assert got[fact][1] == m, f"{fact}: nDPI asserts it {got[fact][1]} times, not {m}"
        assert got[fact][0] >= n, f"{fact}: {got[fact][0]}/{m} matched, floor {n}"


def test_every_miss_is_explained(outcomes: list) -> None:
    misses = {(o.capture, o.number, o.fact) for o in outcomes if not o.matched}
    doc = documented()
    assert all(doc.values()) and "UNEXPLAINED" not in doc.values()
    new = sorted(misses - set(doc))
    assert not new, f"misses not explained in {DOC.name}: {new}"
    fixed = sorted(set(doc) - misses)
    assert not fixed, f"matched now: remove from {DOC.name} and raise FLOORS: {fixed}"
