"""The import contract of DESIGN.md §1: imports go one way, down the layers.

    dissectors  (imports nothing from pcapkit)
    base        schema, errors, anomalies, limits, _parallel, rows (any layer may use them)
    io ← net ← sessions ← align ← detect ← trace, vantage ← report / export / plot ← cli,
    pcapkit/__init__

A module may import only its own layer, the layers below it and the base modules;
only ``sessions`` (and ``lab``, which makes fixtures) import ``dissectors``; the lab
imports only itself, ``io`` and ``dissectors``, and only the CLI and ``replay`` (which drives it)
import the lab.
No module imports a private name (``_x``) of another module or reaches into another
module's objects through one (``trace._net``); the module-level import graph has no
cycle.  Function-level imports count for every rule but the cycle rule (they are how a
module defers an import, never how it goes up a layer).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

BASE = {"schema", "errors", "anomalies", "limits", "_parallel", "_pages", "rows"}
RANKS = {
    "base": 0,
    "io": 1,
    "net": 2,
    "sessions": 3,
    "align": 4,
    "detect": 5,
    "trace": 6,
    "sharded": 6,  # pcapkit/sharded.py: one capture analysed as shards, merged (issue 20)
    "vantage": 6,  # pcapkit/vantage.py: two captures of one traffic (Trace + Trace)
    "report": 7,
    "replay": 7,  # pcapkit/replay.py: analysis (trace, report.diff) around the lab
    "export": 7,
    "batch": 7,  # pcapkit/batch.py: many captures on Dask → Parquet datasets (issue 20)
    "plot": 7,
    "cli": 8,
    "api": 8,  # pcapkit/__init__.py: the façade users import
    "pytest_plugin": 8,  # the pytest11 entry point (issue 18): a user of the façade, as the CLI is
}
# names with a leading underscore that are public API of the standard library
PUBLIC_UNDERSCORE = {"_exit", "_replace", "_asdict", "_fields", "_make"}
# a third-party private a lab scenario must set, (file, attribute), each with its reason:
# aioquic 1.7.2 has no public knob for the bidirectional streams a server grants
# (DETECTION.md §11.4's recipe sets this Limit before the handshake)
# (the QUIC replay's server grants what the captured server did, the same way)
# pandas' block manager (``df._mgr.iget_values``): a column's array without building a
# Series and looking its label up in an Arrow-backed Index (~20 µs a column, issue 15)
THIRD_PARTY_PRIVATE = {
    ("pcapkit/rows.py", "_mgr"),
    ("pcapkit/lab/scenarios/concurrency.py", "_local_max_streams_bidi"),
    ("pcapkit/lab/reenact_quic.py", "_local_max_streams_bidi"),
}


@dataclass(frozen=True)
class Import:
    target: str  # absolute module name ("pcapkit.net.tcp", "dissectors.tls", "numpy")
    names: tuple[str, ...]  # names imported from it (from-imports)
    line: int
    top_level: bool


def module_name(path: Path, root: Path) -> str:
    rel = path.relative_to(root).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def layer_of(mod: str) -> str | None:
    """The layer of a pcapkit module name (None outside pcapkit)."""
    parts = mod.split(".")
    if parts[0] != "pcapkit":
        return None
    if len(parts) == 1:
        return "api"
    head = parts[1]
    if head in BASE:
        return "base"
    if head == "lab":
        return "lab"
    return head if head in RANKS else "unknown"


def imports_of(path: Path, root: Path) -> Iterator[Import]:
    mod = module_name(path, root)
    package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
    tree = ast.parse(path.read_text(), filename=str(path))
    top = {id(n) for n in tree.body}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield Import(a.name, (), node.lineno, id(node) in top)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            names = tuple(a.name for a in node.names)
            if node.module is None:  # "from . import x": x may be a module
                for n in names:
                    yield Import(f"{target}.{n}", (), node.lineno, id(node) in top)
            else:
                yield Import(target, names, node.lineno, id(node) in top)


def private_attribute_uses(path: Path) -> Iterator[tuple[int, str]]:
    """``obj._name`` where obj is not self/cls and this module never assigns ``_name``
    (reaching into an object another module owns)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    own: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            own.add(node.attr)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            own.add(node.name)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.ctx, ast.Load)
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
            and node.attr not in PUBLIC_UNDERSCORE
            and node.attr not in own
            and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
        ):
            yield node.lineno, node.attr


def violations(root: Path) -> list[str]:
    """Every broken rule under ``root`` (a tree holding pcapkit/ and dissectors/)."""
    out: list[str] = []
    graph: dict[str, set[str]] = {}
    files = sorted((root / "pcapkit").rglob("*.py")) + sorted((root / "dissectors").rglob("*.py"))
    known = {module_name(p, root) for p in files}
    for path in files:
        mod = module_name(path, root)
        rel = path.relative_to(root)
        mine = layer_of(mod)
        graph.setdefault(mod, set())
        for imp in imports_of(path, root):
            tgt = imp.target
            where = f"{rel}:{imp.line}"
            # the module a from-import names may be a submodule ("from . import align")
            if tgt not in known and tgt.rpartition(".")[0] in known:
                tgt = tgt.rpartition(".")[0]
            if imp.top_level and tgt in known and tgt != mod:
                graph[mod].add(tgt)
            for n in imp.names:
                if n.startswith("_") and not n.startswith("__") and f"{tgt}.{n}" not in known:
                    out.append(f"{where}: imports the private name {n} of {tgt}")
            if mod.startswith("dissectors"):
                if tgt.split(".")[0] == "pcapkit":
                    out.append(f"{where}: dissectors import {tgt}")
                continue
            if tgt.split(".")[0] == "dissectors" and mine not in ("sessions", "lab"):
                out.append(f"{where}: {mine} imports {tgt} (only sessions and lab may)")
            theirs = layer_of(tgt)
            if theirs is None or mine is None:
                continue
            if mine == "unknown" or theirs == "unknown":
                out.append(f"{where}: {mod} or {tgt} is in no layer (add it to RANKS)")
            elif mine == "lab":
                if theirs not in ("lab", "io"):
                    out.append(f"{where}: the lab imports {tgt} (only lab, io, dissectors)")
            elif theirs == "lab":
                if mine not in ("cli", "replay"):
                    out.append(f"{where}: {mod} imports the lab (only the CLI and replay may)")
            elif RANKS[theirs] > RANKS[mine]:
                out.append(f"{where}: {mine} imports {tgt} ({theirs}, a layer above)")
        for line, attr in private_attribute_uses(path):
            if (str(rel), attr) in THIRD_PARTY_PRIVATE:
                continue
            out.append(f"{rel}:{line}: reaches into another module's private {attr}")
    out.extend(_cycles(graph))
    return out


def _cycles(graph: dict[str, set[str]]) -> list[str]:
    out: list[str] = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for n in sorted(graph.get(m, ())):
            if state.get(n) == 1:
                out.append("import cycle: " + " -> ".join(stack[stack.index(n) :] + [n]))
            elif n not in state:
                visit(n)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)
    return out


def test_the_tree_keeps_the_import_contract() -> None:
    assert violations(ROOT) == []


def _tree(tmp: Path, files: dict[str, str]) -> Path:
    for rel, text in {"pcapkit/__init__.py": "", "dissectors/__init__.py": "", **files}.items():
        p = tmp / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return tmp


def test_the_contract_catches_each_kind_of_violation(tmp_path: Path) -> None:
    """The checker itself, on a planted tree: every rule fires."""
    root = _tree(
        tmp_path,
        {
            "pcapkit/net/__init__.py": "",
            "pcapkit/net/tcp.py": "from ..detect import base\n",  # upward
            "pcapkit/net/flows.py": "from .tcp import _private\n",  # private name
            "pcapkit/detect/__init__.py": "",
            "pcapkit/detect/base.py": "import dissectors.x\n",  # dissectors outside sessions
            "pcapkit/detect/a.py": "from . import b\n",
            "pcapkit/detect/b.py": "from . import a\n",  # cycle
            "pcapkit/trace.py": "def f(t):\n    return t._net\n",  # reaching into privates
            "pcapkit/report/__init__.py": "from ..lab import run\n",  # lab outside the CLI
            "pcapkit/lab/__init__.py": "from ..detect import base\n",  # lab above io
            "dissectors/x.py": "import pcapkit.schema\n",  # dissectors import pcapkit
        },
    )
    found = "\n".join(violations(root))
    assert "net imports pcapkit.detect (detect, a layer above)" in found
    assert "imports the private name _private of pcapkit.net.tcp" in found
    assert "detect imports dissectors.x (only sessions and lab may)" in found
    assert "import cycle: pcapkit.detect.a -> pcapkit.detect.b -> pcapkit.detect.a" in found
    assert "reaches into another module's private _net" in found
    assert "imports the lab (only the CLI and replay may)" in found
    assert "the lab imports pcapkit.detect" in found
    assert "dissectors/x.py:1: dissectors import pcapkit" in found
    ok = _tree(
        tmp_path / "ok",
        {
            "pcapkit/net/__init__.py": "",
            "pcapkit/net/tcp.py": "from .. import schema\n",
            "pcapkit/schema.py": "",
            "pcapkit/detect/__init__.py": "from ..net import tcp\n",
            "pcapkit/cli.py": "from . import lab\n",
            "pcapkit/lab/__init__.py": "import dissectors\nfrom ..io import reader\n",
            "pcapkit/io/__init__.py": "",
            "pcapkit/io/reader.py": "",
        },
    )
    assert violations(ok) == []
