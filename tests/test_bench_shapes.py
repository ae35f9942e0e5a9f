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


def _shapes_module():  # benchmarks/shapes.py (and the run.py it imports)
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import shapes
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    return shapes


def test_linearity_table() -> None:
    """The linearity table: best CPU of the runs, µs/packet and its ratio to the smallest
    and to the previous size, RSS per file byte, tshark's CPU over analyze's."""
    shapes = _shapes_module()

    def run(cpu: float, rss_mib: int, sharded: bool = False) -> dict:
        return dict(
            cpu=cpu,
            wall=cpu * 3,
            rss_kb=rss_mib * 1024,
            json_bytes=2_000_000,
            sharded=sharded,
            pcapkit="commit x",
        )

    db = {
        "sse-100000": dict(
            packets=100_000, bytes=50_000_000, analyze=[run(2.5, 300), run(2.0, 310)]
        ),
        "sse-1000000": dict(packets=1_000_000, bytes=500_000_000, analyze=[run(25.0, 2000)]),
        "sse-5000000": dict(
            packets=5_000_000,
            bytes=2_500_000_000,
            analyze=[run(150.0, 10_000, sharded=True)],
            tshark=dict(cpu=300.0, wall=400.0),
        ),
        "bulk-100000": dict(packets=100_000, bytes=100_000_000, analyze=[]),
        shapes.STARTUP: dict(analyze=[run(0.6, 100), run(0.5, 100)]),
    }
    text = shapes.linearity_table(db, ["bulk", "sse"], [100_000, 1_000_000, 5_000_000])
    rows = [ln for ln in text.splitlines() if ln.startswith("| sse")]
    assert len(rows) == 3 and not any(ln.startswith("| bulk") for ln in text.splitlines())
    c = [[x.strip() for x in r.strip("|").split("|")] for r in rows]
    # best of the two 100k runs: 2.0 s → 20.0 µs/packet; RSS/file of that run (310 MiB)
    assert c[0][3:7] == ["2.00", "20.0", "—", "—"] and c[0][10] == "6.50"
    assert c[1][4:7] == ["25.0", "1.25", "1.25"]
    assert c[2][4:7] == ["30.0", "1.50", "1.20"]
    # without the fixed cost (best start-up run: 0.5 s): 15.0, 24.5 and 29.9 µs/packet
    assert [r[7] for r in c] == ["15.0", "24.5", "29.9"]
    assert c[2][12:] == ["400.0", "300.0", "2.0×"]
    assert "0.50 s CPU" in text
    assert "sse 5,000,000: analysed as flow-hash shards" in text
    assert text.startswith(shapes.LIN_BEGIN) and text.rstrip().endswith(shapes.LIN_END)


def _phases():  # benchmarks/phases.py as a module
    import importlib.util

    spec = importlib.util.spec_from_file_location("phases", ROOT / "benchmarks" / "phases.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_phases_are_exclusive_and_add_up_to_the_run() -> None:
    """Synthetic spans (no timing): a phase inside another is taken out of it, a phase
    called twice adds up, start-up and report fill the rest of the run."""
    ph = _phases()
    spans = [  # (phase, t0, t1, c0, c1) as the child notes them
        ("read", 10.5, 10.6, 0.5, 0.6),
        ("records aligned", 11.0, 12.0, 1.0, 1.9),
        ("TLS record walk", 11.2, 11.5, 1.1, 1.4),  # inside records
        ("detectors", 12.5, 13.0, 2.0, 2.4),
        ("shared detector memos", 12.6, 12.7, 2.1, 2.2),  # inside detectors
        ("detectors", 13.1, 13.2, 2.5, 2.6),  # a second call
    ]
    got = ph.exclusive(spans, 10.0, 14.0, 3.0)
    w, c = got["wall"], got["cpu"]
    assert w["records aligned"] == pytest.approx(0.7) and c["records aligned"] == pytest.approx(0.6)
    assert w["TLS record walk"] == pytest.approx(0.3)
    assert w["detectors"] == pytest.approx(0.5)  # 0.5 − 0.1 + 0.1
    assert w[ph.STARTUP] == pytest.approx(0.5) and c[ph.STARTUP] == pytest.approx(0.5)
    assert w[ph.REPORT] == pytest.approx(4.0 - 0.1 - 1.0 - 0.5 - 0.1 - 0.5)
    assert sum(w.values()) == pytest.approx(4.0)
    assert sum(c.values()) == pytest.approx(3.0)


def test_phases_of_a_real_run(tmp_path: Path) -> None:
    """One round of the wrapped command line on a lab capture: every phase is noted,
    none negative, and the table holds them all."""
    ph = _phases()
    r = ph.one_round(ROOT / "fixtures" / "tls_sse_nagle" / "server.pcapng")
    names = [ph.STARTUP, *dict.fromkeys(p for p, _ in ph.PHASES), ph.REPORT]
    # (a 56-packet TCP capture: no QUIC; the detectors' shared memos only on a big one)
    assert set(names) - {"shared detector memos", "QUIC"} <= set(r["wall"])
    assert all(v >= 0 for v in r["wall"].values())
    assert sum(r["wall"].values()) == pytest.approx(r["total_wall"])
    out = tmp_path / "R.md"
    out.write_text("# results\n")
    cap = str(ROOT / "fixtures" / "tls_sse_nagle" / "server.pcapng")
    assert ph.main([cap, "--reps", "1", "--out", str(out)]) == 0
    body = out.read_text()
    assert body.startswith("# results") and ph.MARK_BEGIN in body
    assert all(f"| {n} |" in body for n in names) and "**run (wait4)**" in body
