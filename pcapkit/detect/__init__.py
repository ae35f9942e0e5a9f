"""Detectors: name the pathology, prove it with frames, price it in milliseconds.

One module per pathology, each a pure function ``detect(ctx, **thresholds) ->
list[Finding]`` of the trace's tables (DESIGN.md §5); thresholds are keyword
arguments whose defaults cite the kernel constant or RFC they come from.  They
are registered in :data:`DETECTORS`, in the order DETECTION.md §9 recommends
(cheap → expensive).  Detection never parses bytes.
"""

from __future__ import annotations

from types import ModuleType

from . import (
    cork,
    delayed_ack,
    h2,
    h2_send_buffer,
    h3,
    hol,
    http,
    nagle,
    quic,
    quic_fc,
    quic_handshake,
    resumption,
    reuse,
    ssr,
    tls_records,
    zero_window,
)
from .base import KINDS, SEVERITIES, Evidence, Finding, severity_for
from .context import DetectContext

# The one explicit list.  Each module has ``KINDS`` (the kinds it can emit) and
# ``detect(ctx, **thresholds) -> list[Finding]``.
DETECTORS: list[ModuleType] = [
    zero_window,  # R2
    cork,  # C1, C2
    nagle,  # N1, N2
    delayed_ack,  # D1
    tls_records,  # T1, T2, T3
    ssr,  # R1
    hol,  # H1
    reuse,  # R3
    resumption,  # R4
    h2,  # H2 (HTTP/2 flow control)
    h2_send_buffer,  # H3 (HTTP/2 send-buffer HoL)
    quic,  # Q1, Q3 (QUIC stream HoL)
    quic_fc,  # QUIC flow-control stalls
    quic_handshake,  # QUIC handshake round trips
    h3,  # QPACK-blocked streams
    http,  # application level, after the TCP/TLS causes it attributes to
]

IMPLEMENTED_KINDS: frozenset[str] = frozenset(k for m in DETECTORS for k in m.KINDS)


def run_detectors(ctx: DetectContext, only: set[str] | None = None) -> list[Finding]:
    """Run every registered detector (or those emitting one of ``only``), worst first."""
    out: list[Finding] = []
    for mod in DETECTORS:
        if only is not None and not (set(mod.KINDS) & only):
            continue
        ctx.prior = list(out)
        found = mod.detect(ctx)
        out.extend(f for f in found if only is None or f.kind in only)
    out.sort(
        key=lambda f: (-(f.cost_ms or 0.0), f.flow if f.flow is not None else -1, f.t_start_ns)
    )
    return out


__all__ = [
    "DETECTORS",
    "IMPLEMENTED_KINDS",
    "KINDS",
    "SEVERITIES",
    "DetectContext",
    "Evidence",
    "Finding",
    "run_detectors",
    "severity_for",
]
