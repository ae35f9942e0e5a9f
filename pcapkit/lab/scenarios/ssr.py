"""Slow-start restart after idle (positive) vs ``tcp_slow_start_after_idle=0`` — DETECTION.md §7.1.

The server (CUBIC via ``TCP_CONGESTION``; the host default BBR has its own idle handling)
sends a first burst (``burst1_len``, 80 KiB: slow start sends flights of 10, 20 and 27
segments and grows cwnd from IW 10 to ≈ 66), waits until all of it is acknowledged, stays
idle ``idle_s`` (1 s ≫ RTO ≈ 230 ms), then sends a second burst (``burst2_len``, 84 KiB ≈ 60
segments) with one ``sendall``.

Positive (``net.ipv4.tcp_slow_start_after_idle = 1`` in the server namespace, the Linux
default): ``tcp_cwnd_restart`` halves cwnd once per RTO of idle, floored at IW — the second
burst's first flight is 10 segments and the burst needs several more RTTs.  Control (``= 0``):
the pre-idle cwnd is kept and the first flight carries the whole burst.

No rate limit: the forwarder's path has no bottleneck, so a flight leaves as one burst and
every later segment waits for an ACK — the sender is purely cwnd-bound and the flight sizes
*are* cwnd, read off the capture with no queueing to smear them (a rate limit would add a
queue whose drain time blurs the flight boundaries at this small scale).  The server's
``SO_SNDBUF`` is fixed at 1 MiB so the send buffer never limits a flight.  The bursts are
kept small (164 KiB together) so each capture stays under 200 KB; the DETECTION.md run used
300 KB + 100 KB.

Ground truth: ``TCP_INFO`` read back on the server (cwnd and RTO after burst 1 was ACKed,
cwnd right after the burst-2 write), the idle gap, and both bursts' flights (segments sent
per round trip, from the forwarder's trace).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import Any

from .. import truth
from ..apps import (
    CONNECT_TIMEOUT_S,
    IO_TIMEOUT_S,
    listen,
    now_ns,
    recv_exact,
    tcp_info,
    tcp_options,
    tcp_socket,
)
from . import RunData, Scenario, register

REQUEST = b"GET /bursts\n"
ACK_WAIT_TIMEOUT_S = 5.0
SSAI = "net.ipv4.tcp_slow_start_after_idle"

PARAMS: dict[str, Any] = {
    "delay_ms": 15.0,
    "burst1_len": 81_920,  # 57 segments: flights 10, 20, 27 → cwnd ≈ 66
    "burst2_len": 86_016,  # 60 segments, fits the pre-idle cwnd
    "idle_s": 1.0,
    "server_sndbuf": 1_048_576,
    "sysctl_srv": {SSAI: 1},
    "server_nodelay": True,
    "client_nodelay": True,
}


def _wait_all_acked(conn: socket.socket) -> dict[str, int]:
    deadline = time.monotonic() + ACK_WAIT_TIMEOUT_S
    while True:
        info = tcp_info(conn)
        if info["unacked"] == 0 or time.monotonic() > deadline:
            return info
        time.sleep(0.002)


def server(p: dict[str, Any], ready: Callable[[], None]) -> dict[str, Any]:
    ls = listen(p["server_ip"], p["port"], cc=p["cc"], nodelay=p["server_nodelay"])
    ready()
    conn, _ = ls.accept()
    conn.settimeout(IO_TIMEOUT_S)
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, p["server_sndbuf"])
    opts = tcp_options(conn)
    recv_exact(conn, len(REQUEST))
    t1 = now_ns()
    conn.sendall(b"1" * p["burst1_len"])
    info1 = _wait_all_acked(conn)
    t_acked = now_ns()
    time.sleep(p["idle_s"])
    info_idle = tcp_info(conn)  # cwnd is restarted lazily, at the next send
    t2 = now_ns()
    conn.sendall(b"2" * p["burst2_len"])
    info2 = tcp_info(conn)
    conn.recv(1)  # the client's FIN
    conn.close()
    ls.close()
    return {
        "socket": opts,
        "burst1_write_ns": t1,
        "burst1_acked_ns": t_acked,
        "burst2_write_ns": t2,
        "tcp_info_after_burst1": info1,
        "tcp_info_after_idle": info_idle,
        "tcp_info_after_burst2_write": info2,
    }


def client(p: dict[str, Any]) -> dict[str, Any]:
    s = tcp_socket(cc=p["cc"], nodelay=p["client_nodelay"])
    s.settimeout(CONNECT_TIMEOUT_S)
    s.connect((p["server_ip"], p["port"]))
    s.settimeout(IO_TIMEOUT_S)
    opts = tcp_options(s)
    s.sendall(REQUEST)
    recv_exact(s, p["burst1_len"])
    t1 = now_ns()
    recv_exact(s, p["burst2_len"])
    t2 = now_ns()
    s.close()
    return {"socket": opts, "burst1_read_ns": t1, "burst2_read_ns": t2}


def ground_truth(run: RunData) -> dict[str, Any]:
    p, srv = run.params, run.server
    pkts = truth.packets(run.forwarder)
    hs = list(truth.handshake(pkts))
    rtt_ns = round(hs[0]["rtt_ms"] * 1e6) if hs else 30_000_000
    f1 = [
        f
        for f in truth.flights(pkts, "s2c", start_ns=srv["burst1_write_ns"], rtt_ns=rtt_ns)
        if f["start_ns"] < srv["burst2_write_ns"]
    ]
    f2 = truth.flights(pkts, "s2c", start_ns=srv["burst2_write_ns"], rtt_ns=rtt_ns)
    data = truth.data_packets(pkts, "s2c")
    last1 = max((x.t_in_ns for x in data if x.t_in_ns < srv["burst2_write_ns"]), default=None)
    first2 = min((x.t_in_ns for x in data if x.t_in_ns >= srv["burst2_write_ns"]), default=None)
    return {
        "handshake": hs,
        "slow_start_after_idle": int(p["sysctl_srv"].get(SSAI, 1)),
        "server_rto_ms": srv["tcp_info_after_burst1"]["rto_us"] / 1000,
        "cwnd_after_burst1": srv["tcp_info_after_burst1"]["snd_cwnd"],
        "cwnd_after_idle_before_write": srv["tcp_info_after_idle"]["snd_cwnd"],
        "cwnd_after_burst2_write": srv["tcp_info_after_burst2_write"]["snd_cwnd"],
        "idle_gap_ms": None if last1 is None or first2 is None else truth.ms(first2 - last1),
        "burst1_flights": [f["segments"] for f in f1],
        "burst2_flights": [f["segments"] for f in f2],
        "burst2_first_flight_start_ns": f2[0]["start_ns"] if f2 else None,
        "burst1_read_ms": truth.ms(run.client["burst1_read_ns"] - srv["burst1_write_ns"]),
        "burst2_read_ms": truth.ms(run.client["burst2_read_ns"] - srv["burst2_write_ns"]),
        "summary": {
            "largest_flight_before_idle": max((f["segments"] for f in f1), default=0),
            "first_flight_after_idle": f2[0]["segments"] if f2 else 0,
            "burst2_rtts": len(f2),
            "burst2_ms": truth.ms(run.client["burst2_read_ns"] - srv["burst2_write_ns"]),
        },
    }


def _validate(doc: dict[str, Any]) -> list[str]:
    s = doc["ground_truth"]["summary"]
    first, largest = s["first_flight_after_idle"], s["largest_flight_before_idle"]
    if doc["ground_truth"]["slow_start_after_idle"]:
        ok = first <= 12 and largest > 2 * first  # DETECTION.md §7.1: F1 < ½ × largest
    else:
        ok = first >= largest > 12
    return [] if ok else [f"flights do not show the expected restart behaviour: {s}"]


_M = __name__
register(
    Scenario(
        name="slow_start_restart",
        summary="CUBIC, 1 s idle then an 84 KiB burst, slow_start_after_idle=1: cwnd back to IW",
        what="after 1 s idle the 84 KiB burst restarts from a 10-segment flight",
        expected=("slow_start_restart",),
        pair="slow_start_restart_off",
        server=f"{_M}:server",
        client=f"{_M}:client",
        params=PARAMS,
        ground_truth=ground_truth,
        validate=_validate,
        # 183 KB per capture: a middle one for both variants (+370 KB) would leave the
        # fixtures folder at the 5 MB budget (checked at the middle in the lab, not kept)
        fixture_middle=False,
    )
)
register(
    Scenario(
        name="slow_start_restart_off",
        summary="same with slow_start_after_idle=0: the burst keeps the pre-idle cwnd (control)",
        what="same bursts, slow_start_after_idle=0: the first flight after idle keeps cwnd",
        expected=(),
        controls=("slow_start_restart",),
        pair="slow_start_restart",
        server=f"{_M}:server",
        client=f"{_M}:client",
        params={**PARAMS, "sysctl_srv": {SSAI: 0}},
        ground_truth=ground_truth,
        validate=_validate,
        # 183 KB per capture: a middle one for both variants (+370 KB) would leave the
        # fixtures folder at the 5 MB budget (checked at the middle in the lab, not kept)
        fixture_middle=False,
    )
)
