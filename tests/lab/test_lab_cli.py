"""The lab's registry, CLI and preconditions — no root or namespaces needed.

These run everywhere (no ``lab`` marker: that marker means "needs root and namespaces"):
the registry's pairs, the click group, the clear non-root error, parameter validation and
DESIGN.md §1's import rule for ``lab``.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from pcapkit.lab import RootRequiredError, cleanup_stale, list_scenarios, run
from pcapkit.lab.cli import lab
from pcapkit.lab.runner import forwarder_config
from pcapkit.lab.scenarios import PATHOLOGIES, get

PKG = Path(__file__).resolve().parents[2] / "pcapkit"
FIRST_SCENARIOS = {"nagle_wwr", "nagle_wwr_nodelay", "tls_sse_nagle", "tls_sse_nodelay"}


def test_registry_has_positive_control_pairs() -> None:
    items = {s["name"]: s for s in list_scenarios()}
    assert FIRST_SCENARIOS <= set(items)
    for name, s in items.items():
        pair = items[s["pair"]]
        assert pair["pair"] == name
        assert {s["variant"], pair["variant"]} == {"positive", "control"}
        assert all(p in PATHOLOGIES for p in s["expected"])
    assert items["nagle_wwr"]["defaults"]["delay_ms"] == 15.0  # RTT 30 ms (§8.1a)
    assert items["nagle_wwr"]["defaults"]["exchanges"] >= 5


def test_unknown_parameter_is_an_error() -> None:
    with pytest.raises(KeyError, match="exchangez"):
        get("nagle_wwr").resolve({"exchangez": 3})


def test_forwarder_config_from_params() -> None:
    p = get("nagle_wwr").resolve({"delay_s2c_ms": 25, "drop_s2c": [4], "rate_mbit": 2})
    cfg = forwarder_config(p)
    assert cfg.c2s.delay_ns == 15_000_000 and cfg.s2c.delay_ns == 25_000_000
    assert cfg.s2c.drop == (4,) and cfg.c2s.drop == ()
    assert cfg.c2s.rate_bps == cfg.s2c.rate_bps == 2_000_000


def test_cli_list() -> None:
    res = CliRunner().invoke(lab, ["list"])
    assert res.exit_code == 0
    for name in FIRST_SCENARIOS:
        assert name in res.output
    res = CliRunner().invoke(lab, ["list", "--json"])
    assert {s["name"] for s in json.loads(res.output)} >= FIRST_SCENARIOS


def test_without_root_clear_error_and_exit_1(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    with pytest.raises(RootRequiredError, match="needs root"):
        run("nagle_wwr", tmp_path)
    with pytest.raises(RootRequiredError):
        cleanup_stale()
    res = CliRunner().invoke(lab, ["run", "nagle_wwr", "-o", str(tmp_path)])
    assert res.exit_code == 1
    assert "needs root" in res.output
    assert not any(tmp_path.iterdir())


def test_cli_unknown_scenario_or_parameter_is_usage_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr("os.geteuid", lambda: 0)  # fails before anything needs real root
    res = CliRunner().invoke(lab, ["run", "no_such_scenario", "-o", str(tmp_path)])
    assert res.exit_code == 2 and "no scenario" in res.output
    res = CliRunner().invoke(lab, ["run", "nagle_wwr", "-o", str(tmp_path), "--set", "bogus=1"])
    assert res.exit_code == 2 and "bogus" in res.output
    res = CliRunner().invoke(lab, ["run", "nagle_wwr", "-o", str(tmp_path), "--set", "oops"])
    assert res.exit_code == 2


def _imports(path: Path) -> set[str]:
    mods: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            mods.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # resolve relative imports against the file's package
                pkg = path.relative_to(PKG.parent).with_suffix("").parts[: -node.level]
                base = ".".join(pkg) + ("." + base if base else "")
            mods.add(base)
    return mods


def test_import_rules() -> None:
    """DESIGN.md §1: only the CLI may import the lab; the lab imports only io and dissectors."""
    for path in PKG.rglob("*.py"):
        rel = path.relative_to(PKG)
        mods = _imports(path)
        if rel.parts[0] == "lab":
            bad = {
                m
                for m in mods
                if m.startswith("pcapkit.") and not m.startswith(("pcapkit.lab", "pcapkit.io"))
            }
            assert not bad, f"{rel} imports {bad}"
        elif rel != Path("cli.py"):
            assert not any(m.startswith("pcapkit.lab") for m in mods), f"{rel} imports the lab"
