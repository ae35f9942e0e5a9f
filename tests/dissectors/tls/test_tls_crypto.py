"""PRF vectors, the cipher-suite table, and record protection for every supported mode.

The encrypting side of the round-trip tests is written here from the RFC formulas
(nonce, additional data, padding) with ``cryptography`` primitives, independently of the
decryptors under test.  RFC 8448 covers TLS 1.3 AES-128-GCM (test_tls_rfc8448.py); the
corpus and the OpenSSL interop tests cover real traffic.
"""

from __future__ import annotations

import hmac

import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESCCM, AESGCM, ChaCha20Poly1305

from dissectors.errors import Malformed
from dissectors.tls.crypto import (
    CIPHER_SUITES,
    AuthenticationFailed,
    CipherSuite,
    Tls12AeadProtection,
    Tls12CbcProtection,
    Tls13Protection,
    make_tls12_protection,
    tls12_key_block,
    tls12_prf,
    tls13_next_traffic_secret,
    tls13_traffic_keys,
)

# TLS 1.2 PRF test vectors (P_SHA256 and P_SHA384) published on the IETF TLS WG list
# ("TLS 1.2 test vectors", https://www.ietf.org/mail-archive/web/tls/current/msg03416.html).
PRF_SHA256_SECRET = bytes.fromhex("9b be 43 6b a9 40 f0 17 b1 76 52 84 9a 71 db 35")
PRF_SHA256_SEED = bytes.fromhex("a0 ba 9f 93 6c da 31 18 27 a6 f7 96 ff d5 19 8c")
PRF_SHA256_OUTPUT = bytes.fromhex(
    "e3 f2 29 ba 72 7b e1 7b 8d 12 26 20 55 7c d4 53 c2 aa b2 1d 07 c3 d4 95 32 9b 52 d4 e6 1e db 5a"
    "6b 30 17 91 e9 0d 35 c9 c9 a4 6b 4e 14 ba f9 af 0f a0 22 f7 07 7d ef 17 ab fd 37 97 c0 56 4b ab"
    "4f bc 91 66 6e 9d ef 9b 97 fc e3 4f 79 67 89 ba a4 80 82 d1 22 ee 42 c5 a7 2e 5a 51 10 ff f7 01"
    "87 34 7b 66"
)
PRF_SHA384_SECRET = bytes.fromhex("b8 0b 73 3d 6c ee fc dc 71 56 6e a4 8e 55 67 df")
PRF_SHA384_SEED = bytes.fromhex("cd 66 5c f6 a8 44 7d d6 ff 8b 27 55 5e db 74 65")
PRF_SHA384_OUTPUT = bytes.fromhex(
    "7b 0c 18 e9 ce d4 10 ed 18 04 f2 cf a3 4a 33 6a 1c 14 df fb 49 00 bb 5f d7 94 21 07 e8 1c 83 cd"
    "e9 ca 0f aa 60 be 9f e3 4f 82 b1 23 3c 91 46 a0 e5 34 cb 40 0f ed 27 00 88 4f 9d c2 36 f8 0e dd"
    "8b fa 96 11 44 c9 e8 d7 92 ec a7 22 a7 b3 2f c3 d4 16 d4 73 eb c2 c5 fd 4a bf da d0 5d 91 84 25"
    "9b 5b f8 cd 4d 90 fa 0d 31 e2 de c4 79 e4 f1 a2 60 66 f2 ee a9 a6 92 36 a3 e5 26 55 c9 e9 ae e6"
    "91 c8 f3 a2 68 54 30 8d 5e aa 3b e8 5e 09 90 70 3d 73 e5 6f"
)
# TLS 1.0/1.1 PRF (RFC 2246 §5: P_MD5 xor P_SHA-1) vector: secret 0xab*48,
# label "PRF Testvector", seed 0xcd*64, 104 bytes, as used by several TLS test suites.
PRF_TLS10_OUTPUT = bytes.fromhex(
    "d3d4d1e349b5d515044666d51de32bab258cb521b6b053463e354832fd976754443bcf9a296519bc289abcbc1187e4eb"
    "d31e602353776c408aafb74cbc85eff69255f9788faa184cbb957a9819d84a5d7eb006eb459d3ae8de9810454b8b2d8f"
    "1afbc655a8c9a013"
)


def test_prf_vectors() -> None:
    assert (
        tls12_prf(0x0303, "sha256", PRF_SHA256_SECRET, b"test label", PRF_SHA256_SEED, 100)
        == PRF_SHA256_OUTPUT
    )
    assert (
        tls12_prf(0x0303, "sha384", PRF_SHA384_SECRET, b"test label", PRF_SHA384_SEED, 148)
        == PRF_SHA384_OUTPUT
    )
    out = tls12_prf(
        0x0301, "sha256", bytes.fromhex("ab" * 48), b"PRF Testvector", bytes.fromhex("cd" * 64), 104
    )
    assert out == PRF_TLS10_OUTPUT


# ---------------------------------------------------------------------------------------
# Cipher-suite table
# ---------------------------------------------------------------------------------------
def test_cipher_suite_table_is_consistent() -> None:
    names = [s.name for s in CIPHER_SUITES.values()]
    assert len(names) == len(set(names))
    for s in CIPHER_SUITES.values():
        assert s.supported, s.name
        if s.tls13:
            assert s.name.startswith("TLS_AES") or s.name.startswith("TLS_CHACHA20")
            assert (s.fixed_iv_length, s.record_iv_length) == (12, 0)
        elif s.mode == "aead" and s.cipher == "CHACHA20_POLY1305":
            assert (s.key_length, s.fixed_iv_length, s.record_iv_length, s.tag_length) == (
                32,
                12,
                0,
                16,
            )
        elif s.mode == "aead":
            assert (s.fixed_iv_length, s.record_iv_length) == (4, 8)
            assert s.tag_length == (8 if s.cipher.endswith("CCM_8") else 16)
            assert s.key_length == (32 if "AES_256" in s.cipher else 16)
        else:
            assert s.mode == "cbc" and s.mac in ("sha1", "sha256", "sha384")
            assert s.mac_length == {"sha1": 20, "sha256": 32, "sha384": 48}[s.mac]
        assert s.prf_hash == ("sha384" if "SHA384" in s.name else "sha256"), s.name
    assert CIPHER_SUITES[0xC013].name == "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA"
    assert (
        CIPHER_SUITES[0xCCA8].key_exchange == "ECDHE"
        and CIPHER_SUITES[0x00A8].key_exchange == "PSK"
    )
    assert CIPHER_SUITES[0x1305].tag_length == 8 and CIPHER_SUITES[0x1302].hash_length == 48


# ---------------------------------------------------------------------------------------
# Independent sealing helpers (test side)
# ---------------------------------------------------------------------------------------
def header(ctype: int, version: int, n: int) -> bytes:
    return bytes((ctype, version >> 8, version & 0xFF, n >> 8, n & 0xFF))


def aead_for(cipher: str, key: bytes) -> AESGCM | AESCCM | ChaCha20Poly1305:
    if cipher.startswith("CHACHA20"):
        return ChaCha20Poly1305(key)
    if "CCM" in cipher:
        return AESCCM(key, tag_length=8 if cipher.endswith("CCM_8") else 16)
    return AESGCM(key)


def seal13(
    suite: CipherSuite, secret: bytes, seq: int, inner_type: int, content: bytes, pad: int = 0
) -> bytes:
    key, iv = tls13_traffic_keys(suite, secret)
    inner = content + bytes((inner_type,)) + bytes(pad)
    aad = header(23, 0x0303, len(inner) + suite.tag_length)
    nonce = bytes(a ^ b for a, b in zip(iv, seq.to_bytes(12, "big"), strict=True))
    return aad + aead_for(suite.cipher, key).encrypt(nonce, inner, aad)


def seal12_aead(
    suite: CipherSuite, key: bytes, iv: bytes, seq: int, ctype: int, content: bytes
) -> bytes:
    aad = seq.to_bytes(8, "big") + header(ctype, 0x0303, len(content))
    if suite.cipher.startswith("CHACHA20"):
        nonce = bytes(a ^ b for a, b in zip(iv, seq.to_bytes(12, "big"), strict=True))
        body = aead_for(suite.cipher, key).encrypt(nonce, content, aad)
    else:
        explicit = (seq + 0x1000).to_bytes(8, "big")  # any value: it travels in the record
        body = explicit + aead_for(suite.cipher, key).encrypt(iv + explicit, content, aad)
    return header(ctype, 0x0303, len(body)) + body


def cbc(key: bytes, iv: bytes, data: bytes, encrypt: bool = True) -> bytes:
    c = Cipher(algorithms.AES(key), modes.CBC(iv))
    ctx = c.encryptor() if encrypt else c.decryptor()
    return ctx.update(data) + ctx.finalize()


def pad_cbc(data: bytes, extra_blocks: int = 0) -> bytes:
    n = 16 - (len(data) + 1) % 16 + 16 * extra_blocks
    n %= 256
    return data + bytes((n,)) * (n + 1)


def seal12_cbc(
    suite: CipherSuite,
    key: bytes,
    mac_key: bytes,
    iv: bytes,
    seq: int,
    version: int,
    content: bytes,
    *,
    etm: bool,
) -> bytes:
    mac_h = suite.mac or "sha1"
    prefix = seq.to_bytes(8, "big")
    explicit = version >= 0x0302
    if etm:
        body = (iv if explicit else b"") + cbc(key, iv, pad_cbc(content))
        mac = hmac.new(mac_key, prefix + header(23, version, len(body)) + body, mac_h).digest()
        body += mac
    else:
        mac = hmac.new(
            mac_key, prefix + header(23, version, len(content)) + content, mac_h
        ).digest()
        body = (iv if explicit else b"") + cbc(key, iv, pad_cbc(content + mac, extra_blocks=1))
    return header(23, version, len(body)) + body


SECRET_32 = bytes(range(100, 132))
SECRET_48 = bytes(range(150, 198))


# ---------------------------------------------------------------------------------------
# TLS 1.3
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("suite_id", [0x1301, 0x1302, 0x1303, 0x1304, 0x1305])
def test_tls13_round_trip_every_suite(suite_id: int) -> None:
    suite = CIPHER_SUITES[suite_id]
    secret = SECRET_48 if suite.hash_length == 48 else SECRET_32
    prot = Tls13Protection(suite, secret)
    for seq, (ctype, content, pad) in enumerate(
        [(23, b"hello", 0), (22, b"\x14\x00\x00\x00", 7), (23, b"", 100)]
    ):
        record = seal13(suite, secret, seq, ctype, content, pad)
        assert prot.decrypt(23, 0x0303, record[5:], seq) == (ctype, content)
    record = seal13(suite, secret, 5, 23, b"x")
    with pytest.raises(AuthenticationFailed):
        prot.decrypt(23, 0x0303, record[5:], 4)
    with pytest.raises(AuthenticationFailed):  # the header is authenticated data
        prot.decrypt(23, 0x0301, record[5:], 5)


def test_tls13_malformed_inner_plaintext_and_short_record() -> None:
    suite = CIPHER_SUITES[0x1301]
    key, iv = tls13_traffic_keys(suite, SECRET_32)
    aad = header(23, 0x0303, 4 + 16)
    all_zero = AESGCM(key).encrypt(iv, bytes(4), aad)  # no content type at all (seq 0)
    with pytest.raises(Malformed):
        Tls13Protection(suite, SECRET_32).decrypt(23, 0x0303, all_zero, 0)
    with pytest.raises(Malformed):
        Tls13Protection(suite, SECRET_32).decrypt(23, 0x0303, bytes(16), 0)
    with pytest.raises(ValueError):
        Tls13Protection(suite, SECRET_48)  # SHA-256 suite, 48-byte secret


def test_key_update_secret_chain() -> None:
    # RFC 8446 §7.2: the next secret is HKDF-Expand-Label(secret, "traffic upd", "", Hash.length);
    # here checked against an HKDF written from RFC 5869 in this test.
    label = b"tls13 traffic upd"
    info = (32).to_bytes(2, "big") + bytes((len(label),)) + label + b"\x00"
    expected = hmac.new(SECRET_32, info + b"\x01", "sha256").digest()
    assert tls13_next_traffic_secret("sha256", SECRET_32) == expected
    assert len(tls13_next_traffic_secret("sha384", SECRET_48)) == 48


# ---------------------------------------------------------------------------------------
# TLS 1.2 AEAD
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "suite_id", [0xC02F, 0xC030, 0xCCA8, 0xC09C, 0xC0A0, 0xC0AD, 0xC0AF, 0x00A8]
)
def test_tls12_aead_round_trip(suite_id: int) -> None:
    suite = CIPHER_SUITES[suite_id]
    keys = tls12_key_block(suite, 0x0303, bytes(range(48)), bytes(32), bytes(range(32)))
    assert len(keys.client_key) == suite.key_length and len(keys.client_iv) == suite.fixed_iv_length
    assert keys.client_mac == b""
    prot = make_tls12_protection(suite, 0x0303, keys, client=True)
    assert isinstance(prot, Tls12AeadProtection)
    for seq, content in enumerate([b"GET / HTTP/1.1\r\n\r\n", b"", bytes(1000)]):
        record = seal12_aead(suite, keys.client_key, keys.client_iv, seq, 23, content)
        assert prot.decrypt(23, 0x0303, record[5:], seq) == (23, content)
    record = seal12_aead(suite, keys.client_key, keys.client_iv, 3, 23, b"data")
    with pytest.raises(AuthenticationFailed):
        prot.decrypt(23, 0x0303, record[5:], 4)  # the sequence number is in the AAD
    server = make_tls12_protection(suite, 0x0303, keys, client=False)
    with pytest.raises(AuthenticationFailed):
        server.decrypt(23, 0x0303, record[5:], 3)  # the other direction's key
    with pytest.raises(Malformed):
        prot.decrypt(23, 0x0303, record[5:12], 3)


# ---------------------------------------------------------------------------------------
# TLS 1.0-1.2 CBC
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("etm", [False, True], ids=["mac-then-encrypt", "encrypt-then-mac"])
@pytest.mark.parametrize("suite_id", [0xC013, 0xC028, 0x003C])
def test_tls12_cbc_round_trip(suite_id: int, etm: bool) -> None:
    suite = CIPHER_SUITES[suite_id]
    key, mac_key = bytes(range(suite.key_length)), bytes(range(50, 50 + suite.mac_length))
    prot = Tls12CbcProtection(suite, 0x0303, key, mac_key, b"", encrypt_then_mac=etm)
    for seq, content in enumerate([b"ping", b"", bytes(range(200))]):
        iv = bytes((seq,)) * 16
        record = seal12_cbc(suite, key, mac_key, iv, seq, 0x0303, content, etm=etm)
        assert prot.decrypt(23, 0x0303, record[5:], seq) == (23, content)
    record = seal12_cbc(suite, key, mac_key, bytes(16), 9, 0x0303, b"pong", etm=etm)
    with pytest.raises(AuthenticationFailed):
        prot.decrypt(23, 0x0303, record[5:], 8)
    other = Tls12CbcProtection(suite, 0x0303, key, mac_key, b"", encrypt_then_mac=not etm)
    with pytest.raises((AuthenticationFailed, Malformed)):
        other.decrypt(23, 0x0303, record[5:], 9)


def test_tls10_cbc_chains_the_iv_across_records() -> None:
    suite = CIPHER_SUITES[0x002F]
    key, mac_key, iv0 = bytes(16), bytes(range(20)), bytes(range(16))
    prot = Tls12CbcProtection(suite, 0x0301, key, mac_key, iv0, encrypt_then_mac=False)
    iv = iv0
    for seq, content in enumerate(
        [b"", b"first", b"second record"]
    ):  # OpenSSL's empty-fragment trick first
        record = seal12_cbc(suite, key, mac_key, iv, seq, 0x0301, content, etm=False)
        assert prot.decrypt(23, 0x0301, record[5:], seq) == (23, content)
        iv = record[-16:]  # RFC 2246 §6.2.3.2: the next IV is the last ciphertext block


def test_cbc_padding_and_length_errors() -> None:
    suite = CIPHER_SUITES[0x002F]
    key, mac_key = bytes(16), bytes(20)
    prot = Tls12CbcProtection(suite, 0x0302, key, mac_key, b"", encrypt_then_mac=False)
    iv = bytes(16)
    mac = hmac.new(mac_key, bytes(8) + header(23, 0x0302, 4) + b"ping", "sha1").digest()
    bad_padding = b"ping" + mac + b"\x07\x07\x07\x07\x07\x07\x06\x07"  # one padding byte differs
    with pytest.raises(AuthenticationFailed):
        prot.decrypt(23, 0x0302, iv + cbc(key, iv, bad_padding), 0)
    with pytest.raises(Malformed):
        prot.decrypt(23, 0x0302, iv + b"x" * 17, 0)  # not a multiple of the block size
    with pytest.raises(Malformed):
        prot.decrypt(23, 0x0302, iv, 0)  # IV only
