"""tls.record_overhead: the fewest bytes a protected record adds to its plaintext, from
the negotiated suite's record protection (DETECTION.md §1.7), checked against RFC
arithmetic and against decrypted records of real captures."""

from __future__ import annotations

from pathlib import Path

import pytest

import pcapkit
from pcapkit.sessions.tls import record_overhead

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT.parent / "shared" / "corpus"
TLS10, TLS12, TLS13 = 0x0301, 0x0303, 0x0304


@pytest.mark.parametrize(
    ("version", "suite", "expected"),
    [
        (TLS13, 0x1301, 5 + 1 + 16),  # RFC 8446 §5.2: header, inner type, AES-GCM tag
        (TLS13, 0x1303, 5 + 1 + 16),  # ChaCha20-Poly1305
        (TLS13, 0x1305, 5 + 1 + 8),  # AES-128-CCM-8: an 8-byte tag
        (TLS12, 0xC02F, 5 + 8 + 16),  # RFC 5288: explicit nonce + tag
        (TLS12, 0xCCA8, 5 + 16),  # RFC 7905: no explicit nonce
        (TLS12, 0xC013, 5 + 16 + 20 + 1),  # RFC 5246 §6.2.3.2: IV, HMAC-SHA1, pad length
        (TLS10, 0xC013, 5 + 20 + 1),  # TLS 1.0: no explicit IV
        (TLS12, 0xC027, 5 + 16 + 32 + 1),  # HMAC-SHA256
        (TLS12, 0x0000, None),  # TLS_NULL_WITH_NULL_NULL: no record protection known here
        (None, 0xC02F, None),
        (TLS12, None, None),
    ],
)
def test_overhead_per_suite(version: int | None, suite: int | None, expected: int | None) -> None:
    assert record_overhead(version, suite) == expected


@pytest.mark.corpus
@pytest.mark.parametrize(
    ("capture", "keys", "aead"),
    [
        (
            "wireshark/tls12-chacha20poly1305.pcap",
            "wireshark/keys/tls12-chacha20poly1305.keys",
            True,
        ),
        ("wireshark/http2-data-reassembly.pcap", "wireshark/keys/http2-data-reassembly.keys", True),
        ("illustrated-tls13/capture.pcap", "illustrated-tls13/keylog.txt", True),
        ("illustrated-tls12/capture.pcap", "illustrated-tls12/keylog.txt", False),
    ],
)
def test_decrypted_records_carry_exactly_that_overhead(capture: str, keys: str, aead: bool) -> None:
    """AEAD: wire length − plaintext = the overhead exactly; CBC: the overhead plus the
    padding that fills the last cipher block (< one 16-byte block)."""
    if not CORPUS.is_dir():
        pytest.skip("../shared/corpus is absent")
    with pcapkit.open(CORPUS / capture, CORPUS / keys) as t:
        oh = t.tls.set_index("flow")["record_overhead"]
        r = t.records[(t.records.status == "decrypted") & (t.records.content_type == 23)]
        assert len(r) > 0
        extra = (r["length"] - r["plaintext_len"]).to_numpy() - oh.loc[r["flow"]].to_numpy()
        if aead:
            assert (extra == 0).all()
        else:
            assert ((extra >= 0) & (extra < 16)).all()
