"""Packet-level replay's sender (issue 19): a capture's frames onto one interface, paced.

``python .../pcapkit/lab/pktsend.py CAPTURE IFACE [--speed X|max] [--loop N]`` runs in the
network namespace that owns IFACE (``pcapkit replay --packets … --into NETNS:IFACE`` starts
it with ``ip netns exec``) and prints one JSON object: packets and bytes sent, seconds,
packets/s, and the inter-packet timing error — each frame's send time minus its due time
(the first frame's send time plus its capture offset ÷ speed), p50/p99/max in µs.

Frames go out through an ``AF_PACKET`` socket: Ethernet frames as they are onto an
Ethernet interface (``SOCK_RAW``); raw-IP frames (link types 101, 228, 229 — the lab's
TUN captures) as network-layer packets (``SOCK_DGRAM``, protocol from the IP version; an
Ethernet interface gets them with a broadcast destination); Ethernet frames onto a
non-Ethernet interface (TUN) without their 14-byte header.  Other link types are refused.
Pacing sleeps until 1 ms before a frame's due time and spins the rest, at SCHED_FIFO
priority when the kernel allows (paced runs only; see :func:`_realtime`).

No frame is lost without a word (see :func:`_wait_carrier`, :func:`_send_one`):

* the interface must have a carrier and an operational state of up (or unknown, as TUN
  devices report) before the first frame — waited for up to :data:`CARRIER_WAIT_S`, then
  refused.  Without a carrier (a veth whose peer is down) the kernel drops every frame
  *after* the send call returns: all 56 frames of a capture were "sent" and all 56 counted
  in the veth's tx_dropped;
* a frame the interface's queue refuses (``ENOBUFS``: a full qdisc at ``--max``; seen with
  a 1 Mbit/s tbf after 179 frames, which used to end the replay with a traceback) is sent
  again after a growing pause, up to :data:`RETRY_GIVE_UP_S`; a frame still refused then
  ends the replay, and the report counts ``send_retries`` and the frames not sent
  (``send_failed``, exit status 1);
* frames the interface dropped after accepting them are its ``tx_dropped`` counter's
  growth over the run, reported as ``dropped_at_iface``.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import socket
import sys
import time
from pathlib import Path

SPIN_NS = 1_000_000  # sleep until this close to a due time, then spin: sleep() overshoots
# ~60 µs idle and up to milliseconds on a busy host
PRIORITY = 5  # SCHED_FIFO when paced: above normal tasks, below the lab forwarder's 10
ETH_P_ALL = 0x0003
ETH_P_IP = 0x0800
ETH_P_IPV6 = 0x86DD
ETH_HEADER = 14
LINK_ETHERNET = 1
LINK_RAW = (101, 228, 229)  # LINKTYPE_RAW, LINKTYPE_IPV4, LINKTYPE_IPV6
ARPHRD_ETHER = 1
PROGRAM = str(Path(__file__).resolve())
CARRIER_WAIT_S = 2.0  # an interface just set up gets its carrier and operstate from the
# kernel's link watcher, asynchronously (and its qdisc with them: until then, noop drops)
RETRY_FIRST_S = 50e-6  # the first pause after ENOBUFS; doubled up to RETRY_MAX_S
RETRY_MAX_S = 0.01
RETRY_GIVE_UP_S = 2.0  # a frame the queue refuses for this long is counted as failed
RETRY_ERRNOS = (errno.ENOBUFS, errno.EAGAIN)


def _sysfs(iface: str, name: str) -> str | None:
    try:
        return Path(f"/sys/class/net/{iface}/{name}").read_text().strip()
    except OSError:  # carrier reads EINVAL while the interface is administratively down
        return None


def _wait_carrier(iface: str, timeout_s: float = CARRIER_WAIT_S) -> None:
    """Return once ``iface`` has a carrier and its operstate is up (or unknown: TUN, lo);
    exit with the state it is stuck in after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        carrier, oper = _sysfs(iface, "carrier"), _sysfs(iface, "operstate")
        if carrier == "1" and oper in ("up", "unknown"):
            return
        if time.monotonic() >= deadline:
            raise SystemExit(
                f"pktsend: {iface} is not ready to send (carrier {carrier or 'none'}, "
                f"operstate {oper}) after {timeout_s:g} s: is the interface (and its peer) up?"
            )
        time.sleep(0.01)


def _tx_dropped(iface: str) -> int:
    v = _sysfs(iface, "statistics/tx_dropped")
    return int(v) if v is not None and v.isdigit() else 0


def _send_one(
    sock: socket.socket, frame: bytes, addr: tuple[object, ...] | None
) -> tuple[bool, int]:
    """Send one frame; on ENOBUFS/EAGAIN (the interface's queue is full and the kernel
    dropped the copy) pause and send it again.  Returns (sent, retries)."""
    retries = 0
    pause = RETRY_FIRST_S
    give_up = 0.0
    while True:
        try:
            if addr is None:
                sock.send(frame)
            else:
                sock.sendto(frame, addr)
            return True, retries
        except OSError as e:
            if e.errno not in RETRY_ERRNOS:
                raise
        now = time.monotonic()
        if not retries:
            give_up = now + RETRY_GIVE_UP_S
        elif now >= give_up:
            return False, retries
        retries += 1
        time.sleep(pause)
        pause = min(pause * 2, RETRY_MAX_S)


def _iface_type(iface: str) -> int:
    try:
        return int(Path(f"/sys/class/net/{iface}/type").read_text().strip())
    except (OSError, ValueError):
        raise SystemExit(f"pktsend: no interface {iface!r} in this namespace") from None


def _frames(path: str) -> tuple[list[int], list[bytes], list[int]]:
    from pcapkit.io.reader import read_capture

    cap = read_capture(path)
    ts = [int(x) for x in cap.ts_ns.tolist()]
    lt = [int(x) for x in cap.linktype.tolist()]
    data = [cap.frame_bytes(i + 1) for i in range(cap.frames)]
    cap.close()
    return ts, data, lt


def _realtime() -> bool:
    """SCHED_FIFO :data:`PRIORITY` for a paced replay: pacing is about *when*, and a normal
    task on a busy host wakes milliseconds late now and then (measured at the receiving
    veth, 2,000 frames at 1 kpkt/s beside other lab runs: timing error p99 6.1 ms at
    normal priority, 65 µs at SCHED_FIFO).  Not for ``--max``: a real-time task that never
    sleeps would hold a core.  False when the kernel refuses."""
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(PRIORITY))
    except (OSError, AttributeError):
        return False
    return True


def _percentile(sorted_vals: list[float], q: float) -> float:
    if not sorted_vals:
        return 0.0
    k = min(len(sorted_vals) - 1, max(0, round(q / 100 * (len(sorted_vals) - 1))))
    return sorted_vals[k]


def send(path: str, iface: str, *, speed: float | None, loop: int) -> dict[str, object]:
    ts, data, lt = _frames(path)
    if not ts:
        raise SystemExit("pktsend: the capture has no frames")
    ether_iface = _iface_type(iface) == ARPHRD_ETHER
    raw = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    dgram = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(ETH_P_IP))
    raw.bind((iface, 0))
    bcast = b"\xff" * 6
    plan: list[tuple[socket.socket, bytes, tuple[object, ...] | None]] = []
    for frame, link in zip(data, lt, strict=True):
        if link == LINK_ETHERNET and ether_iface:
            plan.append((raw, frame, None))
            continue
        if link == LINK_ETHERNET:
            frame = frame[ETH_HEADER:]
        elif link not in LINK_RAW:
            raise SystemExit(f"pktsend: link type {link} cannot be replayed")
        proto = ETH_P_IPV6 if frame[:1] and frame[0] >> 4 == 6 else ETH_P_IP
        plan.append((dgram, frame, (iface, proto, 0, 0, bcast)))
    _wait_carrier(iface)
    dropped_before = _tx_dropped(iface)
    realtime = speed is not None and _realtime()
    errors: list[float] = []
    sent = 0
    failed = 0
    retries = 0
    nbytes = 0
    t0 = ts[0]
    start = time.perf_counter_ns()
    for rnd in range(loop):
        base = time.perf_counter_ns() if rnd else start
        for (sock, frame, addr), t in zip(plan, ts, strict=True):
            if speed is not None:
                due = base + round((t - t0) / speed)
                now = time.perf_counter_ns()
                if due - now > SPIN_NS:
                    time.sleep((due - now - SPIN_NS) / 1e9)
                while time.perf_counter_ns() < due:
                    pass
                errors.append((time.perf_counter_ns() - due) / 1000)
            ok, n = _send_one(sock, frame, addr)
            retries += n
            if not ok:  # the queue has not drained for seconds: the rest would wait too
                failed = len(plan) * loop - sent
                break
            sent += 1
            nbytes += len(frame)
        if failed:
            break
    secs = (time.perf_counter_ns() - start) / 1e9
    dropped = _tx_dropped(iface) - dropped_before
    raw.close()
    dgram.close()
    errors.sort()
    return {
        "packets": sent,
        "bytes": nbytes,
        "send_retries": retries,
        "send_failed": failed,
        "dropped_at_iface": max(0, dropped),
        "seconds": round(secs, 6),
        "packets_per_s": round(sent / secs, 1) if secs > 0 else None,
        "speed": "max" if speed is None else speed,
        "realtime": realtime,
        "timing_error_us": None
        if speed is None
        else {
            "p50": round(_percentile(errors, 50), 1),
            "p99": round(_percentile(errors, 99), 1),
            "max": round(errors[-1], 1),
        },
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="pktsend")
    ap.add_argument("capture")
    ap.add_argument("iface")
    ap.add_argument("--speed", default="1")
    ap.add_argument("--loop", type=int, default=1)
    a = ap.parse_args(argv)
    speed = None if a.speed == "max" else float(a.speed)
    if speed is not None and speed <= 0:
        raise SystemExit("pktsend: --speed must be > 0")
    res = send(a.capture, a.iface, speed=speed, loop=max(1, a.loop))
    print(json.dumps(res))
    if res["send_failed"]:
        print(
            f"pktsend: {res['send_failed']} frames not sent: {a.iface}'s queue refused a "
            f"frame for {RETRY_GIVE_UP_S:g} s (ENOBUFS) after {res['packets']} were sent",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    sys.exit(main())
