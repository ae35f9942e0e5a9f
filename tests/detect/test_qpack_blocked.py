"""qpack_blocked_stream on SYNTHETIC dissector rows (no lab stack blocks QPACK on demand:
aioquic's encoder only references acknowledged entries).  The dissector's blocking and
release logic itself is tested on the QIF corpus replayed with late encoder chunks
(tests/dissectors/http3/test_h3_qpack_qif.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import pcapkit
from pcapkit import schema
from pcapkit.detect import h3 as h3_detector

FIX = Path(__file__).resolve().parents[2] / "fixtures"
T0 = 1_800_000_000_000_000_000


def _blocked_table(rows: list[tuple[int, float, tuple[int, float] | None]]) -> object:
    """SYNTHETIC qpack_blocked rows: (blocked frame, ms, (unblocking frame, ms) or None)."""
    n = len(rows)

    def opt(vals: list[int | None]) -> object:
        return schema.masked(
            np.asarray([0 if v is None else v for v in vals], np.int64),
            np.asarray([v is None for v in vals]),
            "Int64",
        )

    return schema.frame(
        "qpack_blocked",
        {
            "flow": np.zeros(n, np.int64),
            "dir": schema.categorical(np.ones(n, np.int64), schema.DIRS),
            "stream": np.full(n, 4, np.int64),
            "offset": np.zeros(n, np.int64),
            "frame_type": np.ones(n, np.int64),
            "required_insert_count": opt([3] * n),
            "inserts_at_block": np.ones(n, np.int64),
            "blocked_frame": opt([fr for fr, _, _ in rows]),
            "blocked_ts_ns": opt([T0 + int(ms * 1e6) for _, ms, _ in rows]),
            "encoder_stream": opt([7 if u else None for _, _, u in rows]),
            "unblocked_encoder_offset": opt([40 if u else None for _, _, u in rows]),
            "unblocked_frame": opt([u[0] if u else None for _, _, u in rows]),
            "unblocked_ts_ns": opt([T0 + int(u[1] * 1e6) if u else None for _, _, u in rows]),
        },
        n,
    )


def test_blocked_sections_become_findings() -> None:
    with pcapkit.open(FIX / "h3_streams_nodrop" / "client.pcapng") as t:
        ctx = t.detect_context
    ctx.qpack_blocked = _blocked_table(
        [
            (20, 0.0, (31, 12.5)),  # waited 12.5 ms for the encoder stream
            (40, 50.0, (41, 50.3)),  # 0.3 ms: same flight, nobody waited
            (60, 90.0, None),  # never released in the capture
        ]
    )
    found = h3_detector.detect(ctx)
    assert [f.kind for f in found] == ["qpack_blocked_stream"] * 2
    a, b = found
    assert a.cost_ms == 12.5 and a.cost_method == "measured_interval"
    assert a.frames == [20, 31] and a.stream == 4 and a.dir == "s2c"
    assert "needed 3" in a.explanation and "frame 31" in a.explanation
    assert a.details == {"required_insert_count": 3, "inserts_at_block": 1, "encoder_stream": 7}
    assert b.cost_ms is None and b.cost_method == "lower_bound" and b.frames == [60]
    assert b.details["encoder_stream"] is None


def test_qpack_blocked_table_is_declared_and_empty_on_real_h3() -> None:
    with pcapkit.open(FIX / "h3_streams_drop" / "client.pcapng") as t:
        assert list(t.qpack_blocked.columns) == schema.columns("qpack_blocked")
        assert t.qpack_blocked.empty and len(t.requests) > 0


def test_real_h3_fixtures_have_no_blocked_sections() -> None:
    for name in ("h3_streams_drop", "h3_streams_nodrop"):
        with pcapkit.open(FIX / name / "client.pcapng") as t:
            assert "qpack_blocked_stream" not in set(t.findings.kind)
