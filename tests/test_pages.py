"""pcapkit._pages: numpy's huge pages off for the command line, and for the record walk
inside the library, always leaving numpy as it was (and as the environment says)."""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest

from pcapkit import _pages


def _hugepages(state: bool | None = None) -> bool:
    """numpy's madvise-hugepage switch (read, or set when ``state`` is given)."""
    setter = np._core.multiarray._set_madvise_hugepage
    prev = setter(True if state is None else state)
    if state is None:
        setter(prev)
    return bool(prev)


@pytest.fixture
def restore(monkeypatch):
    before = _hugepages()
    monkeypatch.delenv(_pages.ENV, raising=False)
    yield
    _hugepages(before)


def test_command_line_turns_them_off_unless_the_environment_says(restore, monkeypatch):
    _hugepages(True)
    _pages.no_numpy_hugepages()
    assert os.environ[_pages.ENV] == "0"  # for worker processes
    assert _hugepages() is False  # numpy already loaded: set now
    _hugepages(True)
    monkeypatch.setenv(_pages.ENV, "1")  # the user's word stands
    _pages.no_numpy_hugepages()
    assert os.environ[_pages.ENV] == "1"
    assert _hugepages() is True


@pytest.mark.parametrize("start", [True, False])
def test_small_pages_restores_what_was(restore, start):
    _hugepages(start)
    with _pages.small_pages():
        assert _hugepages() is False
        with _pages.small_pages():  # nested: still off, and restored once
            assert _hugepages() is False
        assert _hugepages() is False
    assert _hugepages() is start


def test_small_pages_on_threads_restores_when_the_last_leaves(restore):
    _hugepages(True)
    inside, leave = threading.Barrier(3), threading.Event()

    def work():
        with _pages.small_pages():
            inside.wait()
            leave.wait()

    ts = [threading.Thread(target=work) for _ in range(2)]
    for t in ts:
        t.start()
    inside.wait()
    assert _hugepages() is False
    leave.set()
    for t in ts:
        t.join()
    assert _hugepages() is True


def test_small_pages_leaves_an_environment_choice_alone(restore, monkeypatch):
    monkeypatch.setenv(_pages.ENV, "1")
    _hugepages(True)
    with _pages.small_pages():
        assert _hugepages() is True
    assert _hugepages() is True


def test_small_pages_restores_after_an_exception(restore):
    _hugepages(True)
    with pytest.raises(KeyError), _pages.small_pages():
        raise KeyError("x")
    assert _hugepages() is True


def test_release_free_memory_runs_where_glibc_has_it():
    """glibc's malloc_trim where the C library has it (Linux here), a no-op elsewhere;
    twice in a row is fine."""
    import ctypes
    import sys

    has = sys.platform.startswith("linux") and hasattr(ctypes.CDLL(None), "malloc_trim")
    assert _pages.release_free_memory() is has
    assert _pages.release_free_memory() is has


def test_the_detectors_give_the_free_heap_back_first(monkeypatch):
    """run_detectors releases the heap's free pages before any detector runs (the peak)."""
    from pathlib import Path

    import pcapkit
    from pcapkit import detect

    ctx = pcapkit.open(
        Path(__file__).resolve().parent.parent / "fixtures" / "tls_sse_nagle" / "server.pcapng"
    ).detect_context
    calls: list[str] = []
    monkeypatch.setattr(_pages, "release_free_memory", lambda: calls.append("trim") or True)
    first = detect.DETECTORS[0]
    monkeypatch.setattr(first.module, "detect", lambda c, **k: calls.append(first.name) or [])
    detect.run_detectors(ctx, errors=[])
    assert calls[:2] == ["trim", first.name]
