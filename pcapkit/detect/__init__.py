"""Detectors: name the pathology, prove it with frames, price it in milliseconds.

One module per pathology: a :class:`~pcapkit.detect.spec.DetectorSpec` (its kinds,
their severity and whether they hold bytes, its thresholds with their sources, the
kinds it reads from earlier detectors) and a pure function ``detect(ctx,
**thresholds) -> list[Finding]`` of the trace's tables (DESIGN.md §5).  The
registry (:mod:`pcapkit.detect.registry`) finds the modules and derives the kind
lists and the run order.  Detection never parses bytes.
"""

from __future__ import annotations

import gc
from collections.abc import Mapping
from typing import Any

import pandas as pd

from ..anomalies import isolate
from ..rows import itertuples
from .base import Evidence, Finding, findings_table, frame_filter, severity_for
from .constants import INT64_MAX, INT64_MIN, Coupling
from .context import DetectContext
from .registry import (
    DETECTORS,
    HOLDING_KINDS,
    INFORMATIONAL_KINDS,
    KINDS,
    ThresholdError,
    read_kinds,
    resolve_thresholds,
    thresholds,
)
from .spec import SEVERITIES

IMPLEMENTED_KINDS: frozenset[str] = frozenset(KINDS)


def finding_order(f: Finding) -> tuple[Any, ...]:
    """Worst first: cost, then flow, start, kind, direction and frames (a total order,
    so the findings table does not depend on the order the detectors ran in)."""
    return (
        -(f.cost_ms or 0.0),
        f.flow if f.flow is not None else -1,
        f.t_start_ns,
        f.kind,
        f.dir or "",
        f.frames,
        f.t_end_ns,
    )


def with_evidence(display_filter: str, frames: list[int]) -> str:
    """A detector's display filter widened so that it shows every evidence frame too:
    ``(filter) || frame.number in {…}`` (a filter that narrows to a condition — a stream,
    a flag, a length — can miss an evidence frame that does not meet it)."""
    ff = frame_filter(frames)
    if not display_filter or display_filter == ff:
        return ff
    if not ff:
        return display_filter
    return f"({display_filter}) || {ff}"


# Detectors run in a forked child on a big capture while this process runs the others
# (pcapkit._parallel.ForkedCall), after the memos both halves read are built
# (tcp_model.warm_shared): about half of the detectors' CPU after that, measured at 1M
# packets one detector at a time (sse: 1.95 of 3.86 s; h2: 0.98 of 1.71 s), closed under
# the kinds they read (hol reads rto's, delivery hol's); a detector that reads their
# kinds (http) waits for the child.  reuse joined them when delayed_ack's candidates
# left the child idle (sse-1M: the child's last detector ended ~0.4 s before this
# process's; with reuse, 1.36 vs 1.42 s after the first began).
SIDE = ("delayed_ack", "reuse", "rto", "hol", "delivery", "ssr")
# The fork pays on a capture of at least this many TCP segments and connections: the
# detectors' own cost is mostly per connection (Python per direction), and with fewer the
# fork's cost (page tables of the whole process, copy-on-write, the child's exit: +0.2-0.5 s
# of system time at 1 GB) eats the gain.  Measured (analyze --format json, 3 rounds):
# h2-200k, 133 connections, 124k segments: 1.15-1.17 s → 1.09-1.11 s with the fork;
# bulk-200k, 79 connections, 130k segments: 0.93-1.05 s → 0.92-0.94 s, no gain to speak of
SIDE_MIN_SEGMENTS = 100_000
SIDE_MIN_CONNECTIONS = 100

# a detector's results: its findings, or the internal_error row of its exception
_Result = tuple[list[Finding], dict[str, Any] | None]


def _run_one(det: Any, ctx: DetectContext, kwargs: Mapping[str, Any], isolated: bool) -> _Result:
    """One detector's findings (checked, display filters widened), or with ``isolated``
    its exception as an internal_error row."""
    try:
        found = det.detect(ctx, **kwargs.get(det.name, {}))
        for f in found:
            if f.kind not in det.spec.kind_names:
                raise TypeError(f"detector {det.name} emitted {f.kind!r}, not one of its kinds")
            if not (
                INT64_MIN <= f.t_start_ns <= INT64_MAX and INT64_MIN <= f.t_end_ns <= INT64_MAX
            ):
                # the findings table holds int64 nanoseconds: a time past them is the
                # detector's arithmetic gone wrong on this capture, not a finding
                raise OverflowError(
                    f"detector {det.name} emitted {f.kind!r} with t_start_ns="
                    f"{f.t_start_ns}, t_end_ns={f.t_end_ns} outside int64"
                )
            f.display_filter = with_evidence(f.display_filter, f.frames)
    except Exception as exc:  # noqa: BLE001 - one detector's bug, not the capture's
        if not isolated:
            raise
        return [], isolate("detect", exc, what=f"detector {det.name}")
    return found, None


def _run_in_order(
    dets: list[Any],
    ctx: DetectContext,
    kwargs: Mapping[str, Any],
    results: dict[str, _Result],
    only: set[str] | None,
    isolated: bool,
    wait: Any = None,
) -> None:
    """Run ``dets`` in order into ``results``, each seeing in ``ctx.prior`` the findings
    of the kinds it reads (worst first) of the detectors before it.  ``wait(det)`` is
    called before a detector that reads kinds (it brings in what a child found)."""
    for det in dets:
        kinds = read_kinds(det)
        if kinds and wait is not None:
            wait(det)
        prior = [
            f
            for found, _ in (results.values() if kinds else ())
            for f in found
            if f.kind in kinds and (only is None or f.kind in only)
        ]
        ctx.prior = sorted(prior, key=finding_order)
        results[det.name] = _run_one(det, ctx, kwargs, isolated)
    ctx.prior = []


def _side(dets: list[Any], ctx: DetectContext, isolated: bool) -> list[Any]:
    """The detectors of ``dets`` to run in a forked child (none on a small capture, when
    forking is not allowed, or when a detector's exception must propagate), with every
    detector whose kinds they read."""
    from .._parallel import forking_allowed

    if (
        not isolated
        or len(ctx.segments) < SIDE_MIN_SEGMENTS
        or len(ctx.tcp_flows()) < SIDE_MIN_CONNECTIONS
        or not forking_allowed()
    ):
        return []
    names = {d.name for d in dets if d.name in SIDE}
    grew = True
    while grew:  # close over the kinds read
        wanted = set().union(*(read_kinds(d) for d in dets if d.name in names))
        more = {d.name for d in dets if set(d.spec.kind_names) & wanted} - names
        names |= more
        grew = bool(more)
    return [d for d in dets if d.name in names]


def shared_of(side: list[Any]) -> list[Any]:
    """The detectors of ``side`` that read no kind and whose kinds none of ``side``
    reads: either process may run them (:func:`run_detectors`)."""
    reads = set().union(*(read_kinds(d) for d in side))
    return [d for d in side if not read_kinds(d) and not set(d.spec.kind_names) & reads]


def run_detectors(
    ctx: DetectContext,
    only: set[str] | None = None,
    settings: Mapping[str, Any] | None = None,
    errors: list[dict[str, Any]] | None = None,
) -> list[Finding]:
    """Run every registered detector (or those emitting one of ``only``), worst first.

    ``settings`` sets thresholds by name (``{"nagle.late_slack_ms": 3.0}``, see
    :func:`thresholds`); a bad name or value raises :class:`ThresholdError`.  With an
    ``errors`` list, a detector that raises loses its findings and adds an
    ``internal_error`` row there (:func:`pcapkit.anomalies.isolate`); the detectors after
    it run (those that read its kinds see none).  Without it the exception propagates.

    A detector sees in ``ctx.prior`` only the findings of the kinds its spec ``reads``.
    With an ``errors`` list, on a capture of at least :data:`SIDE_MIN_SEGMENTS` TCP
    segments and :data:`SIDE_MIN_CONNECTIONS` TCP connections, the detectors of
    :data:`SIDE` run in a forked child process while this one runs the others
    (:class:`pcapkit._parallel.ForkedCall`; ``PCAPKIT_THREADS=1``: all here); those of
    them that read no kind and whose kinds none of them reads (:func:`shared_of`:
    delayed_ack, reuse, ssr) run last, each in whichever process is free first
    (:class:`pcapkit._parallel.Tickets`).
    The findings are the same either way.
    """
    from .._pages import release_free_memory
    from .._parallel import ForkedCall, Tickets

    kwargs = resolve_thresholds(settings)
    ctx.set_coupling(Coupling(**kwargs.pop("tcp", {})))
    isolated = errors is not None
    dets = [d for d in DETECTORS if only is None or set(d.spec.kind_names) & only]
    side = _side(dets, ctx, isolated)
    # the heap's free pages back to the kernel before the detectors, which hold the
    # analysis's peak (and before a fork copies their page tables): pcapkit._pages
    release_free_memory()
    results: dict[str, _Result] = {}
    child: ForkedCall | None = None
    gc_was = gc.isenabled()
    # the side's detectors that read no kind and whose kinds no side detector reads run
    # last, in whichever process is free first (a ticket each, pcapkit._parallel.Tickets):
    # the child after the side's others, this process after its own detectors
    shared = shared_of(side)
    fixed = [d for d in side if d not in shared]
    tickets: Tickets | None = None

    def run_taken(into: dict[str, _Result]) -> None:
        while tickets is not None and (i := tickets.take()) is not None:
            _run_in_order([shared[i]], ctx, kwargs, into, only, isolated)

    if side:
        from .tcp_model import warm_shared

        try:
            warm_shared(ctx)  # built once, here, for both processes
        except Exception:  # noqa: BLE001, S110 - the detectors that need it raise it, isolated
            pass

        def in_child() -> dict[str, _Result]:
            got: dict[str, _Result] = {}
            _run_in_order(fixed, ctx, kwargs, got, only, isolated)
            run_taken(got)  # then what this process has not taken yet
            return got

        # no cyclic GC here until the child is joined: a collection would write to every
        # page of objects this process shares with the child (each page then copied)
        gc.disable()
        try:
            tickets = Tickets(len(shared)) if shared else None
            child = ForkedCall(in_child)
        except OSError:
            child = None  # no fork (memory, process limit): the side runs here, at the join
    side_kinds = {k for d in side for k in d.spec.kind_names}
    joined = False

    def join() -> None:
        """Take the child's results; what it did not bring (it failed) is run here.  The
        shared detectors the child has not begun yet run here first (while it works)."""
        nonlocal child, joined
        if joined:
            return
        run_taken(results)
        joined = True
        if child is not None:
            got = child.result()
            child = None
            results.update(got if isinstance(got, dict) else {})
        missing = [d for d in side if d.name not in results]
        _run_in_order(missing, ctx, kwargs, results, only, isolated)

    def wait(det: Any) -> None:
        if read_kinds(det) & side_kinds:
            join()

    try:
        side_names = {d.name for d in side}
        here = [d for d in dets if d.name not in side_names]
        _run_in_order(here, ctx, kwargs, results, only, isolated, wait if side else None)
        join()
    finally:
        if child is not None:
            child.abandon()
        if tickets is not None:
            tickets.close()
        if gc_was:
            gc.enable()
    out: list[Finding] = []
    for det in dets:  # in run order: the errors as a serial run adds them
        found, err = results[det.name]
        if err is not None and errors is not None:
            errors.append(err)
        out.extend(f for f in found if only is None or f.kind in only)
    out.sort(key=finding_order)
    try:
        link_requests(out, ctx.requests)
    except Exception as exc:  # noqa: BLE001 - the findings stand without their join key
        if errors is None:
            raise
        errors.append(isolate("detect", exc, what="link_requests"))
    return out


def link_requests(findings: list[Finding], requests: Any) -> None:
    """Fill each finding's ``request`` (the exchange it delayed: the detector's
    ``details["request"]``, else the first exchange of its flow — and stream — in flight
    between its start and end, else the first one that began after it started: a slow
    handshake delays the connection's first request). A missing HTTP/2 or HTTP/3
    ``stream`` is filled when that exchange is the only one it can have delayed (named,
    or alone in flight); a connection-level finding over several streams keeps none."""
    if requests is None or len(requests) == 0:
        return
    rows = requests[["request", "flow", "stream", "request_start_ts_ns", "last_byte_ts_ns"]]
    by_flow: dict[int, list[tuple[int, int | None, int, int]]] = {}
    for r in itertuples(rows):
        start = r.request_start_ts_ns
        end = r.last_byte_ts_ns
        if start is pd.NA:
            continue
        by_flow.setdefault(int(r.flow), []).append(
            (
                int(r.request),
                None if r.stream is pd.NA else int(r.stream),
                int(start),
                int(start) if end is pd.NA else int(end),
            )
        )
    streams = {int(r.request): r.stream for r in itertuples(rows)}
    for f in findings:
        if f.request is not None:
            continue
        named = f.details.get("request") if isinstance(f.details, dict) else None
        alone = False  # the one exchange it can have delayed
        if isinstance(named, int) and named in streams:
            f.request, alone = named, True
        elif f.flow is not None:
            mine = [
                (req, a, b)
                for req, stream, a, b in by_flow.get(f.flow, [])
                if f.stream is None or stream == f.stream
            ]
            during = [req for req, a, b in mine if a <= f.t_end_ns and f.t_start_ns <= b]
            after = [req for req, a, _b in mine if a >= f.t_start_ns]
            if during or after:
                f.request = (during or after)[0]
                alone = len(during) == 1
        s = streams.get(f.request) if f.request is not None else None
        if f.stream is None and alone and s is not None and s is not pd.NA:
            f.stream = int(s)


__all__ = [
    "DETECTORS",
    "HOLDING_KINDS",
    "IMPLEMENTED_KINDS",
    "INFORMATIONAL_KINDS",
    "KINDS",
    "SEVERITIES",
    "DetectContext",
    "Evidence",
    "Finding",
    "ThresholdError",
    "findings_table",
    "resolve_thresholds",
    "run_detectors",
    "severity_for",
    "thresholds",
]
