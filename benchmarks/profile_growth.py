#!/usr/bin/env python3
"""Which functions grow faster than the packet count (issue 16, "cost linear in packets").

    # one profile per size, same shape, on the CPU clock (process_time: on a loaded
    # machine the default wall clock profiles the load); PCAPKIT_THREADS=1 (one thread)
    python benchmarks/profile_growth.py profile sse-1M.pstats /work/shapes/sse-1000k.pcap
    python benchmarks/profile_growth.py profile sse-5M.pstats /work/shapes-5m/sse-5000k.pcap
    python benchmarks/profile_growth.py compare sse-1M.pstats:1000100 sse-5M.pstats:5000545

``profile`` runs ``pcapkit analyze --format json CAPTURE`` in this process under cProfile
with ``time.process_time`` as its clock (the JSON goes to ``--json``, default /dev/null).
``compare``: for every function in both profiles, its own time (``tottime``) and
cumulative time (``cumtime``) per packet in each, the growth factor (per-packet time at
the larger size over the smaller's: 1.0 is linear) and the excess — the seconds the
larger run spent beyond linear scaling of the smaller one.  Sorted by excess own time:
the top rows are where a superlinear cost lives.  Functions under 1 % of the larger run
are left out.
"""

from __future__ import annotations

import argparse
import pstats
import sys


def load(arg: str) -> tuple[dict[str, tuple[float, float, int]], int, float]:
    path, _, packets = arg.rpartition(":")
    st = pstats.Stats(path)
    out: dict[str, tuple[float, float, int]] = {}
    total = 0.0
    for (fn, line, name), (_cc, nc, tt, ct, _callers) in st.stats.items():  # type: ignore[attr-defined]
        short = fn.rsplit("/site-packages/", 1)[-1]
        for pkg in ("/pcapkit/", "/dissectors/"):  # the tree's own modules, wherever it is
            if pkg in short:
                short = pkg[1:] + short.rsplit(pkg, 1)[1]
        key = f"{short}:{line}({name})"
        out[key] = (tt, ct, nc)
        total += tt
    return out, int(packets), total


def profile(out: str, capture: str, json_out: str) -> int:
    import cProfile
    import os
    import time

    os.environ["PCAPKIT_THREADS"] = "1"  # cProfile sees the main thread only
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sys.path.insert(0, root)  # this tree's pcapkit, not an installed one
    from pcapkit.cli import main as cli

    prof = cProfile.Profile(time.process_time)
    saved = os.dup(1)
    fd = os.open(json_out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    code = 0
    try:
        prof.enable()
        try:
            sys.argv = ["pcapkit", "analyze", "--format", "json", capture]
            cli()
        except SystemExit as exc:
            code = int(exc.code or 0)
        finally:
            prof.disable()
            sys.stdout.flush()
    finally:
        os.dup2(saved, 1)
        os.close(fd)
    prof.dump_stats(out)
    print(f"{out}: {time.process_time():.2f} s CPU in this process", file=sys.stderr)
    return code


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    pp = sub.add_parser("profile", help="cProfile (CPU clock) of analyze --format json")
    pp.add_argument("out", help="PSTATS file to write")
    pp.add_argument("capture")
    pp.add_argument("--json", default="/dev/null", help="where the JSON report goes")
    cp = sub.add_parser("compare", help="per-packet growth of each function")
    cp.add_argument("small", help="PSTATS:PACKETS of the smaller capture")
    cp.add_argument("large", help="PSTATS:PACKETS of the larger capture")
    cp.add_argument("--top", type=int, default=25)
    cp.add_argument("--min-share", type=float, default=0.01)
    a = ap.parse_args(argv)
    if a.cmd == "profile":
        return profile(a.out, a.capture, a.json)
    s, ns, ts = load(a.small)
    g, ng, tg = load(a.large)
    k = ng / ns
    print(
        f"total own time {ts:.2f} s → {tg:.2f} s; packets ×{k:.2f}; "
        f"per packet ×{(tg / ng) / (ts / ns):.2f}"
    )
    rows = []
    for key, (tt, ct, nc) in g.items():
        if ct < a.min_share * tg:
            continue
        tt0, ct0, nc0 = s.get(key, (0.0, 0.0, 0))
        rows.append(
            (
                tt - tt0 * k,
                key,
                tt0,
                tt,
                (tt / ng) / (tt0 / ns) if tt0 else float("inf"),
                ct0,
                ct,
                (ct / ng) / (ct0 / ns) if ct0 else float("inf"),
                nc0,
                nc,
            )
        )
    rows.sort(reverse=True)
    print(
        f"{'excess own s':>12} {'own s small':>11} {'own s large':>11} {'own ×':>6} "
        f"{'cum s small':>11} {'cum s large':>11} {'cum ×':>6} {'calls small':>11} "
        f"{'calls large':>11}  function"
    )
    for ex, key, tt0, tt, gt, ct0, ct, gc, nc0, nc in rows[: a.top]:
        print(
            f"{ex:12.2f} {tt0:11.2f} {tt:11.2f} {gt:6.2f} {ct0:11.2f} {ct:11.2f} {gc:6.2f} "
            f"{nc0:11d} {nc:11d}  {key}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
