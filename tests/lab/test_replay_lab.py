"""Replay through the lab (issue 19): real runs, needs root.

Three socket-level replays (a Nagle × delayed-ACK SSE stream and a corked server, each
faithful + its remedy: ~8 s each; the client's packets held 1.5 s: ~4 s) and one packet-level replay onto a veth pair in a
namespace, captured at the peer.  Assertions are on findings and bytes, never on timing.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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


def _ip_frames(path: Path) -> list[bytes]:
    with pcapkit.open(path) as t:
        return [t.frame_bytes(i) for i in range(1, t.raw.frames + 1)]


def _lost(sent: list[bytes], got: list[bytes]) -> list[int]:
    """1-based indices of ``sent`` frames missing from ``got`` (matched in order)."""
    out, j = [], 0
    for i, frame in enumerate(sent, 1):
        if j < len(got) and got[j] == frame:
            j += 1
        else:
            out.append(i)
    return out


def _ranges(idx: list[int]) -> str:
    """[33, 34, 35, 40] → "33-35,40"."""
    runs: list[list[int]] = []
    for i in idx:
        if runs and runs[-1][1] == i - 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs) or "none"


@contextlib.contextmanager
def _veth(tag: str, *, peer_up: bool = True) -> Iterator[str]:
    """A namespace with a veth pair pk0 ↔ pk1, both up (pk1 left down with peer_up=False)."""
    ns = f"pkrp-{tag}-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        ip = ["ip", "-n", ns, "link"]
        subprocess.run([*ip, "add", "pk0", "type", "veth", "peer", "name", "pk1"], check=True)
        for dev in ("pk0", "pk1") if peer_up else ("pk0",):
            subprocess.run([*ip, "set", dev, "up"], check=True)
        yield ns
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=False)


def _replay_captured(
    tmp_path: Path, ns: str, src: Path, *extra: str, loop: int = 1
) -> tuple[dict[str, Any], list[bytes]]:
    """Replay ``src`` onto NS:pk0 at --max while the capture on pk1 is stopped (SIGSTOP:
    its reader not scheduled for the whole burst, as on the loaded CI machine); resume it,
    wait until every frame is in the file, stop it.  Returns the replay's report and the
    IP packets captured; fails naming the frames lost and the capture's counters."""
    from pcapkit.lab.errors import CaptureError
    from pcapkit.lab.netns import Capture

    cap = Capture(ns, "pk1", tmp_path / "peer.pcap", bpf="ip")
    cap.start()
    sent = _ip_frames(src) * loop
    try:
        assert cap.proc is not None
        assert Path(f"/proc/{cap.proc.pid}/comm").read_text().strip() == "tcpdump"
        os.kill(cap.proc.pid, signal.SIGSTOP)
        try:
            res = CliRunner().invoke(
                cli,
                ["replay", "--packets", str(src), "--into", f"{ns}:pk0", "--max"]
                + ["--loop", str(loop), "--json", *extra],
            )
        finally:
            os.kill(cap.proc.pid, signal.SIGCONT)
        # every frame written (pcap header, then per frame 16 + 14 Ethernet + IP bytes)
        # before tcpdump is stopped: at SIGINT it writes what it has read and leaves the
        # rest of its ring unread ("received by filter" > "captured")
        want = 24 + sum(16 + 14 + len(b) for b in sent)
        deadline = time.monotonic() + 15
        while (
            time.monotonic() < deadline
            and (cap.path.stat().st_size if cap.path.exists() else 0) < want
        ):
            time.sleep(0.05)
    finally:
        try:
            cap.stop()
            why = ""
        except CaptureError as e:
            why = str(e)
    assert res.exit_code == 0, res.output
    report = json.loads(res.output)
    got = [b[14:] for b in _ip_frames(cap.path)] if cap.path.exists() else []
    lost = _lost(sent, got)
    assert not lost and not why and len(got) == len(sent), (
        f"{len(got)} of {len(sent)} frames captured on pk1; lost frames {_ranges(lost)}; "
        f"tcpdump: {cap.stats} {why}; replay: {report}"
    )
    return report, got


def test_packet_replay_onto_a_namespace_veth(tmp_path: Path) -> None:
    """The capture's 56 frames at ``--max`` onto a veth, captured at its peer, byte for
    byte and in order.  The capture's reader is stopped for the whole replay: in two full
    CI runs (2026-12-02) a test tcpdump with libpcap's default 2 MiB buffer kept the first
    32 of 56 frames and counted 24 "dropped by kernel" — veth advertises TSO/GSO, so
    libpcap sizes each ring slot for a 64 KiB packet and a 2 MiB ring holds 32 (1 MiB: 16,
    4 MiB: 64, measured with the reader stopped), and a reader not scheduled during the
    0.4 ms burst overflows it (5 of 10 runs beside two CPU hogs; 0 of 10 with the lab's
    128 MiB ring).  The lab's :class:`Capture` has that ring and fails on kernel drops."""
    src = FIX / "tls_sse_nagle" / "client.pcapng"
    with _veth("a") as ns:
        report, _ = _replay_captured(tmp_path, ns, src)
        assert report["packets"] == 56 and report["send_failed"] == 0
        assert report["dropped_at_iface"] == 0
        host = CliRunner().invoke(cli, ["replay", "--packets", str(src), "--into", "pk0"])
        assert host.exit_code == 1 and "--host-iface" in host.output


def test_packet_replay_refuses_an_interface_without_carrier(tmp_path: Path) -> None:
    """A veth whose peer is down has no carrier: the kernel drops every frame after the
    send call returns (the replay used to report 56 sent while the veth counted 56
    tx_dropped).  Now it waits for the carrier, then refuses, naming the state."""
    src = FIX / "tls_sse_nagle" / "client.pcapng"
    with _veth("c", peer_up=False) as ns:
        res = CliRunner().invoke(cli, ["replay", "--packets", str(src), "--into", f"{ns}:pk0"])
        assert res.exit_code == 1
        assert "pk0 is not ready to send (carrier 0, operstate lowerlayerdown)" in res.output


def test_packet_replay_resends_what_a_full_queue_refused(tmp_path: Path) -> None:
    """A token bucket (256 kbit/s, 4 kB queue) on the sending veth: at ``--max`` its queue
    fills and the kernel answers ENOBUFS — which used to end the replay with a traceback
    after 179 of 1,120 frames.  The frames are sent again until the queue takes them:
    all 280 arrive at the peer, in order, and the report counts the retries."""
    src = FIX / "tls_sse_nagle" / "client.pcapng"
    with _veth("q") as ns:
        tc = ["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", "pk0", "root", "tbf"]
        subprocess.run([*tc, "rate", "256kbit", "burst", "4000", "limit", "4000"], check=True)
        report, got = _replay_captured(tmp_path, ns, src, loop=5)
        assert report["packets"] == len(got) == 280 and report["send_failed"] == 0
        assert report["send_retries"] > 0


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
    # (failed once beside CPU hogs at load ~8, 2026-12-02: 185.9 vs 164.6 ms; 96–127 ms in 9
    # reruns; not diagnosed — the message says whether the forwarder logged a stall then)
    stalls = {
        r: json.loads((tmp_path / r / "scenario.json").read_text())["forwarder"]["stalls"]
        for r in ("faithful", "remedy-h2-window=16777216")
        if (tmp_path / r / "scenario.json").is_file()
    }
    assert rem["ttlb_ms"] < runs["faithful"]["ttlb_ms"], (rem["ttlb_ms"], stalls)
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


def _edge_pauses(run: Path) -> list[str]:
    """receiver_limited's count of the server's pauses at the window edge, with the share
    and cost thresholds lifted (what a missing finding fell short of)."""
    from pcapkit.detect import receiver_limited

    with pcapkit.open(run / "server.pcapng") as t:
        found = receiver_limited.detect(t.detect_context, min_share=0.0, min_cost_ms=0.0)
        return [f.checks[0] for f in found]


def test_slow_reader_and_early_close_replayed(tmp_path: Path) -> None:
    """receiver_limited: the replay's client reads as slowly as the original's (the
    finding comes back); stream_timeout: the replay's client closes mid-response (its FIN
    before the server's, the response incomplete).  One attempt: the faithful replay that
    lost the finding had its server paced twice — by the script's write times and by the
    slow reader — and paused with the window open (7 of 16 pauses at the edge, under the
    detector's half); the plan now queues what the limited stretch sent when it began.
    Lost: main 3 of 10 (interleaved A/B at load ~7) and 1 of 8 quiet; this plan 0 of 28
    (those 10, 8 quiet, 10 beside two CPU hogs; 6–17 of 10–20 pauses at the edge).  A
    failure shows the pauses at the edge."""
    s = _replay(tmp_path / "rl", "receiver_limited")
    kinds = s["runs"]["faithful"]["kinds"]
    assert "receiver_limited" in kinds, (kinds, _edge_pauses(tmp_path / "rl" / "faithful"))
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
