"""QPACK decoding (RFC 9204) against the QPACK offline-interop corpus (qpackers/qifs).

``encoded/qpack-05/<impl>/<name>.out.<table_size>.<max_blocked>.<immediate_ack>`` files are a
sequence of blocks ``u64 BE stream id, u32 BE length, bytes``; stream 0 is the encoder
stream, every other stream one encoded field section.  Decoding them with the named table
size and blocked-stream limit must give the header lists of ``qifs/<name>.qif`` (blank-line
separated, ``name<TAB>value`` lines), in stream-id order.  With ``max_blocked`` > 0 the
encoders may emit a section before the inserts it needs: those are blocked (§2.1.2) and must
be reported, then resumed when the encoder stream catches up.
"""

from __future__ import annotations

import re
import struct
from pathlib import Path

import pytest

from dissectors.qpack import QpackDecoder, decode_prefix_int

CORPUS = Path(__file__).resolve().parents[3].parent / "shared" / "corpus"
QIFS = CORPUS / "qifs"
ENCODED = sorted((QIFS / "encoded").glob("*/*.out.*.*.*") if (QIFS / "encoded").is_dir() else [])
NAME = re.compile(r"^(?P<qif>[\w-]+)\.out\.(?P<table>\d+)\.(?P<blocked>\d+)\.(?P<ack>[01])$")

pytestmark = [
    pytest.mark.corpus,
    pytest.mark.skipif(not QIFS.is_dir(), reason=f"corpus not present at {QIFS}"),
]


def read_qif(path: Path) -> list[list[tuple[str, str]]]:
    """Header lists of a .qif file: blank lines separate lists; '#' lines are comments."""
    lists: list[list[tuple[str, str]]] = []
    cur: list[tuple[str, str]] = []
    for line in path.read_text("utf-8").splitlines():
        if line.startswith("#"):
            continue
        if not line.strip():
            if cur:
                lists.append(cur)
                cur = []
            continue
        name, _, value = line.partition("\t")
        cur.append((name, value))
    if cur:
        lists.append(cur)
    return lists


def read_encoded(path: Path) -> list[tuple[int, bytes]]:
    """(stream id, bytes) blocks of a QIF offline-interop encoded file."""
    raw = path.read_bytes()
    out: list[tuple[int, bytes]] = []
    pos = 0
    while pos < len(raw):
        assert pos + 12 <= len(raw), f"{path.name}: truncated block header at {pos}"
        sid, n = struct.unpack_from(">QI", raw, pos)
        pos += 12
        assert pos + n <= len(raw), f"{path.name}: truncated block at {pos}"
        out.append((sid, raw[pos : pos + n]))
        pos += n
    return out


def decode_file(path: Path) -> tuple[dict[int, list[tuple[str, str]]], list[int]]:
    """Decode every section; return {stream id: headers} and the ids that were blocked."""
    m = NAME.match(path.name)
    assert m, path.name
    dec = QpackDecoder(int(m["table"]), int(m["blocked"]))
    got: dict[int, list[tuple[str, str]]] = {}
    blocked: list[int] = []
    for sid, data in read_encoded(path):
        if sid == 0:
            for u in dec.feed_encoder(data):
                got[u] = list(dec.resume(u).headers)
            continue
        res = dec.decode(sid, data)
        if res is None:
            blocked.append(sid)
            assert sid in dec.blocked
        else:
            got[sid] = list(res.headers)
    assert not dec.blocked, f"still blocked at end: {dec.blocked}"
    return got, blocked


@pytest.mark.parametrize("path", ENCODED, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_qif_encoded_decodes_to_qif(path: Path) -> None:
    m = NAME.match(path.name)
    assert m
    expected = read_qif(QIFS / "qifs" / f"{m['qif']}.qif")
    got, blocked = decode_file(path)
    assert [got[k] for k in sorted(got)] == expected
    if int(m["blocked"]) == 0 or int(m["table"]) == 0:
        assert blocked == []  # §2.1.2: no blocking allowed, or nothing to wait for


def test_corpus_has_both_encoders_and_netbsd() -> None:
    """The corpus claims ls-qpack and nghttp3 encodings of netbsd.qif (18 lists)."""
    impls = {p.parent.name for p in ENCODED if p.name.startswith("netbsd.out.")}
    assert impls == {"ls-qpack", "nghttp3"}
    assert len(read_qif(QIFS / "qifs" / "netbsd.qif")) == 18


def decode_delayed(path: Path) -> tuple[dict[int, list[tuple[str, str]]], list[tuple[int, int]]]:
    """Decode with each encoder-stream chunk delivered *after* the field section that
    follows it in the file (as when the packet carrying the encoder stream is lost):
    sections referencing the new inserts must block, then resume.  Returns the headers and
    (stream id, required insert count) per blocked section."""
    m = NAME.match(path.name)
    assert m
    dec = QpackDecoder(int(m["table"]), int(m["blocked"]))
    got: dict[int, list[tuple[str, str]]] = {}
    blocked: list[tuple[int, int]] = []
    held: list[bytes] = []
    for sid, data in read_encoded(path):
        if sid == 0:
            held.append(data)
            continue
        res = dec.decode(sid, data)
        if res is None:
            ric = dec.blocked[sid]
            assert ric is not None and ric > dec.total_inserts  # §2.1.2 blocked condition
            blocked.append((sid, ric))
        else:
            got[sid] = list(res.headers)
        for chunk in held:
            for u in dec.feed_encoder(chunk):
                got[u] = list(dec.resume(u).headers)
        held.clear()
    assert not dec.blocked
    return got, blocked


BLOCKING = [
    p for p in ENCODED if (m := NAME.match(p.name)) and int(m["blocked"]) and int(m["table"])
]


@pytest.mark.parametrize("path", BLOCKING, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_qif_blocked_sections_resume(path: Path) -> None:
    m = NAME.match(path.name)
    assert m
    expected = read_qif(QIFS / "qifs" / f"{m['qif']}.qif")
    got, blocked = decode_delayed(path)
    assert [got[k] for k in sorted(got)] == expected
    assert blocked, "an encoder allowed to block never referenced a fresh insert"


def test_prefix_int_rfc7541_c1() -> None:
    """RFC 7541 §C.1.2 (used by RFC 9204 §4.1.1): 1337 with a 5-bit prefix."""
    assert decode_prefix_int(bytes([0x1F, 0x9A, 0x0A]), 0, 5) == (1337, 3)
    assert decode_prefix_int(bytes([0x0A]), 0, 5) == (10, 1)
