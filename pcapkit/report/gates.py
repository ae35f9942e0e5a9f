"""Numeric CI gates of ``pcapkit analyze`` and its JUnit report.

A gate is a limit on one measured quantity: ``--max-ttfb-ms``, ``--max-ttft-ms`` and
``--max-gap-p95-ms`` on every HTTP exchange (``Trace.requests``), ``--max-handshake-ms``
on every TLS session and QUIC connection (``Trace.tls`` / ``Trace.quic``).  A gate fails
when a measured value is over its limit — and also when it measured nothing: a TTFT
gate on a capture whose TLS could not be decrypted has no request to check, and a CI
gate that passes on what it could not see would be a clean verdict on nothing.

:func:`junit_xml` writes the analysis as JUnit XML for CI systems: one test case per
exchange, per handshake, per finding and per gate, failing where the exit code says 3.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from ..rows import itertuples
from .escape import printable


@dataclass(frozen=True)
class Gate:
    option: str  # the command-line option, e.g. "--max-ttft-ms"
    table: str  # "requests" or "handshakes"
    column: str
    what: str  # what is measured, for messages


GATES: dict[str, Gate] = {
    g.option: g
    for g in (
        Gate("--max-ttfb-ms", "requests", "ttfb_ms", "time to first byte"),
        Gate("--max-ttft-ms", "requests", "ttft_ms", "time to first token"),
        Gate("--max-gap-p95-ms", "requests", "gap_p95_ms", "p95 gap between events"),
        Gate("--max-handshake-ms", "handshakes", "handshake_ms", "handshake time"),
    )
}


@dataclass
class Subject:
    """One thing a gate measures: an HTTP exchange or a handshake."""

    table: str
    key: int  # requests.request, or the flow of the handshake
    flow: int
    name: str
    values: dict[str, float | None]
    seconds: float | None = None  # how long the exchange or handshake took


@dataclass
class Violation:
    gate: Gate
    limit: float
    subject: Subject | None  # None: the gate measured nothing
    value: float | None
    reason: str

    def line(self) -> str:
        return f"gate {self.gate.option} {self.limit:g}: {self.reason}"


def as_float(v: Any) -> float | None:
    """A table cell as a float; None for missing (None, NA, NaN) or non-numeric values."""
    if v is None or v is pd.NA:
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) else f


def _int(v: Any) -> int | None:
    f = as_float(v)
    return None if f is None else int(f)


def request_name(r: Any) -> str:
    where = f"flow {int(r.flow)}"
    stream = _int(r.stream)
    if stream is not None:
        where += f" stream {stream}"
    target = f"{r.method or '?'} {r.authority or ''}{r.path or ''}".strip()
    return f"request {int(r.request)} ({where}): {target}"


def subjects(
    requests: pd.DataFrame,
    tls: pd.DataFrame,
    quic: pd.DataFrame,
    flows: Iterable[int] | None = None,
) -> list[Subject]:
    """The exchanges and handshakes of the capture (on ``flows`` only, if given)."""
    only = None if flows is None else set(flows)
    out: list[Subject] = []
    rows: list[Any] = list(itertuples(requests))
    for r in rows:
        if only is not None and int(r.flow) not in only:
            continue
        values = {c: as_float(getattr(r, c)) for c in ("ttfb_ms", "ttft_ms", "gap_p95_ms")}
        a, b = as_float(r.request_start_ts_ns), as_float(r.last_byte_ts_ns)
        took = None if a is None or b is None else (b - a) / 1e9
        out.append(Subject("requests", int(r.request), int(r.flow), request_name(r), values, took))
    for proto, table in (("TLS", tls), ("QUIC", quic)):
        sessions: list[Any] = list(itertuples(table))
        for h in sessions:
            if only is not None and int(h.flow) not in only:
                continue
            sni = f" {h.sni}" if isinstance(h.sni, str) and h.sni else ""
            values_ms = as_float(h.handshake_ms)
            out.append(
                Subject(
                    "handshakes",
                    int(h.flow),
                    int(h.flow),
                    f"flow {int(h.flow)} {proto} handshake{sni}",
                    {"handshake_ms": values_ms},
                    None if values_ms is None else values_ms / 1e3,
                )
            )
    return out


def check(limits: Mapping[str, float], subs: list[Subject]) -> list[Violation]:
    """The violations of ``limits`` (option → ms) by ``subs``, gate by gate."""
    out: list[Violation] = []
    for option, limit in limits.items():
        gate = GATES[option]
        mine = [s for s in subs if s.table == gate.table]
        measured = [s for s in mine if s.values.get(gate.column) is not None]
        if not measured:
            what = "HTTP exchange" if gate.table == "requests" else "TLS or QUIC handshake"
            why = f"{len(mine)} {what}(s) in what could be read" + (
                ", none with a " + gate.what if mine else ""
            )
            out.append(
                Violation(gate, limit, None, None, f"nothing to check: no {gate.what} ({why})")
            )
            continue
        for s in measured:
            v = s.values[gate.column]
            assert v is not None
            if v > limit:
                out.append(
                    Violation(gate, limit, s, v, f"{s.name}: {gate.what} {v:.1f} ms > {limit:g}")
                )
    return out


def _case(
    suite: ET.Element,
    classname: str,
    name: str,
    *,
    seconds: float | None = None,
    failures: Iterable[tuple[str, str]] = (),
    out: str | None = None,
) -> None:
    case = ET.SubElement(suite, "testcase", classname=classname, name=printable(name))
    case.set("time", f"{max(seconds or 0.0, 0.0):.6f}")
    for kind, message in failures:
        f = ET.SubElement(case, "failure", type=kind, message=printable(message))
        f.text = printable(message)
    if out:
        ET.SubElement(case, "system-out").text = printable(out)


def junit_xml(
    capture: str,
    subs: list[Subject],
    findings: pd.DataFrame,
    limits: Mapping[str, float],
    violations: list[Violation],
    failing: pd.Series | None = None,
) -> bytes:
    """JUnit XML of one analysis: a test case per HTTP exchange and handshake (failing
    where a gate failed on it), per finding (failing where ``failing``, the ``--fail-on``
    rule's mask over ``findings``, is true) and per gate (failing when it failed anywhere or
    measured nothing)."""
    root = ET.Element("testsuites", name="pcapkit")
    suite = ET.SubElement(root, "testsuite", name=printable(f"pcapkit analyze {capture}"))
    by_subject: dict[tuple[str, int], list[Violation]] = {}
    for v in violations:
        if v.subject is not None:
            by_subject.setdefault((v.subject.table, v.subject.key), []).append(v)
    for s in subs:
        vs = by_subject.get((s.table, s.key), [])
        shown = ", ".join(f"{c} {'–' if x is None else f'{x:.1f}'}" for c, x in s.values.items())
        _case(
            suite,
            f"pcapkit.{s.table}",
            s.name,
            seconds=s.seconds,
            failures=[(v.gate.option.lstrip("-"), v.reason) for v in vs],
            out=shown,
        )
    fail_rows = [False] * len(findings) if failing is None else [bool(x) for x in failing]
    found: list[Any] = list(itertuples(findings))
    for f, failed in zip(found, fail_rows, strict=True):
        cost = as_float(f.cost_ms)
        name = f"{f.kind} on flow {_int(f.flow)}" if _int(f.flow) is not None else str(f.kind)
        frames = list(f.frames)[:8]
        if frames:
            name += " frames " + ", ".join(str(int(x)) for x in frames)
        fails = []
        if failed:
            fails.append(("fail-on", f"{f.kind} ({f.severity}): {f.explanation}"))
        _case(
            suite,
            f"pcapkit.findings.{f.kind}",
            name,
            seconds=None if cost is None else cost / 1000.0,
            failures=fails,
            out=f"{f.severity}; cost {'unknown' if cost is None else f'{cost:.1f} ms'}\n"
            f"{f.explanation}\nremedy: {f.remedy}\nfilter: {f.display_filter}",
        )
    for option, limit in limits.items():
        vs = [v for v in violations if v.gate.option == option]
        _case(
            suite,
            "pcapkit.gates",
            f"{option} {limit:g}",
            failures=[(option.lstrip("-"), v.reason) for v in vs],
        )
    cases = suite.findall("testcase")
    suite.set("tests", str(len(cases)))
    suite.set("failures", str(sum(1 for c in cases if c.find("failure") is not None)))
    suite.set("errors", "0")
    suite.set("skipped", "0")
    root.set("tests", suite.get("tests", "0"))
    root.set("failures", suite.get("failures", "0"))
    ET.indent(root)
    xml: bytes = ET.tostring(root, encoding="utf-8", xml_declaration=True)
    return xml + b"\n"
