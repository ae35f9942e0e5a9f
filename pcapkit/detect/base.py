"""Findings: the evidence schema every detector emits (DETECTION.md §1.8).

A finding names a pathology (``kind``, a stable public name users gate CI on),
where it happened (flow, direction, stream), when (``t_start_ns``/``t_end_ns``),
what it cost (``cost_ms`` and how that was measured), the frames that prove it
with their roles, the vantage the detector assumed, a confidence, the
counter-hypotheses it ruled out, an explanation in plain words, a remedy and a
Wireshark display filter that shows the evidence.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .. import schema

COST_METHODS = ("measured_interval", "lower_bound", "upper_bound", "estimate")

# Severity from cost (per finding): a delay a user feels is ≥ 100 ms (one "blink";
# the classic Nagle × delayed-ACK stall on Linux is 40 ms + RTT); 20 ms is above
# LAN jitter and one human-perceptible frame at 50 Hz.
HIGH_COST_MS = 100.0
MEDIUM_COST_MS = 20.0


def severity_for(cost_ms: float | None, *, informational: bool = False) -> str:
    if informational or cost_ms is None:
        return "info"
    if cost_ms >= HIGH_COST_MS:
        return "high"
    if cost_ms >= MEDIUM_COST_MS:
        return "medium"
    return "low"


@dataclass(frozen=True, slots=True)
class Evidence:
    """One frame that proves a finding, with its role ("held segment", "releasing ACK", …)."""

    frame: int
    role: str
    ts_ns: int | None = None

    def __reduce__(self) -> tuple[Any, ...]:
        # pickled as its three fields: the state functions a slotted dataclass gets are
        # Python per object (the detectors' forked child sends ~24k of these at h2-1M:
        # dumps + loads 71 → 27 ms)
        return (Evidence, (self.frame, self.role, self.ts_ns))


@dataclass(kw_only=True)
class Finding:
    kind: str
    flow: int | None
    dir: str | None
    t_start_ns: int
    t_end_ns: int
    cost_ms: float | None
    cost_method: str
    evidence: list[Evidence]
    explanation: str
    remedy: str
    display_filter: str
    vantage: str = "unknown"
    confidence: float = 0.5
    checks: list[str] = field(default_factory=list)
    stream: int | None = None
    request: int | None = None  # the HTTP exchange it delayed (requests.request)
    severity: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        from .registry import KIND_SPECS  # the registry imports the detectors, which import this

        spec = KIND_SPECS.get(self.kind)
        if spec is None:
            raise ValueError(f"unknown finding kind {self.kind!r}")
        if self.cost_method not in COST_METHODS:
            raise ValueError(f"unknown cost method {self.cost_method!r}")
        if self.severity is None:
            self.severity = spec.severity or severity_for(self.cost_ms)

    @property
    def frames(self) -> list[int]:
        """The evidence frames, each once, in evidence order."""
        return list(dict.fromkeys(e.frame for e in self.evidence))


def frame_filter(frames: list[int]) -> str:
    """A display filter selecting exactly these frames: ``frame.number in {a, b, c}``
    (Wireshark 4 separates set members with commas; tshark 4.0 rejects spaces)."""
    if not frames:
        return ""
    return "frame.number in {" + ", ".join(str(f) for f in sorted(set(frames))) + "}"


def findings_table(fs: list[Finding]) -> pd.DataFrame:
    """Findings as the declared ``findings`` table (``schema.describe("findings")``)."""
    if not fs:
        return schema.frame("findings", n=0)
    data = {
        "kind": [f.kind for f in fs],
        "severity": [f.severity for f in fs],
        "flow": pd.array([f.flow for f in fs], dtype="Int64"),
        "dir": [f.dir for f in fs],
        "cost_ms": pd.array(
            [None if f.cost_ms is None else round(f.cost_ms, 3) for f in fs], dtype="Float64"
        ),
        "frames": [f.frames for f in fs],
        "explanation": [f.explanation for f in fs],
        "remedy": [f.remedy for f in fs],
        "cost_method": [f.cost_method for f in fs],
        "t_start_ns": np.array([f.t_start_ns for f in fs], np.int64),
        "t_end_ns": np.array([f.t_end_ns for f in fs], np.int64),
        "stream": pd.array([f.stream for f in fs], dtype="Int64"),
        "request": pd.array([f.request for f in fs], dtype="Int64"),
        "vantage": [f.vantage for f in fs],
        "confidence": np.array([f.confidence for f in fs], np.float64),
        "evidence": [
            [{"frame": e.frame, "role": e.role, "ts_ns": e.ts_ns} for e in f.evidence] for f in fs
        ],
        "checks": [list(f.checks) for f in fs],
        "display_filter": [f.display_filter for f in fs],
        "details": [dict(f.details) for f in fs],
    }
    return schema.frame("findings", data, len(fs))
