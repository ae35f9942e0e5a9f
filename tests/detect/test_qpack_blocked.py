"""qpack_blocked_stream on SYNTHETIC dissector rows (no lab stack blocks QPACK on demand:
aioquic's encoder only references acknowledged entries).  The dissector's blocking and
release logic itself is tested on the QIF corpus replayed with late encoder chunks
(tests/dissectors/http3/test_h3_qpack_qif.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pcapkit
from dissectors.http3 import QpackBlocked
from pcapkit.detect import h3 as h3_detector

FIX = Path(__file__).resolve().parents[2] / "fixtures"
T0 = 1_800_000_000_000_000_000


@dataclass
class _FakeQuicFlow:
    def flow_dir(self, d: str) -> str:
        return d


@dataclass
class _FakeH3:
    blocked: list[QpackBlocked] = field(default_factory=list)


def _blocked(frame: int, t_ms: float, unblock: tuple[int, float] | None) -> QpackBlocked:
    return QpackBlocked(
        direction="s2c",
        stream_id=4,
        offset=0,
        frame_type=1,
        required_insert_count=3,
        inserts_at_block=1,
        blocked_frame=frame,
        blocked_ts_ns=T0 + int(t_ms * 1e6),
        encoder_stream_id=7 if unblock else None,
        unblocked_encoder_offset=40 if unblock else None,
        unblocked_frame=unblock[0] if unblock else None,
        unblocked_ts_ns=T0 + int(unblock[1] * 1e6) if unblock else None,
    )


def test_blocked_sections_become_findings() -> None:
    with pcapkit.open(FIX / "h3_streams_nodrop" / "client.pcapng") as t:
        ctx = t.detect_context
    ctx.h3 = [
        (
            0,
            _FakeQuicFlow(),
            _FakeH3(
                [
                    _blocked(20, 0.0, (31, 12.5)),  # waited 12.5 ms for the encoder stream
                    _blocked(40, 50.0, (41, 50.3)),  # 0.3 ms: same flight, nobody waited
                    _blocked(60, 90.0, None),  # never released in the capture
                ]
            ),
        )
    ]
    found = h3_detector.detect(ctx)
    assert [f.kind for f in found] == ["qpack_blocked_stream"] * 2
    a, b = found
    assert a.cost_ms == 12.5 and a.cost_method == "measured_interval"
    assert a.frames == [20, 31] and a.stream == 4 and a.dir == "s2c"
    assert "needed 3" in a.explanation and "frame 31" in a.explanation
    assert b.cost_ms is None and b.cost_method == "lower_bound" and b.frames == [60]


def test_real_h3_fixtures_have_no_blocked_sections() -> None:
    for name in ("h3_streams_drop", "h3_streams_nodrop"):
        with pcapkit.open(FIX / name / "client.pcapng") as t:
            assert "qpack_blocked_stream" not in set(t.findings.kind)
