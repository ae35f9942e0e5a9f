"""Every finding's Wireshark display filter is accepted by tshark and shows every
evidence frame it names (issue 14: sets need commas in Wireshark 4; a filter narrowed
to a stream or a flag must not hide an evidence frame)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pandas as pd
import pytest

import pcapkit
from pcapkit.detect import with_evidence

from tshark_util import TSHARK, needs_tshark

FIX = Path(__file__).resolve().parent.parent / "fixtures"
CAPTURES = sorted(p.relative_to(FIX).as_posix() for p in FIX.glob("*/client.pcapng"))


def test_filters_are_widened_to_their_evidence() -> None:
    assert with_evidence("", [3, 1, 3]) == "frame.number in {1, 3}"
    assert with_evidence("frame.number in {1, 3}", [1, 3]) == "frame.number in {1, 3}"
    assert with_evidence("tcp.stream == 2", [7]) == "(tcp.stream == 2) || frame.number in {7}"
    assert with_evidence("tcp.stream == 2", []) == "tcp.stream == 2"


@needs_tshark
@pytest.mark.parametrize("capture", CAPTURES)
def test_tshark_accepts_each_filter_and_shows_its_evidence(capture: str) -> None:
    path = FIX / capture
    with pcapkit.open(path) as t:
        found = [(r.kind, r.display_filter, r.frames, r.flow) for r in t.findings.itertuples()]
        pkt_flow = t.packets.flow.to_numpy(dtype=float, na_value=-1)
    for kind, dfilter, frames, flow in found:
        out = subprocess.run(
            [
                TSHARK or "tshark",
                "-r",
                str(path),
                "-Y",
                dfilter,
                "-T",
                "fields",
                "-e",
                "frame.number",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 0, (kind, dfilter, out.stderr[-300:])
        shown = {int(x) for x in out.stdout.split()}
        assert set(frames) <= shown, (kind, dfilter, sorted(set(frames) - shown))
        # nothing outside the connections the finding is about
        own = {int(pkt_flow[x - 1]) for x in frames} | ({int(flow)} if flow is not pd.NA else set())
        assert all(int(pkt_flow[x - 1]) in own for x in shown), (kind, dfilter)
