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

from ..anomalies import isolate
from .base import Evidence, Finding, findings_table, frame_filter, severity_for
from .constants import Coupling
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
    for det in DETECTORS:
        if only is not None and not (set(det.spec.kind_names) & only):
            continue
        ctx.prior = sorted(out, key=finding_order)
        try:
            found = det.detect(ctx, **kwargs.get(det.name, {}))
            for f in found:
                if f.kind not in det.spec.kind_names:
                    raise TypeError(f"detector {det.name} emitted {f.kind!r}, not one of its kinds")
                f.display_filter = with_evidence(f.display_filter, f.frames)
        except Exception as exc:  # noqa: BLE001 - one detector's bug, not the capture's
            if errors is None:
                raise
            errors.append(isolate("detect", exc, what=f"detector {det.name}"))
            continue
        out.extend(f for f in found if only is None or f.kind in only)
    out.sort(key=finding_order)
    return out


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
