"""Differential test against tshark's HTTP/3 dissector (skipped without tshark).

tshark (checked with 4.0.17) shows ``http3.stream_type``, ``http3.frame_type`` and
``http3.frame_length`` but does not reassemble HTTP/3 across STREAM frames: it dissects
the frames that start in a STREAM frame's own bytes and stops at one that runs past them
(so the DATA frames of the fixtures, which span packets, do not appear).  The comparison is
therefore per STREAM frame: the ``http3`` layers of a packet follow its STREAM frames in
order; each stream type tshark names must be ours, and the (type, length) frames tshark
lists for a STREAM frame must be, in order, a prefix of the frames we found starting inside
that STREAM frame's byte range.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from h3_capture import FIXTURES, h3_flows

from tshark_util import needs_tshark, run

pytestmark = [pytest.mark.tshark, needs_tshark]

CAPTURES = [
    FIXTURES / fx / f"{v}.pcapng"
    for fx in ("h3_streams_drop", "h3_streams_nodrop")
    for v in ("client", "server")
]

Pairs = list[tuple[str, Any]]


def _layer_fields(layer: Any) -> tuple[str | None, list[tuple[int, int]]]:
    """(stream_type, [(frame_type, frame_length)]) of one tshark http3 layer."""
    if not isinstance(layer, list):  # a bare string: no HTTP/3 fields
        return None, []
    stype = None
    types: list[int] = []
    lengths: list[int] = []
    for k, val in layer:
        if k == "http3.stream_type":
            stype = str(val)
        elif k == "http3.frame_type":
            types.append(int(val))
        elif k == "http3.frame_length":
            lengths.append(int(val))
    return stype, list(zip(types, lengths, strict=False))


def tshark_http3(path: Path) -> dict[int, list[tuple[str | None, list[tuple[int, int]]]]]:
    """{frame number: [per http3 layer: (stream_type, frames)]}."""
    out = run(["-r", str(path), "-T", "json", "-J", "frame http3", "-Y", "http3"])
    top = json.loads(out, object_pairs_hook=lambda p: p)
    got: dict[int, list[tuple[str | None, list[tuple[int, int]]]]] = {}
    for pkt in top:
        layers = dict(dict(pkt)["_source"])["layers"]
        frame_layer = dict(layers)["frame"]
        number = next(int(v) for k, v in frame_layer if k == "frame.number")
        got[number] = [_layer_fields(v) for k, v in layers if k == "http3"]
    return got


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: f"{p.parent.name}-{p.stem}")
def test_http3_frames_agree_with_tshark(path: Path) -> None:
    theirs = tshark_http3(path)
    (flow,) = h3_flows(path)
    h3 = flow.h3
    assert h3 is not None
    rows_by_frame: dict[int, list[Any]] = {}
    for r in flow.quic.stream_frames:
        rows_by_frame.setdefault(r.frame, []).append(r)
    compared_frames = compared_types = 0
    for number, layers in sorted(theirs.items()):
        rows = rows_by_frame.get(number, [])
        assert len(rows) == len(layers), f"frame {number}: {len(rows)} STREAM frames"
        for row, (stype, tframes) in zip(rows, layers, strict=True):
            if stype is not None:
                assert row.offset == 0
                ours = h3.stream_types[(row.stream_id, row.direction)]
                assert ours.stream_type == int(stype)
                compared_types += 1
            if not tframes:
                continue
            ours_f = [
                (f.type, f.length)
                for f in h3.frames
                if f.stream_id == row.stream_id
                and f.direction == row.direction
                and row.offset <= f.offset < row.offset + row.length
            ]
            assert ours_f[: len(tframes)] == tframes, (number, row.stream_id)
            compared_frames += len(tframes)
    # something was compared: control streams (SETTINGS …) and every request's HEADERS
    assert compared_types == 6
    assert compared_frames >= 4 + 4 + 2
