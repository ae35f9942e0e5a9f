"""Detectors are pure functions of the declared tables (DESIGN.md §1, §5; issue 12): nothing
under pcapkit/detect imports the dissectors, and the QUIC detectors reach QUIC only
through the DetectContext's declared tables."""

from __future__ import annotations

import ast
from pathlib import Path

DETECT = Path(__file__).resolve().parents[2] / "pcapkit" / "detect"


def _imports(path: Path) -> set[str]:
    mods: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            mods.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):  # relative ones keep their dots: "..sessions"
            mods.add("." * node.level + (node.module or ""))
    return mods


def test_detect_does_not_import_dissectors() -> None:
    for path in sorted(DETECT.glob("*.py")):
        bad = {m for m in _imports(path) if m == "dissectors" or m.startswith("dissectors.")}
        assert not bad, f"{path.name} imports {bad}"


def test_quic_detectors_read_declared_tables() -> None:
    for name in ("quic.py", "quic_fc.py", "quic_handshake.py", "quic_rows.py"):
        src = (DETECT / name).read_text(encoding="utf-8")
        assert "getattr(ctx" not in src and ".conn." not in src, name
        assert not any("sessions" in m for m in _imports(DETECT / name)), name
