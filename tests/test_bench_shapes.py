"""The benchmark's traffic shapes (issue 16, ``gen_capture.py --shape``) are what they
claim: a small capture of each, read by pcapkit (and tshark where present).

No timing here: benchmarks are never timed tests.  This only keeps the generator
honest, so the ratios in ``benchmarks/RESULTS.md`` are measured on the traffic the
README describes.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import pcapkit

ROOT = Path(__file__).resolve().parent.parent
GEN = ROOT / "benchmarks" / "gen_capture.py"


def _gen(tmp_path: Path, shape: str, n: int = 4000) -> tuple[Path, dict]:
    p = tmp_path / f"{shape}.pcap"
    subprocess.run(
        [sys.executable, str(GEN), "-n", str(n), "-o", str(p), "--shape", shape, "--seed", "3"],
        check=True,
        capture_output=True,
    )
    return p, json.loads(Path(str(p) + ".json").read_text())


@pytest.mark.parametrize("shape", ["bulk", "sse", "h2"])
def test_tcp_shapes(tmp_path: Path, shape: str) -> None:
    p, man = _gen(tmp_path, shape)
    assert man["shape"] == shape and man["transport"] == "tcp"
    with pcapkit.open(p) as t:
        assert len(t.flows) == man["connections"]
        assert (t.flows["proto"] == "tcp").all()
        rec = t.records
        # every TLS record the generator wrote, and nothing else
        assert len(rec) == man["tls_records"]
        assert (rec["content_type"] == 23).all()
        data = t.segments[t.segments["length"] > 0]
        full = float((data["length"] == 1448).mean())
        per_seg = len(rec) / max(len(data), 1)
    kinds = man["kinds"]
    if shape == "bulk":
        assert kinds["rr"] == kinds["sse"] == 0
        assert full > 0.9  # full-size segments
    elif shape == "sse":
        assert set(k for k, v in kinds.items() if v) == {"sse"}
        assert per_seg > 5  # many small records per segment
        assert int(np.median(rec["length"])) == 46  # one record per token
    else:
        assert set(k for k, v in kinds.items() if v) == {"rr"}
        assert man["data_segments_lost"] > 0.01 * man["packets"] / 2  # ~2 % loss
        # long-lived: many exchanges per connection
        assert man["connections"] <= 10


def test_quic_shape(tmp_path: Path) -> None:
    p, man = _gen(tmp_path, "quic")
    assert man["transport"] == "udp"
    with pcapkit.open(p) as t:
        assert len(t.flows) == man["connections"]
        assert (t.flows["proto"] == "udp").all()
        q = t.quic
        assert len(q) == man["connections"]  # every flow recognised as QUIC v1
        assert (q["version"] == "0x00000001").all()
    if shutil.which("tshark"):
        out = subprocess.run(
            ["tshark", "-r", str(p), "-T", "fields", "-e", "udp.stream", "-e", "quic.header_form"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split("\n")
        rows = [ln.split("\t") for ln in out if ln]
        assert len(rows) == man["packets"]
        assert len({r[0] for r in rows}) == man["connections"]
        assert all(r[1] in ("0", "1") for r in rows)  # tshark dissects every one as QUIC
