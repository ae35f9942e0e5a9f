"""The lab's registry, CLI and preconditions — no root or namespaces needed.

These run everywhere (no ``lab`` marker: that marker means "needs root and namespaces"):
the registry's pairs, the click group, the clear non-root error, parameter validation and
DESIGN.md §1's import rule for ``lab``.
"""

from __future__ import annotations

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


BULK_CONTROLS = {"bulk_loopback_tls", "bulk_veth_gso_tls"}  # healthy traffic, no positive twin
# issue 21: what the wire cannot decide (a pool of one, a client's own cap): queued
# requests that the concurrency detectors must not report
LONE_CONTROLS = BULK_CONTROLS | {"connection_pool_one", "h2_client_cap"}


def test_registry_has_positive_control_pairs() -> None:
    items = {s["name"]: s for s in list_scenarios()}
    assert FIRST_SCENARIOS <= set(items)
    assert {n for n, s in items.items() if s["pair"] is None} == LONE_CONTROLS
    for name, s in items.items():
        assert all(p in PATHOLOGIES for p in s["expected"] + s["controls"])
        if s["pair"] is None:  # a lone control: names what it controls for, no twin
            assert s["variant"] == "control" and s["controls"], name
            continue
        pair = items[s["pair"]]
        assert pair["pair"] == name
        assert {s["variant"], pair["variant"]} == {"positive", "control"}
    assert items["nagle_wwr"]["defaults"]["delay_ms"] == 15.0  # RTT 30 ms (§8.1a)
    assert items["nagle_wwr"]["defaults"]["exchanges"] >= 5
    for name, s in items.items():  # a control names what it controls for: its pair's pathology
        if s["pair"] is None:
            continue
        if s["variant"] == "control":
            assert s["controls"] == items[s["pair"]]["expected"], name
        else:
            assert s["controls"] == []
        assert s["incidental"] == items[s["pair"]]["incidental"], name  # same in both variants


def test_lone_bulk_controls_run_without_the_forwarder() -> None:
    """The bulk controls: loopback and veth topologies, no path impairment, no middle."""
    from pcapkit.lab.fixtures import wants_middle
    from pcapkit.lab.scenarios import TOPOLOGIES

    assert {get(n).topology for n in BULK_CONTROLS} == {"loopback", "veth"}
    for name in BULK_CONTROLS:
        sc = get(name)
        assert sc.topology in TOPOLOGIES and not wants_middle(name)
        assert {"nagle", "tcp_hol_blocking", "tls_record_spanning"} <= set(sc.controls)
        d = sc.defaults()
        assert d["delay_ms"] == 0 and not d["drop_s2c"] and d["rate_mbit"] is None
    assert wants_middle("nagle_wwr") and not wants_middle("h2_flow_control")


def test_registry_covers_issue_4_matrix_with_stable_names() -> None:
    """Issue 4 item 3: the ten pairs exist; every expected name is a stable public kind."""
    from pcapkit.detect import KINDS

    later = {"h2_flow_control_stall", "quic_stream_hol"}  # kinds of the HTTP/2 and QUIC issues
    items = {s["name"]: s for s in list_scenarios()}
    positives = {n: s["expected"] for n, s in items.items() if s["variant"] == "positive"}
    issue4 = {
        "nagle_wwr": ["nagle_delayed_ack"],
        "tls_sse_nagle": ["nagle_delayed_ack"],
        "tls_tiny_records": ["tls_tiny_records"],
        "tls_large_record_drop": ["tls_record_spanning"],
        "tcp_cork": ["tcp_cork"],
        "zero_window": ["zero_window"],
        "slow_start_restart": ["slow_start_restart"],
        "h2_hol_drop": ["tcp_hol_blocking"],
        "h2_flow_control": ["h2_flow_control_stall"],
        "h3_streams_drop": ["quic_stream_hol"],
    }
    assert issue4.items() <= positives.items()
    for name, expected in positives.items():
        assert set(expected) <= set(KINDS) | later, name
    assert set(PATHOLOGIES) <= set(KINDS) | later
    assert {k for v in issue4.values() for k in v} <= set(PATHOLOGIES)
    assert items["h2_flow_control_large"]["defaults"]["client_window"] >= 16 * 1024 * 1024
    assert items["h2_flow_control"]["defaults"]["client_window"] is None  # RFC default 65 535
    assert items["slow_start_restart"]["defaults"]["sysctl_srv"] == {
        "net.ipv4.tcp_slow_start_after_idle": 1
    }
    assert items["slow_start_restart_off"]["defaults"]["sysctl_srv"] == {
        "net.ipv4.tcp_slow_start_after_idle": 0
    }


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


def test_cli_run_passes_the_forwarder_log_path(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``--forwarder-log FILE`` reaches ``run(forwarder_log=...)``; without it, None."""
    seen: list[object] = []

    def fake_run(name: str, outdir: str, **kw: object) -> dict[str, object]:
        seen.append(kw.get("forwarder_log", "missing"))
        raise RootRequiredError("needs root (test)")

    monkeypatch.setattr("pcapkit.lab.cli.require_root", lambda: None)
    monkeypatch.setattr("pcapkit.lab.cli.run", fake_run)
    log = str(tmp_path / "fwd.json")
    CliRunner().invoke(lab, ["run", "nagle_wwr", "-o", str(tmp_path), "--forwarder-log", log])
    CliRunner().invoke(lab, ["run", "nagle_wwr", "-o", str(tmp_path)])
    assert seen == [log, None]


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


def test_cli_fixtures_needs_root_and_known_names(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    res = CliRunner().invoke(lab, ["fixtures", "-o", str(tmp_path), "--only", "tcp_cork"])
    assert res.exit_code == 1 and "needs root" in res.output
    assert not any(tmp_path.iterdir())
    monkeypatch.setattr("os.geteuid", lambda: 0)  # fails on the name before anything runs
    res = CliRunner().invoke(lab, ["fixtures", "-o", str(tmp_path), "--only", "no_such"])
    assert res.exit_code == 2 and "no scenario" in res.output
    assert not any(tmp_path.iterdir())


def test_cli_fixtures_readme_only_reproduces_the_committed_readme(tmp_path: Path) -> None:
    import shutil

    src = PKG.parent / "fixtures"
    for name in ("tcp_cork", "zero_window_control"):
        shutil.copytree(src / name, tmp_path / name)
    res = CliRunner().invoke(lab, ["fixtures", "-o", str(tmp_path), "--readme-only"])
    assert res.exit_code == 0, res.output
    text = (tmp_path / "README.md").read_text(encoding="utf-8")
    committed = (src / "README.md").read_text(encoding="utf-8")
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    assert len(rows) == 2 and all(row in committed for row in rows)
    assert "2 fixtures" in text


def test_generate_retries_a_run_that_fails_its_check(tmp_path: Path) -> None:
    """`lab fixtures` keeps the old fixture when every attempt fails the scenario's check."""
    import shutil

    from pcapkit.lab.fixtures import generate

    src = PKG.parent / "fixtures" / "tcp_cork"
    calls: list[str] = []

    def fake_run(name: str, outdir: Path, **kw: object) -> dict[str, object]:
        calls.append(name)
        shutil.copytree(src, outdir)
        doc = json.loads((src / "scenario.json").read_text(encoding="utf-8"))
        if len(calls) == 1:  # first attempt: pretend the hold was missing
            doc["ground_truth"]["summary"]["hold_ms_min"] = 1.0
        return doc

    logs: list[str] = []
    res = generate(tmp_path, ["tcp_cork"], attempts=2, log=logs.append, runner=fake_run)
    assert calls == ["tcp_cork", "tcp_cork"] and res["ok"] == ["tcp_cork"]
    assert "attempt 1: positive hold too short" in logs[0] and "attempt 2: ok" in logs[1]
    assert (tmp_path / "tcp_cork" / "client.pcapng").exists()
    assert not list(tmp_path.glob(".*.tmp"))
    calls.clear()
    (tmp_path / "tcp_cork" / "marker").write_text("old")

    def always_bad(name: str, outdir: Path, **kw: object) -> dict[str, object]:
        calls.append(name)
        shutil.copytree(src, outdir)
        doc = json.loads((src / "scenario.json").read_text(encoding="utf-8"))
        doc["ground_truth"]["summary"]["all_psh"] = False
        return doc

    res = generate(tmp_path, ["tcp_cork"], attempts=2, log=logs.append, runner=always_bad)
    assert res["ok"] == [] and "tcp_cork" in res["failed"] and len(calls) == 2
    assert (tmp_path / "tcp_cork" / "marker").exists(), "a failed run must not replace it"


# The lab's import rules (only the CLI imports it; it imports only io and dissectors) are
# part of the whole import contract: tests/test_layers.py.
