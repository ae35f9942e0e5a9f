"""NSS key log parsing, merging and redaction."""

from __future__ import annotations

import pickle
import re
from pathlib import Path

import pytest

from dissectors.tls.crypto import CIPHER_SUITES, tls12_key_block
from dissectors.tls.keylog import KeyLog, KeyLogStats, Secret

CR1 = bytes(range(32))
CR2 = bytes(range(32, 64))
MASTER = bytes.fromhex("aa" * 48)
HS = bytes.fromhex("bb" * 32)

TEXT = f"""# a comment
CLIENT_RANDOM {CR1.hex()} {MASTER.hex()}

CLIENT_HANDSHAKE_TRAFFIC_SECRET {CR2.hex()} {HS.hex()}\r
SERVER_HANDSHAKE_TRAFFIC_SECRET {CR2.hex()} {"cc" * 32}
CLIENT_TRAFFIC_SECRET_0 {CR2.hex()} {"dd" * 48}
SERVER_TRAFFIC_SECRET_0 {CR2.hex()} {"ee" * 48}
CLIENT_EARLY_TRAFFIC_SECRET {CR2.hex()} {"12" * 32}
EXPORTER_SECRET {CR2.hex()} {"34" * 32}
ECH_SECRET {CR2.hex()} {"56" * 32}
RSA 0102030405060708 {"77" * 48}
CLIENT_RANDOM zz{CR1.hex()[2:]} {MASTER.hex()}
CLIENT_RANDOM {CR1.hex()[:-2]} {MASTER.hex()}
CLIENT_RANDOM {CR1.hex()} {"ab" * 32}
CLIENT_RANDOM {CR1.hex()}
garbage line that is not a key log entry
"""


def test_parse_counts_and_lookups() -> None:
    kl = KeyLog.from_text(TEXT, source="test")
    st = kl.stats
    assert (st.lines, st.comments, st.blank, st.entries, st.unknown_labels, st.rsa) == (
        16,
        1,
        1,
        7,
        1,
        1,
    )
    assert st.malformed == 5  # bad hex, short random, 32-byte master secret, two fields, prose
    assert kl.unknown_labels == frozenset({"ECH_SECRET"})
    master = kl.get(CR1, "CLIENT_RANDOM")
    assert master is not None and master.reveal() == MASTER
    hs = kl.get(CR2, "CLIENT_HANDSHAKE_TRAFFIC_SECRET")
    assert hs is not None and hs.reveal() == HS  # the CRLF did not leak into the value
    assert kl.get(CR2, "CLIENT_RANDOM") is None and kl.get(bytes(32), "CLIENT_RANDOM") is None
    assert kl.labels_for(CR2) == frozenset(
        {
            "CLIENT_HANDSHAKE_TRAFFIC_SECRET",
            "SERVER_HANDSHAKE_TRAFFIC_SECRET",
            "CLIENT_TRAFFIC_SECRET_0",
            "SERVER_TRAFFIC_SECRET_0",
            "CLIENT_EARLY_TRAFFIC_SECRET",
            "EXPORTER_SECRET",
        }
    )
    pms = kl.rsa_premaster(bytes(range(1, 9)) + b"rest of the encrypted pre-master")
    assert pms is not None and pms.reveal() == bytes.fromhex("77" * 48)
    assert CR1 in kl and CR2 in kl and len(kl) == 2 and set(kl.client_randoms()) == {CR1, CR2}
    assert kl.sources == ("test",)


def test_merge_several_sources_first_value_wins() -> None:
    a = KeyLog.from_text(f"CLIENT_RANDOM {CR1.hex()} {MASTER.hex()}\n", source="file")
    dsb = f"CLIENT_RANDOM {CR1.hex()} {MASTER.hex()}\nCLIENT_RANDOM {CR1.hex()} {'ff' * 48}\n"
    b = KeyLog.from_text(
        dsb.encode() + b"\x00\x00\x00", source="dsb 1"
    )  # DSB payloads may be padded
    c = KeyLog.from_text(f"CLIENT_TRAFFIC_SECRET_0 {CR2.hex()} {HS.hex()}", source="dsb 2")
    assert b.stats.conflicts == 1 and b.stats.entries == 1
    a.merge(b)
    a.merge(c)
    master = a.get(CR1, "CLIENT_RANDOM")
    assert master is not None and master.reveal() == MASTER
    assert a.stats.duplicates == 1 and a.stats.entries == 2
    assert a.sources == ("file", "dsb 1", "dsb 2")
    assert len(a) == 2
    added = a.add_text("", source="empty")
    assert added == KeyLogStats()


def test_add_secret_validates() -> None:
    kl = KeyLog()
    kl.add_secret(CR1, "CLIENT_RANDOM", MASTER)
    assert kl.stats.entries == 1
    with pytest.raises(ValueError):
        kl.add_secret(CR1, "NOT_A_LABEL", MASTER)
    with pytest.raises(ValueError):
        kl.add_secret(b"short", "CLIENT_RANDOM", MASTER)


def test_secrets_never_print() -> None:
    kl = KeyLog.from_text(TEXT)
    secret = kl.get(CR1, "CLIENT_RANDOM")
    assert secret is not None
    keys = tls12_key_block(CIPHER_SUITES[0xC02F], 0x0303, MASTER, CR1, CR2)
    shown = " ".join(
        [repr(kl), str(kl), repr(secret), str(secret), f"{secret}", f"{secret!r}", repr([secret]),
         repr(kl.secrets_for(CR2)), repr(kl.stats), repr(keys), str(keys)]
    )  # fmt: skip
    for value in (MASTER, HS, bytes.fromhex("cc" * 32), bytes.fromhex("77" * 48), keys.client_key):
        assert value.hex() not in shown
        assert value.hex().upper() not in shown
    assert not re.search(r"(?:[0-9a-f]{2}){12}", shown)  # no long hex run at all
    assert "redacted" in repr(secret) and "redacted" in repr(kl)


def test_secret_equality_and_pickling() -> None:
    assert Secret(b"x" * 32) == Secret(b"x" * 32) and Secret(b"x" * 32) != Secret(b"y" * 32)
    kl = KeyLog.from_text(TEXT)
    clone = pickle.loads(pickle.dumps(kl))
    assert clone.get(CR1, "CLIENT_RANDOM") == kl.get(CR1, "CLIENT_RANDOM")
    assert clone.stats == kl.stats


# ---------------------------------------------------------------------------------------
# Corpus key logs
# ---------------------------------------------------------------------------------------
@pytest.mark.corpus
def test_wireshark_key_files(corpus: Path) -> None:
    keys = corpus / "wireshark" / "keys"
    chacha = KeyLog.from_text((keys / "tls12-chacha20poly1305.keys").read_text())
    assert (
        chacha.stats.comments,
        chacha.stats.rsa,
        chacha.stats.entries,
        chacha.stats.malformed,
    ) == (1, 1, 7, 0)
    assert len(chacha) == 7
    full = KeyLog.from_text((keys / "tls13-rfc8446.keys").read_text())
    noearly = KeyLog.from_text((keys / "tls13-rfc8446-noearly.keys").read_text())
    assert (len(full), full.stats.entries, noearly.stats.entries) == (2, 9, 8)
    early = [
        cr for cr in full.client_randoms() if "CLIENT_EARLY_TRAFFIC_SECRET" in full.labels_for(cr)
    ]
    assert len(early) == 1 and "CLIENT_EARLY_TRAFFIC_SECRET" not in noearly.labels_for(early[0])
    for name in ("tls12-dsb-1.keys", "tls12-dsb-2.keys", "http2-data-reassembly.keys"):
        kl = KeyLog.from_text((keys / name).read_text())
        assert kl.stats.entries == 1 and kl.stats.malformed == 0


@pytest.mark.corpus
def test_dsb_payloads_match_the_key_files(corpus: Path, capture: type) -> None:
    cap = capture.read_capture(corpus / "wireshark" / "tls12-dsb.pcapng")
    assert len(cap.dsb) == 2
    merged = KeyLog()
    for i, payload in enumerate(cap.dsb):
        merged.add_text(payload, source=f"DSB {i + 1}")
    keys = corpus / "wireshark" / "keys"
    files = KeyLog.from_text((keys / "tls12-dsb-1.keys").read_text())
    files.merge(KeyLog.from_text((keys / "tls12-dsb-2.keys").read_text()))
    assert set(merged.client_randoms()) == set(files.client_randoms()) and len(merged) == 2
    for cr in files.client_randoms():
        assert merged.get(cr, "CLIENT_RANDOM") == files.get(cr, "CLIENT_RANDOM")


def test_lines_are_read_as_wireshark_reads_them() -> None:
    """Issue 13 class 3: Wireshark matches a key-log entry from the start of the line and
    ignores what follows the secret (packet-tls-utils.c, ssl_compile_keyfile_regex): a
    backslash before the newline, a CR, a trailing comment.  Those secrets are used and
    the lines counted; lines that cannot be used are counted per kind, with line numbers."""
    text = (
        f"CLIENT_RANDOM {CR1.hex()} {MASTER.hex()}\\\n"
        f"CLIENT_HANDSHAKE_TRAFFIC_SECRET {CR2.hex()} {HS.hex()}\\\r\n"
        f"SERVER_HANDSHAKE_TRAFFIC_SECRET {CR2.hex()} {'cc' * 32} # from the server\n"
        f"CLIENT_TRAFFIC_SECRET_0\t{CR2.hex()}  {'dd' * 32}\r\n"  # tabs, double space: ours only
        f"PMS_CLIENT_RANDOM {CR1.hex()} {'ee' * 48}\n"
        f"CLIENT_RANDOM {CR1.hex()} {'ff' * 48}\n"  # a conflicting second value
        f"SERVER_TRAFFIC_SECRET_0 {CR2.hex()} {'1' * 63}\n"  # 31.5 bytes
        f"RSA Session-ID:{'ab' * 32} Master-Key:{'99' * 48}\n"
        f"RSA 0102030405060708 {'77' * 48}"  # no newline at the end
    )
    kl = KeyLog.from_text(text, source="DSB 1")
    st = kl.stats
    assert (st.lines, st.entries, st.trailing, st.session_ids) == (9, 4, 3, 1)
    assert (st.malformed, st.unknown_labels, st.conflicts, st.rsa) == (1, 1, 1, 1)
    assert kl.get(CR1, "CLIENT_RANDOM") == Secret(MASTER)
    assert kl.get(CR2, "CLIENT_HANDSHAKE_TRAFFIC_SECRET") == Secret(HS)
    assert kl.get(CR2, "SERVER_HANDSHAKE_TRAFFIC_SECRET") == Secret(bytes.fromhex("cc" * 32))
    assert kl.get(CR2, "CLIENT_TRAFFIC_SECRET_0") == Secret(bytes.fromhex("dd" * 32))
    assert kl.get(CR2, "SERVER_TRAFFIC_SECRET_0") is None
    assert kl.session_master(bytes.fromhex("ab" * 32)) == Secret(bytes.fromhex("99" * 48))
    problems = {(p.kind, p.count, p.lines) for p in kl.problems()}
    assert problems == {
        ("trailing", 3, (1, 2, 3)),
        ("unknown_labels", 1, (5,)),
        ("conflicts", 1, (6,)),
        ("malformed", 1, (7,)),
        ("rsa", 1, (9,)),
    }
    assert {p.source for p in kl.problems()} == {"DSB 1"}
    shown = repr(kl.problems())
    assert MASTER.hex() not in shown and HS.hex() not in shown  # line numbers, never values
