"""The detector registry: every module of this package that declares a ``SPEC``.

Derived here, never listed by hand (adding a kind = one module + its tests + its
fixture):

* :data:`DETECTORS` — the detectors in run order: a detector whose spec ``reads``
  kinds runs after every detector that emits one of them; otherwise by name;
* :data:`KINDS` — every public finding kind, :data:`HOLDING_KINDS` those whose
  interval held bytes back (gap attribution), :data:`INFORMATIONAL_KINDS`;
* thresholds — ``<detector>.<keyword>`` for every keyword argument of a detector's
  ``detect``, with the default from its signature and unit, range and source from
  its spec, and ``tcp.<name>`` for the TCP model's coupling window that every TCP
  detector shares (:class:`~pcapkit.detect.constants.Coupling`);
  :func:`resolve_thresholds` checks a user's settings.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import math
import pkgutil
from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from difflib import get_close_matches
from types import ModuleType
from typing import Any

from .constants import COUPLING_SETTINGS, Coupling
from .spec import DetectorSpec, Kind, Threshold

HOLDING = "holding"  # in a spec's ``reads``: every kind that holds bytes


class ThresholdError(ValueError):
    """An unknown threshold name or a value outside what the threshold allows."""


@dataclass(frozen=True)
class Detector:
    name: str  # the module's name inside pcapkit.detect
    module: ModuleType
    spec: DetectorSpec
    defaults: dict[str, int | float]  # threshold keyword -> default (detect's signature)

    def detect(self, ctx: Any, **thresholds: Any) -> list[Any]:
        out: list[Any] = self.module.detect(ctx, **thresholds)
        return out


@dataclass(frozen=True)
class ThresholdInfo:
    name: str  # "<detector>.<keyword>"
    detector: str
    keyword: str
    default: int | float
    unit: str
    minimum: float
    maximum: float | None
    source: str


def _keyword_defaults(mod: ModuleType) -> dict[str, int | float]:
    sig = inspect.signature(mod.detect)
    out: dict[str, int | float] = {}
    for name, p in sig.parameters.items():
        if p.kind is inspect.Parameter.KEYWORD_ONLY:
            if p.default is inspect.Parameter.empty:
                raise TypeError(f"{mod.__name__}.detect: keyword {name!r} has no default")
            out[name] = p.default
    return out


def _discover() -> list[Detector]:
    pkg = importlib.import_module(__name__.rsplit(".", 1)[0])
    found: list[Detector] = []
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        mod = importlib.import_module(f"{pkg.__name__}.{info.name}")
        spec = getattr(mod, "SPEC", None)
        if not isinstance(spec, DetectorSpec):
            continue
        defaults = _keyword_defaults(mod)
        declared = {t.name for t in spec.thresholds}
        if declared != set(defaults):
            raise TypeError(
                f"{mod.__name__}: SPEC thresholds {sorted(declared)} != detect() keywords "
                f"{sorted(defaults)}"
            )
        found.append(Detector(info.name, mod, spec, defaults))
    return found


def read_kinds(det: Detector, holding: AbstractSet[str] | None = None) -> frozenset[str]:
    """The kinds ``det`` reads from earlier detectors' findings: its spec's ``reads``
    with ``holding`` (default :data:`HOLDING_KINDS`) for every kind that holds bytes."""
    held = HOLDING_KINDS if holding is None else holding
    out: set[str] = set()
    for r in det.spec.reads:
        out |= held if r == HOLDING else {r}
    return frozenset(out)


def _order(dets: list[Detector]) -> list[Detector]:
    """Detectors by name, each moved after the detectors emitting a kind it reads."""
    holding = {k.name for d in dets for k in d.spec.kinds if k.holds}
    emits = {d.name: set(d.spec.kind_names) for d in dets}
    needs: dict[str, set[str]] = {}
    for d in dets:
        wanted = read_kinds(d, holding)
        needs[d.name] = {e.name for e in dets if e.name != d.name and emits[e.name] & wanted}
    out: list[Detector] = []
    done: set[str] = set()
    pending = list(dets)
    while pending:
        ready = [d for d in pending if needs[d.name] <= done]
        if not ready:
            raise TypeError(f"detectors read each other's findings: {[d.name for d in pending]}")
        d = ready[0]
        out.append(d)
        done.add(d.name)
        pending.remove(d)
    return out


DETECTORS: list[Detector] = _order(_discover())
KIND_SPECS: dict[str, Kind] = {}
for _d in DETECTORS:
    for _k in _d.spec.kinds:
        if _k.name in KIND_SPECS:
            raise TypeError(f"kind {_k.name!r} declared twice")
        KIND_SPECS[_k.name] = _k
KINDS: tuple[str, ...] = tuple(KIND_SPECS)
HOLDING_KINDS: frozenset[str] = frozenset(k for k, s in KIND_SPECS.items() if s.holds)
INFORMATIONAL_KINDS: frozenset[str] = frozenset(k for k, s in KIND_SPECS.items() if s.informational)
DETECTOR_OF: dict[str, str] = {k: d.name for d in DETECTORS for k in d.spec.kind_names}


# Settings of the shared TCP model: (name, its thresholds, their defaults).
SHARED: dict[str, tuple[tuple[Threshold, ...], dict[str, Any]]] = {
    "tcp": (COUPLING_SETTINGS, {f.name: f.default for f in dataclasses.fields(Coupling)}),
}


def thresholds() -> list[ThresholdInfo]:
    """Every settable threshold, by detector (or shared model) then keyword."""
    groups: list[tuple[str, tuple[Threshold, ...], dict[str, Any]]] = [
        (d.name, d.spec.thresholds, d.defaults) for d in DETECTORS
    ] + [(name, ts, defaults) for name, (ts, defaults) in SHARED.items()]
    out = []
    for name, ts, defaults in sorted(groups, key=lambda g: g[0]):
        by_name: dict[str, Threshold] = {t.name: t for t in ts}
        for kw, default in defaults.items():
            t = by_name[kw]
            out.append(
                ThresholdInfo(
                    f"{name}.{kw}", name, kw, default, t.unit, t.minimum, t.maximum, t.source
                )
            )
    return out


def _value(info: ThresholdInfo, raw: Any) -> int | float:
    want_int = isinstance(info.default, int) and not isinstance(info.default, bool)
    try:
        if isinstance(raw, str):
            v: int | float = float(raw.strip())
        elif isinstance(raw, bool) or not isinstance(raw, (int, float)):
            raise TypeError
        else:
            v = raw
    except (TypeError, ValueError):
        raise ThresholdError(
            f"{info.name}: {raw!r} is not a number ({info.unit}, default {info.default})"
        ) from None
    if not math.isfinite(v):
        raise ThresholdError(f"{info.name}: {raw!r} is not a finite number")
    if want_int:
        if v != int(v):
            raise ThresholdError(f"{info.name}: {raw!r} must be a whole number ({info.unit})")
        v = int(v)
    else:
        v = float(v)
    if v < info.minimum or (info.maximum is not None and v > info.maximum):
        hi = "" if info.maximum is None else f" and at most {info.maximum:g}"
        raise ThresholdError(
            f"{info.name}: {raw!r} out of range (at least {info.minimum:g}{hi} {info.unit})"
        )
    return v


def resolve_thresholds(settings: Mapping[str, Any] | None) -> dict[str, dict[str, int | float]]:
    """A user's ``{"nagle.late_slack_ms": 3.0, …}`` as keyword arguments per detector.

    Raises :class:`ThresholdError` for an unknown name (naming the valid ones, or the
    close matches) or a value of the wrong type or range.
    """
    out: dict[str, dict[str, int | float]] = {}
    if not settings:
        return out
    known = {t.name: t for t in thresholds()}
    for name, raw in settings.items():
        info = known.get(name)
        if info is None:
            close = get_close_matches(name, known, n=3)
            same = sorted(k for k, t in known.items() if t.detector == name.partition(".")[0])
            if close:
                hint = f"did you mean {', '.join(close)}?"
            elif same:
                hint = "valid names: " + ", ".join(same)
            else:
                hint = "valid names: " + ", ".join(sorted(known))
            raise ThresholdError(f"unknown threshold {name!r}; {hint} (pcapkit thresholds)")
        out.setdefault(info.detector, {})[info.keyword] = _value(info, raw)
    return out


def parse_settings(items: list[str] | tuple[str, ...]) -> dict[str, str]:
    """``["nagle.late_slack_ms=3", …]`` (the CLI's ``--set``) as a mapping."""
    out: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip() or not value.strip():
            raise ThresholdError(f"want NAME=VALUE, not {item!r} (pcapkit thresholds)")
        out[name.strip()] = value.strip()
    return out
