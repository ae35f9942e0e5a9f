#!/usr/bin/env python3
"""`pcapkit analyze` against tshark on four synthetic traffic shapes (issue 16).

    python benchmarks/shapes.py                      # 100k and 1M packets, 3 rounds
    python benchmarks/shapes.py --sizes 100000,1000000,5000000 --reps 2
    python benchmarks/shapes.py --shapes sse --sizes 200000 --reps 1 --out ''

For each shape (``gen_capture.py --shape``: bulk, sse, h2, quic) and size, the capture
is generated once into ``benchmarks/out/`` (deterministic, seed 1), then every tool
runs in a fresh process, interleaved round after round over all the captures, and
the best wall time of the rounds is kept (``run.py``'s method: ``posix_spawn`` +
``wait4``, peak RSS from the child's ``ru_maxrss``):

* ``analyze``: ``pcapkit analyze --format json <p> > /dev/null`` — every table, every
  detector and the JSON report, interpreter start-up and imports included;
* ``tshark``: ``tshark -T fields`` with ``frame.number, tcp.stream, tcp.seq, tcp.len,
  tcp.flags.push`` (on the QUIC shape ``frame.number, udp.stream, udp.length,
  quic.header_form, quic.dcid``: the UDP conversation and the QUIC header walk,
  the closest analogue);
* ``reassembly``: ``pcapkit.open(p)``, ``.segments``, ``.flows`` (TCP shapes);
* ``records``: ``pcapkit.open(p).records`` (TCP shapes);
* ``tshark_tls``: ``tshark -T fields -e tls.record.length -d tcp.port==443,tls``
  (TCP shapes; ``--no-tshark-tls`` skips it, it is the slowest row).

The result is written between the ``<!-- shapes -->`` markers of ``--out``
(``benchmarks/RESULTS.md``): ratios measured in one run, never timed tests.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import run  # noqa: E402  (benchmarks/run.py: the spawn/wait4 helper, pcapkit rows)

SHAPES = ("bulk", "sse", "h2", "quic")
TSHARK_QUIC_FIELDS = ["frame.number", "udp.stream", "udp.length", "quic.header_form", "quic.dcid"]
MARK_BEGIN, MARK_END = "<!-- shapes -->", "<!-- /shapes -->"


def capture(shape: str, n: int, outdir: Path) -> Path:
    p = outdir / f"{shape}-{n // 1000}k.pcap"
    if not p.exists() or not Path(str(p) + ".json").exists():
        cmd = [sys.executable, str(HERE / "gen_capture.py"), "-n", str(n), "-o", str(p)]
        subprocess.run([*cmd, "--shape", shape, "--seed", "1"], check=True)
    return p


def commands(
    shape: str, p: Path, tshark_tls: bool, baseline: str | None = None
) -> dict[str, list[str]]:
    py = sys.executable
    ts = shutil.which("tshark")
    cmds: dict[str, list[str]] = {
        "analyze": [py, "-m", "pcapkit.cli", "analyze", "--format", "json", str(p)],
    }
    if baseline:
        # the same command from another tree (e.g. the commit before an optimisation)
        code = (
            f"import sys; sys.path.insert(0, {baseline!r}); "
            "sys.argv = ['pcapkit', 'analyze', '--format', 'json', sys.argv[1]]; "
            "from pcapkit.cli import main; main()"
        )
        cmds["analyze_base"] = [py, "-c", code, str(p)]
    if ts:
        fields = TSHARK_QUIC_FIELDS if shape == "quic" else run.TSHARK_FIELDS
        cmds["tshark"] = [ts, "-r", str(p), "-T", "fields"] + [x for f in fields for x in ("-e", f)]
    if shape != "quic":
        for key, tool in (("reassembly", "pcapkit_full"), ("records", "pcapkit_tls")):
            cmds[key] = [py, "-c", run.PY_PRELUDE + run.TOOLS[tool][1], str(p)]
        if ts and tshark_tls:
            cmds["tshark_tls"] = [ts, "-r", str(p), *run.TSHARK_TLS_ARGS]
    return cmds


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--sizes", default="100000,1000000", help="packets (5000000: the big run)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--outdir", default=str(HERE / "out"))
    ap.add_argument("--out", default=str(HERE / "RESULTS.md"), help="'' for stdout only")
    ap.add_argument("--no-tshark-tls", action="store_true")
    ap.add_argument(
        "--baseline",
        help="a directory holding another pcapkit/ and dissectors/ (e.g. `git archive` of an "
        "older commit): its analyze runs in the same rounds, as a before/after column",
    )
    a = ap.parse_args(argv)
    os.environ["PYTHONPATH"] = str(ROOT)  # the tree being measured, not an installed pcapkit
    os.chdir(ROOT)
    outdir = Path(a.outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    caps = [
        (shape, n, capture(shape, n, outdir))
        for n in (int(x) for x in a.sizes.split(","))
        for shape in a.shapes.split(",")
    ]
    # byte code for the measured tree and the baseline alike: with PYTHONDONTWRITEBYTECODE
    # a tree without it compiles every module in every run (~0.4-0.8 s CPU here)
    for tree in (ROOT, *([Path(a.baseline)] if a.baseline else [])):
        for pkg in ("pcapkit", "dissectors"):
            import compileall

            compileall.compile_dir(str(tree / pkg), quiet=1)
    plan = {(s, n): commands(s, p, not a.no_tshark_tls, a.baseline) for s, n, p in caps}
    res: dict[tuple[str, int], dict[str, list[tuple[float, int]]]] = {
        k: {t: [] for t in v} for k, v in plan.items()
    }
    load0 = os.getloadavg()
    state = run.pcapkit_state()  # the tree as the rounds start
    t_start = time.time()
    for rnd in range(a.reps):
        for s, n, p in caps:
            with open(p, "rb") as f:  # page cache warm for every tool alike
                while f.read(1 << 24):
                    pass
            for tool, cmd in plan[(s, n)].items():
                wall, rss, _out, code = run._popen_wait4(cmd, stdout_to_null=True)
                if code == 0:
                    res[(s, n)][tool].append((wall, rss))
                print(
                    f"round {rnd + 1} {s:5s} {n:>8d} {tool:11s} {wall:7.2f} s "
                    f"{rss / 1024:7.0f} MiB" + ("" if code == 0 else f" FAILED {code}"),
                    file=sys.stderr,
                    flush=True,
                )
    load1 = os.getloadavg()
    lines = [
        MARK_BEGIN,
        "## Traffic shapes: `pcapkit analyze --format json` against `tshark -T fields` (issue 16)\n",
        f"Synthetic captures from `gen_capture.py --shape` (seed 1; see the README). "
        f"{a.reps} interleaved rounds over all captures, best wall time per tool, each in a "
        f"fresh process (start-up included). Measured "
        f"{time.strftime('%Y-%m-%d %H:%M', time.localtime(t_start))}, load average "
        f"{load0[0]:.1f} before / {load1[0]:.1f} after (a shared 2-core machine). "
        f"pcapkit: {state}.\n",
        "| shape | packets | MB | analyze s | tshark s | **tshark / analyze** | per round "
        "| reassembly s | tshark / reassembly | records s | tshark TLS s | tshark TLS / records "
        "| analyze peak RSS / file |"
        + (" baseline analyze s | baseline RSS / file |" if a.baseline else ""),
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
        + ("---:|---:|" if a.baseline else ""),
    ]

    def best(v: list[tuple[float, int]]) -> float | None:
        return min(w for w, _ in v) if v else None

    for s, n, p in caps:
        r = res[(s, n)]
        size = p.stat().st_size
        an, ts, re, rc, tt = (
            best(r.get(k, [])) for k in ("analyze", "tshark", "reassembly", "records", "tshark_tls")
        )
        man = json.loads(Path(str(p) + ".json").read_text())

        def f(x: float | None) -> str:
            return f"{x:.2f}" if x is not None else "—"

        def ratio(x: float | None, y: float | None) -> str:
            return f"{x / y:.1f}×" if x is not None and y else "—"

        rounds = "—"
        if r.get("tshark") and len(r["tshark"]) == len(r["analyze"]):
            rounds = " / ".join(
                f"{t[0] / q[0]:.1f}" for t, q in zip(r["tshark"], r["analyze"], strict=True)
            )
        rss = max(x for _, x in r["analyze"]) * 1024 / size if r["analyze"] else None
        base = ""
        if a.baseline:
            bv = r.get("analyze_base", [])
            brss = max(x for _, x in bv) * 1024 / size if bv else None
            base = f" {f(best(bv))} | {f(brss)} |"
        lines.append(
            f"| {s} | {man['packets']:,} | {size / 1e6:.0f} | {f(an)} | {f(ts)} | "
            f"**{ratio(ts, an)}** | {rounds} | {f(re)} | {ratio(ts, re)} | {f(rc)} | {f(tt)} | "
            f"{ratio(tt, rc)} | {f(rss)} |" + base
        )
    lines += [
        "",
        "tshark fields: `frame.number tcp.stream tcp.seq tcp.len tcp.flags.push`; on the QUIC "
        "shape `" + " ".join(TSHARK_QUIC_FIELDS) + "`. Peak RSS is the child's `ru_maxrss` "
        "(the memory-mapped capture's touched pages included).",
        MARK_END,
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        out = Path(a.out)
        old = out.read_text() if out.exists() else ""
        if MARK_BEGIN in old and MARK_END in old:
            head, rest = old.split(MARK_BEGIN, 1)
            tail = rest.split(MARK_END, 1)[1].lstrip("\n")
            new = head + text + ("\n" + tail if tail else "")
        else:
            new = old.rstrip("\n") + "\n\n" + text
        out.write_text(new)
        print(f"written to {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
