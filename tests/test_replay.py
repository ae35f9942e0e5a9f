"""Replay's derivation (issue 19) on the lab fixtures: no root, no lab run.

What a capture says about the path, the writes and the sockets is checked against the
fixture's own ground truth (scenario.json), and the refusals against captures that lack
what a faithful replay needs.  The lab runs themselves are in tests/lab/test_replay_lab.py.
"""

from __future__ import annotations

import base64
import json
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

import pcapkit
from pcapkit.cli import cli
from pcapkit.replay import (
    ReplayError,
    auto_remedies,
    derive,
    derive_many,
    parse_remedy,
    remedied,
)

from tshark_util import CORPUS, needs_corpus

FIX = Path(__file__).resolve().parents[1] / "fixtures"


def _truth(name: str) -> dict:
    return json.loads((FIX / name / "scenario.json").read_text())


@pytest.mark.parametrize("vantage", ["client", "server"])
def test_sse_nagle_units_payload_and_sockets(vantage: str) -> None:
    with pcapkit.open(FIX / "tls_sse_nagle" / f"{vantage}.pcapng") as t:
        plan = derive(t, 0)
    units = plan.script["units"]
    # GET, the response head, 20 events, the last chunk: one SSL_write each
    assert [u["side"] for u in units] == ["client"] + ["server"] * 22
    first = base64.b64decode(units[0]["data"])
    assert first.startswith(b"GET /v1/stream HTTP/1.1\r\n")
    assert base64.b64decode(units[3]["data"]) == b"f\r\ndata: token 2\n\n\r\n"
    assert plan.script["sides"]["server"]["nodelay"] is False  # nagle_delayed_ack: s2c
    assert plan.script["sides"]["client"]["nodelay"] is True
    assert plan.drop_c2s == [] and plan.drop_s2c == []
    assert plan.delay_ms * 2 == pytest.approx(_truth("tls_sse_nagle")["path"]["rtt_ms"], abs=1)


def test_held_events_get_their_write_times_back() -> None:
    """Events 1 and 2 left together behind the delayed ACK; the script writes them at the
    stream's cadence, as the server did (scenario.json ground truth), not together."""
    with pcapkit.open(FIX / "tls_sse_nagle" / "server.pcapng") as t:
        units = derive(t, 0).script["units"]
    ev = _truth("tls_sse_nagle")["ground_truth"]["events"]
    truth_ms = (ev[1]["write_ns"] - ev[0]["write_ns"]) / 1e6  # event 1 → event 2
    assert units[3]["after"] == "self"
    assert units[3]["delay_ms"] == pytest.approx(truth_ms, abs=5)
    assert units[1]["after"] == "peer" and units[1]["delay_ms"] < 5  # head: at once


@pytest.mark.parametrize("vantage", ["client", "server"])
def test_drop_index_matches_the_forwarder(vantage: str) -> None:
    with pcapkit.open(FIX / "tls_sse_drop" / f"{vantage}.pcapng") as t:
        plan = derive(t, 0)
    assert plan.drop_s2c == _truth("tls_sse_drop")["params"]["drop_s2c"]
    assert plan.drop_c2s == []


def test_socket_behaviour_from_findings_and_remedies() -> None:
    with pcapkit.open(FIX / "tcp_cork" / "server.pcapng") as t:
        cork = derive(t, 0)
    assert cork.script["sides"]["server"]["cork"] is True
    assert cork.script["tls"] is False
    assert [u["len"] for u in cork.script["units"]] == [18, 100, 100, 100, 100]
    assert remedied(cork, "uncork", None)["sides"]["server"]["cork"] is False
    assert cork.script["sides"]["server"]["cork"] is True  # the plan itself unchanged
    with pcapkit.open(FIX / "tls_record_split_write" / "server.pcapng") as t:
        split = derive(t, 0)
    assert split.script["sides"]["server"]["split_records"] is True
    fixed = remedied(split, "coalesce-writes", None)["sides"]["server"]
    assert fixed["split_records"] is False and fixed["coalesce_ms"] > 0
    with pcapkit.open(FIX / "tls_sse_nodelay" / "server.pcapng") as t:
        assert derive(t, 0).script["sides"]["server"]["nodelay"] is True


def test_without_keys_filler_and_a_warning() -> None:
    with pcapkit.open(FIX / "tls_sse_nagle" / "server.pcapng", embedded_keys=False) as t:
        plan = derive(t, 0)
    assert plan.warnings and "no TLS keys" in plan.warnings[0]
    assert all(u["data"] is None for u in plan.script["units"])
    assert plan.script["units"][0] == {**plan.script["units"][0], "side": "client", "len": 73}


@pytest.mark.parametrize(
    ("fixture", "keys", "message"),
    [
        ("h2_hol_nodrop", False, "HTTP/2 without TLS keys"),
        ("h3_sse_nodrop", False, "QUIC without keys"),
    ],
)
def test_refusals(fixture: str, keys: bool, message: str) -> None:
    with (
        pcapkit.open(FIX / fixture / "client.pcapng", embedded_keys=keys) as t,
        pytest.raises(ReplayError) as e,
    ):
        derive(t, 0)
    assert message in str(e.value)


def test_h2_frames_replayed_as_captured() -> None:
    with pcapkit.open(FIX / "h2_hol_nodrop" / "client.pcapng") as t:
        plan = derive(t, 0)
    assert plan.script["alpn"] == "h2" and "HTTP/2" in plan.warnings[0]
    first = base64.b64decode(plan.script["units"][0]["data"])
    assert first.startswith(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")  # RFC 9113 §3.4 preface


def test_refuses_a_capture_without_the_handshake(tmp_path: Path) -> None:
    cut = tmp_path / "cut.pcapng"
    subprocess.run(
        ["editcap", "-r", str(FIX / "tls_sse_nagle" / "server.pcapng"), str(cut), "4-56"],
        check=True,
        capture_output=True,
    )
    with pcapkit.open(cut) as t, pytest.raises(ReplayError, match="no TCP handshake"):
        derive(t, 0)
    with pcapkit.open(cut) as t, pytest.raises(ReplayError, match="no flow 7"):
        derive(t, 7)


def test_remedy_names() -> None:
    assert parse_remedy("nodelay") == ("nodelay", None)
    assert parse_remedy("record-size=4096") == ("record-size", 4096)
    for bad in ("record-size", "nodelay=1", "record-size=x", "record-size=0", "fast"):
        with pytest.raises(ValueError):
            parse_remedy(bad)
    assert auto_remedies(["sse_batching", "tcp_cork", "nagle_delayed_ack"]) == [
        "nodelay",
        "uncork",
    ]


def test_cli_usage_and_refusal_exit_codes(tmp_path: Path) -> None:
    r = CliRunner()
    assert r.invoke(cli, ["replay"]).exit_code == 2
    cap = str(FIX / "tls_sse_nagle" / "server.pcapng")
    assert r.invoke(cli, ["replay", "--packets", cap]).exit_code == 2
    res = r.invoke(cli, ["replay", cap, "--flow", "0", "-o", str(tmp_path), "--remedy", "x"])
    assert res.exit_code == 2
    res = r.invoke(cli, ["replay", "--packets", cap, "--into", "eth0"])
    assert res.exit_code == 1 and "NETNS:IFACE" in res.output
    h3 = str(FIX / "h3_sse_nodrop" / "client.pcapng")
    res = r.invoke(cli, ["replay", h3, "--flow", "7", "-o", str(tmp_path / "x")])
    assert res.exit_code == 1
    assert res.output.strip().splitlines()[-1].startswith("pcapkit: error: no flow 7")
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize(
    ("fixture", "vantage", "c2s", "s2c"),
    [
        ("syn_lost", "client", [1], []),  # the client's first SYN went unanswered
        ("synack_lost", "server", [], [1]),  # the server's first SYN/ACK never arrived
        ("syn_ok", "client", [], []),
    ],
)
def test_lost_handshake_packets(fixture: str, vantage: str, c2s: list, s2c: list) -> None:
    with pcapkit.open(FIX / fixture / f"{vantage}.pcapng") as t:
        plan = derive(t, 0)
    assert (plan.drop_syn_c2s, plan.drop_syn_s2c) == (c2s, s2c)


@pytest.mark.parametrize("fixture", ["slow_start_restart", "slow_start_restart_off"])
def test_slow_start_after_idle_from_the_first_flight(fixture: str) -> None:
    with pcapkit.open(FIX / fixture / "server.pcapng") as t:
        plan = derive(t, 0)
    truth = _truth(fixture)["sysctls"]["srv"]["net.ipv4.tcp_slow_start_after_idle"]
    derived = plan.lab_params()["sysctl_srv"].get("net.ipv4.tcp_slow_start_after_idle", 1)
    assert str(derived) == truth


@pytest.mark.parametrize("vantage", ["client", "server"])
@pytest.mark.parametrize(
    "fixture", ["h2_send_buffer", "h2_send_buffer_lowat", "h2_flow_control_large", "tls_sse_nagle"]
)
def test_bottleneck_rate_only_where_the_path_had_one(fixture: str, vantage: str) -> None:
    """1 Mbit/s where the lab set it; none on the unlimited paths (bulk or paced streams)."""
    with pcapkit.open(FIX / fixture / f"{vantage}.pcapng") as t:
        plan = derive(t, 0)
    assert plan.rate_mbit == _truth(fixture)["path"]["s2c"]["rate_mbit"]


@pytest.mark.parametrize(
    "fixture",
    ["rto_lost_retransmission", "rto_tail_loss", "fast_retransmit", "h2_hol_drop", "grpc_stream"],
)
def test_drops_at_the_sender_match_the_forwarder(fixture: str) -> None:
    """Every lost copy, a lost retransmission included, at the forwarder's index."""
    with pcapkit.open(FIX / fixture / "server.pcapng") as t:
        plan = derive(t, 0)
    assert plan.drop_s2c == _truth(fixture)["params"]["drop_s2c"]


def test_reader_pause_and_receive_buffer_from_zero_window() -> None:
    with pcapkit.open(FIX / "zero_window" / "server.pcapng") as t:
        plan = derive(t, 0)
    truth = _truth("zero_window")["params"]
    (pause,) = plan.script["pauses"]
    assert pause["side"] == "client"
    # the reader stopped after read_before_pause bytes, for pause_s: within one window
    assert abs(pause["after_bytes"] - truth["read_before_pause"]) < 8_688
    assert pause["pause_ms"] == pytest.approx(truth["pause_s"] * 1000, rel=0.1)
    assert plan.script["sides"]["client"]["rcvbuf"] == 8_688  # its largest window
    # the RTO copy sent into the closing window was spurious: the original was ACKed
    assert plan.drop_s2c == []


def test_send_buffer_hol_sender_paces_and_the_urgent_request_needs_what_had_arrived() -> None:
    """h2_send_buffer: the backlog stayed in the server's socket because BBR paced it (the
    scenario's cc); the client sent GET /urgent once ~2 DATA records had *arrived* — the
    server's capture saw 24 KB leave by then, most of it still in the 1 Mbit/s queue."""
    with pcapkit.open(FIX / "h2_send_buffer" / "server.pcapng") as t:
        plan = derive(t, 0)
    truth = _truth("h2_send_buffer")
    assert plan.rate_mbit == truth["params"]["rate_mbit"]
    assert plan.cc == truth["params"]["cc"] == "bbr"
    assert plan.lab_params()["cc"] == "bbr"
    urgent = next(
        u
        for u in plan.script["units"]
        if u["side"] == "client"
        and base64.b64decode(u["data"])[3] == 1  # HEADERS
        and int.from_bytes(base64.b64decode(u["data"])[5:9], "big") == 3  # stream 3
    )
    # the server's application bytes that had reached the client when it wrote the request
    sent = truth["ground_truth"]["urgent"]["client_write_ns"]
    with pcapkit.open(FIX / "h2_send_buffer" / "client.pcapng") as t:
        r = t.records
        r = r[(r["flow"] == 0) & (r["dir"] == "s2c") & (r["content_type"] == 23)]
        arrived = int(r[r["last_ts_ns"] < sent]["plaintext_len"].sum())
    assert 0 < urgent["needs"] <= arrived < 24_724
    # notsent-lowat: the backlog stays in the server, the urgent response is its next write
    units = remedied(plan, "notsent-lowat", 16_384)["units"]
    i = next(k for k, u in enumerate(units) if u["data"] == urgent["data"])
    answer = units[i + 1]
    assert answer["side"] == "server" and answer["after"] == "peer"
    head = base64.b64decode(answer["data"])
    assert head[3] == 1 and int.from_bytes(head[5:9], "big") == 3  # stream 3's HEADERS
    before = plan.script["units"]
    assert sorted(u["data"] for u in units) == sorted(u["data"] for u in before)  # same bytes
    j = next(k for k, u in enumerate(before) if u["data"] == answer["data"])
    assert j > i + 1 + 10  # in the capture it left behind ~11 DATA records of stream 1
    with pcapkit.open(FIX / "h2_send_buffer_lowat" / "server.pcapng") as t:
        assert derive(t, 0).cc is None  # no backlog seen in the socket: the lab's cubic
    with pcapkit.open(FIX / "tls_sse_nagle" / "server.pcapng") as t:
        assert "cc" not in derive(t, 0).lab_params()


def test_data_the_closed_window_held_was_queued_when_it_closed() -> None:
    """The original server wrote its 65 536 B with one sendall: what it sent after the
    window reopened was queued when it closed (its zero-window probes say so).  The plan
    writes it then, right after the last write the window let out — not at its wire time
    (338 ms and 1.5 s later), or the replay's window never closes (NOTE-19d)."""
    with pcapkit.open(FIX / "zero_window" / "server.pcapng") as t:
        plan = derive(t, 0)
        zw = t.findings[t.findings["kind"] == "zero_window"].iloc[0]
        p = t.packets[(t.packets["flow"] == 0) & (t.packets["dir"] == "c2s")]
        acked = int(p[p["ts_ns"] <= zw["t_start_ns"]]["rel_ack"].max())
    truth = _truth("zero_window")["params"]
    server = [u for u in plan.script["units"] if u["side"] == "server"]
    assert sum(u["len"] for u in server) == truth["response_len"]
    reopen = next(i for i, u in enumerate(server) if u["delay_ms"] > 1000)
    queued = sum(u["len"] for u in server[:reopen])
    # more than the receiver had taken when its window closed: data waits for the window
    assert queued > acked - 1 > truth["read_before_pause"]
    # and none of it waits for the reader: round-trip clocked at most, no 338 ms write
    assert max(u["delay_ms"] for u in server[:reopen]) < 2 * plan.delay_ms + 5
    # the reopening write comes after the reader's pause (the window update released it)
    (pause,) = plan.script["pauses"]
    assert server[reopen]["delay_ms"] > pause["pause_ms"]


def test_data_a_slow_reader_held_was_queued_when_the_limited_stretch_began() -> None:
    """receiver_limited: the server wrote its 160 KiB with one sendall (scenario.json) and
    sent it at the slow reader's window edge.  The plan writes what left during the
    finding's stretch when the stretch began, not at its wire times (17 writes 10–21 ms
    apart): the replay's own slow reader paces it, not the script as well — paced twice,
    the sender paused with the window open and lost the finding (main: 3 of 10 faithful
    replays at load ~7 and 1 of 8 quiet; with this plan 0 of 10 interleaved with them)."""
    with pcapkit.open(FIX / "receiver_limited" / "server.pcapng") as t:
        plan = derive(t, 0)
    truth = _truth("receiver_limited")["params"]
    server = [u for u in plan.script["units"] if u["side"] == "server"]
    assert sum(u["len"] for u in server) == truth["response_len"]
    waits = [i for i, u in enumerate(server) if u["delay_ms"] > 5]
    # two round-trip waits of slow start before the stretch (cwnd, not the reader) ...
    assert [round(server[i]["delay_ms"]) for i in waits] == [30, 30]
    # ... then, from the stretch on, the rest written at once (before: 17 more waits)
    rest = server[waits[-1] + 1 :]
    assert len(rest) > 17 and max(u["delay_ms"] for u in rest) < 1


@pytest.mark.parametrize("fixture", ["ack_stall", "black_hole", "rto_tail_loss", "tls_sse_drop"])
def test_held_and_lost_return_path_match_the_forwarder(fixture: str) -> None:
    """The client's packets held 1.5 s (ack_stall) or lost from the request on
    (black_hole): the server's copies were not data losses; the plan holds / black-holes
    the client's packets after as many payload packets as the lab did, and gives the
    server the tcp_retries2 it gave up after.  A loss answered at once (rto_tail_loss,
    tls_sse_drop: a copy, then the client's ACK and FIN close together) is no stall."""
    with pcapkit.open(FIX / fixture / "server.pcapng") as t:
        plan = derive(t, 0)
    truth = _truth(fixture)["params"]
    assert plan.drop_s2c == truth["drop_s2c"]
    assert plan.drop_c2s == truth["drop_c2s"]
    want_hole = (
        {} if truth.get("blackhole_c2s_after") is None else {"c2s": truth["blackhole_c2s_after"]}
    )
    want_stall = {} if truth.get("stall_c2s_after") is None else {"c2s": truth["stall_c2s_after"]}
    assert plan.blackhole_after == want_hole
    assert plan.stall_after == want_stall
    params = plan.lab_params()
    if want_stall:
        assert plan.stall_ms == pytest.approx(truth["stall_ms"], rel=0.01)
        assert params["stall_c2s_after"] == truth.get("stall_c2s_after")
        assert params["stall_ms"] == plan.stall_ms
    else:
        assert "stall_c2s_after" not in params and "stall_ms" not in params
    if want_hole:
        assert params["blackhole_c2s_after"] == truth.get("blackhole_c2s_after")
        retries = truth["sysctl_srv"]["net.ipv4.tcp_retries2"]
        assert params["sysctl_srv"]["net.ipv4.tcp_retries2"] == retries
    else:
        assert "blackhole_c2s_after" not in params
        assert "net.ipv4.tcp_retries2" not in params["sysctl_srv"]


def test_units_that_crossed_the_peers_in_flight_do_not_wait_for_them() -> None:
    """h2_sse_nodrop at the server: the client's two requests (SSE stream, download) reached
    the server 3.9 and 4.6 ms after the server's first frames left — less than the 30 ms
    round trip, so the client wrote them before those frames could reach it.  The script
    must not make the client read them first (that cost the replay a round trip per
    request, a tls_record_spanning and 3.7 ms of gap p95).  Request/response (HTTP/1.1)
    keeps every unit waiting for all the peer wrote before it."""
    with pcapkit.open(FIX / "h2_sse_nodrop" / "server.pcapng") as t:
        units = derive(t, 0).script["units"]
    assert [u["side"] for u in units[:4]] == ["server", "client", "server", "client"]
    assert units[1]["needs"] == 0 and units[3]["needs"] == 0
    assert units[1]["after"] == units[3]["after"] == "self"
    # the server's answers still wait for what they answer
    assert units[2]["needs"] == units[1]["len"]
    assert units[4]["needs"] == units[1]["len"] + units[3]["len"]
    # the client's SETTINGS ACK (9 bytes) answered the server's SETTINGS (unit 0) 0.6 ms
    # after it arrived: not the server's frames that left 4–6 ms after unit 0
    assert units[7]["side"] == "client" and units[7]["len"] == 9
    assert units[7]["needs"] == units[0]["len"] and units[7]["after"] == "peer"
    with pcapkit.open(FIX / "tls_sse_nagle" / "server.pcapng") as t:
        units = derive(t, 0).script["units"]
    sent = {"client": 0, "server": 0}
    for u in units:
        assert u["needs"] == sent["server" if u["side"] == "client" else "client"]
        sent[u["side"]] += u["len"]


@pytest.mark.parametrize("vantage", ["client", "server"])
def test_late_session_tickets_are_replayed_late(vantage: str) -> None:
    """h2_sse_nodrop's server sent its NewSessionTickets 3.9 ms after the client's Finished
    (frames 8 → 9 at the server): sent at once, they moved the client's first ACKs 4–5 ms
    earlier and split the first 16 KiB record across a flight break.  The lab's servers
    usually take under 1.5 ms: those are replayed at once."""
    with pcapkit.open(FIX / "h2_sse_nodrop" / f"{vantage}.pcapng") as t:
        assert derive(t, 0).script["tickets_delay_ms"] == pytest.approx(3.9, abs=0.2)
    with pcapkit.open(FIX / "tls_sse_nagle" / f"{vantage}.pcapng") as t:
        assert derive(t, 0).script["tickets_delay_ms"] == 0.0


def _h2_frames_of(units: list, side: str) -> list[tuple[int, int, bytes]]:
    """(type, stream id, payload) of every frame ``side`` writes in ``units``."""
    stream = b"".join(base64.b64decode(u["data"]) for u in units if u["side"] == side)
    off = 24 if stream.startswith(b"PRI * HTTP/2.0") else 0
    out = []
    while off + 9 <= len(stream):
        n = int.from_bytes(stream[off : off + 3], "big")
        sid = int.from_bytes(stream[off + 5 : off + 9], "big")
        out.append((stream[off + 3], sid, stream[off + 9 : off + 9 + n]))
        off += 9 + n
    assert off == len(stream)  # whole frames, nothing left over
    return out


def _bytes_before_first_window_update(units: list, side: str) -> int:
    total = 0
    for u in units:
        if u["side"] != side:
            continue
        if base64.b64decode(u["data"])[3] == 0x8:  # WINDOW_UPDATE first in the unit
            return total
        total += u["len"]
    return total


def test_h2_window_remedy_advertises_the_window_and_frees_the_sender() -> None:
    """h2_flow_control: 160 KiB on one stream under 64 KiB windows; the server's DATA
    waited for the client's WINDOW_UPDATEs.  ``h2-window=16 MiB``: the client's SETTINGS
    carries INITIAL_WINDOW_SIZE 16 MiB and a connection WINDOW_UPDATE of the rest, and no
    server unit waits for a WINDOW_UPDATE any more; ``h2-window=98304``: the 7th DATA
    frame on (cumulative 114 660 B > 98 304) waits for a WINDOW_UPDATE again."""
    with pcapkit.open(FIX / "h2_flow_control" / "server.pcapng") as t:
        plan = derive(t, 0)
    units = plan.script["units"]
    server = [u for u in units if u["side"] == "server"]
    assert max(u["needs"] for u in server) > _bytes_before_first_window_update(units, "client")
    big = remedied(plan, *parse_remedy("h2-window=16777216"))["units"]
    frames = _h2_frames_of(big, "client")
    settings = dict(
        (int.from_bytes(p[i : i + 2], "big"), int.from_bytes(p[i + 2 : i + 6], "big"))
        for kind, sid, p in frames[:1]
        for i in range(0, len(p), 6)
    )
    assert frames[0][0] == 0x4 and settings[0x4] == 16_777_216
    assert settings[0x1] == 4096  # the other settings kept
    assert frames[1][:2] == (0x8, 0)
    assert int.from_bytes(frames[1][2], "big") == 16_777_216 - 65_535
    free = _bytes_before_first_window_update(big, "client")
    assert all(u["needs"] <= free for u in big if u["side"] == "server")
    # the server's frames and the client's other frames unchanged
    assert _h2_frames_of(big, "client")[2:] == _h2_frames_of(units, "client")[1:]
    assert [u["data"] for u in big if u["side"] == "server"][3:] == [u["data"] for u in server][3:]
    small = remedied(plan, *parse_remedy("h2-window=98304"))["units"]
    data = [u for u in small if u["side"] == "server" and u["len"] == 16384]
    free = _bytes_before_first_window_update(small, "client")
    assert [u["needs"] <= free for u in data] == [True] * 6 + [False] * 4
    assert plan.script["units"] == units  # the plan itself unchanged


def test_h2_window_remedy_refused_without_http2() -> None:
    with pcapkit.open(FIX / "tls_sse_nagle" / "server.pcapng") as t:
        plan = derive(t, 0)
    with pytest.raises(ReplayError, match="not HTTP/2"):
        remedied(plan, "h2-window", 1 << 20)
    assert auto_remedies(["h2_flow_control_stall"]) == ["h2-window=16777216"]
    assert parse_remedy("h2-window=2147483647") == ("h2-window", 2**31 - 1)
    for bad in ("h2-window", "h2-window=0", "h2-window=2147483648"):
        with pytest.raises(ValueError):
            parse_remedy(bad)


# ------------------------------------------------------------------------- QUIC / HTTP/3


def _stream_bytes_in_script(units: list, side: str) -> dict[int, bytes]:
    out: dict[int, bytes] = {}
    for u in units:
        if u["side"] == side:
            for piece in u["pieces"]:
                out[piece[0]] = out.get(piece[0], b"") + base64.b64decode(piece[1])
    return out


@pytest.mark.parametrize("vantage", ["client", "server"])
@pytest.mark.parametrize(
    "fixture", ["h3_sse_drop", "h3_sse_nodrop", "h3_streams_drop", "h3_flow_control"]
)
def test_quic_plan_path_and_every_stream_byte_once(fixture: str, vantage: str) -> None:
    """The QUIC plan: the vantage and RTT from the handshake and ACKs (the lab path: 30 ms),
    the lost datagram as the forwarder numbered it (scenario.json), and every stream's
    bytes, both directions, exactly once and in stream order — at the receiver's vantage
    too, where the retransmission that filled a hole arrived after the data behind it."""
    with pcapkit.open(FIX / fixture / f"{vantage}.pcapng") as t:
        plan = derive(t, 0)
        streams = {
            side: {
                sid: bytes(t.quic_stream(0, sid, d)[:])
                for sid in _stream_bytes_in_script(plan.script["units"], side)
            }
            for side, d in (("client", "c2s"), ("server", "s2c"))
        }
    truth = _truth(fixture)["params"]
    assert plan.quic and plan.vantage == vantage
    assert abs(plan.script["source"]["rtt_ms"] - 30.0) < 2.0
    assert plan.drop_s2c == truth["drop_s2c"] and plan.drop_c2s == []
    for side in ("client", "server"):
        assert _stream_bytes_in_script(plan.script["units"], side) == streams[side]
    assert 0 in streams["client"] and 3 in streams["server"]  # request; server control


def test_quic_plan_timing_limits_and_certificate() -> None:
    with pcapkit.open(FIX / "h3_sse_drop" / "client.pcapng") as t:
        sse = derive(t, 0).script
    events = [u for u in sse["units"] if u["side"] == "server" and u["pieces"][0][0] == 0]
    assert len(events) == 20  # one write per event (the first went with the headers)
    # the event whose packet was lost keeps its 50 ms slot (not the retransmission's)
    assert all(40 < u["delay_ms"] < 60 for u in events[1:]), [u["delay_ms"] for u in events]
    with pcapkit.open(FIX / "h3_flow_control" / "server.pcapng") as t:
        fc = derive(t, 0).script
    assert fc["transport"]["client"]["max_stream_data"] == 8192
    body = [u for u in fc["units"] if u["side"] == "server" and u["pieces"][0][0] == 0]
    # the 32 KiB body written at once: the credit stalls are aioquic's to make again
    assert len(body) == 1 and body[0]["len"] > 32_768
    with pcapkit.open(FIX / "h3_amplification_limit" / "server.pcapng") as t:
        big = derive(t, 0)
    assert big.script["cert_extra_sans"] == 250  # truth: cert_extra_sans 250
    assert remedied(big, "smaller-certificate", None)["cert_extra_sans"] == 0
    with pcapkit.open(FIX / "h3_stream_timeout" / "client.pcapng") as t:
        to = derive(t, 0).script
    stops = [p[3] for u in to["units"] if u["side"] == "client" for p in u["pieces"] if p[3:]]
    assert stops == [{"stop": 0x10C}] * 3  # H3_REQUEST_CANCELLED on each of 3 streams


def test_quic_remedies() -> None:
    with pcapkit.open(FIX / "h3_flow_control" / "server.pcapng") as t:
        plan = derive(t, 0)
    wide = remedied(plan, *parse_remedy("quic-window=16777216"))["transport"]
    assert wide["client"]["max_stream_data"] == wide["client"]["max_data"] == 16_777_216
    for name, value in (("h2-window", 1 << 20), ("nodelay", None)):
        with pytest.raises(ReplayError, match="the flow is QUIC"):
            remedied(plan, name, value)
    with pcapkit.open(FIX / "tls_sse_nagle" / "server.pcapng") as t:
        tcp = derive(t, 0)
    for name, value in (("quic-window", 1 << 20), ("smaller-certificate", None)):
        with pytest.raises(ReplayError, match="not QUIC"):
            remedied(tcp, name, value)
    assert auto_remedies(["quic_flow_control_stall", "quic_handshake_extra_rtt"]) == [
        "quic-window=16777216",
        "smaller-certificate",
    ]


def test_http3_remedy_carries_the_h2_requests_and_responses_over() -> None:
    """``--remedy http3`` on h2_hol_drop: the 8 requests (HPACK-decoded in order: the later
    ones use the dynamic table) and their responses become HTTP/3 actions on QUIC streams
    0, 4, … 28; every response's DATA adds up to the body the analysis of the original
    counted; the responses wait for the 8 requests (counted 1 each)."""
    with pcapkit.open(FIX / "h2_hol_drop" / "server.pcapng") as t:
        plan = derive(t, 0)
        bodies = {
            4 * ((int(r.stream) - 1) // 2): int(r.response_body_bytes)
            for r in t.requests.itertuples()
        }
    h3 = remedied(plan, "http3", None)
    assert h3["quic"] and h3["h3"] and h3["alpn"] == "h3"
    acts = [(u["side"], a) for u in h3["units"] for a in u["actions"]]
    requests = [a for side, a in acts if side == "client" and a[0] == "headers"]
    assert [a[1] for a in requests] == list(range(0, 32, 4)) and all(a[3] for a in requests)
    paths = [
        dict((base64.b64decode(n), base64.b64decode(v)) for n, v in a[2])[b":path"]
        for a in requests
    ]
    assert paths == [f"/blob/{i}".encode() for i in range(8)]
    got: dict[int, int] = {}
    for side, a in acts:
        if side == "server" and a[0] == "data":
            got[a[1]] = got.get(a[1], 0) + len(base64.b64decode(a[2]))
    assert got == bodies and len(bodies) == 8
    first = next(u for u in h3["units"] if u["side"] == "server" and u["actions"])
    assert first["needs"] == 8  # the 8 request header blocks
    assert len(h3["units"]) == len(plan.script["units"])  # timing chain kept
    with pcapkit.open(FIX / "tcp_cork" / "server.pcapng") as t:
        raw = derive(t, 0)  # plain TCP, no HTTP
    with pytest.raises(ReplayError, match="not HTTP/1.1 or HTTP/2"):
        remedied(raw, "http3", None)


@pytest.mark.parametrize("fixture", ["tls_sse_drop", "tls_reuse", "server_think"])
def test_http3_remedy_carries_http1_requests_and_responses_over(fixture: str) -> None:
    """HTTP/1.1 (TLS or plain) → HTTP/3: request i on QUIC stream 4i with :method /
    :scheme / :authority (from Host) / :path, the response's :status, no connection-specific
    field; the bodies, de-chunked or by Content-Length, add up to what the analysis of the
    original counted, split over the units that carried them (an SSE event per unit)."""
    with pcapkit.open(FIX / fixture / "server.pcapng") as t:
        plan = derive(t, 0)
        req = t.requests[t.requests["flow"] == 0].sort_values("request_start_ts_ns")
        paths = [str(x).encode() for x in req["path"]]
        bodies = [int(x) for x in req["response_body_bytes"]]
    h3 = remedied(plan, "http3", None)
    acts = [(u["side"], a) for u in h3["units"] for a in u["actions"]]

    def fields(a: list) -> dict[bytes, bytes]:
        return {base64.b64decode(n): base64.b64decode(v) for n, v in a[2]}

    heads = [fields(a) for side, a in acts if side == "client" and a[0] == "headers"]
    assert [h[b":path"] for h in heads] == paths
    assert all(h[b":method"] == b"GET" and h[b":authority"] for h in heads)
    assert not any(b"host" in h or b"connection" in h for h in heads)
    answers = [(a[1], fields(a)) for side, a in acts if side == "server" and a[0] == "headers"]
    assert [sid for sid, _ in answers] == [4 * i for i in range(len(paths))]
    assert all(h[b":status"] == b"200" and b"transfer-encoding" not in h for _, h in answers)
    got = [0] * len(paths)
    for side, a in acts:
        if side == "server" and a[0] == "data":
            got[a[1] // 4] += len(base64.b64decode(a[2]))
    assert got == bodies
    ends = [a for side, a in acts if side == "server" and a[-1] is True]
    assert len(ends) == len(paths)  # each response ends its stream once


def test_slow_reader_and_client_that_gave_up() -> None:
    """receiver_limited: the client read 4 KiB every 10 ms (scenario.json) — the replay's
    client reads the window's step at the window's cadence; stream_timeout: the client
    closed 1 s after its request, mid-response — the replay's client closes then."""
    with pcapkit.open(FIX / "receiver_limited" / "server.pcapng") as t:
        slow = derive(t, 0).script["sides"]["client"]["read_pace"]
    truth = _truth("receiver_limited")["params"]
    assert 4096 <= slow["bytes"] <= 4096 + 128  # one read (+ its TLS framing)
    assert abs(slow["every_ms"] - truth["read_sleep_ms"]) < 1.0
    with pcapkit.open(FIX / "receiver_limited_control" / "server.pcapng") as t:
        assert "read_pace" not in derive(t, 0).script["sides"]["client"]
    for vantage in ("client", "server"):
        with pcapkit.open(FIX / "stream_timeout" / f"{vantage}.pcapng") as t:
            close = derive(t, 0).script["client_close"]
        assert abs(close["delay_ms"] - 1000) < 5  # the client's 1 s deadline
    with pcapkit.open(FIX / "stream_complete" / "server.pcapng") as t:
        assert "client_close" not in derive(t, 0).script


def test_several_connections_their_starts_resumption_and_remedies() -> None:
    """tls_no_reuse: 3 connections, one request each, ~330 ms apart, no resumption;
    tls_resumed: the later ones resume (accepted); tls_resumption_rejected: offered,
    refused.  keep-alive puts the 3 exchanges on one connection (the later requests
    waiting for the responses before them); it refuses connections that overlapped (a
    hedge, a pool) or a client that gave up; session-tickets resumes every later one."""
    with pcapkit.open(FIX / "tls_no_reuse" / "server.pcapng") as t:
        plan = derive_many(t, [0, 1, 2])
        syn = t.flows.set_index("flow")["first_ts_ns"]
    conns = plan.script["connections"]
    assert [c["flow"] for c in conns] == [0, 1, 2]
    assert [c["start_ms"] for c in conns] == [
        round((int(syn[f]) - int(syn[0])) / 1e6, 3) for f in (0, 1, 2)
    ]
    assert [c["resume"] for c in conns] == [False] * 3
    one = remedied(plan, "keep-alive", None)
    assert "connections" not in one and len(one["units"]) == 6
    sides = [u["side"] for u in one["units"]]
    assert sides == ["client", "server"] * 3
    req = [u for u in one["units"] if u["side"] == "client"]
    assert req[1]["needs"] == one["units"][1]["len"]  # after the first response
    assert 200 < req[1]["delay_ms"] < 330  # the request came when the connection would have
    tickets = remedied(plan, "session-tickets", None)["connections"]
    assert [(c["resume"], c["server_resumes"]) for c in tickets][1:] == [(True, True)] * 2
    for fixture, flows, resume, accepted in (
        ("tls_resumed", [0, 1, 2, 3], True, True),
        ("tls_resumption_rejected", [0, 1, 2, 3], True, False),
    ):
        with pcapkit.open(FIX / fixture / "server.pcapng") as t:
            c = derive_many(t, flows).script["connections"]
        assert [x["resume"] for x in c] == [False] + [resume] * 3
        assert [x["server_resumes"] for x in c][1:] == [accepted] * 3
    for fixture, flows, message in (
        ("hedged_duplicate", [0, 1], "overlapped"),
        ("connection_pool_queueing", [0, 1], "overlapped"),
        ("stream_timeout", [0, 1, 2], "gave up"),
    ):
        with pcapkit.open(FIX / fixture / "server.pcapng") as t:
            many = derive_many(t, flows)
        with pytest.raises(ReplayError, match=message):
            remedied(many, "keep-alive", None)
    with pcapkit.open(FIX / "tls_sse_drop" / "server.pcapng") as t:
        with pytest.raises(ReplayError, match="needs several connections"):
            remedied(derive(t, 0), "keep-alive", None)


def test_several_quic_connections_resumption_and_zero_rtt() -> None:
    """h3_resumed_no_0rtt / h3_resumed_0rtt: the second connection resumes (a pre-shared
    key in its ClientHello); only the 0rtt fixture sent 0-RTT packets (both *offered*
    early data: aioquic always does).  zero-rtt makes the resumed one send in 0-RTT."""
    for fixture, early in (("h3_resumed_no_0rtt", False), ("h3_resumed_0rtt", True)):
        with pcapkit.open(FIX / fixture / "server.pcapng") as t:
            plan = derive_many(t, [0, 1])
        c = plan.script["connections"]
        assert plan.quic and plan.script["quic"]
        assert [(x["resume"], x["early_data"]) for x in c] == [(False, False), (True, early)]
        assert 400 < c[1]["start_ms"] < 450  # the lab client's second connection
        fixed = remedied(plan, "zero-rtt", None)["connections"]
        assert [x["early_data"] for x in fixed] == [False, True]
    with pcapkit.open(FIX / "h3_flow_control" / "server.pcapng") as t:
        with pytest.raises(ReplayError, match="several QUIC connections"):
            remedied(derive(t, 0), "zero-rtt", None)
    assert auto_remedies(["zero_rtt_unused"]) == ["zero-rtt"]


@needs_corpus
def test_foreign_quic_captures_plan_or_refuse() -> None:
    """QUIC that is not the lab's: The Illustrated QUIC Connection (keys given) plans its
    one ping / pong (4 B each way, client vantage); Wireshark's fragmented-handshakes
    capture (packet numbers unknown where keys are missing) is refused, never a crash."""
    iq = CORPUS / "illustrated-quic"
    with pcapkit.open(iq / "capture.pcap", keylog=str(iq / "keylog.txt")) as t:
        plan = derive(t, 0)
    assert plan.quic and plan.vantage == "client"
    assert [(u["side"], u["len"]) for u in plan.script["units"]] == [("client", 4), ("server", 4)]
    with pcapkit.open(CORPUS / "wireshark" / "quic-fragmented-handshakes.pcapng.gz") as t:
        flows = [int(f) for f in t.flows["flow"]]
        for f in flows:
            try:
                derive(t, f)
            except ReplayError:
                pass
        with pytest.raises(ReplayError):
            derive_many(t, flows[:3])
