"""What a detector module declares about itself: its kinds and its thresholds.

Every module of :mod:`pcapkit.detect` that defines ``SPEC = DetectorSpec(...)`` and
``detect(ctx, *, <thresholds>) -> list[Finding]`` is a detector; the registry
(:mod:`pcapkit.detect.registry`) finds it, derives the public lists (every kind, the
kinds that hold bytes back, the run order) and lets users set its thresholds
(``pcapkit analyze --set nagle.late_slack_ms=3``, ``pcapkit thresholds``).

A threshold's *default* is the default of the ``detect`` keyword argument of the
same name (one source of truth); the spec adds its unit, the range a user may set
and where the value comes from (the kernel constant, RFC or measurement).
"""

from __future__ import annotations

from dataclasses import dataclass

SEVERITIES = ("info", "low", "medium", "high")
UNITS = ("ms", "ns", "s", "bytes", "segments", "count", "fraction", "ratio", "rtt")


@dataclass(frozen=True, slots=True)
class Kind:
    """One finding kind: a stable public name users gate CI on.

    ``code`` and ``doc`` point into DETECTION.md; ``holds`` says the finding's interval
    is time the network or a transport mechanism held bytes back (gap attribution
    counts it as network time, never as server time); ``severity`` fixes the severity
    (``"info"``: informational) instead of deriving it from the cost.
    """

    name: str
    code: str
    doc: str
    holds: bool = False
    severity: str | None = None

    def __post_init__(self) -> None:
        if self.severity is not None and self.severity not in SEVERITIES:
            raise ValueError(f"{self.name}: unknown severity {self.severity!r}")

    @property
    def informational(self) -> bool:
        return self.severity == "info"


@dataclass(frozen=True, slots=True)
class Threshold:
    """A keyword argument of ``detect`` that users may set.

    ``minimum``/``maximum`` bound what a user may set (inclusive); ``source`` says
    where the default comes from.
    """

    name: str
    unit: str
    source: str
    minimum: float = 0.0
    maximum: float | None = None

    def __post_init__(self) -> None:
        if self.unit not in UNITS:
            raise ValueError(f"{self.name}: unknown unit {self.unit!r} (one of {UNITS})")


@dataclass(frozen=True, slots=True)
class DetectorSpec:
    """A detector module's declaration.

    ``reads`` names the finding kinds the detector reads from the findings of the
    detectors that ran before it (``ctx.prior``, which holds those kinds only);
    ``"holding"`` stands for every kind that holds bytes.  The registry runs it after
    every detector that emits one.
    """

    kinds: tuple[Kind, ...]
    thresholds: tuple[Threshold, ...] = ()
    reads: tuple[str, ...] = ()

    @property
    def kind_names(self) -> tuple[str, ...]:
        return tuple(k.name for k in self.kinds)
