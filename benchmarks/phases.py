#!/usr/bin/env python3
"""Where the seconds of `pcapkit analyze --format json` go, phase by phase (issue 16).

    python benchmarks/phases.py benchmarks/out/sse-1000k.pcap benchmarks/out/h2-1000k.pcap
    python benchmarks/phases.py --reps 3 --out benchmarks/RESULTS.md CAPTURE...

Each round runs ``pcapkit analyze --format json CAPTURE > /dev/null`` in a fresh process
(``posix_spawn`` + ``wait4``, as ``run.py``), with this script as a wrapper around the
command line: it wraps the functions that make each table (``Trace``'s cached
properties and the detectors' entry points) to note when each began and ended on the
wall clock and on the process's CPU clock, and writes those times to a file when the
process exits.  Each phase is shown *exclusive* of the phases inside it (``records``
without the TLS walk it reads, ``detectors`` without the shared memos), so the rows add
up to the run:

* ``start-up``: spawn to the first phase (interpreter, imports, argument parsing);
* ``read`` … ``detectors``: the named steps (see PHASES);
* ``report``: the rest, to the process's exit (the JSON report; the tables it reads
  that no phase above made).

The round with the least wall time is shown, with every phase's least time over the
rounds beside it.  ``tshark -T fields ÷ 5``: one fifth of the wall time of ``shapes.py``'s tshark command on
the same capture (``--tshark``, one run): the whole run's budget under issue 16's 5× target.
CPU time is user + sys of this process; the forked children (the decode prefetch, the
detectors' side) are counted in the round's total only (``wait4``).  The wrapping costs
a few µs per call, a few hundred calls per run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

MARK_BEGIN, MARK_END = "<!-- phases -->", "<!-- /phases -->"

# (phase, what it wraps: "Trace.<cached property or method>" or "module:function"); a
# phase may wrap several
PHASES = (
    ("read", "Trace.__init__"),  # the capture mapped, its frames indexed
    ("packets, flows, reassembly", "Trace._net"),
    ("tables of packets, flows, segments", "Trace.packets"),
    ("tables of packets, flows, segments", "Trace.flows"),
    ("tables of packets, flows, segments", "Trace.segments"),
    ("TLS record walk", "Trace._tls"),
    ("records aligned", "Trace.records"),
    ("QUIC", "Trace._quic"),
    ("HTTP layer", "Trace._app"),
    ("session tables (tls, requests, …)", "Trace.tls"),
    ("session tables (tls, requests, …)", "Trace.tls_handshake"),
    ("session tables (tls, requests, …)", "Trace._handshake_times"),
    ("session tables (tls, requests, …)", "Trace.requests"),
    ("session tables (tls, requests, …)", "Trace.messages"),
    ("session tables (tls, requests, …)", "Trace.h2_windows"),
    ("session tables (tls, requests, …)", "Trace.quic_packets"),
    ("session tables (tls, requests, …)", "Trace.quic_frames"),
    ("anomalies", "Trace._layer_anomalies"),
    ("detector context", "Trace.detect_context"),
    ("shared detector memos", "pcapkit.detect.tcp_model:warm_shared"),
    ("detectors", "pcapkit.detect:run_detectors"),
    ("findings table, gaps", "Trace.findings"),
    ("findings table, gaps", "Trace.gaps"),
)
STARTUP, REPORT = "start-up", "report"


def _child(capture: str, out: str, t_spawn: float) -> None:
    """Run the command line on ``capture`` with the phases wrapped; their times to ``out``."""
    import atexit
    import functools
    from functools import cached_property

    spans: list[tuple[str, float, float, float, float]] = []  # (phase, t0, t1, c0, c1)

    def wrap(name: str, fn):  # type: ignore[no-untyped-def]
        @functools.wraps(fn)
        def w(*a, **k):  # type: ignore[no-untyped-def]
            t0, c0 = time.time(), time.process_time()
            try:
                return fn(*a, **k)
            finally:
                spans.append((name, t0, time.time(), c0, time.process_time()))

        return w

    import importlib

    from pcapkit import cli, trace

    for phase, target in PHASES:
        if target.startswith("Trace."):
            attr = target.split(".", 1)[1]
            v = trace.Trace.__dict__[attr]
            if isinstance(v, cached_property):
                v.func = wrap(phase, v.func)
            else:
                setattr(trace.Trace, attr, wrap(phase, v))
        else:
            mod, fn = target.split(":")
            m = importlib.import_module(mod)
            setattr(m, fn, wrap(phase, getattr(m, fn)))
    # (Trace and run_detectors import run_detectors and warm_shared from their modules
    # when called: they find the wrapped ones)
    me = os.getpid()

    def dump() -> None:
        if os.getpid() != me:  # a forked child (prefetch, the detectors' side) exiting
            return
        Path(out).write_text(
            json.dumps(
                {
                    "spawn": t_spawn,
                    "cpu_exit": time.process_time(),
                    "spans": spans,
                }
            )
        )

    atexit.register(dump)
    sys.argv = ["pcapkit", "analyze", "--format", "json", capture]
    cli.main()


def exclusive(spans: list[list], t_spawn: float, t_exit: float, cpu_exit: float) -> dict:
    """Per phase: (wall, cpu) seconds exclusive of the wrapped phases inside it, plus
    start-up and report (see the module's docstring)."""
    spans = sorted(spans, key=lambda s: (s[1], -s[2]))
    wall: dict[str, float] = {}
    cpu: dict[str, float] = {}
    for i, (name, t0, t1, c0, c1) in enumerate(spans):
        inner_w = inner_c = 0.0
        # direct children: spans inside this one, not inside another inside it
        kids = [s for s in spans[i + 1 :] if s[1] >= t0 and s[2] <= t1]
        top = [
            k for k in kids if not any(o is not k and o[1] <= k[1] and k[2] <= o[2] for o in kids)
        ]
        for k in top:
            inner_w += k[2] - k[1]
            inner_c += k[4] - k[3]
        wall[name] = wall.get(name, 0.0) + (t1 - t0) - inner_w
        cpu[name] = cpu.get(name, 0.0) + (c1 - c0) - inner_c
    outer = [
        s for s in spans if not any(o is not s and o[1] <= s[1] and s[2] <= o[2] for o in spans)
    ]
    first = min((s[1] for s in spans), default=t_exit)
    wall[STARTUP] = first - t_spawn
    cpu[STARTUP] = min((s[3] for s in spans), default=cpu_exit)
    wall[REPORT] = (t_exit - t_spawn) - sum(s[2] - s[1] for s in outer) - wall[STARTUP]
    cpu[REPORT] = cpu_exit - cpu[STARTUP] - sum(s[4] - s[3] for s in outer)
    return {"wall": wall, "cpu": cpu}


def one_round(capture: Path) -> dict:
    import run

    with tempfile.NamedTemporaryFile(suffix=".json") as tf:
        t_spawn = time.time()
        r = run.spawn_wait4(
            [
                sys.executable,
                str(Path(__file__).resolve()),
                "--child",
                str(capture),
                tf.name,
                repr(t_spawn),
            ],
            os.devnull,
        )
        if r.code != 0:
            raise SystemExit(f"phases: analyze failed on {capture}:\n{r.err[-2000:]}")
        got = json.loads(Path(tf.name).read_text())
    # to the child's reaping (its teardown after the last phase counts as report)
    ph = exclusive(got["spans"], got["spawn"], got["spawn"] + r.wall, got["cpu_exit"])
    ph["total_wall"] = r.wall
    ph["total_cpu"] = r.cpu
    ph["rss_mib"] = r.rss_kb / 1024
    return ph


def tshark_wall(capture: Path, reps: int) -> float | None:
    """``shapes.py``'s tshark command (its QUIC fields on a ``quic-…`` capture)."""
    import run
    import shapes

    shape = capture.name.split("-", 1)[0]
    cmd = shapes.tshark_fields_cmd(shape if shape in shapes.SHAPES else "tcp", capture)
    if cmd is None:
        return None
    best = None
    for _ in range(reps):
        r = run.spawn_wait4(cmd, os.devnull)
        best = r.wall if best is None else min(best, r.wall)
    return best


def table(results: dict[str, list[dict]], tshark: dict[str, float | None]) -> str:
    names = [STARTUP, *dict.fromkeys(p for p, _ in PHASES), REPORT]
    caps = list(results)
    lines = [
        MARK_BEGIN,
        "## Where the seconds of `pcapkit analyze --format json` go (issue 16)",
        "",
        "`benchmarks/phases.py` (`make bench-phases`): each phase's wall seconds, exclusive "
        "of the phases inside it, in the round with the least wall time (its least over "
        "the rounds in brackets); CPU is user + sys of the main process.",
        "",
        "| phase | " + " | ".join(f"{Path(c).name} wall s | CPU s" for c in caps) + " |",
        "|---|" + "---:|---:|" * len(caps),
    ]
    best = {c: min(r, key=lambda x: x["total_wall"]) for c, r in results.items()}
    for n in names:
        cells = []
        for c in caps:
            b = best[c]
            least = min(r["wall"].get(n, 0.0) for r in results[c])
            cells.append(f"{b['wall'].get(n, 0.0):.2f} ({least:.2f}) | {b['cpu'].get(n, 0.0):.2f}")
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    lines.append(
        "| **run (wait4)** | "
        + " | ".join(f"**{best[c]['total_wall']:.2f}** | {best[c]['total_cpu']:.2f}" for c in caps)
        + " |"
    )
    lines.append(
        "| tshark `-T fields` ÷ 5 | "
        + " | ".join((f"{tshark[c] / 5:.2f} | —" if tshark.get(c) else "— | —") for c in caps)
        + " |"
    )
    lines.append(
        "| peak RSS MiB | " + " | ".join(f"{best[c]['rss_mib']:.0f} | —" for c in caps) + " |"
    )
    lines.append(MARK_END)
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        _child(argv[1], argv[2], float(argv[3]))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("captures", nargs="+")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--tshark", action="store_true", help="time tshark -T fields too")
    ap.add_argument("--out", default="", help="a Markdown file to write the table into")
    a = ap.parse_args(argv)
    import compileall

    for pkg in ("pcapkit", "dissectors"):  # (see shapes.py: PYTHONDONTWRITEBYTECODE)
        compileall.compile_dir(str(ROOT / pkg), quiet=1)
    results: dict[str, list[dict]] = {c: [] for c in a.captures}
    for _ in range(a.reps):  # interleaved rounds
        for c in a.captures:
            results[c].append(one_round(Path(c)))
    tshark = {c: (tshark_wall(Path(c), 1) if a.tshark else None) for c in a.captures}
    text = table(results, tshark)
    if a.out:
        import shapes

        shapes.write_section(text, a.out, MARK_BEGIN, MARK_END)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
