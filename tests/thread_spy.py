"""A spy on a module's ``map_in_threads``: the number of items each call handed to the
threads (tests that a pass really went to them)."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest


def spy_threads(monkeypatch: pytest.MonkeyPatch, module: ModuleType, workers: int = 2) -> list[int]:
    """``PCAPKIT_THREADS=workers`` and ``module.map_in_threads`` wrapped: the list it
    appends each call's item count to."""
    from pcapkit import _parallel

    calls: list[int] = []
    real = _parallel.map_in_threads

    def spy(fn: Any, items: Any) -> Any:
        calls.append(len(items))
        return real(fn, items)

    monkeypatch.setenv(_parallel.ENV, str(workers))
    monkeypatch.setattr(module, "map_in_threads", spy)
    return calls
