"""Numeric CI gates of ``pcapkit analyze`` (--max-ttfb-ms, --max-ttft-ms, --max-gap-p95-ms,
--max-handshake-ms) and its JUnit report (--junit)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner

import pcapkit
from pcapkit.cli import cli
from pcapkit.io.writer import write_pcap

from synth import Conn

FIX = Path(__file__).resolve().parent.parent / "fixtures"
SSE = FIX / "tls_sse_nagle" / "client.pcapng"
H3 = FIX / "h3_flow_control" / "client.pcapng"


def run(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(cli, ["analyze", *args])
    return r.exit_code, r.stdout, r.stderr


@pytest.mark.parametrize(
    "option,column",
    [
        ("--max-ttfb-ms", "ttfb_ms"),
        ("--max-ttft-ms", "ttft_ms"),
        ("--max-gap-p95-ms", "gap_p95_ms"),
    ],
)
def test_request_gates_fail_over_the_limit_and_name_the_request(option: str, column: str) -> None:
    with pcapkit.open(SSE) as t:
        q = t.requests
    value = float(q[column].iloc[0])
    assert len(q) == 1 and value > 1.0
    code, _, err = run(str(SSE), option, f"{value * 1.5:.3f}")
    assert code == 0 and err == ""
    code, out, err = run(str(SSE), option, f"{value * 0.5:.3f}")
    assert code == 3
    lines = [ln for ln in err.splitlines() if ln.startswith(f"pcapkit: gate {option}")]
    assert len(lines) == 1, err
    assert "request 0 (flow 0): GET pcapkit.lab/v1/stream" in lines[0]
    assert f"{value:.1f} ms" in lines[0]
    assert "verdict" in out  # the report is printed as usual


@pytest.mark.parametrize("capture,table", [(SSE, "tls"), (H3, "quic")])
def test_handshake_gate_covers_tls_and_quic(capture: Path, table: str) -> None:
    with pcapkit.open(capture) as t:
        hs = getattr(t, table).handshake_ms.dropna()
    assert len(hs) >= 1
    code, _, _ = run(str(capture), "--max-handshake-ms", f"{hs.max() * 1.2:.3f}")
    assert code == 0
    code, _, err = run(str(capture), "--max-handshake-ms", f"{hs.min() * 0.8:.3f}")
    assert code == 3
    lines = err.splitlines()
    assert len(lines) == len(hs)
    proto = "TLS" if table == "tls" else "QUIC"
    assert all(f"{proto} handshake" in ln and "--max-handshake-ms" in ln for ln in lines)


def test_a_gate_that_measured_nothing_fails(tmp_path: Path) -> None:
    """The same capture without its keys: no request can be read, and a TTFT gate that
    passed on nothing would be a clean verdict on nothing."""
    keyless = tmp_path / "keyless.pcap"
    with pcapkit.open(SSE) as t:
        frames = [
            (int(ts), t.frame_bytes(int(n)))
            for n, ts in zip(t.packets.frame, t.packets.ts_ns, strict=True)
        ]
        linktype = t.raw.interfaces[0].linktype
    write_pcap(keyless, frames, linktype)
    code, _, err = run(str(keyless), "--max-ttft-ms", "1000")
    assert code == 3
    assert "nothing to check: no time to first token (0 HTTP exchange(s)" in err
    # the handshake is still measured without keys
    code, _, err = run(str(keyless), "--max-handshake-ms", "1000")
    assert code == 0, err


def test_flow_narrows_the_gates() -> None:
    folder = FIX / "tls_no_reuse" / "client.pcapng"
    with pcapkit.open(folder) as t:
        q = t.requests
    assert q.flow.nunique() >= 2
    worst = q.loc[q.ttfb_ms.idxmax()]
    other = int(q[q.flow != worst.flow].flow.iloc[0])
    limit = float(q[q.flow == other].ttfb_ms.max()) + 0.001
    assert worst.ttfb_ms > limit
    assert run(str(folder), "--max-ttfb-ms", f"{limit}", "--flow", str(other))[0] == 0
    code, _, err = run(str(folder), "--max-ttfb-ms", f"{limit}")
    assert code == 3 and f"request {int(worst.request)} (flow {int(worst.flow)})" in err


def test_junit_has_a_case_per_exchange_handshake_finding_and_gate(tmp_path: Path) -> None:
    out = tmp_path / "out.xml"
    with pcapkit.open(SSE) as t:
        n_req, n_tls, f = len(t.requests), len(t.tls), t.findings
        gap = float(t.requests.gap_p95_ms.iloc[0])
    code, _, _ = run(
        str(SSE), "--junit", str(out), "--fail-on", "medium", "--max-gap-p95-ms", f"{gap / 2}"
    )
    assert code == 3
    root = ET.parse(out).getroot()
    suite = root.find("testsuite")
    assert suite is not None
    cases = suite.findall("testcase")
    by_class: dict[str, list[ET.Element]] = {}
    for c in cases:
        by_class.setdefault(c.get("classname", "").split(".")[1], []).append(c)
    assert len(by_class["requests"]) == n_req
    assert len(by_class["handshakes"]) == n_tls
    assert len(by_class["findings"]) == len(f)
    assert len(by_class["gates"]) == 1
    failed = {c.get("classname", "") for c in cases if c.find("failure") is not None}
    medium_up = {f"pcapkit.findings.{k}" for k in f[f.severity.isin(["medium", "high"])].kind}
    assert medium_up and medium_up <= failed
    low = {f"pcapkit.findings.{k}" for k in f[~f.severity.isin(["medium", "high"])].kind}
    assert not (low - medium_up) & failed
    assert {"pcapkit.requests", "pcapkit.gates"} <= failed
    assert "pcapkit.handshakes" not in failed
    n_fail = sum(1 for c in cases if c.find("failure") is not None)
    assert suite.get("tests") == str(len(cases)) and suite.get("failures") == str(n_fail)
    # no --fail-on, no gate: every case passes and the exit code is 0
    assert run(str(SSE), "--junit", str(out))[0] == 0
    assert ET.parse(out).getroot().get("failures") == "0"


def test_junit_is_well_formed_with_hostile_strings(tmp_path: Path) -> None:
    """SYNTHETIC (scapy): a cleartext exchange whose path and Host carry control
    characters, '<', '&' and ']]>': the XML parses and nothing raw gets through."""
    hostile = "\x1b[2J\x00<x>&]]>\u202e"
    c = Conn(sport=80)
    c.handshake()
    c.c2s(
        30_000, f"GET /p{hostile} HTTP/1.1\r\nHost: h{hostile}\r\n\r\n".encode("latin-1", "replace")
    )
    c.s2c(60_000, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
    c.ack_c(80_000)
    cap = tmp_path / "hostile.pcap"
    write_pcap(cap, c.frames, 1)
    out = tmp_path / "out.xml"
    assert run(str(cap), "--junit", str(out), "--max-ttfb-ms", "1")[0] == 3
    text = out.read_text("utf-8")
    assert not any(ch in text for ch in ("\x1b", "\x00", "\u202e"))
    root = ET.parse(out).getroot()
    names = [c.get("name", "") for c in root.iter("testcase")]
    assert any("<x>&]]>" in n and "\\x1b[2J" in n for n in names), names


def test_bad_junit_path_is_one_line_exit_1(tmp_path: Path) -> None:
    code, _, err = run(str(SSE), "--junit", str(tmp_path / "no" / "such" / "dir.xml"))
    assert code == 1 and err.strip().count("\n") == 0 and "--junit" in err
