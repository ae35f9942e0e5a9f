"""Fixtures for the QUIC dissector tests (helpers live in ``quic_capture``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from quic_capture import CORPUS, Flow, run_capture


@pytest.fixture(scope="session")
def corpus() -> Path:
    if not (CORPUS / "MANIFEST.md").is_file():
        pytest.skip(f"external corpus not present at {CORPUS} (../shared/corpus)")
    return CORPUS


@pytest.fixture(scope="session")
def capture_runner() -> Callable[..., list[Flow]]:
    return run_capture
