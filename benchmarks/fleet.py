#!/usr/bin/env python3
"""Issue 20 benchmark: ``pcapkit shard`` beside editcap / tshark -w, and ``pcapkit batch``
with 1 and 2 Dask workers (throughput and memory per worker).

    python benchmarks/fleet.py benchmarks/out/fleet.pcap --shards 8 --out benchmarks/FLEET.md

The input is a synthetic capture (benchmarks/gen_capture.py); one run of each tool, the
page cache warm (a first read of the file before the timings).  Splitting:
``pcapkit shard -n N`` (by connection, one pass, N pcapng files); ``editcap -c K``
(by packet count: no flow awareness, the floor for "copy the packets into N files");
``tshark -r IN -Y "tcp.stream % N == k" -w OUT`` once per k (tshark can write one
output per pass: N passes, each dissecting every packet).  Batch: ``pcapkit batch`` over
the N shards, into a fresh dataset each time, on a LocalCluster of 1 and of 2 worker
processes; memory per worker is the peak RSS each worker process reported, and the
tasks' own time (analysis and Parquet writing, from the done markers) beside the wall
time shows what the cluster's start and the contention for the cores cost.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _timed(cmd: list[str], **kw: object) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kw)  # type: ignore[call-overload]
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("capture")
    ap.add_argument("--shards", type=int, default=8)
    ap.add_argument("--out", default=None, help="write the Markdown table here too")
    args = ap.parse_args()
    cap = Path(args.capture)
    mb = cap.stat().st_size / 1e6
    n = args.shards
    cap.read_bytes()  # warm the page cache
    py = [sys.executable, "-m", "pcapkit.cli"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    rows: list[tuple[str, str, str]] = []
    with tempfile.TemporaryDirectory(prefix="pcapkit-fleet-") as tmp:
        t = Path(tmp)
        s = _timed([*py, "shard", str(cap), "-n", str(n), "-o", str(t / "shards")], env=env)
        rows.append((f"pcapkit shard -n {n}", f"{s:.2f} s", f"{mb / s:.0f} MB/s"))
        if shutil.which("editcap"):
            per = (
                max(
                    1,
                    int(
                        subprocess.run(
                            ["capinfos", "-c", "-M", str(cap)], capture_output=True, text=True
                        ).stdout.split()[-1]
                    )
                    // n
                    + 1,
                )
                if shutil.which("capinfos")
                else 100000
            )
            (t / "ed").mkdir()
            s = _timed(["editcap", "-c", str(per), str(cap), str(t / "ed" / "part.pcap")])
            rows.append((f"editcap -c (by count, {n} files)", f"{s:.2f} s", f"{mb / s:.0f} MB/s"))
        if shutil.which("tshark"):
            s = 0.0
            for k in range(n):
                s += _timed(
                    [
                        "tshark",
                        "-r",
                        str(cap),
                        "-Y",
                        f"tcp.stream % {n} == {k}",
                        "-w",
                        str(t / f"ts-{k}.pcapng"),
                    ]
                )
            rows.append(
                (
                    f"tshark -Y 'tcp.stream % {n} == k' -w ({n} passes)",
                    f"{s:.2f} s",
                    f"{mb / s:.1f} MB/s",
                )
            )
        shard_mb = sum(p.stat().st_size for p in (t / "shards").glob("*.pcapng")) / 1e6
        for workers in (1, 2):
            out = t / f"ds{workers}"
            s = _timed(
                [*py, "batch", str(t / "shards"), "--out", str(out), "--workers", str(workers)],
                env=env,
            )
            done = [json.loads(p.read_text()) for p in (out / "_done").glob("*.json")]
            rss: dict[int, float] = {}
            for d in done:
                rss[d["pid"]] = max(rss.get(d["pid"], 0.0), d["worker_max_rss_mb"])
            mem = ", ".join(f"{v:.0f}" for v in sorted(rss.values()))
            task_s = sum(d["seconds"] for d in done)
            rows.append(
                (
                    f"pcapkit batch, {workers} worker(s), {len(done)} shards",
                    f"{s:.2f} s",
                    f"{shard_mb / s:.1f} MB/s; tasks {task_s:.1f} s in all "
                    f"({task_s / max(len(done), 1):.2f} s each); peak RSS per worker {mem} MB",
                )
            )
    lines = [
        f"Input: {cap.name}, {mb:.1f} MB (synthetic, benchmarks/gen_capture.py); {os.cpu_count()} cores.",
        "",
        "| run | time | throughput |",
        "|---|---|---|",
        *[f"| {a} | {b} | {c} |" for a, b, c in rows],
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
