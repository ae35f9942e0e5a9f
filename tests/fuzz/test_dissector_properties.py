"""Hypothesis over every dissector entry point of ``fuzz.targets`` (issue 15): any bytes,
and mutants of the seeds made from the fixtures, give records or a DissectError — never
an undocumented exception (DESIGN.md §4).  Hypothesis shrinks a failure to a minimal
input; the long random runs are ``make fuzz``."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuzz.mutate import mutate
from fuzz.seeds import dissector_seeds
from fuzz.targets import TARGETS, run_one

NAMES = sorted(TARGETS)
# deterministic in the suite (the same examples every run, no example database): the
# random long runs are ``make fuzz``
SETTINGS = dict(
    max_examples=60,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@pytest.mark.parametrize("name", NAMES)
@settings(**SETTINGS)
@given(data=st.binary(max_size=3000))
def test_any_bytes(name: str, data: bytes) -> None:
    err = run_one(TARGETS[name], data)
    assert err is None, err


@pytest.mark.parametrize("name", NAMES)
@settings(**SETTINGS)
@given(pick=st.integers(min_value=0), seed=st.integers(min_value=0, max_value=2**32))
def test_mutated_seeds(name: str, pick: int, seed: int) -> None:
    pool = dissector_seeds()[name]
    rng = random.Random(seed)
    data = mutate(pool[pick % len(pool)], rng, others=pool)
    err = run_one(TARGETS[name], data)
    assert err is None, err
