"""What a compiled kernel's runtime costs every process that loads one (issue 16).

numba is the one loop compiler that installs from wheels on a machine without a C
compiler.  This measures, in fresh processes, what loading a small kernel costs beyond
the interpreter with numpy and pandas (what every ``pcapkit analyze`` has loaded): the
import of numba, the first call of the kernel once its machine code is cached on disk
(``@njit(cache=True)``: the second run here), and the resident memory (``VmRSS`` and
its anonymous and file-backed parts from ``/proc/self/status``).

    python benchmarks/compiled_runtime.py [--rounds N]

numba is not a dependency of pcapkit: run it where numba is importable (e.g. a
scratch ``pip install --target DIR numba`` and ``PYTHONPATH=DIR``); without numba it
says so and exits 2.  Results: ``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from statistics import median

# the reference TLS header walk's inner loop, as a kernel would hold it
KERNEL = """
import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def walk(buf, start, end, offs):
    n = 0
    o = start
    while o + 5 <= end:
        offs[n] = o
        n += 1
        o += 5 + ((np.int64(buf[o + 3]) << 8) | buf[o + 4])
    return n
"""

CHILD = """
import json, sys, time
import numpy as np
import pandas  # noqa: F401 - what every analysis has loaded


def status():
    out = {}
    for line in open("/proc/self/status"):
        k, _, v = line.partition(":")
        if k in ("VmRSS", "RssAnon", "RssFile"):
            out[k] = int(v.split()[0]) / 1024
    return out


before = status()
sys.path.insert(0, sys.argv[1])
t0 = time.perf_counter()
import kern
t1 = time.perf_counter()
buf = np.zeros(4096, np.uint8)
kern.walk(buf, 0, buf.shape[0], np.zeros(1024, np.int64))
t2 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "first_call_s": t2 - t1, "before": before, "after": status()}))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5, help="runs after the compiling one")
    args = ap.parse_args()
    try:
        import numba
    except ImportError:
        print("numba is not importable here: nothing to measure", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as d:
        Path(d, "kern.py").write_text(KERNEL)
        runs = []
        for _ in range(args.rounds + 1):
            got = subprocess.run(
                [sys.executable, "-c", CHILD, d], capture_output=True, text=True, check=True
            )
            runs.append(json.loads(got.stdout))
    first, cached = runs[0], runs[1:]

    def med(f):  # type: ignore[no-untyped-def]
        return median(f(r) for r in cached)

    print(f"numba {numba.__version__}, {args.rounds} runs with the kernel cached on disk")
    print(f"first run (compiles): first call {first['first_call_s']:.3f} s")
    print(f"import numba + the kernel's module: {med(lambda r: r['import_s']):.3f} s")
    print(f"first call, cached: {med(lambda r: r['first_call_s']):.3f} s")
    for k in ("VmRSS", "RssAnon", "RssFile"):
        print(
            f"{k}: {med(lambda r, k=k: r['before'][k]):.0f} → "
            f"{med(lambda r, k=k: r['after'][k]):.0f} MiB "
            f"(+{med(lambda r, k=k: r['after'][k] - r['before'][k]):.0f})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
