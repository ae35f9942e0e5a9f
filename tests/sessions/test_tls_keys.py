"""Keys from pcapng Decryption Secrets Blocks the way Wireshark reads them (issue 13
class 3), and key lines that cannot be used reported, never silently dropped."""

from __future__ import annotations

import struct
from pathlib import Path

import pcapkit
from pcapkit.report.text import analysis_text

ROOT = Path(__file__).resolve().parents[2]
DSB = 0x0000000A


def _rewrite_dsbs(src: Path, dst: Path, edit: object) -> None:
    """Copy a little-endian pcapng, passing each Decryption Secrets Block's key log text
    through ``edit`` (block lengths and padding recomputed)."""
    data = src.read_bytes()
    out = bytearray()
    off = 0
    while off < len(data):
        btype, blen = struct.unpack_from("<II", data, off)
        block = data[off : off + blen]
        if btype == DSB:
            stype, slen = struct.unpack_from("<II", block, 8)
            text = edit(block[16 : 16 + slen])  # type: ignore[operator]
            body = struct.pack("<II", stype, len(text)) + text + bytes(-len(text) % 4)
            n = 12 + len(body)
            block = struct.pack("<II", btype, n) + body + struct.pack("<I", n)
        out += block
        off += blen
    dst.write_bytes(bytes(out))


def test_backslash_before_the_newline_still_gives_every_key(tmp_path: Path) -> None:
    """A real TLS 1.3 capture of the lab (fixtures/tls_reuse) whose DSB lines were
    rewritten to end with a backslash before the newline (what the issue saw on a
    browser capture): Wireshark reads those keys, so do we — and say so."""
    src = ROOT / "fixtures" / "tls_reuse" / "client.pcapng"
    dst = tmp_path / "backslash.pcapng"
    _rewrite_dsbs(src, dst, lambda b: b.replace(b"\n", b"\\\n"))
    with pcapkit.open(src) as t:
        want = t.tls[["flow", "decrypted", "decrypted_records"]].to_dict("records")
        lines = sum(s.data.count(b"\n") for s in t.secrets)
    with pcapkit.open(dst) as t:
        assert t.tls[["flow", "decrypted", "decrypted_records"]].to_dict("records") == want
        assert all(r["decrypted"] for r in want)
        a = t.anomalies
        rows = a[a.name == "tls_keylog_trailing_characters"]
        assert (
            len(rows) == 1
            and f": {lines} lines with characters after the secret" in (rows.detail.iloc[0])
        )
        assert t.key_sources == [
            f"1 pcapng decryption secrets block(s) ({lines} secrets; {lines} line(s) with "
            "characters after the secret, ignored as Wireshark does)"
        ]


def test_key_lines_that_cannot_be_used_are_reported(tmp_path: Path) -> None:
    """SYNTHETIC key lines added to a real capture's DSB: one anomaly row per kind of
    problem, with counts and line numbers, and the report's "keys from" line says it."""
    src = ROOT / "fixtures" / "tls_reuse" / "client.pcapng"
    dst = tmp_path / "odd.pcapng"
    extra = (
        b"this is not a key log line\n"
        b"CLIENT_RANDOM 00\n"
        b"PMS_CLIENT_RANDOM " + b"11" * 32 + b" " + b"22" * 48 + b"\n"
        b"RSA 0102030405060708 " + b"33" * 48 + b"\n"
    )
    _rewrite_dsbs(src, dst, lambda b: extra + b)
    with pcapkit.open(dst) as t:
        assert t.tls.decrypted.all()
        a = t.anomalies.set_index("name")
        assert a.loc["tls_keylog_line_malformed", "detail"] == (
            "pcapng DSB 1 (after frame 0): 2 lines that do not parse (not used) (lines 1, 2)"
        )
        assert a.loc["tls_keylog_unknown_label", "detail"].endswith("(line 3)")
        assert a.loc["tls_keylog_rsa_unused", "detail"].endswith("(line 4)")
        (src_line,) = t.key_sources
        assert "4 line(s) not used: 2 malformed, 1 unknown label, 1 RSA pre-master" in src_line
        text = analysis_text(t)
        assert "keys from: 1 pcapng decryption secrets block(s) (" in text


def test_a_key_source_without_secrets_says_so(tmp_path: Path) -> None:
    """SYNTHETIC: a DSB holding only a comment: "keys from" must not look like keys."""
    src = ROOT / "fixtures" / "tls_reuse" / "client.pcapng"
    dst = tmp_path / "empty.pcapng"
    _rewrite_dsbs(src, dst, lambda b: b"# nothing here\n")
    with pcapkit.open(dst) as t:
        assert t.key_sources == ["1 pcapng decryption secrets block(s) (no secrets in it)"]
        assert set(t.tls.why_not) == {"missing_key"}
