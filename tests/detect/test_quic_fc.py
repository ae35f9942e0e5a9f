"""quic_flow_control_stall on the h3_flow_control lab fixtures (aioquic, 8 KiB stream
window) against the stalls the lab saw on the wire, and on QUIC tables written by hand;
transport parameters decoding and their quic_tls columns."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from quic_tables import Conn, max_data, max_stream_data, stream

import pcapkit
from dissectors.errors import DissectError
from dissectors.quic.transport_params import parse_transport_parameters
from pcapkit.detect import quic_fc

FIX = Path(__file__).resolve().parents[2] / "fixtures"


def _truth(name: str) -> dict:
    return json.loads((FIX / name / "scenario.json").read_text())


@pytest.mark.parametrize("vantage", ["client", "server"])
def test_stalls_match_the_wire(vantage: str) -> None:
    sc = _truth("h3_flow_control")
    stalls = sc["ground_truth"]["server_stalls"]
    with pcapkit.open(FIX / "h3_flow_control" / f"{vantage}.pcapng") as t:
        f = t.findings
    st = f[f.kind == "quic_flow_control_stall"].sort_values("t_start_ns")
    assert len(st) == len(stalls) >= 2
    assert [d["limit"] for d in st.details] == [s["limit"] for s in stalls]
    for got, want in zip(st.cost_ms, stalls, strict=True):
        assert got == pytest.approx(want["wire_idle_ms"], rel=0.2)
    assert set(st.stream) == {0} and set(st.dir) == {"s2c"}
    # each finding names the MAX_STREAM_DATA that raised the limit
    assert all(d["raised_to"] > d["limit"] for d in st.details)


@pytest.mark.parametrize("name", ["h3_flow_control_large", "h3_streams_nodrop", "h3_streams_drop"])
def test_large_windows_do_not_stall(name: str) -> None:
    for v in ("client", "server"):
        with pcapkit.open(FIX / name / f"{v}.pcapng") as t:
            assert "quic_flow_control_stall" not in set(t.findings.kind)


def test_transport_parameters_of_the_fixture() -> None:
    """Trace.quic_tls carries the client's transport parameters on its ClientHello row,
    as the dissector decodes them."""
    with pcapkit.open(FIX / "h3_flow_control" / "client.pcapng") as t:
        tls = t.quic_tls
        dcid = t.quic.client_dcid.iloc[0]
    ch = tls[tls.name == "CLIENT_HELLO"].iloc[0]
    assert ch.from_client and ch.dir == "c2s" and ch.space == "initial"
    assert ch.initial_max_stream_data_bidi_local == 8192  # the scenario's setting
    assert ch.initial_max_data == 1_048_576  # aioquic's default
    assert ch.max_idle_timeout_ms == 10_000
    ee = tls[tls.name == "ENCRYPTED_EXTENSIONS"].iloc[0]
    assert not ee.from_client and ee.initial_max_data > 0
    assert ee.original_destination_connection_id == dcid
    # messages without the extension carry none
    assert (
        tls[~tls.name.isin(["CLIENT_HELLO", "ENCRYPTED_EXTENSIONS"])].initial_max_data.isna().all()
    )


# --------------------------------------------------------------------------- by hand
#
# The server (X) sends on stream 0, which the client opened: its credit is the client's
# (Y's) initial_max_stream_data_bidi_local (RFC 9000 §18.2), then MAX_STREAM_DATA.


def stalled(
    *, grant_ms: float | None = 35.0, resume_ms: float = 40.0, stream_limit: int = 1000,
    conn_limit: int = 1_000_000, second_stream: bool = False, grant: dict | None = None,
) -> Conn:  # fmt: skip
    """The server's data reaches 1000 bytes at 11 ms (on stream 0, or on streams 0 and 4
    together), the client grants more at ``grant_ms``, the server resumes at ``resume_ms``."""
    c = Conn()
    f1 = c.packet("c2s", 0.0, ptype="initial", pn=0)
    c.tls_message(
        "c2s", "CLIENT_HELLO", f1,
        initial_max_data=conn_limit, initial_max_stream_data_bidi_local=stream_limit,
    )  # fmt: skip
    f2 = c.packet("s2c", 5.0, ptype="handshake", pn=0)
    c.tls_message("s2c", "ENCRYPTED_EXTENSIONS", f2, initial_max_data=1_000_000)
    c.packet("s2c", 10.0, stream(0, 0, 600), pn=1)
    last = stream(4, 0, 400) if second_stream else stream(0, 600, 400)
    c.packet("s2c", 11.0, last, pn=2)
    if grant_ms is not None:
        c.packet("c2s", grant_ms, grant or max_stream_data(0, 3000), pn=1)
    sid = last["stream_id"]
    c.packet("s2c", resume_ms, stream(sid, last["offset"] + last["length"], 1000), pn=3)
    return c


def test_stream_limit_stall_by_hand() -> None:
    (f,) = quic_fc.detect(stalled().context())
    assert (f.kind, f.flow, f.dir, f.stream) == ("quic_flow_control_stall", 0, "s2c", 0)
    assert f.cost_ms == pytest.approx(29.0)  # the limit-hitting data (11 ms) → resume (40)
    assert f.details == {"limit": 1000, "window": "stream", "raised_to": 3000}
    assert [(e.frame, e.role) for e in f.evidence] == [
        (4, "STREAM data reaches the stream limit"),
        (5, "MAX_STREAM_DATA raises it"),
        (6, "new data resumes"),
    ]
    assert "limit of 1000 bytes" in f.explanation


def test_connection_limit_stall_by_hand() -> None:
    c = stalled(stream_limit=1_000_000, conn_limit=1000, second_stream=True, grant=max_data(5000))
    (f,) = quic_fc.detect(c.context())
    assert (f.stream, f.dir) == (4, "s2c")
    assert f.details == {"limit": 1000, "window": "connection", "raised_to": 5000}
    assert f.evidence[1].role == "MAX_DATA raises it"


def test_no_grant_no_stall() -> None:
    """The sender paused at the limit but resumed without a new grant: not flow control."""
    assert quic_fc.detect(stalled(grant_ms=None).context()) == []


def test_min_idle_threshold() -> None:
    c = stalled(grant_ms=11.2, resume_ms=11.5)  # 0.5 ms: scheduling within one flight
    assert quic_fc.detect(c.context()) == []
    (f,) = quic_fc.detect(c.context(), min_idle_ms=0.1)
    assert f.cost_ms == pytest.approx(0.5)


def test_below_the_limit_no_stall() -> None:
    """The sender stopped short of its credit: it had nothing to send, it was not blocked."""
    assert quic_fc.detect(stalled(stream_limit=5000).context()) == []


def test_transport_parameters_synthetic() -> None:
    """SYNTHETIC encodings (RFC 9000 §18): varint id, varint length, value."""
    raw = (
        bytes([0x04, 0x04, 0x80, 0x01, 0x00, 0x00])
        + bytes([0x0C, 0x00])
        + bytes([0x3F, 0x01, 0xAA])
    )
    tp = parse_transport_parameters(raw)
    assert tp == {"initial_max_data": 65536, "disable_active_migration": True, "0x3f": b"\xaa"}
    with pytest.raises(DissectError):
        parse_transport_parameters(bytes([0x04, 0x02, 0x01, 0x02]))  # trailing byte in a varint
    with pytest.raises(DissectError):
        parse_transport_parameters(bytes([0x04, 0x05, 0x01]))  # truncated
