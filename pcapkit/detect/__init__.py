"""Detectors: name the pathology, prove it with frames, price it in milliseconds.

One module per pathology: a :class:`~pcapkit.detect.spec.DetectorSpec` (its kinds,
their severity and whether they hold bytes, its thresholds with their sources, the
kinds it reads from earlier detectors) and a pure function ``detect(ctx,
**thresholds) -> list[Finding]`` of the trace's tables (DESIGN.md §5).  The
registry (:mod:`pcapkit.detect.registry`) finds the modules and derives the kind
lists and the run order.  Detection never parses bytes.
"""

from __future__ import annotations

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
    """
    kwargs = resolve_thresholds(settings)
    ctx.set_coupling(Coupling(**kwargs.pop("tcp", {})))
    out: list[Finding] = []
    # each finding's finding_order key, computed once (findings are not changed after
    # their detector returns): ``ctx.prior`` is re-sorted only when findings were added
    keys: list[tuple[Any, ...]] = []
    ranked: list[int] = []  # positions in ``out``, worst first
    for det in DETECTORS:
        if only is not None and not (set(det.spec.kind_names) & only):
            continue
        if len(ranked) != len(out):
            keys.extend(finding_order(f) for f in out[len(keys) :])
            ranked = sorted(range(len(out)), key=keys.__getitem__)
        ctx.prior = [out[i] for i in ranked]  # = sorted(out, key=finding_order)
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
            if errors is None:
                raise
            errors.append(isolate("detect", exc, what=f"detector {det.name}"))
            continue
        out.extend(f for f in found if only is None or f.kind in only)
    keys.extend(finding_order(f) for f in out[len(keys) :])
    out = [out[i] for i in sorted(range(len(out)), key=keys.__getitem__)]
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
