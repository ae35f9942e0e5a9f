"""Run the fuzzers and count what they did (``make fuzz SECONDS=…``).

    python -m fuzz.run files --seconds 600            # file-level mutants through everything
    python -m fuzz.run dissectors --seconds 60        # every entry point, 60 s each
    python -m fuzz.run dissectors --count 1000000 --target http2
    python -m fuzz.run dissectors --engine atheris --seconds 60   # coverage-guided (atheris)
    python -m fuzz.run all --seconds 600               # half files, half dissectors

One process (the machine is shared).  Every failure is saved under ``--workdir``
(``crashes/``: the input and its traceback), de-duplicated by where it was raised; the
summary (inputs run, failures, unique failures per target) is printed as JSON, and
written to ``--json`` if given.  Exit status 1 when anything failed.  A failure that is
fixed becomes a regression test with its reproducer (``tests/fuzz/test_regressions.py``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
WORKDIR = ROOT / "fuzz" / "work"
# a mutant that takes longer than this is a hang (the fixtures' mutants take ~50 ms)
HANG_S = 60
PROGRESS_EVERY = 1000  # file mutants between progress lines on stderr


def signature(text: str) -> str:
    """Where a failure was raised: the exception type and the innermost pcapkit/dissectors
    frame of the traceback (the same bug from many inputs counts once)."""
    lines = text.strip().splitlines()
    exc = lines[-1].split(":")[0] if lines else "?"
    where = ""
    for ln in lines:
        m = re.search(r'File ".*?/((?:pcapkit|dissectors)/[^"]+)", line (\d+), in (\S+)', ln)
        if m:
            where = f"{m.group(1)}:{m.group(3)}"
    return f"{exc} @ {where or 'internal_error: ' + lines[-1][:80] if lines else '?'}"


class _Hang(Exception):
    pass


def _alarm(_sig: int, _frame: Any) -> None:
    raise _Hang


def _save(workdir: Path, kind: str, data: bytes, text: str) -> Path:
    d = workdir / "crashes"
    d.mkdir(parents=True, exist_ok=True)
    h = hashlib.sha1(data).hexdigest()[:12]
    p = d / f"{kind}-{h}.bin"
    p.write_bytes(data)
    p.with_suffix(".txt").write_text(text)
    return p


def run_files(seconds: float | None, count: int | None, seed: int, workdir: Path) -> dict[str, Any]:
    """File-level mutants until ``seconds`` pass or ``count`` mutants ran."""
    from .files import check, file_seeds, make_mutant, others_of, scratch_dir, write_mutant

    seeds = file_seeds()
    others = others_of(seeds)
    rng = random.Random(seed)
    scratch = scratch_dir()  # the mutant files: RAM when there is a /dev/shm
    tmp = (
        Path(tempfile.mkdtemp(prefix="pcapkit-fuzz-", dir=scratch)) if scratch else workdir / "tmp"
    )
    tmp.mkdir(parents=True, exist_ok=True)
    n = fails = 0
    unique: dict[str, dict[str, Any]] = {}
    by_strategy: dict[str, int] = {}
    t0 = time.monotonic()
    c0 = time.process_time()
    old = signal.signal(signal.SIGALRM, _alarm)
    try:
        while (count is None or n < count) and (seconds is None or time.monotonic() - t0 < seconds):
            s = rng.choice(seeds)
            strategy, data = make_mutant(s, rng, others)
            by_strategy[strategy] = by_strategy.get(strategy, 0) + 1
            path = write_mutant(data, str(tmp))
            signal.alarm(HANG_S)
            try:
                found = [(f.where, f.text) for f in check(path)]
            except _Hang:
                found = [("hang", f"more than {HANG_S} s")]
            finally:
                signal.alarm(0)
                os.unlink(path)
            n += 1
            if n % PROGRESS_EVERY == 0:  # a run stopped early still shows what it did
                progress = {"mutants": n, "failing_mutants": fails, "strategies": by_strategy}
                print(json.dumps(progress), file=sys.stderr, flush=True)
            if found:
                fails += 1
                for where, text in found:
                    sig = f"{where}: {signature(text)}"
                    if sig not in unique:
                        p = _save(
                            workdir,
                            f"files-{where}",
                            data,
                            f"{s.name} / {strategy} / {where}\n{text}",
                        )
                        unique[sig] = {"count": 0, "example": str(p), "seed": s.name}
                    unique[sig]["count"] += 1
    finally:
        signal.signal(signal.SIGALRM, old)
        if scratch:
            shutil.rmtree(tmp, ignore_errors=True)
    return {
        "mutants": n,
        "failing_mutants": fails,
        "unique_failures": unique,
        "strategies": by_strategy,
        "seconds": round(time.monotonic() - t0, 1),
        "cpu_seconds": round(time.process_time() - c0, 1),
        "cpu_per_mutant_s": round((time.process_time() - c0) / n, 4) if n else None,
        "seeds": [s.name for s in seeds],
    }


def run_dissectors(
    names: list[str], seconds: float | None, count: int | None, seed: int, workdir: Path
) -> dict[str, Any]:
    """Random mutation of each target's seeds (no instrumentation: the fastest loop)."""
    from .mutate import mutate
    from .seeds import dissector_seeds
    from .targets import TARGETS, run_one

    seeds = dissector_seeds()
    out: dict[str, Any] = {}
    for name in names:
        t = TARGETS[name]
        pool = seeds.get(name) or [b""]
        rng = random.Random(seed)
        n = fails = 0
        unique: dict[str, dict[str, Any]] = {}
        t0 = time.monotonic()
        for s in pool:  # every seed as it is first
            err = run_one(t, s)
            n += 1
            if err:
                fails += 1
                unique.setdefault(
                    signature(err), {"count": 0, "example": str(_save(workdir, name, s, err))}
                )
        while (count is None or n < count) and (seconds is None or time.monotonic() - t0 < seconds):
            data = mutate(rng.choice(pool), rng, others=pool)
            err = run_one(t, data)
            n += 1
            if err:
                fails += 1
                sig = signature(err)
                if sig not in unique:
                    unique[sig] = {"count": 0, "example": str(_save(workdir, name, data, err))}
                unique[sig]["count"] += 1
                if len(pool) < 4096:  # failing inputs breed (they sit near a bug)
                    pool.append(data)
        out[name] = {
            "inputs": n,
            "failures": fails,
            "unique_failures": unique,
            "seconds": round(time.monotonic() - t0, 1),
        }
        print(json.dumps({name: out[name]}), file=sys.stderr, flush=True)
    return out


def run_atheris(
    names: list[str], seconds: float, count: int | None, workdir: Path
) -> dict[str, Any]:
    """Coverage-guided: one atheris (libFuzzer) process per target, seeded corpus."""
    from .seeds import dissector_seeds

    seeds = dissector_seeds()
    out: dict[str, Any] = {}
    for name in names:
        corpus = workdir / "corpus" / name
        corpus.mkdir(parents=True, exist_ok=True)
        for s in seeds.get(name, []):
            (corpus / hashlib.sha1(s).hexdigest()).write_bytes(s)
        crashes = workdir / "crashes"
        crashes.mkdir(parents=True, exist_ok=True)
        cmd = [
            sys.executable, "-m", "fuzz.atheris_target", name, str(corpus),
            f"-max_total_time={int(seconds)}", f"-artifact_prefix={crashes}/atheris-{name}-",
            "-print_final_stats=1", "-close_fd_mask=1",
        ]  # fmt: skip
        if count:
            cmd.append(f"-runs={count}")
        r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        runs = re.findall(r"stat::number_of_executed_units:\s*(\d+)", r.stderr)
        out[name] = {
            "inputs": int(runs[-1]) if runs else None,
            "exit": r.returncode,
            "crash": r.returncode != 0,
            "tail": r.stderr.strip().splitlines()[-12:] if r.returncode else [],
        }
        print(json.dumps({name: out[name]}), file=sys.stderr, flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    from .targets import TARGETS

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("what", choices=["files", "dissectors", "all"])
    ap.add_argument(
        "--seconds", type=float, default=None, help="time budget (per target for dissectors)"
    )
    ap.add_argument("--count", type=int, default=None, help="mutants / inputs (per target)")
    ap.add_argument(
        "--target", action="append", choices=sorted(TARGETS), help="dissector target(s)"
    )
    ap.add_argument("--engine", choices=["random", "atheris"], default="random")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workdir", type=Path, default=WORKDIR)
    ap.add_argument("--json", type=Path, default=None, help="write the summary here too")
    a = ap.parse_args(argv)
    if a.seconds is None and a.count is None:
        a.seconds = 60.0
    os.environ.setdefault("PCAPKIT_THREADS", "1")  # one process, one thread: a shared machine
    names = a.target or sorted(TARGETS)
    summary: dict[str, Any] = {}
    if a.what in ("files", "all"):
        secs = a.seconds / 2 if (a.what == "all" and a.seconds) else a.seconds
        summary["files"] = run_files(secs, a.count, a.seed, a.workdir)
    if a.what in ("dissectors", "all"):
        secs = a.seconds / 2 / len(names) if (a.what == "all" and a.seconds) else a.seconds
        if a.engine == "atheris":
            summary["dissectors"] = run_atheris(names, secs or 60.0, a.count, a.workdir)
        else:
            summary["dissectors"] = run_dissectors(names, secs, a.count, a.seed, a.workdir)
    text = json.dumps(summary, indent=2)
    print(text)
    if a.json:
        a.json.write_text(text + "\n")
    bad = summary.get("files", {}).get("failing_mutants", 0) + sum(
        (v.get("failures") or int(bool(v.get("crash"))))
        for v in summary.get("dissectors", {}).values()
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
