"""Every finding's Wireshark display filter, checked with tshark on every capture.

    python scripts/check_filters.py            # fixtures, ../shared/corpus, ../shared/realworld

For each finding: tshark 4.x must accept the filter, select every evidence frame it
names, and select nothing outside the connections the finding is about (its flow, and
for connection_not_reused / tls_resumption_missing the earlier connection it names).
Prints each failure and a final "N/N filters" line; exits 1 on any failure.  The test
suite runs the same check on the fixtures' client captures (tests/test_display_filters.py).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
SUFFIXES = (".pcap", ".pcapng", ".pcap.gz", ".pcapng.gz")


def captures() -> list[Path]:
    out = sorted((ROOT / "fixtures").glob("*/*.pcapng"))
    for sub in ("corpus", "realworld"):
        if (SHARED / sub).is_dir():
            out += sorted(p for p in (SHARED / sub).rglob("*") if p.name.endswith(SUFFIXES))
    return out


def main() -> int:
    import pcapkit

    total = ok = 0
    for path in captures():
        with pcapkit.open(path) as t:
            findings = t.findings
            pkt_flow = t.packets.flow.to_numpy(dtype=float, na_value=-1)
        for f in findings.itertuples(index=False):
            if not f.display_filter:
                continue
            total += 1
            r = subprocess.run(
                ["tshark", "-r", str(path), "-Y", f.display_filter, "-T", "fields", "-e",
                 "frame.number"],
                capture_output=True,
                text=True,
            )  # fmt: skip
            if r.returncode:
                print(f"REJECTED {path.name} {f.kind}: {f.display_filter}: {r.stderr[-200:]}")
                continue
            shown = {int(x) for x in r.stdout.split()}
            missing = sorted(set(f.frames) - shown)
            own = {int(pkt_flow[x - 1]) for x in f.frames if pkt_flow[x - 1] >= 0}
            if f.flow is not None and str(f.flow) != "<NA>":
                own.add(int(f.flow))
            outside = sorted(x for x in shown if int(pkt_flow[x - 1]) not in own)
            if missing or outside:
                print(f"{path.name} {f.kind}: misses {missing[:5]}, outside {outside[:5]}")
                continue
            ok += 1
    print(f"{ok}/{total} filters accepted, showing all their evidence and nothing else")
    return 0 if ok == total else 1


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    raise SystemExit(main())
