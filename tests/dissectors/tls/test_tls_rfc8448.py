"""RFC 8448 §3 "Simple 1-RTT Handshake": key schedule and record protection vectors.

Every constant below is copied from the hex dumps of RFC 8448 §3 (the step named in the
comment).  The tests derive the values with :mod:`dissectors.tls.crypto` and decrypt the
RFC's protected records, then drive a whole :class:`TlsSession` with the RFC's records and
a key log built from the RFC's traffic secrets.
"""

from __future__ import annotations

import hashlib

import pytest

from dissectors.tls.crypto import (
    CIPHER_SUITES,
    AuthenticationFailed,
    Tls13Protection,
    derive_secret,
    hkdf_expand_label,
    tls13_early_secret,
    tls13_handshake_secret,
    tls13_master_secret,
    tls13_traffic_keys,
)
from dissectors.tls.handshake import (
    Certificate,
    CertificateVerify,
    ClientHello,
    EncryptedExtensions,
    Finished,
    HandshakeReassembler,
    NewSessionTicket,
    ServerHello,
    decode_handshake,
)
from dissectors.tls.keylog import KeyLog
from dissectors.tls.record import parse_record
from dissectors.tls.session import DecryptStatus, Epoch, TlsSession


def h(text: str) -> bytes:
    return bytes.fromhex(text)


SUITE = CIPHER_SUITES[0x1301]  # TLS_AES_128_GCM_SHA256, the suite of RFC 8448 §3

# {server}  extract secret "early": secret
EARLY_SECRET = h(
    "33 ad 0a 1c 60 7e c0 3b 09 e6 cd 98 93 68 0c e2 10 ad f3 00 aa 1f 26 60 e1 b2 2e 10 f1 70 f9 2a"
)
# {server}  derive secret for handshake "tls13 derived": expanded
DERIVED_FOR_HANDSHAKE = h(
    "6f 26 15 a1 08 c7 02 c5 67 8f 54 fc 9d ba b6 97 16 c0 76 18 9c 48 25 0c eb ea c3 57 6c 36 11 ba"
)
# {server}  extract secret "handshake": IKM (the x25519 shared secret)
ECDHE_SHARED_SECRET = h(
    "8b d4 05 4f b5 5b 9d 63 fd fb ac f9 f0 4b 9f 0d 35 e6 d6 3f 53 75 63 ef d4 62 72 90 0f 89 49 2d"
)
# {server}  extract secret "handshake": secret
HANDSHAKE_SECRET = h(
    "1d c8 26 e9 36 06 aa 6f dc 0a ad c1 2f 74 1b 01 04 6a a6 b9 9f 69 1e d2 21 a9 f0 ca 04 3f be ac"
)
# {server}  derive secret "tls13 c hs traffic": hash (ClientHello..ServerHello)
HELLO_HASH = h(
    "86 0c 06 ed c0 78 58 ee 8e 78 f0 e7 42 8c 58 ed d6 b4 3f 2c a3 e6 e9 5f 02 ed 06 3c f0 e1 ca d8"
)
# {server}  derive secret "tls13 c hs traffic": expanded
CLIENT_HANDSHAKE_TRAFFIC_SECRET = h(
    "b3 ed db 12 6e 06 7f 35 a7 80 b3 ab f4 5e 2d 8f 3b 1a 95 07 38 f5 2e 96 00 74 6a 0e 27 a5 5a 21"
)
# {server}  derive secret "tls13 s hs traffic": expanded
SERVER_HANDSHAKE_TRAFFIC_SECRET = h(
    "b6 7b 7d 69 0c c1 6c 4e 75 e5 42 13 cb 2d 37 b4 e9 c9 12 bc de d9 10 5d 42 be fd 59 d3 91 ad 38"
)
# {server}  extract secret "master": secret
MASTER_SECRET = h(
    "18 df 06 84 3d 13 a0 8b f2 a4 49 84 4c 5f 8a 47 80 01 bc 4d 4c 62 79 84 d5 a4 1d a8 d0 40 29 19"
)
# {server}  derive secret "tls13 c ap traffic": hash (ClientHello..server Finished)
SERVER_FINISHED_HASH = h(
    "96 08 10 2a 0f 1c cc 6d b6 25 0b 7b 7e 41 7b 1a 00 0e aa da 3d aa e4 77 7a 76 86 c9 ff 83 df 13"
)
# {server}  derive secret "tls13 c ap traffic": expanded
CLIENT_APPLICATION_TRAFFIC_SECRET = h(
    "9e 40 64 6c e7 9a 7f 9d c0 5a f8 88 9b ce 65 52 87 5a fa 0b 06 df 00 87 f7 92 eb b7 c1 75 04 a5"
)
# {server}  derive secret "tls13 s ap traffic": expanded
SERVER_APPLICATION_TRAFFIC_SECRET = h(
    "a1 1a f9 f0 55 31 f8 56 ad 47 11 6b 45 a9 50 32 82 04 b4 f4 4b fb 6b 3a 4b 4f 1f 3f cb 63 16 43"
)
# {server}  derive secret "tls13 exp master": expanded
EXPORTER_MASTER_SECRET = h(
    "fe 22 f8 81 17 6e da 18 eb 8f 44 52 9e 67 92 c5 0c 9a 3f 89 45 2f 68 d8 ae 31 1b 43 09 d3 cf 50"
)
# {server}  derive write traffic keys for handshake data: key expanded / iv expanded
SERVER_HANDSHAKE_KEY = h("3f ce 51 60 09 c2 17 27 d0 f2 e4 e8 6e e4 03 bc")
SERVER_HANDSHAKE_IV = h("5d 31 3e b2 67 12 76 ee 13 00 0b 30")
# {server}  derive read traffic keys for handshake data: key expanded / iv expanded
CLIENT_HANDSHAKE_KEY = h("db fa a6 93 d1 76 2c 5b 66 6a f5 d9 50 25 8d 01")
CLIENT_HANDSHAKE_IV = h("5b d3 c7 1b 83 6e 0b 76 bb 73 26 5f")
# {server}  derive write traffic keys for application data
SERVER_APPLICATION_KEY = h("9f 02 28 3b 6c 9c 07 ef c2 6b b9 f2 ac 92 e3 56")
SERVER_APPLICATION_IV = h("cf 78 2b 88 dd 83 54 9a ad f1 e9 84")
# {client}  derive write traffic keys for application data
CLIENT_APPLICATION_KEY = h("17 42 2d da 59 6e d5 d9 ac d8 90 e3 c6 3f 50 51")
CLIENT_APPLICATION_IV = h("5b 78 92 3d ee 08 57 90 33 e5 23 d9")
# {server}  derive write traffic keys for handshake data: key info (the HkdfLabel bytes)
KEY_INFO = h("00 10 09 74 6c 73 31 33 20 6b 65 79 00")

# {client}  send handshake record: complete record (ClientHello)
CLIENT_HELLO_RECORD = h(
    "16 03 01 00 c4 01 00 00 c0 03 03 cb 34 ec b1 e7 81 63 ba 1c 38 c6 da cb 19 6a 6d ff a2 1a 8d 99 12"
    "ec 18 a2 ef 62 83 02 4d ec e7 00 00 06 13 01 13 03 13 02 01 00 00 91 00 00 00 0b 00 09 00 00 06 73"
    "65 72 76 65 72 ff 01 00 01 00 00 0a 00 14 00 12 00 1d 00 17 00 18 00 19 01 00 01 01 01 02 01 03 01"
    "04 00 23 00 00 00 33 00 26 00 24 00 1d 00 20 99 38 1d e5 60 e4 bd 43 d2 3d 8e 43 5a 7d ba fe b3 c0"
    "6e 51 c1 3c ae 4d 54 13 69 1e 52 9a af 2c 00 2b 00 03 02 03 04 00 0d 00 20 00 1e 04 03 05 03 06 03"
    "02 03 08 04 08 05 08 06 04 01 05 01 06 01 02 01 04 02 05 02 06 02 02 02 00 2d 00 02 01 01 00 1c 00"
    "02 40 01"
)
# {server}  send handshake record: complete record (ServerHello)
SERVER_HELLO_RECORD = h(
    "16 03 03 00 5a 02 00 00 56 03 03 a6 af 06 a4 12 18 60 dc 5e 6e 60 24 9c d3 4c 95 93 0c 8a c5 cb 14"
    "34 da c1 55 77 2e d3 e2 69 28 00 13 01 00 00 2e 00 33 00 24 00 1d 00 20 c9 82 88 76 11 20 95 fe 66"
    "76 2b db f7 c6 72 e1 56 d6 cc 25 3b 83 3d f1 dd 69 b1 b0 4e 75 1f 0f 00 2b 00 02 03 04"
)
# {server}  construct an EncryptedExtensions handshake message
ENCRYPTED_EXTENSIONS = h(
    "08 00 00 24 00 22 00 0a 00 14 00 12 00 1d 00 17 00 18 00 19 01 00 01 01 01 02 01 03 01 04 00 1c"
    "00 02 40 01 00 00 00 00"
)
# {server}  construct a Finished handshake message
SERVER_FINISHED = h(
    "14 00 00 20 9b 9b 14 1d 90 63 37 fb d2 cb dc e7 1d f4 de da 4a b4 2c 30 95 72 cb 7f ff ee 54 54 b7"
    "8f 07 18"
)
# {server}  send handshake record: complete record (EncryptedExtensions .. Finished, protected)
SERVER_HANDSHAKE_RECORD = h(
    "17 03 03 02 a2 d1 ff 33 4a 56 f5 bf f6 59 4a 07 cc 87 b5 80 23 3f 50 0f 45 e4 89 e7 f3 3a f3 5e df"
    "78 69 fc f4 0a a4 0a a2 b8 ea 73 f8 48 a7 ca 07 61 2e f9 f9 45 cb 96 0b 40 68 90 51 23 ea 78 b1 11"
    "b4 29 ba 91 91 cd 05 d2 a3 89 28 0f 52 61 34 aa dc 7f c7 8c 4b 72 9d f8 28 b5 ec f7 b1 3b d9 ae fb"
    "0e 57 f2 71 58 5b 8e a9 bb 35 5c 7c 79 02 07 16 cf b9 b1 18 3e f3 ab 20 e3 7d 57 a6 b9 d7 47 76 09"
    "ae e6 e1 22 a4 cf 51 42 73 25 25 0c 7d 0e 50 92 89 44 4c 9b 3a 64 8f 1d 71 03 5d 2e d6 5b 0e 3c dd"
    "0c ba e8 bf 2d 0b 22 78 12 cb b3 60 98 72 55 cc 74 41 10 c4 53 ba a4 fc d6 10 92 8d 80 98 10 e4 b7"
    "ed 1a 8f d9 91 f0 6a a6 24 82 04 79 7e 36 a6 a7 3b 70 a2 55 9c 09 ea d6 86 94 5b a2 46 ab 66 e5 ed"
    "d8 04 4b 4c 6d e3 fc f2 a8 94 41 ac 66 27 2f d8 fb 33 0e f8 19 05 79 b3 68 45 96 c9 60 bd 59 6e ea"
    "52 0a 56 a8 d6 50 f5 63 aa d2 74 09 96 0d ca 63 d3 e6 88 61 1e a5 e2 2f 44 15 cf 95 38 d5 1a 20 0c"
    "27 03 42 72 96 8a 26 4e d6 54 0c 84 83 8d 89 f7 2c 24 46 1a ad 6d 26 f5 9e ca ba 9a cb bb 31 7b 66"
    "d9 02 f4 f2 92 a3 6a c1 b6 39 c6 37 ce 34 31 17 b6 59 62 22 45 31 7b 49 ee da 0c 62 58 f1 00 d7 d9"
    "61 ff b1 38 64 7e 92 ea 33 0f ae ea 6d fa 31 c7 a8 4d c3 bd 7e 1b 7a 6c 71 78 af 36 87 90 18 e3 f2"
    "52 10 7f 24 3d 24 3d c7 33 9d 56 84 c8 b0 37 8b f3 02 44 da 8c 87 c8 43 f5 e5 6e b4 c5 e8 28 0a 2b"
    "48 05 2c f9 3b 16 49 9a 66 db 7c ca 71 e4 59 94 26 f7 d4 61 e6 6f 99 88 2b d8 9f c5 08 00 be cc a6"
    "2d 6c 74 11 6d bd 29 72 fd a1 fa 80 f8 5d f8 81 ed be 5a 37 66 89 36 b3 35 58 3b 59 91 86 dc 5c 69"
    "18 a3 96 fa 48 a1 81 d6 b6 fa 4f 9d 62 d5 13 af bb 99 2f 2b 99 2f 67 f8 af e6 7f 76 91 3f a3 88 cb"
    "56 30 c8 ca 01 e0 c6 5d 11 c6 6a 1e 2a c4 c8 59 77 b7 c7 a6 99 9b bf 10 dc 35 ae 69 f5 51 56 14 63"
    "6c 0b 9b 68 c1 9e d2 e3 1c 0b 3b 66 76 30 38 eb ba 42 f3 b3 8e dc 03 99 f3 a9 f2 3f aa 63 97 8c 31"
    "7f c9 fa 66 a7 3f 60 f0 50 4d e9 3b 5b 84 5e 27 55 92 c1 23 35 ee 34 0b bc 4f dd d5 02 78 40 16 e4"
    "b3 be 7e f0 4d da 49 f4 b4 40 a3 0c b5 d2 af 93 98 28 fd 4a e3 79 4e 44 f9 4d f5 a6 31 ed e4 2c 17"
    "19 bf da bf 02 53 fe 51 75 be 89 8e 75 0e dc 53 37 0d 2b"
)
# {client}  send handshake record: complete record (client Finished, protected)
CLIENT_FINISHED_RECORD = h(
    "17 03 03 00 35 75 ec 4d c2 38 cc e6 0b 29 80 44 a7 1e 21 9c 56 cc 77 b0 51 7f e9 b9 3c 7a 4b fc 44"
    "d8 7f 38 f8 03 38 ac 98 fc 46 de b3 84 bd 1c ae ac ab 68 67 d7 26 c4 05 46"
)
# {server}  send handshake record: complete record (NewSessionTicket, protected)
NEW_SESSION_TICKET_RECORD = h(
    "17 03 03 00 de 3a 6b 8f 90 41 4a 97 d6 95 9c 34 87 68 0d e5 13 4a 2b 24 0e 6c ff ac 11 6e 95 d4 1d"
    "6a f8 f6 b5 80 dc f3 d1 1d 63 c7 58 db 28 9a 01 59 40 25 2f 55 71 3e 06 1d c1 3e 07 88 91 a3 8e fb"
    "cf 57 53 ad 8e f1 70 ad 3c 73 53 d1 6d 9d a7 73 b9 ca 7f 2b 9f a1 b6 c0 d4 a3 d0 3f 75 e0 9c 30 ba"
    "1e 62 97 2a c4 6f 75 f7 b9 81 be 63 43 9b 29 99 ce 13 06 46 15 13 98 91 d5 e4 c5 b4 06 f1 6e 3f c1"
    "81 a7 7c a4 75 84 00 25 db 2f 0a 77 f8 1b 5a b0 5b 94 c0 13 46 75 5f 69 23 2c 86 51 9d 86 cb ee ac"
    "87 aa c3 47 d1 43 f9 60 5d 64 f6 50 db 4d 02 3e 70 e9 52 ca 49 fe 51 37 12 1c 74 bc 26 97 68 7e 24"
    "87 46 d6 df 35 30 05 f3 bc e1 86 96 12 9c 81 53 55 6b 3b 6c 67 79 b3 7b f1 59 85 68 4f"
)
# {client}  send application_data record: payload / complete record
APPLICATION_PAYLOAD = bytes(range(50))
CLIENT_APPLICATION_RECORD = h(
    "17 03 03 00 43 a2 3f 70 54 b6 2c 94 d0 af fa fe 82 28 ba 55 cb ef ac ea 42 f9 14 aa 66 bc ab 3f 2b"
    "98 19 a8 a5 b4 6b 39 5b d5 4a 9a 20 44 1e 2b 62 97 4e 1f 5a 62 92 a2 97 70 14 bd 1e 3d ea e6 3a ee"
    "bb 21 69 49 15 e4"
)
# {server}  send application_data record: complete record (same 50-byte payload)
SERVER_APPLICATION_RECORD = h(
    "17 03 03 00 43 2e 93 7e 11 ef 4a c7 40 e5 38 ad 36 00 5f c4 a4 69 32 fc 32 25 d0 5f 82 aa 1b 36 e3"
    "0e fa f9 7d 90 e6 df fc 60 2d cb 50 1a 59 a8 fc c4 9c 4b f2 e5 f0 a2 1c 00 47 c2 ab f3 32 54 0d d0"
    "32 e1 67 c2 95 5d"
)
# {client}  send alert record / {server}  send alert record: complete record (close_notify)
CLIENT_ALERT_RECORD = h("17 03 03 00 13 c9 87 27 60 65 56 66 b7 4d 7f f1 15 3e fd 6d b6 d0 b0 e3")
SERVER_ALERT_RECORD = h("17 03 03 00 13 b5 8f d6 71 66 eb f5 99 d2 47 20 cf be 7e fa 7a 88 64 a9")

EMPTY_HASH = hashlib.sha256(b"").digest()


# ---------------------------------------------------------------------------------------
# Key schedule (RFC 8446 §7.1, §7.3)
# ---------------------------------------------------------------------------------------
def test_early_and_handshake_secrets() -> None:
    early = tls13_early_secret("sha256")
    assert early == EARLY_SECRET
    assert derive_secret("sha256", early, "derived", EMPTY_HASH) == DERIVED_FOR_HANDSHAKE
    assert tls13_handshake_secret("sha256", early, ECDHE_SHARED_SECRET) == HANDSHAKE_SECRET


def test_handshake_traffic_secrets_from_transcript() -> None:
    # The transcript hash is recomputed from the RFC's ClientHello and ServerHello bytes.
    transcript = CLIENT_HELLO_RECORD[5:] + SERVER_HELLO_RECORD[5:]
    assert hashlib.sha256(transcript).digest() == HELLO_HASH
    assert (
        derive_secret("sha256", HANDSHAKE_SECRET, "c hs traffic", HELLO_HASH)
        == CLIENT_HANDSHAKE_TRAFFIC_SECRET
    )
    assert (
        derive_secret("sha256", HANDSHAKE_SECRET, "s hs traffic", HELLO_HASH)
        == SERVER_HANDSHAKE_TRAFFIC_SECRET
    )


def test_master_and_application_secrets() -> None:
    master = tls13_master_secret("sha256", HANDSHAKE_SECRET)
    assert master == MASTER_SECRET
    assert (
        derive_secret("sha256", master, "c ap traffic", SERVER_FINISHED_HASH)
        == CLIENT_APPLICATION_TRAFFIC_SECRET
    )
    assert (
        derive_secret("sha256", master, "s ap traffic", SERVER_FINISHED_HASH)
        == SERVER_APPLICATION_TRAFFIC_SECRET
    )
    assert (
        derive_secret("sha256", master, "exp master", SERVER_FINISHED_HASH)
        == EXPORTER_MASTER_SECRET
    )


@pytest.mark.parametrize(
    ("secret", "key", "iv"),
    [
        (SERVER_HANDSHAKE_TRAFFIC_SECRET, SERVER_HANDSHAKE_KEY, SERVER_HANDSHAKE_IV),
        (CLIENT_HANDSHAKE_TRAFFIC_SECRET, CLIENT_HANDSHAKE_KEY, CLIENT_HANDSHAKE_IV),
        (SERVER_APPLICATION_TRAFFIC_SECRET, SERVER_APPLICATION_KEY, SERVER_APPLICATION_IV),
        (CLIENT_APPLICATION_TRAFFIC_SECRET, CLIENT_APPLICATION_KEY, CLIENT_APPLICATION_IV),
    ],
    ids=["server-hs", "client-hs", "server-ap", "client-ap"],
)
def test_traffic_keys(secret: bytes, key: bytes, iv: bytes) -> None:
    assert tls13_traffic_keys(SUITE, secret) == (key, iv)


def test_hkdf_label_encoding() -> None:
    # HKDF-Expand-Label(secret, "key", "", 16) is HKDF-Expand(secret, KEY_INFO, 16).
    import hmac

    t1 = hmac.new(SERVER_HANDSHAKE_TRAFFIC_SECRET, KEY_INFO + b"\x01", "sha256").digest()
    assert (
        hkdf_expand_label("sha256", SERVER_HANDSHAKE_TRAFFIC_SECRET, "key", b"", 16)
        == t1[:16]
        == SERVER_HANDSHAKE_KEY
    )


# ---------------------------------------------------------------------------------------
# Record protection (RFC 8446 §5.2-§5.4)
# ---------------------------------------------------------------------------------------
def _open(record_bytes: bytes, secret: bytes, seq: int) -> tuple[int, bytes]:
    rec, end = parse_record(record_bytes)
    assert end == len(record_bytes)
    return Tls13Protection(SUITE, secret).decrypt(
        rec.content_type, rec.version, bytes(rec.fragment), seq
    )


def test_server_handshake_record_decrypts_to_the_rfc_messages() -> None:
    inner_type, plaintext = _open(SERVER_HANDSHAKE_RECORD, SERVER_HANDSHAKE_TRAFFIC_SECRET, 0)
    assert inner_type == 22
    assert plaintext.startswith(ENCRYPTED_EXTENSIONS)
    assert plaintext.endswith(SERVER_FINISHED)
    # The transcript through the server Finished hashes to the RFC's value.
    transcript = CLIENT_HELLO_RECORD[5:] + SERVER_HELLO_RECORD[5:] + plaintext
    assert hashlib.sha256(transcript).digest() == SERVER_FINISHED_HASH
    messages = HandshakeReassembler().feed(plaintext)
    assert [m.msg_type for m in messages] == [8, 11, 15, 20]


def test_application_records_decrypt_to_the_rfc_payload() -> None:
    assert _open(CLIENT_APPLICATION_RECORD, CLIENT_APPLICATION_TRAFFIC_SECRET, 0) == (
        23,
        APPLICATION_PAYLOAD,
    )
    # The server's application record follows its NewSessionTicket: sequence number 1.
    assert _open(SERVER_APPLICATION_RECORD, SERVER_APPLICATION_TRAFFIC_SECRET, 1) == (
        23,
        APPLICATION_PAYLOAD,
    )


def test_wrong_sequence_number_or_key_does_not_authenticate() -> None:
    with pytest.raises(AuthenticationFailed):
        _open(CLIENT_APPLICATION_RECORD, CLIENT_APPLICATION_TRAFFIC_SECRET, 1)
    with pytest.raises(AuthenticationFailed):
        _open(CLIENT_APPLICATION_RECORD, SERVER_APPLICATION_TRAFFIC_SECRET, 0)
    tampered = bytearray(CLIENT_APPLICATION_RECORD)
    tampered[20] ^= 1
    with pytest.raises(AuthenticationFailed):
        _open(bytes(tampered), CLIENT_APPLICATION_TRAFFIC_SECRET, 0)


def test_alert_records() -> None:
    # Application epoch: client data (seq 0) then its alert (seq 1); the server sent a
    # NewSessionTicket (0) and data (1) before its alert (2).
    assert _open(CLIENT_ALERT_RECORD, CLIENT_APPLICATION_TRAFFIC_SECRET, 1) == (21, b"\x01\x00")
    assert _open(SERVER_ALERT_RECORD, SERVER_APPLICATION_TRAFFIC_SECRET, 2) == (21, b"\x01\x00")


# ---------------------------------------------------------------------------------------
# Handshake messages of the trace
# ---------------------------------------------------------------------------------------
def test_client_hello_fields() -> None:
    [msg] = HandshakeReassembler().feed(CLIENT_HELLO_RECORD[5:])
    ch = decode_handshake(msg)
    assert isinstance(ch, ClientHello)
    assert ch.random == CLIENT_HELLO_RECORD[11:43]
    assert ch.cipher_suites == (0x1301, 0x1303, 0x1302)
    assert ch.server_name == "server"
    assert ch.supported_groups == (
        0x001D,
        0x0017,
        0x0018,
        0x0019,
        0x0100,
        0x0101,
        0x0102,
        0x0103,
        0x0104,
    )
    assert ch.key_share_groups == (0x001D,)
    assert ch.supported_versions == (0x0304,)
    assert ch.psk_key_exchange_modes == (1,)
    assert ch.record_size_limit == 0x4001
    assert ch.session_ticket == b""  # empty session_ticket extension: asks for a ticket
    assert ch.extension_types == (0, 0xFF01, 10, 35, 51, 43, 13, 45, 28)
    assert ch.malformed_extensions == () and ch.duplicate_extensions == ()


def test_server_hello_fields() -> None:
    [msg] = HandshakeReassembler().feed(SERVER_HELLO_RECORD[5:])
    sh = decode_handshake(msg)
    assert isinstance(sh, ServerHello)
    assert sh.cipher_suite == 0x1301
    assert sh.version == 0x0304 and sh.legacy_version == 0x0303
    assert sh.key_share_group == 0x001D
    assert sh.selected_identity is None
    assert sh.downgrade_sentinel is None


def test_session_decrypts_the_whole_trace() -> None:
    client_random = CLIENT_HELLO_RECORD[11:43]
    keylog = KeyLog.from_text(
        "\n".join(
            f"{label} {client_random.hex()} {secret.hex()}"
            for label, secret in [
                ("CLIENT_HANDSHAKE_TRAFFIC_SECRET", CLIENT_HANDSHAKE_TRAFFIC_SECRET),
                ("SERVER_HANDSHAKE_TRAFFIC_SECRET", SERVER_HANDSHAKE_TRAFFIC_SECRET),
                ("CLIENT_TRAFFIC_SECRET_0", CLIENT_APPLICATION_TRAFFIC_SECRET),
                ("SERVER_TRAFFIC_SECRET_0", SERVER_APPLICATION_TRAFFIC_SECRET),
            ]
        )
    )
    session = TlsSession(keylog)
    wire = [
        ("c2s", CLIENT_HELLO_RECORD),
        ("s2c", SERVER_HELLO_RECORD),
        ("s2c", SERVER_HANDSHAKE_RECORD),
        ("c2s", CLIENT_FINISHED_RECORD),
        ("s2c", NEW_SESSION_TICKET_RECORD),
        ("c2s", CLIENT_APPLICATION_RECORD),
        ("s2c", SERVER_APPLICATION_RECORD),
        ("c2s", CLIENT_ALERT_RECORD),
        ("s2c", SERVER_ALERT_RECORD),
    ]
    results = []
    for direction, data in wire:
        results.extend(session.feed_data(direction, data))
    assert session.close() == []
    assert [r.status for r in results] == [DecryptStatus.NOT_ENCRYPTED] * 2 + [
        DecryptStatus.DECRYPTED
    ] * 7
    assert [r.epoch for r in results[2:]] == [Epoch.HANDSHAKE] * 2 + [Epoch.APPLICATION] * 5
    assert [type(m) for m in results[2].handshake] == [
        EncryptedExtensions,
        Certificate,
        CertificateVerify,
        Finished,
    ]
    ee = results[2].handshake[0]
    assert isinstance(ee, EncryptedExtensions) and ee.record_size_limit == 0x4001
    cert = results[2].handshake[1]
    assert isinstance(cert, Certificate) and cert.tls13 and cert.certificate_lengths == (432,)
    assert isinstance(results[3].handshake[0], Finished)
    nst = results[4].handshake[0]
    assert isinstance(nst, NewSessionTicket) and nst.tls13 and nst.max_early_data_size == 1024
    assert (
        results[5].plaintext == APPLICATION_PAYLOAD and results[6].plaintext == APPLICATION_PAYLOAD
    )
    # Sequence numbers restart at 0 in every epoch of each direction (RFC 8446 §5.3).
    assert [r.seq for r in results[2:]] == [0, 0, 0, 0, 1, 1, 2]
    assert [a.description for r in results[7:] for a in r.alerts] == [0, 0]
    s = session.summary()
    assert s.version == 0x0304 and s.cipher_suite_name == "TLS_AES_128_GCM_SHA256"
    assert s.sni == "server" and s.handshake_complete and s.decrypted and s.why_not is None
    assert s.server_certificate_lengths == (432,)
    assert session.anomalies == []
