#!/usr/bin/env python3
"""`pcapkit analyze` against tshark on four synthetic traffic shapes (issue 16).

    python benchmarks/shapes.py                      # 100k and 1M packets, 3 rounds
    python benchmarks/shapes.py --sizes 100000,1000000,5000000 --reps 2
    python benchmarks/shapes.py --shapes sse --sizes 200000 --reps 1 --out ''

For each shape (``gen_capture.py --shape``: bulk, sse, h2, quic) and size, the capture
is generated once into ``benchmarks/out/`` (deterministic, seed 1), then every tool
runs in a fresh process, interleaved round after round over all the captures (the
tools' order turned by one each round), and the best wall time of the rounds is kept (``run.py``'s method: ``posix_spawn`` +
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

``--linearity`` (issue 16, "cost linear in packets"; ``make bench-linear``) measures
instead, per shape and size, ``pcapkit analyze --format json`` (its JSON written to a
file) in a fresh process: CPU user + sys (the child's ``wait4`` rusage, its forked
prefetch children included: what ``/usr/bin/time -v`` reports), wall, peak RSS; CPU per
packet and its ratio to the smaller sizes' (1.0: linear); ``tshark -T fields`` (the
fields above) at the sizes of ``--tshark-sizes`` (default the largest).  Results are kept
in ``--results`` (JSON, one entry per shape and size, updated run by run, so sizes can be
measured in separate runs) and the table is written between the ``<!-- linearity -->``
markers (``--reps 0``: only that, from ``--results``).  ``--capture-dirs`` names directories holding captures generated earlier
(``<shape>-<N/1000>k.pcap`` + ``.json``), used before generating into ``--outdir``.
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
LIN_BEGIN, LIN_END = "<!-- linearity -->", "<!-- /linearity -->"
STARTUP = "startup"  # the linearity results' entry of the fixed cost
STARTUP_CAPTURE = "fixtures/tls_sse_nagle/server.pcapng"  # 56 packets (the demo capture)


def capture(shape: str, n: int, outdir: Path, also: tuple[Path, ...] = ()) -> Path:
    name = f"{shape}-{n // 1000}k.pcap"
    for d in also:
        if (d / name).exists() and (d / (name + ".json")).exists():
            return d / name
    p = outdir / name
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
    ap.add_argument(
        "--linearity",
        action="store_true",
        help="analyze's CPU, wall and peak RSS per shape and size, CPU per packet (the "
        "linearity table); tshark at --tshark-sizes",
    )
    ap.add_argument("--tshark-sizes", help="linearity: sizes tshark runs at (default: largest)")
    ap.add_argument(
        "--results",
        default=str(HERE / "out" / "linearity.json"),
        help="linearity: JSON of every measurement, updated by each run",
    )
    ap.add_argument(
        "--capture-dirs",
        default="",
        help="comma-separated directories of captures generated earlier (used first)",
    )
    ap.add_argument("--nice", type=int, default=0, help="os.nice() increment for all runs")
    a = ap.parse_args(argv)
    if a.nice:
        os.nice(a.nice)
    os.environ["PYTHONPATH"] = str(ROOT)  # the tree being measured, not an installed pcapkit
    os.chdir(ROOT)
    outdir = Path(a.outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    also = tuple(Path(d) for d in a.capture_dirs.split(",") if d)
    caps = [
        # --linearity --reps 0 only writes the table from --results: no capture needed
        (shape, n, Path() if a.linearity and not a.reps else capture(shape, n, outdir, also))
        for n in (int(x) for x in a.sizes.split(","))
        for shape in a.shapes.split(",")
    ]
    # byte code for the measured tree and the baseline alike: with PYTHONDONTWRITEBYTECODE
    # a tree without it compiles every module in every run (~0.4-0.8 s CPU here)
    for tree in (ROOT, *([Path(a.baseline)] if a.baseline else [])):
        for pkg in ("pcapkit", "dissectors"):
            import compileall

            compileall.compile_dir(str(tree / pkg), quiet=1)
    if a.linearity:
        return linearity(a, caps)
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
            # the order turns by one each round: the first process after another
            # capture's tools runs slower here (up to ~1 s at 1M packets, whichever tool
            # it is), so no tool is always first
            tools = list(plan[(s, n)].items())
            k = rnd % len(tools)
            for tool, cmd in tools[k:] + tools[:k]:
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
        f"{a.reps} interleaved rounds over all captures (the tools' order turned by one each "
        "round), best wall time per tool, each in a "
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
    write_section("\n".join(lines) + "\n", a.out, MARK_BEGIN, MARK_END)
    return 0


def write_section(text: str, out_path: str, begin: str, end: str) -> None:
    """Print ``text`` (a section from ``begin`` to ``end``) and put it in ``out_path`` in
    place of the previous one (appended when there is none)."""
    print(text)
    if not out_path:
        return
    out = Path(out_path)
    old = out.read_text() if out.exists() else ""
    if begin in old and end in old:
        head, rest = old.split(begin, 1)
        tail = rest.split(end, 1)[1].lstrip("\n")
        new = head + text + ("\n" + tail if tail else "")
    else:
        new = old.rstrip("\n") + "\n\n" + text
    out.write_text(new)
    print(f"written to {out}", file=sys.stderr)


def tshark_fields_cmd(shape: str, p: Path) -> list[str] | None:
    ts = shutil.which("tshark")
    if not ts:
        return None
    fields = TSHARK_QUIC_FIELDS if shape == "quic" else run.TSHARK_FIELDS
    return [ts, "-r", str(p), "-T", "fields"] + [x for f in fields for x in ("-e", f)]


def linearity(a: argparse.Namespace, caps: list[tuple[str, int, Path]]) -> int:
    """Measure analyze (and tshark at the tshark sizes) on every capture, one run at a
    time, keep every measurement in ``a.results`` and write the linearity table."""
    import tempfile

    sizes = sorted({n for _, n, _ in caps})
    ts_sizes = {int(x) for x in a.tshark_sizes.split(",")} if a.tshark_sizes else {sizes[-1]}
    res_path = Path(a.results)
    res_path.parent.mkdir(parents=True, exist_ok=True)
    db: dict[str, dict[str, object]] = json.loads(res_path.read_text()) if res_path.exists() else {}
    state = run.pcapkit_state()
    # the fixed cost (interpreter, imports, the report of a tiny capture): best of 3 runs
    # on the demo fixture, so CPU per packet can be shown without it
    fixed = [
        run.spawn_wait4(
            [sys.executable, "-m", "pcapkit.cli", "analyze", "--format", "json", STARTUP_CAPTURE],
            stdout=os.devnull,
        )
        for _ in range(3 if a.reps else 0)
    ]
    if fixed and all(r.code == 0 for r in fixed):
        db[STARTUP] = dict(
            path=STARTUP_CAPTURE,
            analyze=[dict(cpu=r.cpu, wall=r.wall, rss_kb=r.rss_kb, pcapkit=state) for r in fixed],
        )
        print(f"start-up cpu {min(r.cpu for r in fixed):.2f} s", file=sys.stderr)
    for rnd in range(a.reps):
        for s, n, p in caps:
            with open(p, "rb") as f:  # page cache warm for every tool alike
                while f.read(1 << 24):
                    pass
            man = json.loads(Path(str(p) + ".json").read_text())
            key = f"{s}-{n}"
            entry = db.setdefault(key, {})
            entry.update(
                shape=s, size=n, path=str(p), packets=man["packets"], bytes=p.stat().st_size
            )
            with tempfile.TemporaryDirectory() as td:
                out_json = os.path.join(td, "analyze.json")
                cmd = [sys.executable, "-m", "pcapkit.cli", "analyze", "--format", "json", str(p)]
                load = os.getloadavg()[0]
                r = run.spawn_wait4(cmd, stdout=out_json)
                json_bytes = os.path.getsize(out_json)
            sharded = "flow-hash shards" in r.err
            print(
                f"round {rnd + 1} {s:5s} {n:>8d} analyze cpu {r.cpu:7.2f} s (user {r.user:.2f} "
                f"sys {r.sys:.2f}) wall {r.wall:7.2f} s {r.rss_kb / 1024:7.0f} MiB "
                f"json {json_bytes:,} B load {load:.1f}"
                + (" SHARDED" if sharded else "")
                + ("" if r.code == 0 else f" FAILED {r.code}"),
                file=sys.stderr,
                flush=True,
            )
            if r.code == 0:
                runs = entry.setdefault("analyze", [])
                assert isinstance(runs, list)
                if rnd == 0:
                    runs.clear()  # this run's measurements replace an older run's
                runs.append(
                    dict(
                        cpu=r.cpu,
                        user=r.user,
                        sys=r.sys,
                        wall=r.wall,
                        rss_kb=r.rss_kb,
                        json_bytes=json_bytes,
                        sharded=sharded,
                        load=load,
                        pcapkit=state,
                        at=time.strftime("%Y-%m-%d %H:%M"),
                    )
                )
            tcmd = tshark_fields_cmd(s, p)
            if tcmd and n in ts_sizes and rnd == 0:
                load = os.getloadavg()[0]
                t = run.spawn_wait4(tcmd, stdout=os.devnull)
                print(
                    f"round {rnd + 1} {s:5s} {n:>8d} tshark  cpu {t.cpu:7.2f} s wall "
                    f"{t.wall:7.2f} s {t.rss_kb / 1024:7.0f} MiB load {load:.1f}",
                    file=sys.stderr,
                    flush=True,
                )
                if t.code == 0:
                    entry["tshark"] = dict(
                        cpu=t.cpu,
                        wall=t.wall,
                        rss_kb=t.rss_kb,
                        load=load,
                        at=time.strftime("%Y-%m-%d %H:%M"),
                    )
            res_path.write_text(json.dumps(db, indent=1, sort_keys=True))
    write_section(
        linearity_table(db, [s for s in SHAPES if any(c[0] == s for c in caps)], sizes),
        a.out,
        LIN_BEGIN,
        LIN_END,
    )
    return 0


def linearity_table(db: dict[str, dict[str, object]], shapes: list[str], sizes: list[int]) -> str:
    """The linearity section from the measurements in ``db`` (best CPU of the runs)."""

    def best(key: str) -> dict[str, object] | None:
        runs = db.get(key, {}).get("analyze")
        if not runs:
            return None
        assert isinstance(runs, list)
        return min(runs, key=lambda x: float(x["cpu"]))

    lines = [
        LIN_BEGIN,
        "## Cost linear in packets: `pcapkit analyze --format json` at 100k / 1M / 5M (issue 16)\n",
        "Each row: one fresh process of `pcapkit analyze --format json CAPTURE > file`, "
        "niced, on the shapes of the table above (same generator, seed 1). **CPU** is user + "
        "sys of the process and its waited-for children (`wait4` rusage, what `/usr/bin/time "
        "-v` reports; the fair measure on this shared, loaded 2-core machine); **wall** is "
        "elapsed time, shown for reference only (it moves with the load). µs/packet = CPU / "
        "packets; *×smallest* and *×previous* divide it by the same shape's µs/packet at the "
        "smallest and at the next smaller size (1.0 = linear). *net*: µs/packet without the "
        f"fixed cost — the best CPU of `analyze` on `{STARTUP_CAPTURE}` (56 packets: "
        "interpreter, imports, a report), {fixed} — subtracted first; that cost is measured "
        "apart, at another moment, and its error weighs on the small captures (not a ratio "
        "to read at 100k). Peak RSS: the child's "
        "`ru_maxrss` (the memory-mapped capture's touched pages included). tshark: "
        "`-T fields` with the fields of the table above, one run, wall and CPU.\n",
        "| shape | packets | file MB | analyze CPU s | CPU µs/packet | ×smallest | ×previous "
        "| net µs/packet | wall s | peak RSS MiB | RSS / file | JSON MB | tshark wall s | tshark CPU s "
        "| tshark CPU / analyze CPU |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    fb = best(STARTUP)
    fixed = float(fb["cpu"]) if fb else 0.0  # type: ignore[arg-type]
    lines[2] = lines[2].replace("{fixed}", f"{fixed:.2f} s CPU" if fb else "not measured")
    notes: list[str] = []
    for s in shapes:
        per: dict[int, float] = {}
        for n in sizes:
            e = db.get(f"{s}-{n}")
            b = best(f"{s}-{n}")
            if e is None or b is None:
                continue
            pk, size = int(e["packets"]), int(e["bytes"])  # type: ignore[call-overload]
            cpu = float(b["cpu"])  # type: ignore[arg-type]
            us = cpu / pk * 1e6
            prev = [per[m] for m in sorted(per)]
            per[n] = us
            nus = (cpu - fixed) / pk * 1e6
            rss = int(b["rss_kb"]) * 1024  # type: ignore[call-overload]
            ts = e.get("tshark")
            tw = tc = tr = "—"
            if isinstance(ts, dict):
                tw, tc = f"{ts['wall']:.1f}", f"{ts['cpu']:.1f}"
                tr = f"{ts['cpu'] / cpu:.1f}×"
            if b.get("sharded"):
                notes.append(f"{s} {n:,}: analysed as flow-hash shards (memory budget)")
            lines.append(
                f"| {s} | {pk:,} | {size / 1e6:,.0f} | {cpu:.2f} | {us:.1f} | "
                + (f"{us / prev[0]:.2f}" if prev else "—")
                + " | "
                + (f"{us / prev[-1]:.2f}" if prev else "—")
                + f" | {nus:.1f} | {float(b['wall']):.1f} | {rss / 2**20:,.0f} | {rss / size:.2f} | "  # type: ignore[arg-type]
                f"{int(b['json_bytes']) / 1e6:.1f} | {tw} | {tc} | {tr} |"  # type: ignore[call-overload]
            )
    states = sorted(
        {str(r["pcapkit"]) for e in db.values() for r in e.get("analyze", [])}  # type: ignore[attr-defined]
    )
    lines += ["", "pcapkit: " + "; ".join(states) + "."] + [f"- {x}" for x in notes]
    lines.append(LIN_END)
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
