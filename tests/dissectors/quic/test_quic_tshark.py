"""Differential tests against tshark: per datagram, the packet types and packet numbers;
per stream, the STREAM frames (stream id, offset, length).  Skipped without tshark.

Captures: the corpus illustrated-quic (key log file) and the repository's h3 fixtures
(client and server vantage; keys in pcapng Decryption Secrets Blocks, which tshark reads
too).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from quic_capture import CORPUS, FIXTURES, run_capture

from tshark_util import needs_tshark, run

pytestmark = [pytest.mark.tshark, needs_tshark]

# tshark's quic.long.packet_type for v1 / draft-29 (RFC 9000 §17.2)
LONG_TYPES = {"0": "initial", "1": "0rtt", "2": "handshake", "3": "retry"}

Pairs = list[tuple[str, Any]]


def _find(pairs: Pairs, key: str) -> str | None:
    """First value of ``key`` in a packet's QUIC tree, not looking inside frames."""
    for k, v in pairs:
        if k == key:
            return str(v)
        if isinstance(v, list) and k != "quic.frame":
            got = _find(v, key)
            if got is not None:
                return got
    return None


def tshark_view(path: Path, keylog: Path | None = None) -> tuple[dict[int, list], dict]:
    """{frame: [(type, pn)]} and {(stream_id, frame): [(offset, length)]} as tshark sees them."""
    args = ["-r", str(path), "-T", "json", "-J", "frame quic", "-Y", "quic"]
    if keylog is not None:
        args += ["-o", f"tls.keylog_file:{keylog}"]
    top = json.loads(run(args), object_pairs_hook=lambda p: p)
    packets: dict[int, list[tuple[str, int | None]]] = {}
    streams: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for pkt in top:
        layers = dict(dict(pkt)["_source"])["layers"]
        frame = int(_find(dict(layers)["frame"], "frame.number") or 0)
        for key, q in layers:
            if key != "quic":
                continue
            form = _find(q, "quic.header_form")
            if form is None:  # zero bytes after the last packet (tshark shows them as padding)
                continue
            kind = (
                "1rtt" if form == "0" else LONG_TYPES.get(_find(q, "quic.long.packet_type") or "")
            )
            pn = _find(q, "quic.packet_number")
            packets.setdefault(frame, []).append((kind or "?", None if pn is None else int(pn)))
            for k, f in q:
                if k != "quic.frame":
                    continue
                ft = int(_find(f, "quic.frame_type") or -1)
                if 0x08 <= ft <= 0x0F:
                    sid = int(_find(f, "quic.stream.stream_id") or -1)
                    off = int(_find(f, "quic.stream.offset") or 0)
                    ln = int(_find(f, "quic.stream.length") or 0)
                    streams.setdefault((sid, frame), []).append((off, ln))
    return packets, streams


def our_view(path: Path, keylog: Path | None = None) -> tuple[dict[int, list], dict]:
    packets: dict[int, list[tuple[str, int | None]]] = {}
    streams: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for fl in run_capture(path, keylog):
        for r in fl.conn.packets:
            kind = r.packet_type.value if r.packet_type is not None else "?"
            packets.setdefault(r.frame, []).append((kind, r.packet_number))
        for s in fl.conn.stream_frames:
            streams.setdefault((s.stream_id, s.frame), []).append((s.offset, s.length))
    return packets, streams


CASES = [
    pytest.param(CORPUS / "illustrated-quic" / "capture.pcap", CORPUS / "illustrated-quic" / "keylog.txt", id="illustrated-quic"),
    *(
        pytest.param(FIXTURES / d / f"{v}.pcapng", None, id=f"{d}-{v}")
        for d in ("h3_streams_drop", "h3_streams_nodrop")
        for v in ("client", "server")
    ),
]  # fmt: skip


@pytest.mark.parametrize(("path", "keylog"), CASES)
def test_packets_and_stream_frames_match_tshark(path: Path, keylog: Path | None) -> None:
    if not path.is_file():
        pytest.skip(f"{path} not present")
    theirs_p, theirs_s = tshark_view(path, keylog)
    ours_p, ours_s = our_view(path, keylog)
    assert theirs_p, "tshark saw no QUIC"
    assert ours_p == theirs_p
    assert ours_s == theirs_s
    # and everything decrypted on our side
    for fl in run_capture(path, keylog):
        assert all(r.decrypted for r in fl.conn.packets if r.packet_type is not None), [
            (r.frame, r.reason) for r in fl.conn.packets if not r.decrypted
        ]
