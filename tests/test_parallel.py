"""pcapkit._parallel: thread count from PCAPKIT_THREADS, results in input order."""

from __future__ import annotations

import threading

import pytest

from pcapkit import _parallel


@pytest.mark.parametrize(
    "value,expect",
    [("1", 1), ("3", 3), (" 2 ", 2), ("0", None), ("-4", None), ("many", None), ("", None)],
)
def test_thread_count_from_environment(monkeypatch, value, expect):
    monkeypatch.setattr(_parallel.os, "sched_getaffinity", lambda _pid: set(range(16)))
    monkeypatch.setenv(_parallel.ENV, value)
    # unset or unusable values fall back to the usable cores, capped
    assert _parallel.thread_count() == (expect if expect is not None else _parallel.MAX_THREADS)


def test_map_in_threads_keeps_input_order_and_uses_threads(monkeypatch):
    monkeypatch.setenv(_parallel.ENV, "3")
    names: set[str] = set()
    gate = threading.Barrier(3, timeout=10)  # only passes if three items run at once

    def work(x: int) -> int:
        names.add(threading.current_thread().name)
        if x < 3:
            gate.wait()
        return x * x

    assert _parallel.map_in_threads(work, list(range(9))) == [x * x for x in range(9)]
    assert len(names) == 3 and all(n.startswith("pcapkit") for n in names)


def test_map_in_threads_with_one_thread_runs_here(monkeypatch):
    monkeypatch.setenv(_parallel.ENV, "1")
    here = threading.current_thread().name
    seen = _parallel.map_in_threads(lambda _x: threading.current_thread().name, [1, 2, 3])
    assert seen == [here] * 3


def test_tickets_are_each_taken_once_across_a_fork():
    """A forked child and this process take tickets side by side: every number once, by
    one of them; none left is None, also after close."""
    import time

    t = _parallel.Tickets(40)

    def child():
        mine = []
        while (i := t.take()) is not None:
            mine.append(i)
            time.sleep(0.002)
        return mine

    call = _parallel.ForkedCall(child)
    here = []
    while (i := t.take()) is not None:
        here.append(i)
        time.sleep(0.002)
    there = call.result()
    assert isinstance(there, list)
    assert sorted(here + there) == list(range(40))
    assert here and there  # both took some (each waits between takes)
    assert t.take() is None
    t.close()
    assert t.take() is None
    with pytest.raises(ValueError):
        _parallel.Tickets(256)
    assert _parallel.Tickets(0).take() is None
