#!/usr/bin/env python3
"""Time pcapkit against tshark, dpkt and scapy on one capture, side by side.

    python benchmarks/run.py benchmarks/out/big.pcap [--reps 3] [--out benchmarks/RESULTS.md]

Every measurement runs in a fresh subprocess; wall time and the child's peak RSS
(``os.wait4`` rusage, ``ru_maxrss``) are recorded.  Tools are run interleaved,
round after round, and the best (lowest) wall time of the rounds is kept, so the
ratios compare runs that saw the same machine load.  Ratios, not absolute
seconds, are the result: the absolute numbers depend on the machine and on
whatever else runs on it.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

# Each Python tool prints one JSON line: {"work_s": seconds inside the child after
# imports, "n": packets (or rows) touched}.  Wall time also counts interpreter
# start-up and imports, like tshark's start-up counts for tshark.
PY_PRELUDE = """
import json, sys, time
p = sys.argv[1]
"""

TOOLS: dict[str, tuple[str, str]] = {
    # key: (label, code)
    "pcapkit_packets": (
        "pcapkit: `open(p).packets` (packets table)",
        """
import pcapkit
t0 = time.perf_counter()
t = pcapkit.open(p)
n = len(t.packets)
print(json.dumps({"work_s": time.perf_counter() - t0, "n": n}))
""",
    ),
    "pcapkit_full": (
        "pcapkit: `open(p)`, `.segments`, `.flows` (full reassembly)",
        """
import pcapkit
t0 = time.perf_counter()
t = pcapkit.open(p)
n = len(t.segments)
nf = len(t.flows)
print(json.dumps({"work_s": time.perf_counter() - t0, "n": n, "flows": nf}))
""",
    ),
    "pcapkit_tls": (
        "pcapkit: `open(p).records` (TLS record walk + alignment with frames/PSH)",
        """
import pcapkit
t0 = time.perf_counter()
t = pcapkit.open(p)
n = len(t.records)
print(json.dumps({"work_s": time.perf_counter() - t0, "n": n}))
""",
    ),
    "dpkt": (
        "dpkt: `pcap.Reader` + Ethernet/IP/TCP parse (seq, len, flags)",
        """
import dpkt
t0 = time.perf_counter()
n = acc = 0
with open(p, "rb") as f:
    for ts, buf in dpkt.pcap.Reader(f):
        eth = dpkt.ethernet.Ethernet(buf)
        ip = eth.data
        tcp = ip.data
        acc += tcp.seq + len(tcp.data) + tcp.flags
        n += 1
print(json.dumps({"work_s": time.perf_counter() - t0, "n": n}))
""",
    ),
    "scapy_raw": (
        "scapy: `RawPcapReader`, iterate records (raw bytes, no parse)",
        """
from scapy.utils import RawPcapReader
t0 = time.perf_counter()
n = size = 0
with RawPcapReader(p) as r:
    for data, meta in r:
        size += len(data)
        n += 1
print(json.dumps({"work_s": time.perf_counter() - t0, "n": n}))
""",
    ),
    "scapy_full": (
        "scapy: `rdpcap` full parse of the first {k} packets, extrapolated ×{x:.0f}",
        """
from scapy.utils import rdpcap
from scapy.layers.inet import TCP
k = int(sys.argv[2])
t0 = time.perf_counter()
acc = 0
pk = rdpcap(p, count=k)
for q in pk:
    tcp = q[TCP]
    acc += tcp.seq + len(tcp.payload) + int(tcp.flags)
print(json.dumps({"work_s": time.perf_counter() - t0, "n": len(pk)}))
""",
    ),
}
TSHARK_FIELDS = ["frame.number", "tcp.stream", "tcp.seq", "tcp.len", "tcp.flags.push"]
# issue 3: the TLS record walk against tshark decoding the benchmark's TLS port
TSHARK_TLS_ARGS = ["-T", "fields", "-e", "tls.record.length", "-d", "tcp.port==443,tls"]


@dataclass
class Result:
    key: str
    label: str
    wall: list[float] = field(default_factory=list)
    work: list[float] = field(default_factory=list)
    rss_kb: list[int] = field(default_factory=list)
    scale: float = 1.0  # extrapolation factor (scapy full parse of a slice)
    note: str = ""

    @property
    def best(self) -> float:
        return min(self.wall) * self.scale

    @property
    def best_work(self) -> float | None:
        return min(self.work) * self.scale if self.work else None


@dataclass
class Spawned:
    """One child's run: wall seconds, CPU seconds (user + sys, its waited-for children's
    included: ``wait4``'s rusage, what ``/usr/bin/time -v`` reports), peak RSS KiB
    (``ru_maxrss``), stdout (unless sent elsewhere), stderr, exit status."""

    wall: float
    user: float
    sys: float
    rss_kb: int
    out: str
    err: str
    code: int

    @property
    def cpu(self) -> float:
        return self.user + self.sys


def spawn_wait4(cmd: list[str], stdout: str | None = None) -> Spawned:
    """Run ``cmd``, reaped with wait4 so the rusage is this child's alone (and its
    children's it waited for).  ``stdout``: None keeps it (returned), a path writes it
    there (``os.devnull`` discards it)."""
    import tempfile

    env = dict(os.environ, LC_ALL="C", HOME=os.environ.get("HOME", "/tmp"))
    t0 = time.perf_counter()
    with (
        open(stdout, "wb") if stdout is not None else tempfile.TemporaryFile() as so,
        tempfile.TemporaryFile() as se,
    ):
        pid = os.posix_spawn(
            cmd[0],
            cmd,
            env,
            file_actions=[
                (os.POSIX_SPAWN_DUP2, so.fileno(), 1),
                (os.POSIX_SPAWN_DUP2, se.fileno(), 2),
            ],
        )
        _, status, ru = os.wait4(pid, 0)
        wall = time.perf_counter() - t0
        out = ""
        if stdout is None:
            so.seek(0)
            out = so.read().decode()
        se.seek(0)
        err = se.read().decode(errors="replace")
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        sys.stderr.write(f"command failed ({code}): {' '.join(cmd)}\n{err[-2000:]}\n")
    return Spawned(wall, ru.ru_utime, ru.ru_stime, int(ru.ru_maxrss), out, err, code)


def _popen_wait4(cmd: list[str], stdout_to_null: bool) -> tuple[float, int, str, int]:
    """Run ``cmd``, reaped with wait4 so the rusage is this child's alone.

    Returns (wall seconds, peak RSS KiB, stdout, exit status).
    """
    r = spawn_wait4(cmd, os.devnull if stdout_to_null else None)
    return r.wall, r.rss_kb, r.out, r.code


def machine() -> dict[str, str]:
    info: dict[str, str] = {}
    model = ""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    info["CPU"] = model or platform.processor() or platform.machine()
    info["cores"] = f"{os.cpu_count()} logical, {len(os.sched_getaffinity(0))} usable"
    try:
        mem = next(ln for ln in open("/proc/meminfo") if ln.startswith("MemTotal"))
        info["RAM"] = f"{int(mem.split()[1]) / 1024 / 1024:.1f} GiB"
    except (OSError, StopIteration):
        pass
    info["OS"] = f"{platform.system()} {platform.release()}"
    info["Python"] = platform.python_version()
    code = (
        "import json, numpy, pandas\n"
        "v = {'numpy': numpy.__version__, 'pandas': pandas.__version__}\n"
        "for m in ('dpkt', 'scapy'):\n"
        "    try:\n"
        "        v[m] = __import__(m).__version__\n"
        "    except Exception:\n"
        "        v[m] = 'not installed'\n"
        "print(json.dumps(v))"
    )
    v = json.loads(
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout
    )
    info.update(v)
    ts = shutil.which("tshark")
    if ts:
        first = subprocess.run(
            [ts, "--version"], capture_output=True, text=True
        ).stdout.splitlines()
        info["tshark"] = first[0] if first else "?"
    else:
        info["tshark"] = "not installed"
    return info


def pcapkit_state() -> str:
    """Git commit of the tree being measured, and whether pcapkit/ has local changes."""
    import hashlib

    h = hashlib.sha1()
    for f in sorted((ROOT / "pcapkit").rglob("*.py")):
        h.update(f.read_bytes())
    try:
        head = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain", "--", "pcapkit"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.splitlines()
    except (OSError, subprocess.CalledProcessError):
        return f"pcapkit/ sources sha1 {h.hexdigest()[:10]}"
    extra = f" + uncommitted changes in {len(dirty)} file(s) under pcapkit/" if dirty else ""
    return f"commit {head}{extra} (pcapkit/*.py sha1 {h.hexdigest()[:10]})"


def fmt_mb(kb: int) -> str:
    return f"{kb / 1024:.0f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "pcap", nargs="*", default=[str(HERE / "out" / "big.pcap")], help="one or more captures"
    )
    ap.add_argument(
        "--reps", type=int, default=3, help="interleaved rounds; best wall time is kept"
    )
    ap.add_argument("--out", default=str(HERE / "RESULTS.md"), help="markdown report ('' for none)")
    ap.add_argument(
        "--scapy-slice", type=int, default=50_000, help="packets for scapy's full parse (0: skip)"
    )
    ap.add_argument(
        "--only",
        default="",
        help="comma-separated subset of: " + ",".join(list(TOOLS) + ["tshark"]),
    )
    a = ap.parse_args(argv)
    load0 = os.getloadavg()
    state0 = pcapkit_state()
    lines = ["# pcapkit benchmark results\n"]
    for path in a.pcap:
        lines += bench_one(os.path.abspath(path), a)
    load1 = os.getloadavg()
    info = machine()
    state1 = pcapkit_state()
    info["pcapkit"] = state1 if state1 == state0 else f"{state0} at the start, {state1} at the end"
    lines.append("## Machine\n")
    for k, v in info.items():
        lines.append(f"- {k}: {v}")
    lines.append(f"- load average (1 min) before / after: {load0[0]:.2f} / {load1[0]:.2f}")
    lines.append("")
    lines.append(
        "Notes: peak RSS of pcapkit includes the pages of the memory-mapped capture it "
        "touched (the whole file); dpkt and scapy stream the file through a small buffer. "
        "The scapy full-parse row times a slice and scales the parse time (not start-up) "
        "to the whole file; its RSS is the slice's.\n"
    )
    text = "\n".join(lines)
    print(text)
    if a.out:
        Path(a.out).write_text(text)
        print(f"written to {a.out}", file=sys.stderr)
    return 0


def bench_one(path: str, a: argparse.Namespace) -> list[str]:
    """Benchmark every tool on one capture; return its markdown section."""
    size = os.path.getsize(path)
    py = sys.executable

    # frame count (for the scapy extrapolation) from the manifest, else by counting
    n_frames = None
    try:
        n_frames = json.load(open(path + ".json"))["packets"]
    except (OSError, KeyError, ValueError):
        pass

    keys = ["pcapkit_packets", "pcapkit_full", "tshark", "dpkt", "scapy_raw"]
    try:
        tls_payload = json.load(open(path + ".json")).get("payload") == "tls"
    except (OSError, ValueError):
        tls_payload = False
    if tls_payload:
        keys += ["pcapkit_tls", "tshark_tls"]
    if a.scapy_slice > 0:
        keys.append("scapy_full")
    if a.only:
        keys = [k for k in keys if k in a.only.split(",")]
    tshark = shutil.which("tshark")
    if tshark is None:
        for k in ("tshark", "tshark_tls"):
            if k in keys:
                print(f"tshark not installed: {k} skipped", file=sys.stderr)
                keys.remove(k)

    results: dict[str, Result] = {}
    for k in keys:
        if k == "tshark":
            label = "tshark: `-T fields -e " + " -e ".join(TSHARK_FIELDS) + "` > /dev/null"
        elif k == "tshark_tls":
            label = "tshark: `" + " ".join(TSHARK_TLS_ARGS) + "` > /dev/null"
        else:
            label = TOOLS[k][0]
        results[k] = Result(k, label)

    # pcapkit runs from the source tree (editable install): compile its bytecode once,
    # as pip does for every installed package (dpkt, scapy, pandas have theirs), so no
    # round pays for compiling it (PYTHONDONTWRITEBYTECODE would otherwise make every
    # round compile ~100 ms of modules again)
    for pkg in ("pcapkit", "dissectors"):
        compileall.compile_dir(str(ROOT / pkg), quiet=1)

    # warm the page cache so no tool pays for the first read from disk
    with open(path, "rb") as f:
        while f.read(1 << 24):
            pass

    t_start = time.time()
    print(
        f"{path}: {size / 1e6:.1f} MB; {a.reps} interleaved rounds of {', '.join(keys)}",
        file=sys.stderr,
    )
    for rnd in range(a.reps):
        for k in keys:
            r = results[k]
            if k == "tshark":
                cmd = [tshark, "-r", path, "-T", "fields"]  # type: ignore[list-item]
                for fld in TSHARK_FIELDS:
                    cmd += ["-e", fld]
                wall, rss, out, code = _popen_wait4(cmd, stdout_to_null=True)
            elif k == "tshark_tls":
                cmd = [tshark, "-r", path, *TSHARK_TLS_ARGS]  # type: ignore[list-item]
                wall, rss, out, code = _popen_wait4(cmd, stdout_to_null=True)
            else:
                code_s = PY_PRELUDE + TOOLS[k][1]
                cmd = [py, "-c", code_s, path]
                if k == "scapy_full":
                    cmd.append(str(a.scapy_slice))
                wall, rss, out, code = _popen_wait4(cmd, stdout_to_null=False)
                if code == 0:
                    d = json.loads(out.strip().splitlines()[-1])
                    r.work.append(float(d["work_s"]))
                    if k == "scapy_full":
                        n = n_frames or d["n"]
                        r.scale = n / max(d["n"], 1)
                        r.label = TOOLS[k][0].format(k=d["n"], x=r.scale)
                        # only the parse scales with the packet count, not start-up
                        wall = float(d["work_s"]) + (wall - float(d["work_s"])) / r.scale
            if code != 0:
                r.note = f"failed (exit {code})"
                continue
            r.wall.append(wall)
            r.rss_kb.append(rss)
            print(
                f"  round {rnd + 1}: {k:16s} {wall * (r.scale if k == 'scapy_full' else 1):8.2f} s"
                f"  peak RSS {rss / 1024:7.0f} MiB",
                file=sys.stderr,
                flush=True,
            )
    ref = results.get("pcapkit_full")
    lines = []
    try:
        man = json.load(open(path + ".json"))
        payload = {
            "tls": "TLS 1.3 application-data records on port 443",
            "random": "opaque random payload on ports 7443/8443/9000/9443",
        }.get(man.get("payload", ""), "payload unknown")
        lines.append(
            f"## `{os.path.basename(path)}`: {man['connections']:,} TCP connections, {payload}\n"
        )
    except (OSError, KeyError, ValueError):
        lines.append(f"## `{os.path.basename(path)}`\n")
    lines.append(
        f"Capture: `{os.path.relpath(path, ROOT) if path.startswith(str(ROOT)) else path}`, "
        f"{size / 1e6:.1f} MB ({size / 2**20:.0f} MiB)"
        + (f", {n_frames:,} packets" if n_frames else "")
        + f". {a.reps} interleaved rounds, best wall time of the rounds; "
        f"each tool in a fresh process (wall time includes interpreter start-up and imports). "
        f"Measured {time.strftime('%Y-%m-%d %H:%M', time.localtime(t_start))}.\n"
    )
    lines.append(
        "| tool | seconds | × pcapkit full reassembly | per-round ratios | in-process s "
        "| peak RSS MiB | RSS / file size |"
    )
    lines.append("|---|---:|---:|---:|---:|---:|---:|")
    for k in keys:
        r = results[k]
        if not r.wall:
            lines.append(f"| {r.label} | {r.note or 'n/a'} | | | | | |")
            continue
        ratio = f"{r.best / ref.best:.1f}×" if ref and ref.wall else "n/a"
        rounds = "n/a"
        if ref and ref.wall and len(ref.wall) == len(r.wall):
            rounds = " / ".join(
                f"{w * r.scale / rw:.1f}" for w, rw in zip(r.wall, ref.wall, strict=True)
            )
        work = f"{r.best_work:.2f}" if r.best_work is not None else "—"
        rss = max(r.rss_kb)
        star = " (slice)" if k == "scapy_full" else ""
        lines.append(
            f"| {r.label} | {r.best:.2f} | {ratio} | {rounds} | {work} | {fmt_mb(rss)}{star} "
            f"| {rss * 1024 / size:.2f}{star} |"
        )
    lines.append("")
    lines.append(
        "seconds: best wall time over the rounds. × pcapkit full reassembly: that best time "
        "over pcapkit's best (higher: pcapkit is faster); per-round ratios: the same ratio "
        "within each round (the two ran back to back), which shows how much background load "
        "moved the result.\n"
    )

    # targets (issue 2)
    if ref and ref.wall:
        lines.append("Targets (issue 2) on this capture:\n")
        t = results.get("tshark")
        d = results.get("dpkt")

        def span(r: Result) -> str:
            if len(r.wall) != len(ref.wall) or len(r.wall) < 2:
                return ""
            xs = [w / rw for w, rw in zip(r.wall, ref.wall, strict=True)]
            return f" (per round {min(xs):.1f}–{max(xs):.1f}×)"

        if t and t.wall:
            x = t.best / ref.best
            lines.append(
                f"- full reassembly ≥ 10× faster than the tshark command: "
                f"**{x:.1f}×, {'met' if x >= 10 else 'NOT met'}**{span(t)}"
            )
        if d and d.wall:
            x = d.best / ref.best
            lines.append(
                f"- full reassembly ≥ 3× faster than the dpkt parse: "
                f"**{x:.1f}×, {'met' if x >= 3 else 'NOT met'}**{span(d)}"
            )
        tt, pt = results.get("tshark_tls"), results.get("pcapkit_tls")
        if tt and tt.wall and pt and pt.wall:
            x = tt.best / pt.best
            per_round = ""
            if len(tt.wall) == len(pt.wall) >= 2:
                xs = [a / b for a, b in zip(tt.wall, pt.wall, strict=True)]
                per_round = f" (per round {min(xs):.1f}–{max(xs):.1f}×)"
            lines.append(
                f"- (issue 3) TLS record walking and alignment ≥ 10× faster than tshark's "
                f"`tls.record.length`: **{x:.1f}×, {'met' if x >= 10 else 'NOT met'}**{per_round}"
            )
        for k in ("pcapkit_full", "pcapkit_packets", "pcapkit_tls"):
            r = results.get(k)
            if r and r.rss_kb:
                x = max(r.rss_kb) * 1024 / size
                lines.append(
                    f"- peak memory below 2× the file size ({k}): **{x:.2f}×, {'met' if x < 2 else 'NOT met'}**"
                )
        lines.append("")

    return lines


if __name__ == "__main__":
    sys.exit(main())
