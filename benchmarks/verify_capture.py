#!/usr/bin/env python3
"""Check a generated capture against tshark, its manifest and pcapkit.

    python benchmarks/verify_capture.py                      # generates a small one
    python benchmarks/verify_capture.py benchmarks/out/x.pcap  # an existing one (+ .json)

Checks:
1. tshark reads every frame, with no malformed packets and no expert errors;
2. tshark's tcp.stream count = the manifest's connection count = pcapkit's flows;
3. pcapkit's per-flow reassembled bytes (c2s_bytes / s2c_bytes) = the manifest, for
   every flow, and no flow has missing bytes;
4. for a handful of streams (with losses, reordering, a reused 5-tuple, the largest,
   random ones): ``tshark -z follow,tcp,raw,N`` bytes = ``Trace.stream`` bytes.
Exit status 0 when all hold.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

import numpy as np  # noqa: E402

import pcapkit  # noqa: E402

import tshark_util  # noqa: E402


def tls_tiles(data: bytes) -> bool:
    """Do TLS 1.3 application-data records (17 03 03 len) tile ``data`` exactly?"""
    p = 0
    while p + 5 <= len(data):
        if data[p : p + 3] != b"\x17\x03\x03":
            return False
        p += 5 + int.from_bytes(data[p + 3 : p + 5], "big")
    return p == len(data)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pcap", nargs="?", help="capture to check (default: generate one)")
    ap.add_argument("-n", "--packets", type=int, default=20_000)
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--port-reuse", type=float, default=0.2, help="when generating")
    ap.add_argument(
        "--follow", type=int, default=8, help="streams to compare with tshark follow (0: none)"
    )
    a = ap.parse_args(argv)
    if tshark_util.TSHARK is None:
        print("tshark is not installed", file=sys.stderr)
        return 2
    tmp = None
    if a.pcap is None:
        tmp = tempfile.TemporaryDirectory(prefix="pcapkit-verify-")
        path = os.path.join(tmp.name, "v.pcap")
        subprocess.run(
            [
                sys.executable,
                str(HERE / "gen_capture.py"),
                "-n",
                str(a.packets),
                "-o",
                path,
                "--seed",
                str(a.seed),
                "--port-reuse",
                str(a.port_reuse),
            ],
            check=True,
        )
    else:
        path = a.pcap
    man = json.load(open(path + ".json"))
    ok = True

    def check(cond: bool, what: str) -> None:
        nonlocal ok
        ok &= bool(cond)
        print(f"{'ok  ' if cond else 'FAIL'} {what}")

    t0 = time.perf_counter()

    # 1. tshark: frames, malformed, expert errors.  With tshark's default preferences
    # TCP reassembly for a dissector above TCP (TLS) gives up on out-of-order segments
    # and then misparses (as it does on real captures); with out-of-order reassembly
    # on, the capture must dissect without a single error, checksums included.
    def tshark_expert(prefs: list[str]) -> tuple[str, str]:
        p = subprocess.run(
            [tshark_util.TSHARK, "-r", path, *prefs, "-q", "-z", "expert,error", "-z", "io,phs"],
            capture_output=True,
            text=True,
            env={"LC_ALL": "C", "HOME": "/tmp"},
        )
        return p.stdout, p.stderr

    def errors(out: str) -> str:
        rows = []
        body = False
        for ln in out.splitlines():
            if ln.startswith("Errors ("):
                body = True
            elif body and ln.startswith("="):
                continue
            elif body and ln.strip() and not ln.strip().startswith("Frequency"):
                if ln.startswith("Protocol Hierarchy") or ln.startswith("Filter"):
                    break
                rows.append(" ".join(ln.split()))
        return "; ".join(r for r in rows if r[0].isdigit())

    out, err = tshark_expert([])
    frames_line = next((ln for ln in out.splitlines() if ln.strip().startswith("eth ")), "")
    ts_frames = int(frames_line.split("frames:")[1].split()[0]) if "frames:" in frames_line else -1
    check(ts_frames == man["packets"], f"tshark frames {ts_frames} = manifest {man['packets']}")
    check(err.strip() == "" or "dangerous" in err, f"tshark stderr clean {err.strip()[:200]!r}")
    proto_lines = [ln.split()[0] for ln in out.splitlines() if "frames:" in ln]
    print(f"     protocol hierarchy: {' / '.join(proto_lines)}")
    print(f"     expert errors with default preferences: {errors(out) or 'none'}")
    strict = [
        "-o",
        "tcp.reassemble_out_of_order:TRUE",
        "-o",
        "tcp.check_checksum:TRUE",
        "-o",
        "ip.check_checksum:TRUE",
    ]
    out2, _ = tshark_expert(strict)
    check(
        "malformed" not in out2.lower() and "Errors (" not in out2,
        "tshark (out-of-order reassembly on, checksums checked): no malformed packet, no expert "
        "error" + (f" — {errors(out2)}" if errors(out2) else ""),
    )

    # 2. streams
    n_ts = tshark_util.tcp_stream_count(path)
    t = pcapkit.open(path)
    fl = t.flows
    check(t.frames == man["packets"], f"pcapkit frames {t.frames} = manifest")
    check(
        n_ts == man["tcp_streams"] == len(fl),
        f"tcp streams: tshark {n_ts}, manifest {man['tcp_streams']}, pcapkit {len(fl)}"
        f" ({man['port_reuse']} reuse a 5-tuple)",
    )

    # 3. bytes per flow vs the manifest (streams are in first-packet order in both)
    ms = man["streams"]
    if len(fl) == len(ms):
        exp_c = np.array([s["c2s_bytes"] for s in ms])
        exp_s = np.array([s["s2c_bytes"] for s in ms])
        exp_cli = [s["client"] for s in ms]
        got_cli = [f"{ip}:{port}" for ip, port in zip(fl.client_ip, fl.client_port, strict=True)]
        check(exp_cli == got_cli, "client endpoint of every stream = manifest")
        bad = np.nonzero((fl.c2s_bytes.to_numpy() != exp_c) | (fl.s2c_bytes.to_numpy() != exp_s))[0]
        check(
            bad.shape[0] == 0,
            f"c2s/s2c bytes of all {len(fl)} flows = manifest"
            + (f" (differ: streams {bad[:10].tolist()})" if bad.shape[0] else ""),
        )
        miss = int(fl.c2s_missing.sum() + fl.s2c_missing.sum())
        check(miss == 0, f"no missing bytes (pcapkit says {miss})")

    # 4. byte-exact streams vs tshark follow
    rng = np.random.default_rng(0)
    pick: list[int] = []
    for key in ("reuses_tuple", "lost", "reordered"):
        pick += [s["stream"] for s in ms if s.get(key)][:2]
    pick.append(int(np.argmax([s["c2s_bytes"] + s["s2c_bytes"] for s in ms])))
    pick += rng.choice(len(ms), size=min(len(ms), a.follow), replace=False).tolist()
    pick = list(dict.fromkeys(pick))[: a.follow]
    for s in pick:
        f = tshark_util.follow_tcp(path, s)
        flow = int(np.nonzero(fl.stream.to_numpy() == s)[0][0])
        c2s, s2c = t.stream(flow, "c2s"), t.stream(flow, "s2c")
        same = bytes(c2s) == f.data[0] and bytes(s2c) == f.data[1] and f.missing == [0, 0]
        if man.get("payload") == "tls":
            same &= tls_tiles(bytes(c2s)) and tls_tiles(bytes(s2c))
        check(
            same,
            f"stream {s} ({ms[s]['kind']}, lost {ms[s]['lost']}, reordered "
            f"{ms[s].get('reordered', 0)}, reused tuple {ms[s].get('reuses_tuple', False)}): "
            f"follow {len(f.data[0])}/{len(f.data[1])} B = pcapkit {len(c2s)}/{len(s2c)} B"
            + (", TLS records tile both directions" if man.get("payload") == "tls" else ""),
        )
    print(
        f"{'all checks passed' if ok else 'SOME CHECKS FAILED'} ({time.perf_counter() - t0:.1f} s)"
    )
    if tmp is not None:
        tmp.cleanup()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
