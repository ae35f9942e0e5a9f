"""The anomaly-name registry: every name the code can emit is declared once, with its
layer and meaning (pcapkit.anomalies.ANOMALIES); the tables only ever hold those."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pcapkit
from pcapkit.anomalies import ANOMALIES, describe, qualified

ROOT = Path(__file__).resolve().parents[1]
SNAKE = re.compile(r"^[a-z][a-z0-9]*(_[a-z0-9]+)*$")
# calls that name an anomaly: the reader's, decoder's and dissectors' helpers and the
# dissectors' error records; the name is a positional or a ``name=``/``reason=`` argument
EMITTERS = re.compile(r"anomaly$|^add$|^_error$|^_fail$|^bad$|^H2Error$|^H3Error$|^Anomaly$")
# the session layer prefixes the names of these dissectors (pcapkit.anomalies.qualified)
PREFIXED = {"http1.py": "http1", "http2.py": "h2", "http3.py": "h3"}


def _name(f: ast.expr) -> str:
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""


def emitted_names() -> dict[str, set[str]]:
    """Anomaly names written as literals at emitting call sites, per source file."""
    out: dict[str, set[str]] = {}
    files = [*(ROOT / "pcapkit").rglob("*.py"), *(ROOT / "dissectors").rglob("*.py")]
    for path in files:
        if {"lab", "export", "report", "detect"} & set(path.parts):
            continue  # these emit no anomalies (qlog and findings have "name" keys)
        tree = ast.parse(path.read_text())
        found: set[str] = set()
        for node in ast.walk(tree):
            args: list[ast.expr] = []
            if isinstance(node, ast.Call) and EMITTERS.search(_name(node.func)):
                args = list(node.args) + [k.value for k in node.keywords if k.arg == "name"]
            elif isinstance(node, ast.FunctionDef) and path.name == "http1.py":
                a = node.args
                named = list(zip(a.kwonlyargs, a.kw_defaults, strict=True))
                args = [d for arg, d in named if arg.arg == "reason" and d is not None]
            elif isinstance(node, ast.Call) and path.name == "http1.py":
                # HTTP/1.1 errors carry their name as ``reason`` (elsewhere a reason is
                # not an anomaly name: TLS StreamGap reasons become other anomalies)
                args = [k.value for k in node.keywords if k.arg == "reason"]
            elif isinstance(node, ast.Dict):
                args = [
                    v
                    for k, v in zip(node.keys, node.values, strict=True)
                    if isinstance(k, ast.Constant) and k.value == "name"
                ]
            elif isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Attribute) and t.attr == "reason" for t in node.targets
            ):
                args = [node.value]
            elif isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "name" for t in node.targets
            ):
                args = [node.value]
            for a in args:
                if isinstance(a, ast.Constant) and isinstance(a.value, str):
                    if SNAKE.match(a.value):
                        found.add(a.value)
        proto = PREFIXED.get(path.name) if path.parent.name == "dissectors" else None
        if proto:
            found = {qualified(proto, n) for n in found}
        if found:
            out[str(path.relative_to(ROOT))] = found
    return out


def test_every_emitted_name_is_declared() -> None:
    emitted = emitted_names()
    undeclared = {f: sorted(n - set(ANOMALIES)) for f, n in emitted.items() if n - set(ANOMALIES)}
    assert undeclared == {}
    every = set().union(*emitted.values())
    assert set(ANOMALIES) - every == set(), "declared but never emitted"


def test_registry_describes_each_name() -> None:
    d = describe()
    assert list(d["name"]) == list(ANOMALIES)
    assert d["meaning"].str.len().min() > 15
    assert set(d["layer"]) == {
        "io", "net", "tls", "quic", "http1", "sse", "h2", "h3", "http", "limits", "internal",
    }  # fmt: skip
    assert qualified("h3", "h3_frame_unexpected") == "h3_frame_unexpected"
    assert qualified("h3", "frame_truncated") == "h3_frame_truncated"
    assert qualified("h2", "frame_truncated") == "h2_frame_truncated"


def test_real_captures_emit_declared_names_only() -> None:
    fixtures = sorted((ROOT / "fixtures").glob("*/client.pcapng"))[:6]
    shared = ROOT.parent / "shared"
    extra = sorted((shared / "realworld").rglob("*.pcap*"))[:40] if shared.is_dir() else []
    seen: set[str] = set()
    for p in fixtures + extra:
        with pcapkit.open(p) as t:
            seen |= set(t.anomalies["name"])
    assert seen <= set(ANOMALIES), seen - set(ANOMALIES)
