"""The command line: output contract, exit codes, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from pcapkit.cli import Exit, cli
from pcapkit.io.writer import PcapWriter, write_pcap

from synth import Conn

STABLE_FLOW_KEYS = {
    "flow",
    "proto",
    "client_ip",
    "client_port",
    "server_ip",
    "server_port",
    "c2s_bytes",
    "s2c_bytes",
}


@pytest.fixture()
def capture(tmp_path):
    c = Conn()
    c.handshake()
    c.c2s(30_000, b"GET / HTTP/1.1\r\n\r\n")
    c.s2c(31_000, b"HTTP/1.1 200 OK\r\n\r\nhello")
    c.ack_c(31_100)
    p = tmp_path / "t.pcap"
    write_pcap(p, c.frames, 1)
    return p


def run(*args: str):
    return CliRunner().invoke(cli, list(args))


def test_analyze_text(capture):
    r = run("analyze", str(capture))
    assert r.exit_code == Exit.OK
    assert "flow 0" in r.output
    assert "10.1.0.1:40000 → 10.2.0.2:443" in r.output
    assert "c2s 18 B in 4 pkts" in r.output
    assert "client-side capture" in r.output


def test_analyze_json_contract(capture):
    r = run("analyze", str(capture), "--format", "json")
    assert r.exit_code == Exit.OK
    doc = json.loads(r.output)
    assert {"capture", "flows", "findings", "anomalies"} <= set(doc)
    assert doc["capture"]["frames"] == 6
    assert doc["findings"] == [] and doc["anomalies"] == []
    (f,) = doc["flows"]
    assert STABLE_FLOW_KEYS <= set(f)
    assert (f["proto"], f["c2s_bytes"], f["s2c_bytes"]) == ("tcp", 18, 24)
    assert f["server_port"] == 443


def test_not_a_capture_is_one_line_and_exit_1(tmp_path):
    p = tmp_path / "notes.txt"
    p.write_text("hello")
    r = run("analyze", str(p))
    assert r.exit_code == Exit.ERROR
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pcapkit: error:") and "not a pcap" in lines[0]


def test_unsupported_linktype_exit_1(tmp_path):
    p = tmp_path / "u.pcap"
    with open(p, "wb") as f:
        PcapWriter(f, 147).write(0, b"\x00\x01")
    r = run("analyze", str(p))
    assert r.exit_code == Exit.ERROR
    assert "link type 147 is not supported" in r.output


def _one_line_error(r, *parts: str) -> None:
    assert r.exit_code == Exit.ERROR, r.output
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pcapkit: error:"), r.output
    for p in parts:
        assert p in lines[0], (p, lines[0])


def test_each_bad_input_is_exit_1_and_one_line(tmp_path, monkeypatch):
    """README: 'exit 1, the input could not be analysed — one line on stderr', for every
    kind of bad input (issue 14), on every command that reads a capture."""
    good = Path(__file__).resolve().parent.parent / "fixtures" / "tls_sse_nagle" / "client.pcapng"
    missing = tmp_path / "nope.pcap"
    _one_line_error(run("analyze", str(missing)), "nope.pcap", "No such file")
    _one_line_error(run("records", str(missing)), "No such file")
    _one_line_error(run("requests", str(missing)), "No such file")
    _one_line_error(run("analyze", str(tmp_path)), "Is a directory")
    empty = tmp_path / "empty.pcap"
    empty.write_bytes(b"")
    _one_line_error(run("analyze", str(empty)), "empty file")
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(bytes.fromhex("d4c3b2a1020004"))  # a pcap header cut at 7 of 24 bytes
    _one_line_error(run("analyze", str(cut)), "header is cut short")
    _one_line_error(run("analyze", str(good), "--keylog", str(missing)), "--keylog", "No such")
    # unreadable (root reads any file: the open is made to fail the way it would)
    import pcapkit.io.reader as reader

    real_open = open

    def deny(path, *a, **k):
        if str(path).endswith("locked.pcap"):
            raise PermissionError(13, "Permission denied")
        return real_open(path, *a, **k)

    monkeypatch.setattr(reader, "open", deny, raising=False)
    _one_line_error(run("analyze", str(tmp_path / "locked.pcap")), "Permission denied")


def test_capture_from_stdin_and_from_a_pipe(tmp_path):
    """`tcpdump -w - | pcapkit analyze -` and /dev/stdin-like streams: spooled, then read."""
    import subprocess
    import sys

    good = Path(__file__).resolve().parent.parent / "fixtures" / "tls_sse_nagle" / "client.pcapng"
    data = good.read_bytes()
    r = CliRunner().invoke(cli, ["analyze", "-", "--format", "json"], input=data)
    assert r.exit_code == Exit.OK, r.output
    doc = json.loads(r.output)
    assert doc["capture"]["frames"] == 56 and doc["capture"]["path"] == "-"
    assert [f["kind"] for f in doc["findings"]][:1] == ["nagle_delayed_ack"]
    # a real pipe through a subprocess (not seekable, not mappable)
    out = subprocess.run(
        [sys.executable, "-m", "pcapkit.cli", "records", "/dev/stdin", "--format", "csv"],
        input=data,
        capture_output=True,
        check=True,
    )
    from_file = run("records", str(good), "--format", "csv").output.encode()
    assert out.stdout == from_file and out.stdout.count(b"\n") > 30  # every TLS record


def test_truncated_gzip_keeps_the_frames_before_the_cut(tmp_path):
    import gzip

    good = Path(__file__).resolve().parent.parent / "fixtures" / "tls_sse_nagle" / "client.pcapng"
    z = gzip.compress(good.read_bytes())
    cut = tmp_path / "cut.pcapng.gz"
    cut.write_bytes(z[: len(z) * 2 // 3])
    r = run("analyze", str(cut), "--format", "json")
    assert r.exit_code == Exit.OK, r.output
    doc = json.loads(r.output)
    names = [a["name"] for a in doc["anomalies"]]
    assert "gzip_truncated" in names and "truncated_record" in names  # the cut record too
    assert 0 < doc["capture"]["frames"] < 56
    bad = tmp_path / "garbage.gz"
    bad.write_bytes(b"\x1f\x8b" + b"\xff" * 40)
    _one_line_error(run("analyze", str(bad)), "gzip stream is corrupt")


def test_truncated_capture_reports_anomaly_and_succeeds(capture):
    data = capture.read_bytes()
    capture.write_bytes(data[:-7])
    r = run("analyze", str(capture))
    assert r.exit_code == Exit.OK
    assert "truncated_record" in r.output
    j = json.loads(run("analyze", str(capture), "--format", "json").output)
    assert [a["name"] for a in j["anomalies"]] == ["truncated_record"]


def test_help_documents_exit_codes():
    r = run("analyze", "--help")
    assert r.exit_code == 0
    assert "Exit codes" in r.output and "1 the input could not be analysed" in r.output
    assert "Example" in r.output


def test_progress_callback_reports_stages(capture):
    import pcapkit

    seen: list[tuple[str, float]] = []
    t = pcapkit.open(capture, progress=lambda stage, frac: seen.append((stage, frac)))
    _ = t.flows
    stages = [s for s, _ in seen]
    assert stages[0] == "read" and ("read", 1.0) in seen
    assert stages.index("decode") < stages.index("reassembly")
    assert seen[-1] == ("reassembly", 1.0)
    fracs = [f for _, f in seen]
    assert all(0.0 <= f <= 1.0 for f in fracs)


ZW = Path(__file__).resolve().parents[1] / "fixtures" / "zero_window" / "server.pcapng"


def test_fail_on_kind_exits_3_and_lists_the_finding():
    r = run("analyze", str(ZW), "--fail-on", "nagle,zero_window")
    assert r.exit_code == Exit.FINDINGS
    assert "▶ zero_window [high" in r.output and "remedy:" in r.output
    assert (
        r.output.strip()
        .splitlines()[-1]
        .startswith("verdict: 1 finding(s) cost time — zero_window")
    )


def test_fail_on_severity_and_min_cost():
    assert run("analyze", str(ZW), "--fail-on", "medium").exit_code == Exit.FINDINGS
    r = run("analyze", str(ZW), "--fail-on", "medium", "--min-cost-ms", "5000")
    assert r.exit_code == Exit.OK
    assert "verdict: no latency pathology found" in r.output


def test_fail_on_unknown_kind_is_usage_error():
    r = run("analyze", str(ZW), "--fail-on", "bogus")
    assert r.exit_code == Exit.USAGE and "unknown kind(s) bogus" in r.output


def test_json_findings_carry_the_stable_keys():
    doc = json.loads(run("analyze", str(ZW), "--format", "json").output)
    (f,) = doc["findings"]
    assert {"kind", "severity", "flow", "dir", "cost_ms", "frames", "explanation", "remedy"} <= set(
        f
    )
    assert f["kind"] == "zero_window" and isinstance(f["frames"], list) and f["cost_ms"] > 1000


def test_flow_that_does_not_exist_is_a_usage_error():
    good = Path(__file__).resolve().parent.parent / "fixtures" / "tls_sse_nagle" / "client.pcapng"
    for cmd in ("requests", "records"):
        r = run(cmd, str(good), "--flow", "99")
        assert r.exit_code == Exit.USAGE
        assert (
            r.output.strip() == "pcapkit: error: --flow 99: no such flow (the capture has 1: 0–0)"
        )


REAL = Path(__file__).resolve().parents[2] / "shared" / "realworld" / "ndpi" / "pcap"


def test_narrowing_the_report():
    """--flow, --kind, --min-severity, --since/--until and --top narrow the findings (text
    and JSON alike); --fail-on judges what is shown."""
    nagle = Path(__file__).resolve().parent.parent / "fixtures" / "nagle_wwr" / "client.pcapng"

    def found(*extra: str) -> list[dict]:
        r = run("analyze", str(nagle), "--format", "json", *extra)
        assert r.exit_code == Exit.OK, r.output
        return json.loads(r.output)["findings"]

    def kinds(*extra: str) -> list[str]:
        return [f["kind"] for f in found(*extra)]

    everything = kinds()
    assert everything.count("nagle_delayed_ack") >= 5 and "nagle" in everything
    assert set(kinds("--kind", "nagle")) == {"nagle"}
    assert kinds("--top", "2") == everything[:2]
    sev = ["info", "low", "medium", "high"]
    high = [f["kind"] for f in found() if sev.index(f["severity"]) >= 3]
    assert kinds("--min-severity", "high") == high  # none: every hold here costs < 100 ms
    assert kinds("--min-severity", "medium") == everything
    assert kinds("--since", "1e6") == [] and kinds("--until", "-1") == []
    assert kinds("--flow", "0") == everything
    r = run("analyze", str(nagle), "--kind", "bogus")
    assert r.exit_code == Exit.USAGE and r.output.startswith("pcapkit: error: --kind: unknown")
    r = run("analyze", str(nagle), "--flow", "7")
    assert r.exit_code == Exit.USAGE and "--flow 7: no such flow" in r.output
    assert (
        run("analyze", str(nagle), "--kind", "nagle", "--fail-on", "nagle_delayed_ack").exit_code
        == 0
    )


def test_repeated_findings_are_grouped_with_one_remedy():
    nagle = Path(__file__).resolve().parent.parent / "fixtures" / "nagle_wwr" / "client.pcapng"
    text = run("analyze", str(nagle)).output
    n = json.loads(run("analyze", str(nagle), "--format", "json").output)["findings"]
    repeated = sum(1 for f in n if f["kind"] == "nagle_delayed_ack")
    assert text.count("▶ nagle_delayed_ack") == 1
    assert f"{repeated} times on this connection; the costliest:" in text
    assert text.count("remedy:") == len({(f["kind"], f["dir"]) for f in n})
    assert "findings by connection, worst first:" in text
    assert "flow 0 (tcp.stream 0)" in text


def test_flows_are_named_as_wireshark_numbers_them():
    """On a capture mixing TCP and UDP, flow N is printed with its tcp.stream / udp.stream."""
    p = REAL / "teams.pcap"
    if not p.exists():
        pytest.skip("../shared/realworld is absent")
    text = run("analyze", str(p), "--all").output
    assert "flow 0   udp.stream 0 " in text and "flow 1   tcp.stream 0 " in text


def test_readme_and_help_match_the_code():
    """The README's JSON keys are the report's; every command and option the README's
    command-line section uses exists; --help lists the JSON keys the report has."""
    import re

    from pcapkit.report.json import JSON_KEYS

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    section = readme.split("### JSON report", 1)[1].split("## Python API", 1)[0]
    keys = re.findall(r"^\| `([a-z_]+)` \|", section, re.M)
    assert tuple(keys) == JSON_KEYS
    assert ", ".join(JSON_KEYS) in " ".join(run("analyze", "--help").output.split())
    cmdline = readme.split("## Command line", 1)[1].split("### JSON report", 1)[0]
    for line in (p for ln in cmdline.splitlines() for p in ln.split(";")):
        m = re.match(r"\s+(?:.*\| )?(?:sudo )?pcapkit (\w+)(.*?)(#|$)", line)
        if not m:
            continue
        cmd, rest = m.group(1), m.group(2)
        command = cli.get_command(click.Context(cli), cmd)  # lab: loaded when named
        assert command is not None, line
        sub = rest.split()[0] if rest.split() else ""
        if hasattr(command, "commands") and sub in command.commands:  # a group: lab run …
            command = command.commands[sub]
        params = {o for p in command.params for o in getattr(p, "opts", [])}
        for opt in re.findall(r"(--[a-z0-9-]+)", rest):
            assert opt in params, (cmd, opt)


def test_colour_only_on_a_terminal_and_never_with_no_color(monkeypatch):
    import click

    nagle = Path(__file__).resolve().parent.parent / "fixtures" / "nagle_wwr" / "client.pcapng"
    plain = run("analyze", str(nagle)).output
    assert "\x1b[" not in plain  # CliRunner is not a terminal: no styles
    styled = CliRunner().invoke(cli, ["analyze", str(nagle)], color=True).output
    assert click.style("medium", fg="yellow", bold=True) in styled
    assert click.unstyle(styled) == plain
    monkeypatch.setenv("NO_COLOR", "1")
    assert "\x1b[" not in CliRunner().invoke(cli, ["analyze", str(nagle)], color=True).output


def test_record_type_names_are_never_cut():
    good = Path(__file__).resolve().parent.parent / "fixtures" / "tls_sse_nagle" / "client.pcapng"
    out = run("records", str(good)).output
    assert "EncryptedExtensions" in out and "EncryptedExtensio " not in out


def test_each_command_lists_only_the_exit_codes_it_returns():
    for cmd in ("records", "requests", "export", "slice"):
        out = " ".join(run(cmd, "--help").output.split())
        assert "Exit codes: 0 ok; 1 the input could not be analysed" in out, cmd
        assert "--fail-on" not in out and "3 a finding" not in out, cmd
    out = " ".join(run("analyze", "--help").output.split())
    assert "3 a finding matched --fail-on" in out
