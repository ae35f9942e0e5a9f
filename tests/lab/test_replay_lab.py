"""Replay through the lab (issue 19): real runs, needs root.

Three socket-level replays (a Nagle × delayed-ACK SSE stream and a corked server, each
faithful + its remedy: ~8 s each; the client's packets held 1.5 s: ~4 s) and one packet-level replay onto a veth pair in a
namespace, captured at the peer.  Assertions are on findings and bytes, never on timing.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

import pcapkit
from pcapkit.cli import cli

pytestmark = [pytest.mark.lab, pytest.mark.usefixtures("lab_ready")]
FIX = Path(__file__).resolve().parents[2] / "fixtures"


def _replay(tmp: Path, fixture: str, *remedy: str) -> dict:
    args = ["replay", str(FIX / fixture / "server.pcapng"), "--flow", "0", "-o", str(tmp)]
    for r in remedy:
        args += ["--remedy", r]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    assert "faithful replay" in res.output
    return json.loads((tmp / "summary.json").read_text())


def test_sse_nagle_replayed_and_nodelay_removes_the_hold(tmp_path: Path) -> None:
    s = _replay(tmp_path, "tls_sse_nagle", "auto")
    runs = s["runs"]
    assert set(runs) == {"original", "faithful", "remedy-nodelay"}
    for run in ("faithful", "remedy-nodelay"):
        for end in ("client", "server"):
            with pcapkit.open(tmp_path / run / f"{end}.pcapng") as t:
                assert t.embedded_keys  # keys in the capture: the replay is decryptable
                assert (t.records["status"] == "decrypted").any()
                assert len(t.requests) == 1 and int(t.requests["events"].iloc[0]) == 20
    assert "nagle_delayed_ack" in runs["original"]["kinds"]
    assert "nagle_delayed_ack" in runs["faithful"]["kinds"]
    assert "nagle_delayed_ack" not in runs["remedy-nodelay"]["kinds"]
    assert runs["remedy-nodelay"]["remedy"]["addressed_gone"] is True
    assert runs["faithful"]["ttfb_ms"] is not None
    assert (tmp_path / "diff-nodelay.txt").read_text().strip()


def test_cork_replayed_and_uncork_removes_it(tmp_path: Path) -> None:
    s = _replay(tmp_path, "tcp_cork", "uncork")
    runs = s["runs"]
    assert s["sides"]["server"]["cork"] is True
    assert list(runs["faithful"]["kinds"]) == ["tcp_cork"]
    assert runs["faithful"]["kinds"]["tcp_cork"]["count"] == 4  # every write corked
    assert runs["remedy-uncork"]["kinds"] == {}


def test_held_client_packets_are_no_loss_in_the_replay(tmp_path: Path) -> None:
    """ack_stall: the client's packets held 1.5 s.  Replayed as a hold of the client's
    packets, the server's copies are spurious again: no loss_recovery / rto_stall (which
    a replay that read them as data losses showed)."""
    s = _replay(tmp_path, "ack_stall")
    assert s["path"]["stall_after"] == {"c2s": 1}
    assert s["path"]["drop_s2c"] == []
    assert s["runs"]["original"]["kinds"] == {}
    assert s["runs"]["faithful"]["kinds"] == {}
    with pcapkit.open(tmp_path / "faithful" / "server.pcapng") as t:
        seg = t.segments
        assert (seg["kind"] == "retransmission").any()  # the server did resend meanwhile


def test_zero_window_replayed_with_the_data_queued(tmp_path: Path) -> None:
    """zero_window: the reader pauses and the server has the rest of its response queued
    (written when the window closed, not at its wire times): the replay's client
    advertises a zero window and the server probes it, as in the original."""
    s = _replay(tmp_path, "zero_window")
    assert s["sides"]["client"]["rcvbuf"] == 8_688
    assert "zero_window" in s["runs"]["original"]["kinds"]
    assert "zero_window" in s["runs"]["faithful"]["kinds"]
    with pcapkit.open(tmp_path / "faithful" / "server.pcapng") as t:
        p = t.packets
        assert ((p["dir"] == "c2s") & (p["window"] == 0)).any()
        assert (t.segments["kind"] == "zero_window_probe").any()
        assert int(t.segments[t.segments["dir"] == "s2c"]["new_bytes"].sum()) == 65_536


def test_send_buffer_hol_replayed_and_notsent_lowat_removes_it(tmp_path: Path) -> None:
    """h2_send_buffer: a pacing (BBR) server behind 1 Mbit/s, the urgent request sent once
    the first DATA arrived: its response leaves behind the stream-1 backlog in the socket;
    with TCP_NOTSENT_LOWAT the backlog stays in the server and the response goes first."""
    s = _replay(tmp_path, "h2_send_buffer", "auto")
    runs = s["runs"]
    assert s["path"]["cc"] == "bbr" and s["path"]["rate_mbit"] == 1.0
    assert "h2_send_buffer_hol" in runs["original"]["kinds"]
    assert "h2_send_buffer_hol" in runs["faithful"]["kinds"]
    assert "h2_send_buffer_hol" not in runs["remedy-notsent-lowat=16384"]["kinds"]
    assert runs["remedy-notsent-lowat=16384"]["remedy"]["addressed_gone"] is True


@pytest.mark.skipif(shutil.which("ip") is None, reason="needs ip")
def _ip_frames(path: Path) -> list[bytes]:
    with pcapkit.open(path) as t:
        return [t.frame_bytes(i) for i in range(1, t.raw.frames + 1)]


def test_packet_replay_onto_a_namespace_veth(tmp_path: Path) -> None:
    """Two attempts: run after the rest of the suite, the veth capture lost frames at
    ``--max`` rate (32 of 56, in both full CI runs of 2026-12-02; never in 7 runs alone)."""
    try:
        _packet_replay_once(tmp_path / "a")
    except AssertionError:
        _packet_replay_once(tmp_path / "b")


def _packet_replay_once(tmp_path: Path) -> None:
    tmp_path.mkdir()
    ns = f"pkrp-{os.getpid()}"
    cap = tmp_path / "peer.pcap"
    src = FIX / "tls_sse_nagle" / "client.pcapng"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        ip = ["ip", "-n", ns, "link"]
        subprocess.run([*ip, "add", "pk0", "type", "veth", "peer", "name", "pk1"], check=True)
        for dev in ("pk0", "pk1"):
            subprocess.run([*ip, "set", dev, "up"], check=True)
        dump = subprocess.Popen(
            ["ip", "netns", "exec", ns, "tcpdump", "-i", "pk1", "--immediate-mode"]
            + ["-U", "-w", str(cap), "ip"],
            stderr=subprocess.PIPE,
        )
        # tcpdump's socket must be open before the first frame: wait for its "listening
        # on" line (as the lab does), never a fixed sleep (1 s was not enough under load)
        assert dump.stderr is not None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            line = dump.stderr.readline().decode(errors="replace")
            if "listening on" in line or not line:
                break
        assert "listening on" in line, line
        res = CliRunner().invoke(
            cli, ["replay", "--packets", str(src), "--into", f"{ns}:pk0", "--max", "--json"]
        )
        # every frame written (pcap header, then per frame 16 + 14 Ethernet + IP bytes)
        # before tcpdump is stopped: without immediate mode libpcap hands over a block of
        # packets only when it fills or its timeout passes, and a stop before that lost
        # them all ("0 packets captured, 56 received by filter")
        want = 24 + 56 * (16 + 14) + sum(len(b) for b in _ip_frames(src))
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and (cap.stat().st_size if cap.exists() else 0) < want:
            time.sleep(0.05)
        dump.send_signal(signal.SIGINT)  # tcpdump flushes and closes the file on SIGINT
        dump.wait(10)
        assert res.exit_code == 0, res.output
        assert json.loads(res.output)["packets"] == 56
        with pcapkit.open(src) as a, pcapkit.open(cap) as b:
            assert b.raw.frames == a.raw.frames == 56
            # same IP packets, in order, after the veth's Ethernet header
            for i in range(1, 57):
                assert b.frame_bytes(i)[14:] == a.frame_bytes(i)
        host = CliRunner().invoke(cli, ["replay", "--packets", str(src), "--into", "pk0"])
        assert host.exit_code == 1 and "--host-iface" in host.output
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=False)


def test_h2_window_remedy_removes_the_flow_control_stall(tmp_path: Path) -> None:
    """h2_flow_control (64 KiB windows): the faithful replay stalls on credit as the
    original did; with the client advertising 16 MiB (``--remedy auto``) the stall is gone
    and the response's last byte comes sooner (measured: 96.9 vs 166.9 ms)."""
    s = _replay(tmp_path, "h2_flow_control", "auto")
    runs = s["runs"]
    assert set(runs) == {"original", "faithful", "remedy-h2-window=16777216"}
    assert "h2_flow_control_stall" in runs["faithful"]["kinds"]
    rem = runs["remedy-h2-window=16777216"]
    assert "h2_flow_control_stall" not in rem["kinds"]
    assert rem["remedy"]["addressed_gone"] is True
    assert rem["ttlb_ms"] < runs["faithful"]["ttlb_ms"]
    with pcapkit.open(tmp_path / "remedy-h2-window=16777216" / "server.pcapng") as t:
        req = t.requests
        assert len(req) == 1 and int(req["response_body_bytes"].iloc[0]) == 160 * 1024


def test_http3_replayed_over_aioquic_and_quic_window_removes_the_stall(tmp_path: Path) -> None:
    """h3_flow_control (the client grants 8 KiB per stream): the QUIC replay — aioquic at
    both ends, the capture's decrypted stream bytes, the client's transport parameters —
    stalls on credit as the original did; ``--remedy auto`` (quic-window=16 MiB) does not."""
    s = _replay(tmp_path, "h3_flow_control", "auto")
    runs = s["runs"]
    assert set(runs) == {"original", "faithful", "remedy-quic-window=16777216"}
    assert s["sides"]["client"]["max_stream_data"] == 8192
    assert "quic_flow_control_stall" in runs["faithful"]["kinds"]
    rem = runs["remedy-quic-window=16777216"]
    assert rem["kinds"] == {} and rem["remedy"]["addressed_gone"] is True
    for run in ("faithful", "remedy-quic-window=16777216"):
        with pcapkit.open(tmp_path / run / "client.pcapng") as t:
            assert t.embedded_keys
            req = t.requests
            assert len(req) == 1 and req["protocol"].iloc[0] == "h3"
            assert int(req["response_body_bytes"].iloc[0]) == 32_768


def test_http3_sse_drop_replayed_with_its_loss(tmp_path: Path) -> None:
    s = _replay(tmp_path, "h3_sse_drop")
    assert s["path"]["drop_s2c"] == [14]  # the forwarder's datagram index (scenario.json)
    assert list(s["runs"]["faithful"]["kinds"]) == ["h3_single_stream_hol"]
    with pcapkit.open(tmp_path / "faithful" / "server.pcapng") as t:
        assert int(t.requests["events"].iloc[0]) == 20


def test_http3_remedy_moves_an_h2_exchange_onto_quic(tmp_path: Path) -> None:
    """h2_hol_drop with ``--remedy http3``: the same 8 requests and responses over aioquic;
    the lost packet no longer blocks every stream behind it (tcp_hol_blocking gone)."""
    s = _replay(tmp_path, "h2_hol_drop", "http3")
    runs = s["runs"]
    assert "tcp_hol_blocking" in runs["faithful"]["kinds"]
    assert "tcp_hol_blocking" not in runs["remedy-http3"]["kinds"]
    with (
        pcapkit.open(tmp_path / "faithful" / "client.pcapng") as h2,
        pcapkit.open(tmp_path / "remedy-http3" / "client.pcapng") as h3,
    ):
        assert set(h3.requests["protocol"]) == {"h3"} and len(h3.requests) == 8
        assert sorted(h3.requests["response_body_bytes"]) == sorted(
            h2.requests["response_body_bytes"]
        )
        assert sorted(h3.requests["path"]) == sorted(h2.requests["path"])


def test_slow_reader_and_early_close_replayed(tmp_path: Path) -> None:
    """receiver_limited: the replay's client reads as slowly as the original's (the
    finding comes back); stream_timeout: the replay's client closes mid-response (its FIN
    before the server's, the response incomplete).  The slow reader is real timing: on the
    2-core build machine, quiet, 1 replay in 5 lost its reading pause (no finding, the
    same with main's detectors of the session before) — two attempts."""
    for attempt in range(2):
        s = _replay(tmp_path / f"rl{attempt}", "receiver_limited")
        if "receiver_limited" in s["runs"]["faithful"]["kinds"]:
            break
    assert "receiver_limited" in s["runs"]["faithful"]["kinds"]
    _replay(tmp_path / "st", "stream_timeout")
    with pcapkit.open(tmp_path / "st" / "faithful" / "server.pcapng") as t:
        assert not bool(t.requests["complete"].iloc[0])
        p = t.packets
        fin = p[(p["tcp_flags"].astype("int64") & 0x01) > 0]
        assert fin["dir"].iloc[0] == "c2s"  # the client closed first


def _replay_flows(tmp: Path, fixture: str, flows: list[int], *remedy: str) -> dict:
    args = ["replay", str(FIX / fixture / "server.pcapng"), "-o", str(tmp)]
    for f in flows:
        args += ["--flow", str(f)]
    for r in remedy:
        args += ["--remedy", r]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    return json.loads((tmp / "summary.json").read_text())


def test_several_connections_keep_alive_and_session_tickets(tmp_path: Path) -> None:
    """tls_no_reuse's 3 connections replayed together reproduce connection_not_reused and
    tls_resumption_missing; keep-alive (one connection) removes both, session-tickets
    (each later connection resumes) the second.  tls_resumption_rejected: the offered
    tickets are refused again (a server context with other ticket keys)."""
    s = _replay_flows(tmp_path / "a", "tls_no_reuse", [0, 1, 2], "auto")
    runs = s["runs"]
    assert set(runs["faithful"]["kinds"]) == {"connection_not_reused", "tls_resumption_missing"}
    assert runs["remedy-keep-alive"]["remedy"]["addressed_gone"] is True
    assert "tls_resumption_missing" not in runs["remedy-session-tickets"]["kinds"]
    with pcapkit.open(tmp_path / "a" / "remedy-keep-alive" / "server.pcapng") as t:
        assert len(t.flows) == 1 and len(t.requests) == 3
    with pcapkit.open(tmp_path / "a" / "remedy-session-tickets" / "server.pcapng") as t:
        assert t.tls["resumption_accepted"].tolist() == [False, True, True]
    r = _replay_flows(tmp_path / "b", "tls_resumption_rejected", [0, 1, 2, 3])
    assert "tls_resumption_missing" in r["runs"]["faithful"]["kinds"]
    with pcapkit.open(tmp_path / "b" / "faithful" / "server.pcapng") as t:
        assert t.tls["resumption_offered"].tolist() == [False, True, True, True]
        assert not t.tls["resumption_accepted"].any()


def test_several_connections_client_timeout_and_a_hedge(tmp_path: Path) -> None:
    """stream_timeout's 3 connections (each given up after 1 s) bring client_timeout back
    (it takes 2 cancels: one connection cannot show it), and, as in the original, no
    connection_not_reused (an HTTP/1.1 client cancels by closing), so auto proposes no
    keep-alive.  hedged_duplicate: the hedge resumes the session of the connection still
    streaming (no tls_resumption_missing)."""
    s = _replay_flows(tmp_path / "a", "stream_timeout", [0, 1, 2], "auto")
    assert "client_timeout" in s["runs"]["faithful"]["kinds"]
    assert "connection_not_reused" not in s["runs"]["faithful"]["kinds"]
    assert not any(k.startswith("remedy-keep-alive") for k in s["runs"]), s["runs"].keys()
    h = _replay_flows(tmp_path / "b", "hedged_duplicate", [0, 1])
    assert list(h["runs"]["faithful"]["kinds"]) == ["retry_amplification"]
    with pcapkit.open(tmp_path / "b" / "faithful" / "server.pcapng") as t:
        assert t.tls["resumption_accepted"].tolist() == [False, True]


def test_quic_resumption_replayed_and_zero_rtt_removes_the_wait(tmp_path: Path) -> None:
    """h3_resumed_no_0rtt's two QUIC connections: the second resumes with the first's
    ticket and waits for the handshake (zero_rtt_unused, as captured); ``auto`` (zero-rtt)
    sends its request in 0-RTT packets and the finding is gone."""
    s = _replay_flows(tmp_path, "h3_resumed_no_0rtt", [0, 1], "auto")
    runs = s["runs"]
    assert "zero_rtt_unused" in runs["faithful"]["kinds"]
    assert runs["remedy-zero-rtt"]["remedy"]["addressed_gone"] is True
    with pcapkit.open(tmp_path / "remedy-zero-rtt" / "client.pcapng") as t:
        q = t.quic_packets
        assert ((q["flow"] == 1) & (q["packet_type"] == "0rtt")).any()
        assert not ((q["flow"] == 0) & (q["packet_type"] == "0rtt")).any()
