"""RFC 7541 through the HTTP/2 parser: every story of http2jp/hpack-test-case.

Each story's header blocks are sent as client HEADERS frames (large blocks split into
HEADERS + CONTINUATION) on one connection, so one decoder decodes them in order, and
each decoded list must equal the story's.  ``nghttp2-change-table-size`` exercises
dynamic table size updates (RFC 7541 §6.3).  Skipped when the corpus is absent.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from h2_build import PREFACE, continuation, headers, settings, settings_ack

from dissectors.http2 import H2Connection, H2Error, HeaderBlock

CORPUS = Path(__file__).resolve().parents[3].parent / "shared" / "corpus" / "hpack-test-case"
EXPECTED_BLOCKS = {"nghttp2": (32, 3384), "nghttp2-change-table-size": (31, 3267)}
pytestmark = pytest.mark.corpus


def stories(folder: str) -> list[Path]:
    if not CORPUS.is_dir():
        pytest.skip(f"hpack-test-case corpus not present at {CORPUS}")
    return sorted((CORPUS / folder).glob("story_*.json"))


def story_wire(cases: list[dict]) -> bytes:
    wire = PREFACE + settings()
    for i, case in enumerate(cases):
        block = bytes.fromhex(case["wire"])
        sid = 2 * i + 1
        if len(block) > 40:  # exercise CONTINUATION: 3 pieces
            a, b = len(block) // 3, 2 * len(block) // 3
            wire += headers(sid, block[:a], end_stream=True, end_headers=False)
            wire += continuation(sid, block[a:b], end_headers=False)
            wire += continuation(sid, block[b:])
        else:
            wire += headers(sid, block, end_stream=True)
    return wire


@pytest.mark.parametrize("folder", sorted(EXPECTED_BLOCKS))
def test_hpack_stories(folder: str) -> None:
    files = stories(folder)
    n_stories, n_blocks = EXPECTED_BLOCKS[folder]
    assert len(files) == n_stories
    total = 0
    for path in files:
        cases = json.loads(path.read_text())["cases"]
        conn = H2Connection()
        conn.feed("s2c", settings(), 0)
        events = conn.feed("c2s", story_wire(cases), 0)
        events += conn.feed("s2c", settings_ack(), 9) + conn.close()
        assert [e for e in events if isinstance(e, H2Error)] == [], path.name
        blocks = [e for e in events if isinstance(e, HeaderBlock)]
        assert len(blocks) == len(cases), path.name
        for case, block in zip(cases, blocks, strict=True):
            want = tuple((k, v) for h in case["headers"] for k, v in h.items())
            assert block.headers == want, f"{path.name} seqno {case['seqno']}"
            if "header_table_size" in case:
                assert block.table_size == case["header_table_size"], path.name
        total += len(blocks)
    assert total == n_blocks


def test_hpack_corpus_detects_a_corrupted_block() -> None:
    """The comparison can fail: flip one octet of a Huffman string and the story breaks."""
    path = stories("nghttp2")[0]
    cases = json.loads(path.read_text())["cases"]
    cases[0] = dict(cases[0], wire=cases[0]["wire"][:-2] + "ff")
    conn = H2Connection()
    events = conn.feed("c2s", story_wire(cases), 0) + conn.close()
    blocks = [e for e in events if isinstance(e, HeaderBlock)]
    want = tuple((k, v) for h in cases[0]["headers"] for k, v in h.items())
    assert blocks[0].headers != want
