"""qlog export (issue 7): JSON-SEQ records a qlog reader can load, one event per QUIC packet,
with the STREAM frames the trace itself reports."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

import pcapkit
from pcapkit.cli import cli
from pcapkit.export.qlog import RS, export_qlog

FIX = Path(__file__).resolve().parent.parent / "fixtures"


def _records(path: Path) -> list[dict]:
    text = path.read_text(encoding="utf-8")
    assert text.startswith(RS)
    chunks = text.split(RS)[1:]
    assert all(c.endswith("\n") for c in chunks)  # RFC 7464: RS json LF
    return [json.loads(c) for c in chunks]


@pytest.mark.parametrize("vantage", ["client", "server"])
def test_qlog_matches_the_trace(tmp_path: Path, vantage: str) -> None:
    with pcapkit.open(FIX / "h3_streams_drop" / f"{vantage}.pcapng") as t:
        written = export_qlog(t, tmp_path)
        quic = t.quic
        msgs = t.quic_messages
    assert len(written) == len(quic) == 1
    recs = _records(written[0])
    head, events = recs[0], recs[1:]
    assert head["qlog_version"] == "0.3" and head["qlog_format"] == "JSON-SEQ"
    assert head["trace"]["vantage_point"] == {
        "name": "capture",
        "type": "network",
        "flow": "client",
    }
    assert head["trace"]["common_fields"]["ODCID"] == quic.client_dcid.iloc[0]
    assert len(events) == int(quic.packets.iloc[0])
    times = [e["time"] for e in events]
    assert times == sorted(times) and times[0] == 0
    assert {e["name"] for e in events} == {"transport:packet_sent", "transport:packet_received"}
    got = Counter(
        (f["stream_id"], f["offset"], f["length"])
        for e in events
        for f in e["data"]["frames"]
        if f["frame_type"] == "stream"
    )
    st = msgs[msgs.type == "STREAM"]
    want = Counter(zip(st.stream.tolist(), st.offset.tolist(), st.length.tolist(), strict=True))
    assert got == want
    types = Counter(e["data"]["header"]["packet_type"] for e in events)
    assert set(types) <= {"initial", "handshake", "1RTT", "0RTT"}
    assert types["initial"] >= 2 and types["1RTT"] > 10
    # every frame of the capture's packets is named, none unknown
    assert not any(f["frame_type"] == "unknown" for e in events for f in e["data"]["frames"])


def test_export_cli(tmp_path: Path) -> None:
    r = CliRunner().invoke(
        cli, ["export", str(FIX / "h3_streams_nodrop" / "client.pcapng"), "--qlog", str(tmp_path)]
    )
    assert r.exit_code == 0, r.output
    out = Path(r.output.strip())
    assert out.exists() and out.suffix == ".sqlog"
    r = CliRunner().invoke(
        cli, ["export", str(FIX / "nagle_wwr" / "client.pcapng"), "--qlog", str(tmp_path / "x")]
    )
    assert r.exit_code == 0 and "no QUIC connections" in r.output


@pytest.mark.parametrize("name", ["h3_streams_nodrop", "h3_streams_drop"])
def test_qlog_agrees_with_the_servers_own_qlog(tmp_path: Path, name: str) -> None:
    """The lab kept aioquic's qlog of every packet the server sent (scenario.json); the
    qlog pcapkit writes from the server-side capture names the same packets, packet
    numbers, STREAM frames and frame types."""
    truth = json.loads((FIX / name / "scenario.json").read_text())["ground_truth"]["server_packets"]
    with pcapkit.open(FIX / name / "server.pcapng") as t:
        (path,) = export_qlog(t, tmp_path)
    events = [e for e in _records(path)[1:] if e["name"] == "transport:packet_received"]

    def key(types: list[str], pn: int, ptype: str, streams: list[list]) -> tuple:
        return (
            ptype,
            pn,
            tuple(tuple(s) for s in streams),
            tuple(sorted(set(types) - {"padding"})),
        )

    ours = [
        key(
            [f["frame_type"] for f in e["data"]["frames"]],
            e["data"]["header"]["packet_number"],
            e["data"]["header"]["packet_type"],
            [
                [f["stream_id"], f["offset"], f["length"], f["fin"]]
                for f in e["data"]["frames"]
                if f["frame_type"] == "stream"
            ],
        )
        for e in events
    ]
    theirs = [key(p["frames"], p["pn"], p["type"], p["stream_frames"]) for p in truth]
    assert sorted(ours) == sorted(theirs)
