"""Handshake facts of ``../shared/realworld/ndpi`` compared with nDPI's expected output.

nDPI's test suite prints one line per flow (``result/NAME.out``) with what it read from
the TLS and QUIC handshakes.  This module parses those lines, finds our flow for each
(same 5-tuple, either direction) and compares, fact by fact:

==================  ======================================  ===============================
fact                nDPI                                    ours
==================  ======================================  ===============================
sni                 ``[Hostname/SNI: …]``                   ``tls.sni`` / ``quic.sni``
alpn_offered        ``[(Advertised) ALPNs: a;b]``           ``tls.alpn_offered`` /
                                                            ``quic.alpn_offered``
alpn                ``[(Negotiated) ALPN: …]``              ``tls.alpn`` / ``quic.alpn``
tls_version         ``[TLSv1.2]`` … (TCP flows)             ``tls.version``
versions_offered    ``[TLS Supported Versions: …]``         ``tls.versions_offered`` /
                                                            ``quic.tls_versions_offered``
quic_version        ``[QUIC ver: …]``                       ``quic.version``
cipher              ``[Cipher: …]``                         ``tls.cipher`` / ``quic.cipher``
==================  ======================================  ===============================

A fact counts only where nDPI asserts it; ``Hostname/SNI`` only on lines where nDPI saw
a TLS or QUIC handshake (a JA3/JA4 fingerprint, a TLS or QUIC version, ALPNs or a
cipher: elsewhere the name is an HTTP Host or a DNS query, not a handshake fact).
nDPI prints ``[TLSv1.3]`` for QUIC flows too; ``tls_version`` is compared on TCP flows
only (QUIC always carries TLS 1.3, and the QUIC table has no TLS version column).

Every miss is listed with its reason in ``NDPI_FACTS.md`` beside this file.  Run
``python tests/realworld/ndpi_facts.py`` to print the counts and the current misses as
that file's table (reasons already written there are kept).
"""

from __future__ import annotations

import ipaddress
import re
import sys
import warnings
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
NDPI = (ROOT.parent / "shared" / "realworld" / "ndpi").resolve()
DOC = Path(__file__).resolve().parent / "NDPI_FACTS.md"

FACTS = (
    "sni",
    "alpn_offered",
    "alpn",
    "tls_version",
    "versions_offered",
    "quic_version",
    "cipher",
)
_KEYS = {
    "sni": "Hostname/SNI",
    "alpn_offered": "(Advertised) ALPNs",
    "alpn": "(Negotiated) ALPN",
    "versions_offered": "TLS Supported Versions",
    "quic_version": "QUIC ver",
    "cipher": "Cipher",
}
_LINE = re.compile(r"^\t(\d+)\t(TCP|UDP) (\S+) (<->|->) (\S+) (.*)$")
_FIELD = re.compile(r"\[([^\[\]:]+): ([^\[\]]*)\]")
_TLS_VERSION = re.compile(r"\[(TLSv1(?:\.\d)?)(?: \([^)]*\))?\]")
_HANDSHAKE_MARKS = ("[JA4: ", "[JA3C: ", "[TLSv1", "[QUIC ver: ", "ALPN", "[Cipher: ")

# our version names (tls.version, tls.versions_offered) → nDPI's
_NDPI_TLS = {
    "TLS 1.0": "TLSv1",
    "TLS 1.1": "TLSv1.1",
    "TLS 1.2": "TLSv1.2",
    "TLS 1.3": "TLSv1.3",
    "SSL 3.0": "SSLv3",
}
# nDPI's QUIC version names → the version number (quic.version is "0x%08x")
_NDPI_QUIC = {"V-1": 0x00000001, "V-2": 0x6B3343CF, "MVFST-22": 0xFACEB001}
_NDPI_QUIC |= {"MVFST-27": 0xFACEB002, "MVFST-EXP": 0xFACEB00E}


def _ndpi_tls_name(ours: str) -> str:
    if ours in _NDPI_TLS:
        return _NDPI_TLS[ours]
    if ours.startswith("GREASE"):
        return "GREASE"
    if "Facebook" in ours:
        return "TLSv1.3 (Fizz)"
    if "draft" in ours or "experiment" in ours:
        return "TLSv1.3 (draft)"
    return ours


def _quic_version_matches(ndpi: str, ours: str | None) -> bool:
    if ours is None:
        return False
    v = int(ours, 16)
    if ndpi == "Ver-Negotiation":
        # nDPI's name for the versions reserved to force version negotiation
        # (RFC 9000 §15: 0x?a?a?a?a)
        return v & 0x0F0F0F0F == 0x0A0A0A0A
    if ndpi.startswith("Draft-"):
        return v == 0xFF000000 | int(ndpi[6:])
    if re.fullmatch(r"[QT]\d{3}", ndpi):
        return v == int.from_bytes(ndpi.encode(), "big")
    return _NDPI_QUIC.get(ndpi) == v


@dataclass(frozen=True)
class Flow:
    """One flow line of nDPI's output."""

    capture: str
    number: int
    proto: str  # tcp / udp
    a: tuple[str, int]
    b: tuple[str, int]
    text: str  # the endpoints as nDPI prints them
    facts: dict[str, str] = field(hash=False, compare=False)


@dataclass(frozen=True)
class Outcome:
    capture: str
    number: int
    flow_text: str
    fact: str
    ndpi: str
    ours: str
    matched: bool


def _address(a: str) -> str:
    """RFC 5952 text form: nDPI shortens a single zero group of IPv6 to "::" (RFC 5952
    §4.2.2 says not to), we do not."""
    try:
        return ipaddress.ip_address(a).compressed
    except ValueError:
        return a


def _endpoint(s: str) -> tuple[str, int]:
    if s.startswith("["):
        a, p = s[1:].rsplit("]:", 1)
    else:
        a, p = s.rsplit(":", 1)
    return _address(a), int(p)


def ndpi_flows(capture: str) -> list[Flow]:
    out = []
    text = (NDPI / "result" / f"{capture}.out").read_text(errors="replace")
    for line in text.splitlines():
        m = _LINE.match(line)
        if not m:
            continue
        rest = m.group(6)
        facts = dict(_FIELD.findall(rest))
        handshake = any(k in rest for k in _HANDSHAKE_MARKS)
        got = {f: facts[k] for f, k in _KEYS.items() if k in facts}
        if "sni" in got and not handshake:
            del got["sni"]  # an HTTP Host or a DNS name, not a handshake fact
        v = _TLS_VERSION.search(rest)
        if v and m.group(2) == "TCP":
            got["tls_version"] = v.group(1)
        out.append(
            Flow(
                capture=capture,
                number=int(m.group(1)),
                proto=m.group(2).lower(),
                a=_endpoint(m.group(3)),
                b=_endpoint(m.group(5)),
                text=f"{m.group(3)} {m.group(4)} {m.group(5)}",
                facts=got,
            )
        )
    return out


def _na(v: Any) -> bool:
    return v is None or v is pd.NA or (isinstance(v, float) and v != v)


def _ours(kind: str, row: Any, fact: str) -> str | None:
    """Our value of ``fact`` in a row of Trace.tls / Trace.quic, in nDPI's notation."""
    col = {"tls_version": "version", "quic_version": "version"}.get(fact, fact)
    if fact == "versions_offered" and kind == "quic":
        col = "tls_versions_offered"
    if fact == "tls_version" and kind != "tls":
        return None
    if fact == "quic_version" and kind != "quic":
        return None
    v = getattr(row, col, None)
    if _na(v):
        return None
    v = str(v)
    if fact == "alpn_offered":
        return v.replace(",", ";")
    if fact == "tls_version":
        return _ndpi_tls_name(v)
    if fact == "versions_offered":
        return ";".join(_ndpi_tls_name(x) for x in v.split(","))
    return v


def _same(fact: str, ndpi: str, ours: str | None) -> bool:
    if ours is None:
        return False
    if fact == "quic_version":
        return _quic_version_matches(ndpi, ours)
    if fact == "sni":
        return ndpi.lower() == ours.lower()
    if fact == "tls_version":
        return ndpi == ours.split(" (")[0]
    return ndpi == ours


def _shown(flows: list[int], rows: list[Any], value: str | None) -> str:
    if not flows:
        return "(no flow)"  # no flow of ours has these endpoints
    if not rows:
        return "(no row)"  # the flow is neither in Trace.tls nor in Trace.quic
    return "–" if value is None else value


def compare_capture(path: Path) -> list[Outcome]:
    """Every fact nDPI asserts for the flows of one capture, with ours beside it."""
    import pcapkit

    name = path.name
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = pcapkit.open(path)
        try:
            flows, tls, quic = t.flows, t.tls, t.quic
        finally:
            t.close()
    index: dict[tuple[str, frozenset[tuple[str, int]]], list[int]] = defaultdict(list)
    for r in flows.itertuples():
        key = frozenset(
            [
                (_address(r.client_ip), int(r.client_port)),
                (_address(r.server_ip), int(r.server_port)),
            ]
        )
        index[(r.proto, key)].append(int(r.flow))
    rows: dict[int, list[tuple[str, Any]]] = defaultdict(list)
    for kind, table in (("tls", tls), ("quic", quic)):
        for r in table.itertuples():
            rows[int(r.flow)].append((kind, r))
    out = []
    for f in ndpi_flows(name):
        ours_flows = index.get((f.proto, frozenset([f.a, f.b])), [])
        ours_rows = [kr for fl in ours_flows for kr in rows[fl]]
        for fact in FACTS:
            if fact not in f.facts:
                continue
            want = f.facts[fact]
            values = [_ours(kind, r, fact) for kind, r in ours_rows]
            hit = next((v for v in values if _same(fact, want, v)), None)
            shown = hit if hit is not None else next((v for v in values if v is not None), None)
            out.append(
                Outcome(
                    capture=name,
                    number=f.number,
                    flow_text=f.text,
                    fact=fact,
                    ndpi=want,
                    ours=_shown(ours_flows, ours_rows, shown),
                    matched=hit is not None,
                )
            )
    return out


def captures() -> list[Path]:
    return sorted(p for p in (NDPI / "pcap").iterdir() if p.is_file())


def compare_all() -> list[Outcome]:
    out = []
    for p in captures():
        out += compare_capture(p)
    return out


def counts(outcomes: list[Outcome]) -> dict[str, tuple[int, int]]:
    n: dict[str, list[int]] = {f: [0, 0] for f in FACTS}
    for o in outcomes:
        n[o.fact][1] += 1
        n[o.fact][0] += o.matched
    return {f: (a, b) for f, (a, b) in n.items()}


# --------------------------------------------------------------------------- NDPI_FACTS.md
_ROW = re.compile(r"^\| ([^|]+) \| (\d+) \| (\w+) \| .*\| ([^|]*) \|$")


def documented(doc: Path = DOC) -> dict[tuple[str, int, str], str]:
    """(capture, nDPI flow number, fact) → reason, from the misses table of the doc."""
    out = {}
    if not doc.is_file():
        return out
    for line in doc.read_text().splitlines():
        m = _ROW.match(line)
        if m:
            out[(m.group(1).strip(), int(m.group(2)), m.group(3))] = m.group(4).strip()
    return out


def _cell(s: str, n: int = 60) -> str:
    s = s.replace("|", "/")
    return s if len(s) <= n else s[: n - 1] + "…"


def misses_table(outcomes: list[Outcome], reasons: dict[tuple[str, int, str], str]) -> str:
    lines = [
        "| capture | nDPI flow | fact | nDPI | ours | reason |",
        "|---|---|---|---|---|---|",
    ]
    for o in outcomes:
        if o.matched:
            continue
        reason = reasons.get((o.capture, o.number, o.fact), "UNEXPLAINED")
        lines.append(
            f"| {o.capture} | {o.number} | {o.fact} | {_cell(o.ndpi)} | {_cell(o.ours)} | "
            f"{reason} |"
        )
    return "\n".join(lines)


def main() -> None:
    outcomes = compare_all()
    for fact, (n, m) in counts(outcomes).items():
        print(f"{fact}: {n}/{m}", file=sys.stderr)
    print(misses_table(outcomes, documented()))


if __name__ == "__main__":
    main()
