"""quic_flow_control_stall on the h3_flow_control lab fixtures (aioquic, 8 KiB stream
window) against the stalls the lab saw on the wire; transport parameters decoding."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import pcapkit
from dissectors.errors import DissectError
from dissectors.quic.transport_params import from_extensions, parse_transport_parameters

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
    with pcapkit.open(FIX / "h3_flow_control" / "client.pcapng") as t:
        conn = t._quic[0].conn
    ch = next(m for m in conn.tls_messages if m.name == "CLIENT_HELLO")
    tp = from_extensions(ch.decoded.extensions)
    assert tp is not None
    assert tp["initial_max_stream_data_bidi_local"] == 8192  # the scenario's setting
    assert tp["initial_max_data"] == 1_048_576  # aioquic's default
    assert tp["max_idle_timeout"] == 10_000


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
