"""The detector registry: kinds, order and thresholds derived from the modules' specs."""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path
from types import ModuleType

import pytest
from click.testing import CliRunner

import pcapkit
from pcapkit.cli import cli
from pcapkit.detect import registry
from pcapkit.detect.constants import Coupling
from pcapkit.detect.spec import DetectorSpec, Kind, Threshold
from pcapkit.detect.tcp_model import DirView

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "fixtures"


def test_every_detector_module_is_registered_with_a_matching_spec() -> None:
    files = {
        p.stem
        for p in (ROOT / "pcapkit" / "detect").glob("*.py")
        if re.search(r"^def detect\(", p.read_text(), re.M)
    }
    assert files == {d.name for d in registry.DETECTORS}
    for d in registry.DETECTORS:
        kws = {
            n
            for n, p in inspect.signature(d.module.detect).parameters.items()
            if p.kind is inspect.Parameter.KEYWORD_ONLY
        }
        assert kws == {t.name for t in d.spec.thresholds}, d.name
        assert tuple(d.module.KINDS) == d.spec.kind_names


def test_kinds_are_derived_and_documented() -> None:
    assert len(registry.KINDS) == len(set(registry.KINDS)) == 37
    readme = (ROOT / "README.md").read_text()
    for k in registry.KINDS:
        assert f"`{k}`" in readme, f"README does not list the kind {k}"
    assert registry.INFORMATIONAL_KINDS == {"write_coalescing"}
    assert "nagle_delayed_ack" in registry.HOLDING_KINDS
    assert "connection_not_reused" not in registry.HOLDING_KINDS


def test_lab_pathologies_come_from_the_specs() -> None:
    from pcapkit.lab.scenarios import PATHOLOGIES

    for k, (code, doc) in PATHOLOGIES.items():
        spec = registry.KIND_SPECS[k]
        assert (spec.code, spec.doc) == (code, doc)


def test_readers_run_after_the_detectors_they_read() -> None:
    order = [d.name for d in registry.DETECTORS]
    http = order.index("http")
    for d in registry.DETECTORS:
        if set(d.spec.kind_names) & (registry.HOLDING_KINDS | {"tcp_hol_blocking"}):
            assert order.index(d.name) < http, d.name


def _fake(name: str, spec: DetectorSpec, src: str) -> ModuleType:
    mod = ModuleType(name)
    exec(src, mod.__dict__)  # noqa: S102 - a synthetic detector module
    mod.SPEC = spec
    return mod


def _det(name: str, kind: str, reads: tuple[str, ...] = ()) -> registry.Detector:
    spec = DetectorSpec(kinds=(Kind(kind, "X1", "synthetic"),), reads=reads)
    return registry.Detector(name, _fake(name, spec, "def detect(ctx):\n    return []\n"), spec, {})


def test_order_is_by_name_with_readers_after_what_they_read() -> None:
    a, b, c = _det("a", "ka", reads=("kb",)), _det("b", "kb"), _det("c", "kc")
    assert [d.name for d in registry._order([a, b, c])] == ["b", "a", "c"]
    with pytest.raises(TypeError, match="read each other"):
        registry._order([_det("a", "ka", reads=("kb",)), _det("b", "kb", reads=("ka",))])


def test_a_keyword_without_spec_or_default_is_refused() -> None:
    mod = _fake("m", DetectorSpec(kinds=()), "def detect(ctx, *, x_ms):\n    return []\n")
    with pytest.raises(TypeError, match="no default"):
        registry._keyword_defaults(mod)
    with pytest.raises(ValueError, match="unknown unit"):
        Threshold("x", "parsecs", "why")


def test_thresholds_list_defaults_from_the_signatures() -> None:
    info = {t.name: t for t in registry.thresholds()}
    assert info["tcp.late_slack_ms"].default == 2.0
    assert info["tcp.late_slack_ms"].unit == "ms"
    assert info["nagle.min_repeats"].default == 3 and info["nagle.min_repeats"].minimum == 1
    assert info["tls_records.tiny_min_fraction"].maximum == 1.0
    assert all(t.source for t in info.values())


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"tcp.late_slak_ms": 1}, "did you mean tcp.late_slack_ms"),
        ({"nagle.bogus": 1}, "valid names: nagle.ack_delay_max_ms"),
        ({"bogus": 1}, "valid names: cork."),
        ({"nagle.min_repeats": 2.5}, "whole number"),
        ({"nagle.min_repeats": 0}, "out of range"),
        ({"tcp.tol_fraction": 1.5}, "out of range"),
        ({"nagle.delack_timer_min_ms": "fast"}, "not a number"),
        ({"tcp.late_slack_ms": float("nan")}, "not a finite number"),
        ({"tcp.late_slack_ms": True}, "not a number"),
    ],
)
def test_bad_settings_are_refused_by_name(settings: dict[str, object], message: str) -> None:
    with pytest.raises(registry.ThresholdError, match=re.escape(message)):
        registry.resolve_thresholds(settings)
    with pytest.raises(ValueError, match=re.escape(message)):
        pcapkit.open(FIX / "nagle_wwr" / "client.pcapng", thresholds=settings)


def test_settings_reach_the_detectors() -> None:
    path = FIX / "nagle_wwr" / "client.pcapng"
    with pcapkit.open(path) as t:
        base = list(t.findings.kind)
    assert "nagle" in base and "nagle_delayed_ack" in base
    # N1 (quick-ACK) holds need min_repeats coupled exchanges; N2 holds do not
    with pcapkit.open(path, thresholds={"nagle.min_repeats": 1000}) as t:
        assert "nagle" not in set(t.findings.kind)
        assert list(t.findings.kind).count("nagle_delayed_ack") == base.count("nagle_delayed_ack")
    # a receiver delay must reach delack_timer_min_ms to be a timer
    with pcapkit.open(path, thresholds={"nagle.delack_timer_min_ms": 499}) as t:
        assert "nagle_delayed_ack" not in set(t.findings.kind)
    assert registry.resolve_thresholds({"nagle.min_repeats": "4"}) == {"nagle": {"min_repeats": 4}}


def test_the_coupling_window_is_one_setting_for_every_tcp_detector() -> None:
    """tcp.* sets the one "released by an ACK" window: with no window at all nothing is
    coupled, so neither Nagle kind nor any record finding that needs a release remains."""
    path = FIX / "nagle_wwr" / "client.pcapng"
    zero = {"tcp.tol_min_ms": 0, "tcp.tol_fraction": 0, "tcp.late_slack_ms": 0}
    with pcapkit.open(path, thresholds=zero) as t:
        assert t.findings.empty
        v = DirView.build(t.detect_context, 0, 0)
        assert v.coupling == Coupling(0.0, 0.0, 0.0) and v.tolerance() == 0
    with pcapkit.open(path, thresholds={"tcp.late_slack_ms": 4}) as t:
        assert not t.findings.empty
        assert DirView.build(t.detect_context, 0, 0).coupling.late_ns == 4_000_000
    assert {t.name for t in registry.thresholds() if t.detector == "tcp"} == {
        "tcp.tol_min_ms",
        "tcp.tol_fraction",
        "tcp.late_slack_ms",
    }


def test_cli_set_and_thresholds() -> None:
    runner = CliRunner()
    path = str(FIX / "nagle_wwr" / "client.pcapng")
    r = runner.invoke(cli, ["analyze", path, "--set", "nagle.zzz=1"])
    assert r.exit_code == 2
    assert r.output.count("\n") == 1 and "valid names: nagle." in r.output
    r = runner.invoke(cli, ["analyze", path, "--set", "nagle.min_repeats=1000", "--format", "json"])
    assert r.exit_code == 0
    kinds = [f["kind"] for f in json.loads(r.output)["findings"]]
    assert "nagle" not in kinds and "nagle_delayed_ack" in kinds
    r = runner.invoke(cli, ["thresholds", "--format", "json"])
    assert r.exit_code == 0
    names = {t["name"] for t in json.loads(r.output)}
    assert names == {t.name for t in registry.thresholds()}
    r = runner.invoke(cli, ["thresholds", "hol"])
    assert r.exit_code == 0 and "hol.min_episode_ms = 0.0 ms" in r.output
    assert "nagle." not in r.output
    r = runner.invoke(cli, ["thresholds", "nope"])
    assert r.exit_code == 2 and "detectors: cork" in r.output
