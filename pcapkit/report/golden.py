"""Golden findings beside each fixture: ``fixtures/<name>/expected.json``.

``python -m pcapkit.report.golden fixtures`` (``make golden``) rewrites them from
the current detectors, so a change in what pcapkit finds shows up as a diff to
review; ``tests/detect/test_golden.py`` fails when the findings drift from them.
A golden entry keeps what matters for regression: kind, flow, direction, stream,
the evidence frames and the cost (compared with a tolerance).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from ..rows import itertuples
from ..trace import open as open_trace

VANTAGES = ("client", "server", "middle")
# Costs are re-measured from the same bytes, so they only move when a detector's
# method changes; the tolerance absorbs float formatting, not behaviour.
COST_REL_TOLERANCE = 0.05
COST_ABS_TOLERANCE_MS = 0.5


def findings_of(path: Path) -> list[dict[str, Any]]:
    with open_trace(path) as t:
        f = t.findings
        rows = []
        for r in itertuples(f):
            rows.append(
                {
                    "kind": r.kind,
                    "flow": None if r.flow is None or str(r.flow) == "<NA>" else int(r.flow),
                    "dir": r.dir,
                    "stream": None if str(r.stream) == "<NA>" else int(r.stream),
                    "cost_ms": None if str(r.cost_ms) == "<NA>" else round(float(r.cost_ms), 3),
                    "frames": [int(x) for x in r.frames],
                }
            )
    rows.sort(key=lambda x: (x["kind"], x["flow"] or -1, x["dir"] or "", x["frames"]))
    return rows


def golden_for(folder: Path) -> dict[str, Any]:
    return {
        "generated_by": "make golden (python -m pcapkit.report.golden fixtures)",
        "vantages": {
            v: findings_of(folder / f"{v}.pcapng")
            for v in VANTAGES
            if (folder / f"{v}.pcapng").exists()
        },
    }


def write(root: Path) -> list[Path]:
    written = []
    for scen in sorted(root.glob("*/scenario.json")):
        folder = scen.parent
        out = folder / "expected.json"
        out.write_text(json.dumps(golden_for(folder), indent=1) + "\n")
        written.append(out)
    return written


def main(argv: list[str]) -> int:
    root = Path(argv[0] if argv else "fixtures")
    for p in write(root):
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
