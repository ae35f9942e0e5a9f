"""End-to-end lab runs: real namespaces, real kernel TCP, captures judged by tshark.

The properties come from issue 4 and DETECTION.md §2.2: with Nagle on, the 2nd write of each
exchange (after the first, quick-ACKed one) leaves ≤ 1 ms after the ACK that released it and
≥ 35 ms after the 1st write's segment; with TCP_NODELAY both writes leave within 1 ms; the
handshake RTT is within 10 % of 2 × delay; a dropped packet is missing at the receiver and
present, then retransmitted, at the sender; nothing is left behind, even after a crash.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.lab, pytest.mark.usefixtures("lab_ready")]

MS = 1_000_000
CLIENT_IP, SERVER_IP = "10.77.0.1", "10.77.0.2"
ROOT = Path(__file__).resolve().parents[2]
FIXTURE_BUDGET_BYTES = 200_000  # issue 4: each capture well under ~200 KB

Doc = dict[str, Any]
Rows = list[Doc]


def handshake_rtt_ns(rows: Rows) -> int:
    syn = next(r for r in rows if r["syn"] and not r["ackf"] and r["src"] == CLIENT_IP)
    synack = next(r for r in rows if r["syn"] and r["ackf"] and r["src"] == SERVER_IP)
    return int(synack["ts_ns"] - syn["ts_ns"])


def data(rows: Rows, src: str) -> Rows:
    return [r for r in rows if r["src"] == src and r["len"] > 0]


def exchange_segments(rows: Rows, doc: Doc) -> list[tuple[Doc, Doc]]:
    """(header segment, body segment) per exchange, first transmissions, Wireshark rel. seq."""
    p = doc["params"]
    req = p["header_len"] + p["body_len"]
    cdata = data(rows, CLIENT_IP)
    out = []
    for i in range(p["exchanges"]):
        s1 = next(r for r in cdata if r["seq"] == 1 + i * req)
        s2 = next(
            r for r in cdata if r["seq"] <= 1 + i * req + p["header_len"] < r["seq"] + r["len"]
        )
        out.append((s1, s2))
    return out


def releasing_ack(rows: Rows, s1: Doc) -> Doc:
    end = s1["seq"] + s1["len"]
    return next(
        r for r in rows if r["src"] == SERVER_IP and r["ts_ns"] > s1["ts_ns"] and r["ack"] >= end
    )


# --------------------------------------------------------------------------- Nagle


def test_nagle_second_write_waits_for_the_delayed_ack(
    lab_run: Callable[..., tuple[Path, Doc]], tshark: Callable[..., Rows]
) -> None:
    out, doc = lab_run("nagle_wwr")
    rows = tshark(out / "client.pcapng")
    rtt = 2 * doc["params"]["delay_ms"] * MS
    pairs = exchange_segments(rows, doc)
    assert len(pairs) >= 5
    for i, (s1, s2) in enumerate(pairs):
        assert s1 is not s2 and s1["len"] == s2["len"] == 100
        ack = releasing_ack(rows, s1)
        assert ack["ts_ns"] <= s2["ts_ns"], f"exchange {i + 1}: body left before the ACK"
        assert s2["ts_ns"] - ack["ts_ns"] <= 1 * MS, f"exchange {i + 1}: not released by ACK"
        if i == 0:  # quick-ACK mode: Nagle alone, one RTT (DETECTION.md §2.2)
            assert s2["ts_ns"] - s1["ts_ns"] >= 0.9 * rtt
        else:
            assert ack["len"] == 0, f"exchange {i + 1}: releasing ACK is not pure"
            assert s2["ts_ns"] - s1["ts_ns"] >= 35 * MS, f"exchange {i + 1}: not held"


def test_nagle_server_delayed_ack_matches_ground_truth(
    lab_run: Callable[..., tuple[Path, Doc]], tshark: Callable[..., Rows]
) -> None:
    out, doc = lab_run("nagle_wwr")
    rows = tshark(out / "server.pcapng")  # receiver vantage: delack = ACK sent − S1 arrived
    truth = doc["ground_truth"]["exchanges"]
    late: list[str] = []
    for i, (s1, _) in enumerate(exchange_segments(rows, doc)):
        if i == 0:
            continue
        ack = releasing_ack(rows, s1)
        delack_ms = (ack["ts_ns"] - s1["ts_ns"]) / MS
        assert 35 <= delack_ms <= 60, f"exchange {i + 1}: {delack_ms} ms is not Linux's delack"
        # forwarder − capture = (ACK read − ACK captured) + (S1 captured − S1's write stamp):
        # both ≥ 0 (the forwarder stamps S1 before its TUN write, and the server's capture
        # stamps S1 inside that write), so the lower bound is exact.  Stamped after the
        # write, S1's stamp came 12–243 µs after the capture's and this went to −0.066 ms
        # (2 of 9 runs on 2026-12-02).
        slack = truth[i]["server_ack_delay_ms"] - delack_ms
        assert slack >= 0, f"exchange {i + 1}: forwarder − capture = {slack:.3f} ms"
        if slack >= 3.0:
            late.append(f"exchange {i + 1}: {slack:.3f} ms")
    # The upper bound is the two legs' scheduling: usually ~0.1 ms, but on the saturated
    # 2-vCPU VM (load ~7, 2.6 % steal) the SCHED_FIFO forwarder read an ACK 4.4 ms after
    # the capture and wrote a packet 1.9 ms after its stamp (8 runs, 208 / 168 packets),
    # and one exchange of 35 measured 7.4 ms.  One such exchange per run is the machine's;
    # two are not.
    assert len(late) <= 1, f"forwarder − capture ≥ 3 ms: {late}"
    assert len(doc["ground_truth"]["summary"]["delayed_acks_ms"]) == doc["params"]["exchanges"] - 1


def test_nodelay_both_writes_leave_together(
    lab_run: Callable[..., tuple[Path, Doc]], tshark: Callable[..., Rows]
) -> None:
    out, doc = lab_run("nagle_wwr_nodelay")
    rows = tshark(out / "client.pcapng")
    writes = doc["ground_truth"]["exchanges"]
    for i, (s1, s2) in enumerate(exchange_segments(rows, doc)):
        # the app's own gap between its two write() calls (scheduling on a busy 2-core VM can
        # stretch it to ms) is not the stack's doing; everything beyond it must be < 1 ms
        app_gap = writes[i]["write2_ns"] - writes[i]["write1_ns"]
        assert s2["ts_ns"] - s1["ts_ns"] < 1 * MS + app_gap, f"exchange {i + 1}"
        assert s2["ts_ns"] - writes[i]["write2_ns"] < 1 * MS, f"exchange {i + 1}: body held"
    assert doc["sockets"]["client"]["TCP_NODELAY"] is True
    assert doc["expected"] == [] and doc["variant"] == "control"


# The path's fidelity, and its tolerance for the machine's stalls.  The forwarder releases
# a packet ≈ 50 µs after its due time, and never before it (the exact bound below).  But
# this VM's kernel is PREEMPT_NONE on 2 vCPUs: a SCHED_FIFO forwarder woken while another
# task runs kernel code waits until that task yields, and the hypervisor can take the vCPU.
# Beside two CPU hogs (load 6–8, 2026-12-02) 3 of 27 nagle_wwr runs had such a stall: the
# forwarder's own trace released packets 1.2, 6.5 and 10–26 ms after their due time (the
# last delaying the three packets due during it), the other 24 none above 0.75 ms; with a
# second lab run beside them, 3 of 10 had stalls of 10–675 ms.  So the forwarder logs every
# time it was not where it should have been for more than 1 ms (forwarder.STALL_NS): a
# wake-up late after its timeout or kept on the run queue, a pass of its loop that long by
# the wall clock (the hypervisor's time is charged to it as CPU time: one pass that read
# one packet took 75 ms of wall and 40 ms of "CPU", 2026-12-02, load 6).  Each packet's
# one-way time is taken apart with the forwarder's trace: *read* (sender's capture → the
# forwarder's read), *hold* (read → release: the forwarder's own part, the delay) and
# *delivery* (release → receiver's capture).  The hold is late by more than 10 % of the
# delay only inside a logged stall.  Read and delivery are the kernel's: a wake-up of an
# idle vCPU the hypervisor took is seen by no clock of the forwarder's, but each wait ends
# by WATCH_NS, so a read later than WATCH_NS + STALL_NS is in a logged stall (CI, 2026-12-02:
# a FIN 1.9 ms late with none logged, the read leg as far as the old test could tell), and
# a delivery later than STALL_NS (the write hands the packet to the receiver's stack in the
# forwarder's pass) too.
LATE_FRACTION = 0.1  # of the one-way delay: beyond it a hold is late
WATCH_NS = 2 * MS  # pcapkit.lab.forwarder.WATCH_NS: the longest wait
STALL_NS = 1 * MS  # pcapkit.lab.forwarder.STALL_NS: a longer lapse is logged


def _key(r: Doc) -> tuple[Any, ...]:
    return (r["src"], r["sport"], r["dport"], r["seq"], r["ack"], r["len"], r["syn"], r["ackf"])


def passes(cli: Rows, srv: Rows, log: Doc) -> list[tuple[Doc, int, int, int, int]]:
    """(packet at its sender, sent, read by the forwarder, released by it, arrived) for every
    packet of both directions: the sender's capture, the forwarder's trace and the receiver's
    capture list each direction's packets in the same order (no drop, no reorder here)."""
    cols = log["trace_columns"]
    trace = [dict(zip(cols, r, strict=True)) for r in log["trace"]]
    assert not log["trace_truncated"] and all(t["action"] == "fwd" for t in trace)
    out = []
    for sent, got, src, d in ((cli, srv, CLIENT_IP, "c2s"), (srv, cli, SERVER_IP, "s2c")):
        a = [r for r in sent if r["src"] == src]
        b = [r for r in got if r["src"] == src]
        t = sorted((x for x in trace if x["dir"] == d), key=lambda x: x["t_in_ns"])
        assert len(a) == len(t) == len(b), (d, len(a), len(t), len(b))
        for ra, tr, rb in zip(a, t, b, strict=True):
            assert (_key(ra), tr["len"], bool(tr["flags"] & 2)) == (_key(rb), ra["len"], ra["syn"])
            out.append((ra, ra["ts_ns"], tr["t_in_ns"], tr["t_out_ns"], rb["ts_ns"]))
    return sorted(out, key=lambda x: x[1])


def machine_share(
    legs: list[tuple[Doc, int, int, int, int]], delay: float, logged: list[list[int]]
) -> tuple[dict[tuple[Any, ...], int], list[str]]:
    """({packet: ns of its one-way time beyond the delay that is the machine's}, [late
    packets nothing logged explains]) of :func:`passes`' ``legs``, by the rules above.  The
    logged stalls [t, ns] that overlap a lapse's interval [a, b] (from up to WATCH_NS
    before each was logged) explain it when it is no longer than they are together, plus
    WATCH_NS and the leg's allowance."""

    def logged_for(a: int, b: int, lapse: int, allowance: int) -> bool:
        # stalls come in runs (2026-12-02: a hold 38.2 ms late over two of 13.2 + 34.6 ms)
        within = [ns for t, ns in logged if t - WATCH_NS <= b and a <= t + ns]
        return bool(within) and lapse <= sum(within) + WATCH_NS + allowance

    share: dict[tuple[Any, ...], int] = {}
    unexplained = []
    for r, sent, t_in, t_out, got in legs:
        read, hold, delivery = t_in - sent, t_out - t_in - delay, got - t_out
        legs = (  # (what, lapse, interval, allowed unlogged, allowance beside a stall)
            ("read", read, (sent, t_in), WATCH_NS + STALL_NS, STALL_NS),
            ("hold", hold, (t_in + delay, t_out), LATE_FRACTION * delay, LATE_FRACTION * delay),
            ("delivery", delivery, (t_out, got), STALL_NS, STALL_NS),
        )
        mine = 0
        for what, lapse, (a, b), unlogged, allowance in legs:
            if lapse <= unlogged:
                mine += max(0, lapse) if what != "hold" else 0
            elif logged_for(a, b, lapse, allowance):
                mine += lapse
            else:
                side = "c2s" if r["src"] == CLIENT_IP else "s2c"
                unexplained.append(
                    f"{side} seq {r['seq']} len {r['len']}: {what} {lapse / MS:.2f} ms "
                    f"(read {read / MS:.2f}, hold +{hold / MS:.2f}, delivery {delivery / MS:.2f})"
                )
        share[_key(r)] = mine
    return share, unexplained


@pytest.mark.parametrize("name", ["nagle_wwr", "nagle_wwr_nodelay"])
def test_every_packet_takes_the_configured_delay(
    name: str,
    lab_run: Callable[..., tuple[Path, Doc]],
    tshark: Callable[..., Rows],
    forwarder_log: Callable[[Path], Doc],
) -> None:
    """Each packet's one-way delay, its sender's capture to its receiver's: never less than
    the configured delay (the forwarder never releases early); the forwarder's hold within
    10 % above it, read and delivery within the machine's unlogged lapses, or each inside a
    stall of the machine the forwarder logged."""
    out, doc = lab_run(name)
    log = forwarder_log(out)
    assert log["stalls"] == doc["forwarder"]["stalls"]
    delay = doc["params"]["delay_ms"] * MS
    cli, srv = tshark(out / "client.pcapng"), tshark(out / "server.pcapng")
    legs = passes(cli, srv, log)
    assert len(legs) == len(cli) >= 30  # every packet seen at both ends and by the forwarder
    early = [(r["seq"], (got - sent) / MS) for r, sent, _, _, got in legs if got - sent < delay]
    assert not early, f"released before the delay: {early}"
    assert all(t_out - t_in >= delay for _, _, t_in, t_out, _ in legs)
    _, unexplained = machine_share(legs, delay, log["stalls"])
    stalls = [(t, round(ns / MS, 2)) for t, ns in log["stalls"]]
    assert not unexplained, f"late outside the machine's stalls {stalls}: {unexplained}"


@pytest.mark.parametrize("name", ["nagle_wwr", "nagle_wwr_nodelay"])
def test_handshake_rtt_within_10_percent(
    name: str,
    lab_run: Callable[..., tuple[Path, Doc]],
    tshark: Callable[..., Rows],
    forwarder_log: Callable[[Path], Doc],
) -> None:
    """The handshake RTT at each end (SYN→SYN/ACK at the client, SYN/ACK→ACK at the
    server) is 2 × delay within 10 %, never less, once what the machine added to a leg is
    taken out (test_every_packet_takes_the_configured_delay)."""
    out, doc = lab_run(name)
    delay = doc["params"]["delay_ms"] * MS
    target = 2 * delay
    cli, srv = tshark(out / "client.pcapng"), tshark(out / "server.pcapng")
    log = forwarder_log(out)
    machine, _ = machine_share(passes(cli, srv, log), delay, log["stalls"])
    for role in ("client", "server"):
        # at each end one leg is ≈ 0, so SYN→SYN/ACK (client) or SYN/ACK→ACK (server) is RTT
        rows = cli if role == "client" else srv
        if role == "client":
            first = next(r for r in rows if r["syn"] and not r["ackf"] and r["src"] == CLIENT_IP)
            last = next(r for r in rows if r["syn"] and r["ackf"] and r["src"] == SERVER_IP)
        else:
            first = next(r for r in rows if r["syn"] and r["ackf"])
            last = next(
                r
                for r in rows
                if r["src"] == CLIENT_IP and not r["syn"] and r["ts_ns"] > first["ts_ns"]
            )
        rtt = last["ts_ns"] - first["ts_ns"]
        assert rtt >= target  # the forwarder never releases early
        # the rest of the RTT (the other leg, the peer's turn-around) is held to the 10 %
        stall = machine.get(_key(first), 0) + machine.get(_key(last), 0)
        assert rtt - stall - target <= LATE_FRACTION * target, (
            f"{role}: {rtt / MS:.3f} ms, of which {stall / MS:.3f} ms the machine's"
        )


def test_fixture_files_and_metadata(
    lab_run: Callable[..., tuple[Path, Doc]], tshark: Callable[..., Rows]
) -> None:
    out, doc = lab_run("nagle_wwr")
    assert sorted(p.name for p in out.iterdir()) == [
        "client.pcapng",
        "scenario.json",
        "server.pcapng",
    ]
    for role in ("client", "server"):
        path = out / f"{role}.pcapng"
        assert path.read_bytes()[:4] == b"\x0a\x0d\x0d\x0a"  # pcapng Section Header Block
        assert path.stat().st_size < FIXTURE_BUDGET_BYTES
        assert len(tshark(path, "frame")) == doc["captures"][role]["packets"]
        assert doc["captures"][role]["dropped_by_kernel"] == 0
    assert doc["schema"] == "pcapkit.lab.scenario/1"
    assert doc["expected"] == ["nagle_delayed_ack"] and doc["expected_codes"] == ["N2"]
    assert doc["sockets"]["client"] == {"TCP_NODELAY": False, "TCP_CONGESTION": "cubic"}
    assert doc["path"]["rtt_ms"] == 30.0


def test_rerun_gives_the_same_packet_structure(
    lab_run: Callable[..., tuple[Path, Doc]], tshark: Callable[..., Rows], tmp_path: Path
) -> None:
    """Issue 4: same data segments (dir, rel. seq, len) and drop position on a second run."""
    from pcapkit.lab import run

    def structure(path: Path) -> list[tuple[str, int, int]]:
        return [(r["src"], r["seq"], r["len"]) for r in tshark(path) if r["len"] > 0]

    out1, doc1 = lab_run("nagle_wwr_nodelay", exchanges=5, drop_c2s=[3])
    doc2 = run("nagle_wwr_nodelay", tmp_path, exchanges=5, drop_c2s=[3])
    for role in ("client", "server"):
        a, b = structure(out1 / f"{role}.pcapng"), structure(tmp_path / f"{role}.pcapng")
        # (failed once beside CPU hogs, 2026-12-02, not reproduced in 14 reruns: say where)
        i = next(
            (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
        )
        assert a == b, (
            f"{role}: {len(a)} vs {len(b)} data segments, first difference at {i}: "
            f"{a[max(0, i - 2) : i + 3]} vs {b[max(0, i - 2) : i + 3]}; stalls "
            f"{doc1['forwarder']['stalls']} / {doc2['forwarder']['stalls']}"
        )
    strip = [
        {k: v for k, v in e.items() if k not in ("t_ns", "seq", "src_port")}
        for e in doc1["forwarder"]["events"]
    ]
    assert strip == [
        {k: v for k, v in e.items() if k not in ("t_ns", "seq", "src_port")}
        for e in doc2["forwarder"]["events"]
    ]


# --------------------------------------------------------------------------- drops


def test_dropped_packet_missing_at_receiver_retransmitted_by_sender(
    lab_run: Callable[..., tuple[Path, Doc]], tshark: Callable[..., Rows]
) -> None:
    out, doc = lab_run("nagle_wwr_nodelay", exchanges=5, drop_c2s=[3])
    (ev,) = [e for e in doc["forwarder"]["events"] if e["event"] == "drop"]
    # payload packets c2s with NODELAY: hdr1, body1, hdr2 → #3 is exchange 2's header
    assert (ev["dir"], ev["payload_index"], ev["rel_seq"], ev["len"]) == ("c2s", 3, 200, 100)
    seq = 1 + ev["rel_seq"]  # Wireshark's relative seq starts at 1
    sent = [r for r in data(tshark(out / "client.pcapng"), CLIENT_IP) if r["seq"] == seq]
    srv_rows = tshark(out / "server.pcapng")
    got = [r for r in data(srv_rows, CLIENT_IP) if r["seq"] == seq]
    assert len(sent) >= 2, "sender capture must show the original and a retransmission"
    assert 0 <= ev["t_ns"] - sent[0]["ts_ns"] < 2 * MS  # the forwarder logged the original
    assert len(got) == len(sent) - 1, "the receiver must miss exactly the dropped original"
    assert got[0]["ts_ns"] > sent[1]["ts_ns"]  # what arrives is the retransmission
    body = next(r for r in data(srv_rows, CLIENT_IP) if r["seq"] == seq + 100)
    assert body["ts_ns"] < got[0]["ts_ns"]  # the hole: later bytes arrived first


# --------------------------------------------------------------------------- TLS


def test_tls_sse_captures_decrypt_with_embedded_keys(
    lab_run: Callable[..., tuple[Path, Doc]],
) -> None:
    import shutil

    if shutil.which("tshark") is None:
        pytest.skip("tshark is not installed")
    for name in ("tls_sse_nagle", "tls_sse_nodelay"):
        out, doc = lab_run(name)
        assert doc["tls"]["version"] == "TLSv1.3" and doc["tls"]["keylog_lines"] >= 4
        assert sorted(p.name for p in out.iterdir()) == [
            "client.pcapng",
            "scenario.json",
            "server.pcapng",
        ]  # no key file lying around
        for role in ("client", "server"):
            path = out / f"{role}.pcapng"
            assert path.stat().st_size < FIXTURE_BUDGET_BYTES
            text = subprocess.run(
                ["tshark", "-r", str(path), "-q", "-z", "follow,tls,ascii,0"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            assert "GET /v1/stream HTTP/1.1" in text, f"{name}/{role} did not decrypt"
            n = doc["params"]["events"]
            assert f"data: token {n}" in text


def test_tls_sse_first_token_late_only_with_nagle(
    lab_run: Callable[..., tuple[Path, Doc]],
) -> None:
    _, pos = lab_run("tls_sse_nagle")
    _, ctl = lab_run("tls_sse_nodelay")
    one_way = pos["params"]["delay_ms"]
    rtt = pos["path"]["rtt_ms"]
    # positive: the first event waits behind the client's delayed ACK of the 2nd ticket
    assert pos["ground_truth"]["first_event_latency_ms"] >= one_way + rtt + 30
    delacks = pos["ground_truth"]["summary"]["client_delayed_acks_ms"]
    assert delacks and all(35 <= d <= 60 for d in delacks), delacks  # Linux delack, §2.1
    # control: no event is held — each leaves the server's stack at once and reaches the
    # client's interface one delay later (the forwarder's trace), but where a stall of the
    # machine the forwarder logged explains it.  Not the client app's read: a normal-priority
    # Python process beside two CPU hogs read events 4.6–12.8 ms after they arrived (load
    # 7–9, 6 runs, 27 events late by that alone: the old "≤ 2 events later than one way +
    # 5 ms at the app" failed 4 of 6), which is the scheduler's, not Nagle's.
    stalls = ctl["forwarder"]["stalls"]
    for e in ctl["ground_truth"]["events"]:
        assert e["left_ms"] is not None and e["arrived_ms"] is not None, e
        if e["left_ms"] > 5 or e["arrived_ms"] > one_way + 5:
            end = e["write_ns"] + e["arrived_ms"] * MS
            assert any(t - WATCH_NS <= end and e["write_ns"] <= t + ns for t, ns in stalls), (
                f"control event {e['n']} held: {e}; stalls {stalls}"
            )
    for doc in (pos, ctl):
        assert doc["ground_truth"]["summary"]["events_read"] == doc["params"]["events"]
        assert doc["sockets"]["client"]["TCP_NODELAY"] is True


# --------------------------------------------------------------------------- teardown


def _netns_names() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def _root_links() -> str:
    return subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout


def test_nothing_left_after_a_run(lab_run: Callable[..., tuple[Path, Doc]]) -> None:
    _, doc = lab_run("nagle_wwr")
    topo = doc["topology"]
    names = {topo["client"]["netns"], topo["server"]["netns"]}
    assert names.isdisjoint(_netns_names())
    links = _root_links()
    assert topo["client"]["iface"] not in links and topo["server"]["iface"] not in links


def _spawn_runner(outdir: Path) -> subprocess.Popen[bytes]:
    code = "import sys; from pcapkit.lab import run; run('nagle_wwr', sys.argv[1], exchanges=400)"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-c", code, str(outdir)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _wait_for_traffic(proc: subprocess.Popen[bytes]) -> list[str]:
    """The runner's namespaces, once its server app runs (traffic is flowing)."""
    prefix = f"pklab-{proc.pid}-"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        mine = sorted(n for n in _netns_names() if n.startswith(prefix))
        if len(mine) == 2:
            srv = next(n for n in mine if n.endswith("-srv"))
            pids = subprocess.run(
                ["ip", "netns", "pids", srv], capture_output=True, text=True
            ).stdout.split()
            if len(pids) >= 2:  # tcpdump + server app
                time.sleep(0.5)
                return mine
        assert proc.poll() is None, "runner exited early"
        time.sleep(0.05)
    raise AssertionError("runner never started its traffic")


def test_sigterm_tears_everything_down(tmp_path: Path) -> None:
    proc = _spawn_runner(tmp_path)
    try:
        mine = _wait_for_traffic(proc)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 128 + signal.SIGTERM
    finally:
        if proc.poll() is None:
            proc.kill()
    assert set(mine).isdisjoint(_netns_names())


def test_killed_runner_leaves_only_namespaces_which_cleanup_removes(tmp_path: Path) -> None:
    from pcapkit.lab import cleanup_stale

    proc = _spawn_runner(tmp_path)
    try:
        mine = _wait_for_traffic(proc)
        proc.kill()  # simulated crash: no atexit, no handlers
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert set(mine) <= _netns_names(), "a SIGKILLed runner cannot clean up; names remain"
    deadline = time.monotonic() + 10
    left: list[str] = []
    while time.monotonic() < deadline:  # parent-death signal ends every child it started
        left = [
            p
            for ns in mine
            for p in subprocess.run(
                ["ip", "netns", "pids", ns], capture_output=True, text=True
            ).stdout.split()
        ]
        if not left:
            break
        time.sleep(0.05)
    assert left == [], "children of the killed runner survived"
    removed = cleanup_stale()
    assert set(mine) <= set(removed)
    assert set(mine).isdisjoint(_netns_names())
    assert f"pkl{mine[0].split('-')[2]}" not in _root_links()


# --------------------------------------------------------------------------- new scenarios


def test_rerun_of_a_drop_scenario_gives_the_same_structure(
    tmp_path: Path, tshark: Callable[..., Rows]
) -> None:
    """Issue 4: the same data segments, records and drop position on a second run."""

    def structure(out: Path, doc: Doc) -> dict[str, Any]:
        gt = doc["ground_truth"]
        (d,) = gt["drops"]
        start = gt["response_rel_seq"]
        seg_counts = {}
        for role in ("client", "server"):
            rows = data(tshark(out / f"{role}.pcapng"), SERVER_IP)
            # (offset in the response, length) of every data segment: the packet structure.
            # Sorted: where the retransmission falls among the new segments depends on when
            # the SACKs reach the sender (a loaded CI machine moved it by two segments);
            # which segments exist, and how many times each, does not.
            seg_counts[role] = sorted(
                (r["seq"] - 1 - start, r["len"]) for r in rows if r["seq"] > start
            )
        return {
            "segments": seg_counts,
            "records": [(r["record"], r["wire_len"]) for r in gt["records"]],
            "drop": (d["payload_index"], d["rel_seq"] - start, d["len"], d["in_record"]),
            "retransmissions": len(d["retransmissions"]),
        }

    out1, doc1 = lab_run_once("tls_large_record_drop", tmp_path / "a")
    out2, doc2 = lab_run_once("tls_large_record_drop", tmp_path / "b")
    s1, s2 = structure(out1, doc1), structure(out2, doc2)
    assert s1 == s2
    assert s1["drop"][3] == 1 and len(s1["segments"]["client"]) == len(s1["segments"]["server"]) - 1


def lab_run_once(name: str, out: Path) -> tuple[Path, Doc]:
    from pcapkit.lab import run

    return out, run(name, out)


def test_fixtures_command_writes_a_checked_fixture_and_readme(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from pcapkit.lab.cli import lab

    res = CliRunner().invoke(lab, ["fixtures", "-o", str(tmp_path), "--only", "tcp_cork_cleared"])
    assert res.exit_code == 0, res.output
    # the command retries a capture whose path timing was off (up to 3 attempts): one of
    # them must have passed the checks, and every attempt says how it went
    lines = [ln for ln in res.output.splitlines() if ln.startswith("tcp_cork_cleared: attempt ")]
    assert lines and lines[-1].split(": ")[2].startswith("ok"), res.output
    assert len(lines) <= 3
    assert sorted(p.name for p in (tmp_path / "tcp_cork_cleared").iterdir()) == [
        "client.pcapng",
        "middle.pcapng",  # the default for forwarder scenarios (fixtures.wants_middle)
        "scenario.json",
        "server.pcapng",
    ]
    readme = (tmp_path / "README.md").read_text(encoding="utf-8")
    assert "| `tcp_cork_cleared` | control for `tcp_cork` |" in readme
    assert "1 fixtures" in readme


# --------------------------------------------------------------------------- no forwarder


@pytest.mark.parametrize("name", ["bulk_loopback_tls", "bulk_veth_gso_tls"])
def test_forwarderless_topologies_run_and_leave_nothing(
    lab_run: Callable[..., tuple[Path, Doc]], tshark: Callable[..., Rows], name: str
) -> None:
    """Loopback: one capture on lo (client.pcapng only), 65 483-byte segments; veth: both
    ends, super-segments > MSS at each; no forwarder, no middle; namespaces gone after."""
    out, doc = lab_run(name)
    loopback = doc["topology"]["topology"] == "loopback"
    files = sorted(p.name for p in out.iterdir())
    assert files == (
        ["client.pcapng", "scenario.json"]
        if loopback
        else ["client.pcapng", "scenario.json", "server.pcapng"]
    )
    assert doc["forwarder"]["events"] == [] and doc["path"]["middle"] is None
    mss = 65_483 if loopback else 1_448
    for role in doc["captures"]:
        rows = tshark(out / f"{role}.pcapng")
        lens = [r["len"] for r in data(rows, SERVER_IP)]
        assert max(lens) == mss if loopback else max(lens) > 10 * mss, role
        assert handshake_rtt_ns(rows) < 5 * MS
    names = {doc["topology"]["client"]["netns"], doc["topology"]["server"]["netns"]}
    assert names.isdisjoint(_netns_names())


def test_forwarderless_topology_refuses_path_impairment(tmp_path: Path) -> None:
    from pcapkit.lab import LabError, run

    with pytest.raises(LabError, match="no forwarder"):
        run("bulk_veth_gso_tls", tmp_path / "a", delay_ms=10)
    with pytest.raises(LabError, match="middle"):
        run("bulk_loopback_tls", tmp_path / "b", middle=True)
