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


def test_every_frame_type_in_qlog_form() -> None:
    """Each QUIC frame type goes dissector record → Trace.quic_frames row → qlog QuicFrame
    (quic-events §8.13), including the types the captures do not carry."""
    import numpy as np

    from dissectors.quic import PacketType, QuicConnection
    from dissectors.quic import frames as F
    from dissectors.quic.connection import PacketRecord
    from pcapkit.export.qlog import connection_records
    from pcapkit.sessions.quic import QuicFlow, frame_table, packet_table

    z = {"frame_offset": 0, "frame_length": 3}
    cases = [
        (F.Padding(frame_offset=0, frame_length=7), {"frame_type": "padding", "raw": {"length": 7}}),
        (F.Ping(**z), {"frame_type": "ping"}),
        (
            F.Ack(**z, frame_type=0x03, largest_acknowledged=9, ack_delay=125, first_ack_range=1,
                  ranges=((8, 9), (2, 5)), ecn_counts=(1, 2, 3)),
            {"frame_type": "ack", "ack_delay": 1.0, "acked_ranges": [[2, 5], [8, 9]],
             "ect0": 1, "ect1": 2, "ce": 3},
        ),
        (
            F.ResetStream(**z, stream_id=4, application_protocol_error_code=258, final_size=10),
            {"frame_type": "reset_stream", "stream_id": 4, "error_code": 258, "final_size": 10},
        ),
        (
            F.StopSending(**z, stream_id=4, application_protocol_error_code=268),
            {"frame_type": "stop_sending", "stream_id": 4, "error_code": 268},
        ),
        (F.Crypto(**z, offset=5, length=2, data=b"ab"),
         {"frame_type": "crypto", "offset": 5, "length": 2}),
        (F.NewToken(**z, token=b"t"), {"frame_type": "new_token"}),
        (
            F.Stream(**z, frame_type=0x0F, stream_id=8, offset=3, length=2, fin=True, data=b"ab"),
            {"frame_type": "stream", "stream_id": 8, "offset": 3, "length": 2, "fin": True},
        ),
        (F.MaxData(**z, maximum_data=99), {"frame_type": "max_data", "maximum": 99}),
        (F.MaxStreamData(**z, stream_id=8, maximum_stream_data=77),
         {"frame_type": "max_stream_data", "stream_id": 8, "maximum": 77}),
        (F.MaxStreams(**z, frame_type=0x13, bidirectional=False, maximum_streams=3),
         {"frame_type": "max_streams", "maximum": 3, "stream_type": "unidirectional"}),
        (F.DataBlocked(**z, maximum_data=50), {"frame_type": "data_blocked", "limit": 50}),
        (F.StreamDataBlocked(**z, stream_id=0, maximum_stream_data=60),
         {"frame_type": "stream_data_blocked", "stream_id": 0, "limit": 60}),
        (F.StreamsBlocked(**z, frame_type=0x16, bidirectional=True, maximum_streams=100),
         {"frame_type": "streams_blocked", "limit": 100, "stream_type": "bidirectional"}),
        (
            F.NewConnectionId(**z, sequence_number=2, retire_prior_to=1,
                              connection_id=b"\x01\x02", stateless_reset_token=bytes(16)),
            {"frame_type": "new_connection_id", "sequence_number": 2, "retire_prior_to": 1,
             "connection_id": "0102"},
        ),
        (F.RetireConnectionId(**z, sequence_number=1),
         {"frame_type": "retire_connection_id", "sequence_number": 1}),
        (F.PathChallenge(**z, data=bytes(8)), {"frame_type": "path_challenge"}),
        (F.PathResponse(**z, data=bytes(8)), {"frame_type": "path_response"}),
        (
            F.ConnectionClose(**z, frame_type=0x1C, error_code=10, error_frame_type=6,
                              reason_phrase=b"bad \xff"),
            {"frame_type": "connection_close", "error_space": "transport", "error_code": 10,
             "reason": "bad \ufffd"},
        ),
        (
            F.ConnectionClose(**z, frame_type=0x1D, error_code=256, error_frame_type=None,
                              reason_phrase=b""),
            {"frame_type": "connection_close", "error_space": "application", "error_code": 256,
             "reason": ""},
        ),
        (F.HandshakeDone(**z), {"frame_type": "handshake_done"}),
        (F.Datagram(**z, frame_type=0x31, data=b"xyz"), {"frame_type": "datagram", "length": 3}),
    ]  # fmt: skip
    conn = QuicConnection()
    conn.packets.append(
        PacketRecord(
            frame=1, ts_ns=10**18, direction="c2s", index=0, offset=0, length=200,
            packet_type=PacketType.ONE_RTT, version=None, dcid=b"\xaa", scid=b"",
            packet_number=5, decrypted=True, frames=tuple(f for f, _ in cases),
        )
    )  # fmt: skip
    qf = QuicFlow(
        flow=0, conn=conn, swapped=False, datagrams=1,
        datagram_frames=np.array([1]), datagram_bytes=np.array([200]),
    )  # fmt: skip
    packets, frames = packet_table([qf]), frame_table([qf])
    assert len(frames) == len(cases)
    head, event = connection_records(0, None, packets, frames, title="t")
    assert event["name"] == "transport:packet_sent"
    assert event["data"]["header"] == {"packet_type": "1RTT", "packet_number": 5, "dcid": "aa"}
    assert event["data"]["frames"] == [want for _, want in cases]
    json.dumps(event)  # plain Python values only
