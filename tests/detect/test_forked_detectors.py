"""run_detectors with its side detectors in a forked child (pcapkit._parallel.ForkedCall)
= run_detectors all in one process, on real fixture captures: the same findings, the same
internal_error rows, and the side run here when the child fails."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

import pcapkit
from pcapkit import _parallel, detect
from pcapkit.detect import hol, registry

FIX = Path(__file__).resolve().parents[2] / "fixtures"
# captures with findings of the side's kinds (hol, delayed_ack, rto, ssr …) and of the
# others' (cork, nagle, tls_records …)
CAPTURES = [
    "fast_retransmit/middle.pcapng",
    "tls_sse_drop/client.pcapng",
    "nagle_wwr/server.pcapng",
    "tcp_cork/server.pcapng",
    "tls_tiny_records/client.pcapng",
    "tls_sse_nagle/server.pcapng",
]


@pytest.fixture(scope="module")
def traces():
    return [(name, pcapkit.open(FIX / name)) for name in CAPTURES]


@pytest.fixture
def forks(monkeypatch):
    """Forking allowed on any capture; what each ForkedCall made brought back (None: the
    child failed), in order."""
    monkeypatch.setenv(_parallel.ENV, "2")
    made: list[object] = []

    class Counted(_parallel.ForkedCall):
        def result(self):
            got = super().result()
            made.append(got)
            return got

    monkeypatch.setattr(_parallel, "ForkedCall", Counted)
    # allowed even if an earlier test left a thread behind (an idle one holds no lock
    # the child needs; a child that did hang would be killed and its work done here)
    monkeypatch.setattr(_parallel, "forking_allowed", lambda: True)
    return made


def _key(findings):
    return [
        (
            f.kind,
            f.flow,
            f.dir,
            f.stream,
            f.request,
            f.t_start_ns,
            f.t_end_ns,
            f.cost_ms,
            f.frames,
            [(e.frame, e.role) for e in f.evidence],
            f.explanation,
            f.remedy,
            f.display_filter,
            repr(f.details),
        )
        for f in findings
    ]


def _run(t, monkeypatch, forked: bool):
    monkeypatch.setattr(detect, "SIDE_MIN_SEGMENTS", 0 if forked else 10**12)
    monkeypatch.setattr(detect, "SIDE_MIN_CONNECTIONS", 0)
    ctx = t.detect_context
    ctx._memo.clear()
    errors: list[dict] = []
    out = detect.run_detectors(ctx, errors=errors)
    return _key(out), errors


def test_forked_findings_equal_serial(traces, forks, monkeypatch):
    side_kinds = {k for d in detect.DETECTORS if d.name in detect.SIDE for k in d.spec.kind_names}
    seen = {"side": 0, "here": 0}
    for name, t in traces:
        serial = _run(t, monkeypatch, forked=False)
        n = len(forks)
        forked = _run(t, monkeypatch, forked=True)
        assert len(forks) == n + 1, name
        # the side ran in the child (but the shared detectors this process may have
        # taken first), and its results were taken
        assert set(detect.SIDE) - SHARED <= set(forks[-1]) <= set(detect.SIDE), name
        assert forked == serial, name
        for kind, *_ in serial[0]:
            seen["side" if kind in side_kinds else "here"] += 1
    # both halves found something on these captures: the comparison covers both
    assert seen["side"] > 0 and seen["here"] > 0, seen


# the side's detectors that either process may run (no kind read, none read by the side)
SHARED = {d.name for d in detect.shared_of([d for d in detect.DETECTORS if d.name in detect.SIDE])}


def _slow_in(module, where: str, monkeypatch) -> None:
    """``module.detect`` a second slower in the forked child (``where="child"``) or in
    this process (``"here"``)."""
    me, real = os.getpid(), module.detect

    def slow(ctx, **kw):
        if (os.getpid() != me) == (where == "child"):
            time.sleep(1.0)
        return real(ctx, **kw)

    monkeypatch.setattr(module, "detect", slow)


@pytest.mark.parametrize("slow", ["child", "here"])
def test_shared_detectors_run_where_a_process_is_free(traces, forks, monkeypatch, slow):
    """The SHARED detectors (delayed_ack, reuse, ssr) go to whichever process is free
    first: with the child held up in hol this process takes them all, with this process
    held up in cork the child runs them; the findings are the serial run's either way."""
    assert SHARED == {"delayed_ack", "reuse", "ssr"}
    from pcapkit.detect import cork

    name, t = traces[1]
    serial = _run(t, monkeypatch, forked=False)
    _slow_in(hol if slow == "child" else cork, slow, monkeypatch)
    forked = _run(t, monkeypatch, forked=True)
    assert forked == serial, name
    took = set(forks[-1])
    if slow == "child":
        assert took == set(detect.SIDE) - SHARED
    else:
        assert took == set(detect.SIDE)


def test_side_detector_error_is_isolated_in_the_child(traces, forks, monkeypatch):
    def boom(ctx, **kw):
        raise RuntimeError("planted in hol")

    monkeypatch.setattr(hol, "detect", boom)
    name, t = traces[0]
    serial = _run(t, monkeypatch, forked=False)
    forked = _run(t, monkeypatch, forked=True)
    assert isinstance(forks[0], dict) and forks[0]["hol"][1] is not None  # hol's error row
    assert forked == serial
    details = [e["detail"] for e in forked[1]]
    assert any("detector hol" in d and "planted in hol" in d for d in details), details


def test_child_that_dies_leaves_its_detectors_to_the_parent(traces, forks, monkeypatch):
    parent = os.getpid()
    real = hol.detect

    def dies_in_child(ctx, **kw):
        if os.getpid() != parent:
            os._exit(3)
        return real(ctx, **kw)

    name, t = traces[0]
    serial = _run(t, monkeypatch, forked=False)
    assert any(k[0] in hol.SPEC.kind_names for k in serial[0]), name
    monkeypatch.setattr(hol, "detect", dies_in_child)
    forked = _run(t, monkeypatch, forked=True)
    assert forks == [None]  # the child died
    assert forked == serial  # hol's findings made here


def test_side_is_closed_under_the_kinds_it_reads(monkeypatch, forks):
    class Big:
        segments = range(detect.SIDE_MIN_SEGMENTS)

        def tcp_flows(self):
            return list(range(detect.SIDE_MIN_CONNECTIONS))

    side = detect._side(list(detect.DETECTORS), Big(), isolated=True)
    names = {d.name for d in side}
    assert names >= set(detect.SIDE)
    for d in side:
        for other in detect.DETECTORS:
            if set(other.spec.kind_names) & registry.read_kinds(d):
                assert other.name in names, (d.name, other.name)
    # not when a detector's exception must propagate, nor on a small capture, nor on
    # one of a few connections
    assert detect._side(list(detect.DETECTORS), Big(), isolated=False) == []

    class Small(Big):
        segments = range(10)

    class FewConnections(Big):
        def tcp_flows(self):
            return [1, 2]

    assert detect._side(list(detect.DETECTORS), FewConnections(), isolated=True) == []
    assert detect._side(list(detect.DETECTORS), Small(), isolated=True) == []


def test_forked_call_returns_the_value_or_none():
    assert _parallel.ForkedCall(lambda: {"a": [1, 2], "pid": os.getpid()}).result()["a"] == [1, 2]
    other = _parallel.ForkedCall(os.getpid).result()
    assert isinstance(other, int) and other != os.getpid()

    def raises():
        raise ValueError("x")

    assert _parallel.ForkedCall(raises).result() is None
    assert _parallel.ForkedCall(lambda: os._exit(0)).result() is None  # nothing sent
    big = _parallel.ForkedCall(lambda: bytes(5 << 20)).result()  # more than a pipe holds
    assert big == bytes(5 << 20)


class _UnpickledAt:
    """Unpickles as the time it was unpickled at (``time.monotonic()``)."""

    def __reduce__(self):
        return (time.monotonic, ())


def test_forked_call_reads_the_message_before_the_child_has_exited(monkeypatch):
    """The child closes the pipe after its message: the parent unpickles it while the
    child's exit (delayed here by a second and a half) goes on, then reaps it."""
    real_exit = os._exit

    def slow_exit(code):
        time.sleep(1.5)
        real_exit(code)

    monkeypatch.setattr(os, "_exit", slow_exit)  # what the forked child calls
    call = _parallel.ForkedCall(lambda: _UnpickledAt())
    monkeypatch.setattr(os, "_exit", real_exit)
    unpickled = call.result()
    returned = time.monotonic()
    assert isinstance(unpickled, float)
    assert returned - unpickled >= 1.0  # unpickled before the child's exit, not after
    with pytest.raises(ChildProcessError):
        os.waitpid(call.pid or -1, os.WNOHANG)  # reaped


def test_forked_call_refuses_a_message_cut_short(monkeypatch):
    """A message shorter than the length it announced (the child died while writing) is
    no value: None, and the caller does the work itself."""
    real_write = _parallel.write_all
    calls = []

    def half(fd, data):
        calls.append(len(data))
        real_write(fd, data[: len(data) // 2] if len(calls) == 2 else data)

    monkeypatch.setattr(_parallel, "write_all", half)  # in the child: length, then half
    assert _parallel.ForkedCall(lambda: list(range(1000))).result() is None
    monkeypatch.setattr(_parallel, "write_all", real_write)
    assert _parallel.ForkedCall(lambda: list(range(1000))).result() == list(range(1000))


def test_forked_call_gives_up_on_a_child_that_stopped(monkeypatch):
    monkeypatch.setattr(_parallel, "STUCK_S", 1.0)
    call = _parallel.ForkedCall(lambda: time.sleep(60))
    pid = call.pid
    t0 = time.monotonic()
    assert call.result() is None
    assert time.monotonic() - t0 < 30
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # killed and reaped


def test_abandoned_forked_call_is_reaped():
    call = _parallel.ForkedCall(lambda: time.sleep(60))
    pid = call.pid
    call.abandon()
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
    assert call.result() is None


def test_evidence_pickles_as_its_fields():
    """Evidence crosses the fork by pickle (its own __reduce__: the three fields)."""
    import pickle

    from pcapkit.detect.base import Evidence

    for e in (Evidence(7, "hole", 1_700_000_000_123_456_789), Evidence(1, "victim")):
        back = pickle.loads(pickle.dumps(e, protocol=pickle.HIGHEST_PROTOCOL))
        assert back == e and type(back) is Evidence
        assert (back.frame, back.role, back.ts_ns) == (e.frame, e.role, e.ts_ns)
