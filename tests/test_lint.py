"""``make lint`` stays clean: ruff (check and format) everywhere, mypy --strict on the
modules the Makefile's STRICT list names (read from the Makefile: one list)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TREES = ["pcapkit", "dissectors", "tests", "benchmarks", "scripts", "fuzz"]


def _tool(name: str) -> str:
    exe = Path(sys.executable).with_name(name)
    found = str(exe) if exe.exists() else shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is not installed (pip install '.[dev]')")
    return found


def _run(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_ruff_check_and_format() -> None:
    ruff = _tool("ruff")
    r = _run([ruff, "check", *TREES])
    assert r.returncode == 0, r.stdout + r.stderr
    r = _run([ruff, "format", "--check", *TREES])
    assert r.returncode == 0, r.stdout + r.stderr


def strict_modules() -> list[str]:
    text = (ROOT / "Makefile").read_text()
    m = re.search(r"^STRICT := (.*?)(?<!\\)\n", text, re.M | re.S)
    assert m, "Makefile has no STRICT list"
    return m.group(1).replace("\\\n", " ").split()


def test_mypy_strict() -> None:
    mods = strict_modules()
    assert "dissectors" in mods and "pcapkit/trace.py" in mods
    r = _run([_tool("mypy"), "--strict", "--follow-imports=silent", *mods])
    assert r.returncode == 0, r.stdout + r.stderr
