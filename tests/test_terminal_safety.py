"""Nothing from a capture reaches a terminal raw (issue 15): every command's output
escapes the control characters a captured header, path or name carries."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from pcapkit.cli import cli
from pcapkit.io.writer import write_pcap
from pcapkit.report.escape import printable

from synth import Conn

# an OSC title change + a screen clear, a bell, an 8-bit CSI and a bidi override
HOSTILE = "\x1b]0;pwned\x07\x1b[2J\x9b31m\u202eevil"
RAW = ("\x1b", "\x07", "\x9b", "\u202e")


def test_printable_escapes_what_a_terminal_would_act_on() -> None:
    assert printable(HOSTILE) == "\\x1b]0;pwned\\x07\\x1b[2J\\x9b31m\\u202eevil"
    assert printable("tab\there\nnext line, ünïcode ✓") == "tab\there\nnext line, ünïcode ✓"


@pytest.fixture()
def hostile_capture(tmp_path: Path) -> Path:
    """SYNTHETIC (scapy): a cleartext HTTP/1.1 exchange whose request path, Host and
    X-Request-Id, and whose response reason and body, carry terminal control sequences."""
    c = Conn(sport=80)
    c.handshake()
    req = (
        f"GET /a{HOSTILE} HTTP/1.1\r\nHost: h{HOSTILE}\r\nX-Request-Id: {HOSTILE}\r\n\r\n"
    ).encode("latin-1", "replace")
    c.c2s(30_000, req)
    body = f"data: {HOSTILE}\n\n".encode("latin-1", "replace")
    resp = (
        f"HTTP/1.1 200 O{HOSTILE}\r\nContent-Type: text/event-stream\r\n"
        f"X-Request-Id: {HOSTILE}\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode("latin-1", "replace") + body
    c.s2c(60_000, resp)
    c.ack_c(80_000)
    p = tmp_path / "hostile.pcap"
    write_pcap(p, c.frames, 1)
    return p


@pytest.mark.parametrize(
    "args",
    [
        ["analyze"],
        ["analyze", "--all"],
        ["analyze", "--format", "json"],
        ["requests"],
        ["requests", "--format", "csv"],
        ["requests", "--format", "json"],
        ["records"],
        ["records", "--format", "csv"],
    ],
)
def test_no_command_prints_a_control_character(hostile_capture: Path, args: list[str]) -> None:
    r = CliRunner().invoke(cli, [args[0], str(hostile_capture), *args[1:]])
    assert r.exit_code == 0, r.output
    for ch in RAW:
        assert ch not in r.output, (args, ch)
    if args[0] == "requests" and "json" not in args:
        assert "\\x1b]0;pwned" in r.output  # shown, escaped, not dropped
    if "json" in args:
        json.loads(r.output)  # still valid JSON
