"""Packet-level replay beside tcpreplay (issue 19; needs root): speed and pacing error.

``python benchmarks/replay_packets.py [--max-packets N] [--paced-packets N] [--reps R]
[--out FILE]`` builds a throw-away namespace with a veth pair (``pk0`` → ``pk1``), writes
two Ethernet/IPv4/UDP captures (classic pcap, ns timestamps), and sends each with
``pcapkit replay --packets … --into NS:pk0`` and with ``tcpreplay -i pk0`` (run in the
same namespace), while tcpdump on ``pk1`` records what arrived with nanosecond kernel
timestamps.  Both tools are judged by the same receiver:

``tcpreplay`` runs twice: as it comes, and under ``chrt -f 5`` — the SCHED_FIFO priority
pcapkit's sender takes for itself when paced (``pcapkit/lab/pktsend.py``).

* **--max** (``tcpreplay --topspeed``): packets/s = received packets − 1 over the first to
  last arrival (the sender's own start-up does not count), and how many arrived;
* **--speed 1** (``tcpreplay`` default pacing): for each packet, |(arrival − first
  arrival) − (capture offset)|, p50 and p99 in µs, over a capture whose gaps alternate
  0.5 ms and 1.5 ms (1 kpkt/s on average).

Best of ``--reps`` rounds per cell (lowest error, highest rate), tools interleaved.  The
machine is shared: ratios, not absolute numbers.
"""

from __future__ import annotations

import argparse
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NS = f"pkbench-{os.getpid()}"
PCAP_NS_MAGIC = 0xA1B23C4D
LINKTYPE_ETHERNET = 1
# tcpreplay as it comes, and at the SCHED_FIFO priority pcapkit's paced sender takes
# for itself (chrt -f 5): the same footing
TOOLS = ("pcapkit", "tcpreplay", "tcpreplay-rt")


def write_capture(path: Path, n: int, *, paced: bool) -> None:
    """``n`` 106-byte Ethernet/IPv4/UDP frames; gaps 0.5/1.5 ms (paced) or 10 µs."""
    eth = bytes.fromhex("02000000000202000000000108 00".replace(" ", ""))
    t = 1_800_000_000 * 10**9
    with path.open("wb") as f:
        f.write(struct.pack("<IHHiIII", PCAP_NS_MAGIC, 2, 4, 0, 0, 65535, LINKTYPE_ETHERNET))
        for i in range(n):
            payload = struct.pack("!I", i) + b"x" * 60
            udp = struct.pack("!HHHH", 40000, 9, 8 + len(payload), 0) + payload
            total = 20 + len(udp)
            ip = struct.pack(
                "!BBHHHBBH4s4s", 0x45, 0, total, i & 0xFFFF, 0, 64, 17, 0,
                bytes([10, 99, 0, 1]), bytes([10, 99, 0, 2]),
            )  # fmt: skip
            frame = eth + ip + udp
            f.write(struct.pack("<IIII", t // 10**9, t % 10**9, len(frame), len(frame)) + frame)
            t += (500_000 if i % 2 else 1_500_000) if paced else 10_000


def read_times(path: Path) -> dict[int, int]:
    """Packet number (the first 4 payload bytes) → timestamp (ns), IPv4/UDP frames only."""
    data = path.read_bytes()
    magic = struct.unpack_from("<I", data)[0]
    scale = 1 if magic == PCAP_NS_MAGIC else 1000
    out: dict[int, int] = {}
    off = 24
    while off + 16 <= len(data):
        s, frac, incl, _ = struct.unpack_from("<IIII", data, off)
        off += 16
        if data[off + 12 : off + 14] == b"\x08\x00" and data[off + 23] == 17 and incl >= 46:
            out.setdefault(struct.unpack_from("!I", data, off + 42)[0], s * 10**9 + frac * scale)
        off += incl
    return out


def sh(*argv: str, **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), check=True, capture_output=True, text=True, **kw)  # type: ignore[call-overload, no-any-return]


def setup() -> None:
    sh("ip", "netns", "add", NS)
    sh("ip", "-n", NS, "link", "add", "pk0", "type", "veth", "peer", "name", "pk1")
    for dev in ("pk0", "pk1"):
        sh("ip", "-n", NS, "link", "set", dev, "up")
    sh("ip", "netns", "exec", NS, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1")


def one(tool: str, cap: Path, work: Path, *, top: bool) -> tuple[dict[int, int], float]:
    """Send ``cap`` with ``tool``; the arrival times at pk1 and the sender's wall time."""
    rx = work / f"rx-{tool}.pcap"
    dump = subprocess.Popen(
        ["ip", "netns", "exec", NS, "tcpdump", "-i", "pk1", "-U", "-B", "65536", "-w", str(rx),
         "--time-stamp-precision", "nano", "udp"],
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    time.sleep(1.0)
    if tool == "pcapkit":
        argv = [sys.executable, "-c", "from pcapkit.cli import main; main()", "replay",
                "--packets", str(cap), "--into", f"{NS}:pk0", "--json"]  # fmt: skip
        argv += ["--max"] if top else ["--speed", "1"]
    else:
        argv = ["ip", "netns", "exec", NS, "tcpreplay", "-q", "-i", "pk0"]
        if tool == "tcpreplay-rt":
            argv = ["chrt", "-f", "5", *argv]
        argv += ["--topspeed"] if top else []
        argv += [str(cap)]
    t0 = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True, cwd=ROOT)
    wall = time.perf_counter() - t0
    time.sleep(0.5)
    dump.terminate()
    dump.wait(10)
    return read_times(rx), wall


def pacing_error_us(arrivals: dict[int, int], cap: Path) -> tuple[float, float, int]:
    """|arrival offset − capture offset| per packet (matched by number), p50 and p99 in µs,
    offsets from the first packet that arrived."""
    sent = read_times(cap)
    keys = sorted(k for k in arrivals if k in sent)
    k0 = keys[0]
    errs = sorted(abs((arrivals[k] - arrivals[k0]) - (sent[k] - sent[k0])) / 1000 for k in keys)
    n = len(errs)
    return errs[n // 2], errs[min(n - 1, round(0.99 * (n - 1)))], n


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--max-packets", type=int, default=200_000)
    ap.add_argument("--paced-packets", type=int, default=3000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("replay_packets: needs root (a network namespace)", file=sys.stderr)
        return 1
    setup()
    try:
        with tempfile.TemporaryDirectory(prefix="pkbench-") as tmp:
            work = Path(tmp)
            fast, paced = work / "fast.pcap", work / "paced.pcap"
            write_capture(fast, a.max_packets, paced=False)
            write_capture(paced, a.paced_packets, paced=True)
            rate: dict[str, list[tuple[float, int]]] = {t: [] for t in TOOLS}
            err: dict[str, list[tuple[float, float, int]]] = {t: [] for t in TOOLS}
            for _ in range(a.reps):
                for tool in TOOLS:
                    got, _wall = one(tool, fast, work, top=True)
                    ts = sorted(got.values())
                    span = (ts[-1] - ts[0]) / 1e9 if len(ts) > 1 else float("nan")
                    rate[tool].append(((len(ts) - 1) / span, len(ts)))
                    got, _wall = one(tool, paced, work, top=False)
                    err[tool].append(pacing_error_us(got, paced))
    finally:
        subprocess.run(["ip", "netns", "del", NS], check=False)
    lines = [
        f"packet replay, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"{os.cpu_count()} cores; best of {a.reps} rounds, judged at the receiving veth",
        "",
        "| tool | packets/s at max (received/sent) | all rounds | timing error p50 | p99 (speed 1) | all rounds p99 | received (speed 1) |",
        "|---|---:|---|---:|---:|---|---:|",
    ]
    for tool in TOOLS:
        best = max(rate[tool])
        e = min(err[tool], key=lambda x: x[1])
        lines.append(
            f"| {tool} | {best[0]:,.0f} ({best[1]}/{a.max_packets}) | "
            f"{', '.join(f'{r:,.0f}' for r, _ in rate[tool])} | {e[0]:.1f} µs | {e[1]:.1f} µs | "
            f"{', '.join(f'{x[1]:.0f}' for x in err[tool])} | {e[2]}/{a.paced_packets} |"
        )
    med = statistics.median
    lines.append("")
    for other in TOOLS[1:]:
        ratio = max(rate["pcapkit"])[0] / max(rate[other])[0]
        lines.append(
            f"pcapkit / {other}: packets/s at max {ratio:.2f}×; median p99 at speed 1 "
            f"{med(x[1] for x in err['pcapkit']):.0f} µs vs {med(x[1] for x in err[other]):.0f} µs"
        )
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if a.out:
        a.out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
