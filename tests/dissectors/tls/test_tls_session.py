"""TlsSession state machine on synthetic connections: epochs, statuses, gaps, resumption.

Connections are built here record by record (hellos from the RFC structures, protection
sealed with ``cryptography`` directly, see test_tls_crypto.py); secrets are arbitrary
constants handed to the session through a key log, as a client would log them.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305
from hypothesis import given, settings
from hypothesis import strategies as st

from dissectors.tls.crypto import (
    CIPHER_SUITES,
    hkdf_expand_label,
    tls12_key_block,
    tls13_next_traffic_secret,
    tls13_traffic_keys,
)
from dissectors.tls.handshake import (
    HRR_RANDOM,
    Certificate,
    CertificateVerify,
    EncryptedExtensions,
    Finished,
    KeyUpdate,
    NewSessionTicket,
)
from dissectors.tls.keylog import KeyLog
from dissectors.tls.record import IncompleteRecord, StreamGap, TlsRecord
from dissectors.tls.session import DecryptStatus, Epoch, RecordResult, ResumptionCache, TlsSession

D = DecryptStatus


# -- wire builders ----------------------------------------------------------------------
def u16(n: int) -> bytes:
    return struct.pack("!H", n)


def vec(b: bytes, n: int) -> bytes:
    return len(b).to_bytes(n, "big") + b


def ext(t: int, data: bytes) -> bytes:
    return u16(t) + vec(data, 2)


def hs(t: int, body: bytes) -> bytes:
    return bytes((t,)) + vec(body, 3)


def record(ctype: int, body: bytes, version: int = 0x0303) -> bytes:
    return bytes((ctype,)) + u16(version) + vec(body, 2)


CR = bytes(range(32))
SR = bytes(range(64, 96))
CCS = record(20, b"\x01")


def client_hello(
    *,
    cr: bytes = CR,
    tls13: bool = True,
    early: bool = False,
    psk: bool = False,
    suites: Iterable[int] = (0x1301, 0x1302, 0x1303),
    session_id: bytes = b"",
    ticket: bytes | None = None,
    etm: bool = False,
    versions: Iterable[int] = (0x0304, 0x0303),
) -> bytes:
    exts = [
        ext(0, vec(b"\x00" + vec(b"example.org", 2), 2)),
        ext(16, vec(vec(b"h2", 1) + vec(b"http/1.1", 1), 2)),
    ]
    if tls13:
        exts += [
            ext(43, vec(b"".join(u16(v) for v in versions), 1)),
            ext(51, vec(u16(0x001D) + vec(bytes(32), 2), 2)),
        ]
        exts += [ext(45, vec(b"\x01", 1))]
    if early:
        exts.append(ext(42, b""))
    if ticket is not None:
        exts.append(ext(35, ticket))
    if etm:
        exts.append(ext(22, b""))
    if psk:
        exts.append(ext(41, vec(vec(b"ticket-id", 2) + bytes(4), 2) + vec(vec(bytes(32), 1), 2)))
    body = (
        u16(0x0303)
        + cr
        + vec(session_id, 1)
        + vec(b"".join(u16(s) for s in suites), 2)
        + b"\x01\x00"
    )
    return record(22, hs(1, body + vec(b"".join(exts), 2)), 0x0301)


def server_hello(
    suite: int,
    *,
    tls13: bool = True,
    psk: bool = False,
    key_share: bool = True,
    session_id: bytes = b"",
    random: bytes = SR,
    etm: bool = False,
) -> bytes:
    exts = []
    if tls13:
        exts.append(ext(43, u16(0x0304)))
        if key_share:
            exts.append(
                ext(51, u16(0x001D) if random == HRR_RANDOM else u16(0x001D) + vec(bytes(32), 2))
            )
        if psk:
            exts.append(ext(41, u16(0)))
    elif etm:
        exts.append(ext(22, b""))
    body = u16(0x0303) + random + vec(session_id, 1) + u16(suite) + b"\x00" + vec(b"".join(exts), 2)
    return record(22, hs(2, body))


class Seal13:
    """TLS 1.3 sender for one traffic secret (RFC 8446 §5.2-§5.3), written independently."""

    def __init__(self, suite_id: int, secret: bytes) -> None:
        self.suite = CIPHER_SUITES[suite_id]
        self.secret = secret
        self.seq = 0
        self._keys()

    def _keys(self) -> None:
        key, self.iv = tls13_traffic_keys(self.suite, self.secret)
        self.aead = ChaCha20Poly1305(key) if "CHACHA" in self.suite.cipher else AESGCM(key)

    def __call__(self, ctype: int, content: bytes, pad: int = 0) -> bytes:
        inner = content + bytes((ctype,)) + bytes(pad)
        aad = bytes((23, 3, 3)) + u16(len(inner) + 16)
        nonce = bytes(a ^ b for a, b in zip(self.iv, self.seq.to_bytes(12, "big"), strict=True))
        self.seq += 1
        return aad + self.aead.encrypt(nonce, inner, aad)

    def update(self) -> None:
        self.secret = tls13_next_traffic_secret(self.suite.prf_hash, self.secret)
        self.seq = 0
        self._keys()


class Seal12Gcm:
    """TLS 1.2 AES-GCM sender (RFC 5288 §3)."""

    def __init__(self, suite_id: int, master: bytes, cr: bytes, sr: bytes, *, client: bool) -> None:
        keys = tls12_key_block(CIPHER_SUITES[suite_id], 0x0303, master, cr, sr)
        self.aead = AESGCM(keys.client_key if client else keys.server_key)
        self.salt = keys.client_iv if client else keys.server_iv
        self.seq = 0

    def __call__(self, ctype: int, content: bytes) -> bytes:
        explicit = self.seq.to_bytes(8, "big")
        aad = self.seq.to_bytes(8, "big") + bytes((ctype, 3, 3)) + u16(len(content))
        self.seq += 1
        return record(ctype, explicit + self.aead.encrypt(self.salt + explicit, content, aad))


S = {
    "CLIENT_EARLY_TRAFFIC_SECRET": bytes([1]) * 32,
    "CLIENT_HANDSHAKE_TRAFFIC_SECRET": bytes([2]) * 32,
    "SERVER_HANDSHAKE_TRAFFIC_SECRET": bytes([3]) * 32,
    "CLIENT_TRAFFIC_SECRET_0": bytes([4]) * 32,
    "SERVER_TRAFFIC_SECRET_0": bytes([5]) * 32,
}
MASTER = bytes([9]) * 48


def keylog(secrets: dict[str, bytes], cr: bytes = CR, **override: bytes | None) -> KeyLog:
    kl = KeyLog()
    for label, value in {**secrets, **override}.items():
        if value is not None:
            kl.add_secret(cr, label, value)
    return kl


EE = hs(8, vec(ext(16, vec(vec(b"h2", 1), 2)), 2))
EE_EARLY = hs(8, vec(ext(16, vec(vec(b"h2", 1), 2)) + ext(42, b""), 2))
CERT13 = hs(11, b"\x00" + vec(vec(b"C" * 300, 3) + vec(b"", 2), 3))
CV = hs(15, u16(0x0804) + vec(b"s" * 64, 2))
FIN = hs(20, b"f" * 32)
NST13 = hs(4, struct.pack("!II", 7200, 1) + vec(b"\x00", 1) + vec(b"T" * 40, 2) + vec(b"", 2))


def tls13_connection(suite_id: int = 0x1301) -> list[tuple[str, bytes]]:
    """A full TLS 1.3 handshake, application data both ways and a KeyUpdate each way."""
    s_hs, c_hs = (
        Seal13(suite_id, S["SERVER_HANDSHAKE_TRAFFIC_SECRET"]),
        Seal13(suite_id, S["CLIENT_HANDSHAKE_TRAFFIC_SECRET"]),
    )
    s_ap, c_ap = (
        Seal13(suite_id, S["SERVER_TRAFFIC_SECRET_0"]),
        Seal13(suite_id, S["CLIENT_TRAFFIC_SECRET_0"]),
    )
    wire = [
        ("c2s", client_hello()),
        (
            "s2c",
            server_hello(suite_id) + CCS + s_hs(22, EE) + s_hs(22, CERT13 + CV) + s_hs(22, FIN),
        ),
        ("c2s", CCS + c_hs(22, FIN)),
        ("c2s", c_ap(23, b"GET / HTTP/1.1\r\n\r\n")),
        ("s2c", s_ap(22, NST13) + s_ap(23, b"HTTP/1.1 200 OK\r\n\r\n", pad=30)),
        ("s2c", s_ap(22, hs(24, b"\x01"))),  # KeyUpdate, update_requested
    ]
    s_ap.update()
    wire.append(("s2c", s_ap(23, b"after server update")))
    wire.append(("c2s", c_ap(22, hs(24, b"\x00"))))
    c_ap.update()
    wire += [("c2s", c_ap(23, b"after client update")), ("c2s", c_ap(21, b"\x01\x00"))]
    return wire


def drive(session: TlsSession, wire: Iterable[tuple[str, bytes | int]]) -> list[RecordResult]:
    out: list[RecordResult] = []
    for direction, data in wire:
        out += (
            session.feed_gap(direction, data)
            if isinstance(data, int)
            else session.feed_data(direction, data)
        )
    return out + session.close()


def statuses(results: list[RecordResult]) -> list[tuple[str, str]]:
    return [(r.direction, r.status.value) for r in results]


# ---------------------------------------------------------------------------------------
# TLS 1.3
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("suite_id", [0x1301, 0x1303])
def test_tls13_full_connection_with_key_updates(suite_id: int) -> None:
    session = TlsSession(keylog(S))
    results = drive(session, tls13_connection(suite_id))
    protected = [r for r in results if r.content_type == 23]
    assert all(r.status is D.DECRYPTED for r in protected)
    assert [(r.direction, r.epoch.value, r.key_generation, r.seq) for r in protected] == [
        ("s2c", "handshake", 0, 0), ("s2c", "handshake", 0, 1), ("s2c", "handshake", 0, 2),
        ("c2s", "handshake", 0, 0), ("c2s", "application", 0, 0),
        ("s2c", "application", 0, 0), ("s2c", "application", 0, 1), ("s2c", "application", 0, 2),
        ("s2c", "application", 1, 0), ("c2s", "application", 0, 1),
        ("c2s", "application", 1, 0), ("c2s", "application", 1, 1),
    ]  # fmt: skip
    plaintexts = [r.plaintext for r in protected if r.inner_content_type == 23]
    assert plaintexts == [
        b"GET / HTTP/1.1\r\n\r\n",
        b"HTTP/1.1 200 OK\r\n\r\n",
        b"after server update",
        b"after client update",
    ]
    assert [type(m) for m in protected[1].handshake] == [Certificate, CertificateVerify]
    assert isinstance(protected[0].handshake[0], EncryptedExtensions) and isinstance(
        protected[2].handshake[0], Finished
    )
    assert isinstance(protected[5].handshake[0], NewSessionTicket)
    ku = protected[7].handshake[0]
    assert isinstance(ku, KeyUpdate) and ku.request_update == 1
    assert [a.description for a in protected[-1].alerts] == [0]
    s = session.summary()
    assert (s.version, s.cipher_suite, s.alpn, s.sni, s.key_updates) == (
        0x0304,
        suite_id,
        "h2",
        "example.org",
        2,
    )
    assert (
        s.alpn_offered == ("h2", "http/1.1")
        and s.key_exchange == "ECDHE"
        and s.key_share_group == 0x001D
    )
    assert (
        s.handshake_complete
        and s.decrypted
        and s.why_not is None
        and s.server_certificate_lengths == (300,)
    )
    assert s.records_by_status == {"not_encrypted": 4, "decrypted": 12}
    assert session.anomalies == []


def test_client_encrypted_extensions_do_not_replace_the_servers_alpn() -> None:
    """SYNTHETIC (issue 13 class 5): Chrome's ALPS.  With application_settings
    (17513) negotiated, the client sends its own EncryptedExtensions before its Finished;
    they carry its settings and no ALPN.  The negotiated ALPN is the server's."""
    s_hs = Seal13(0x1301, S["SERVER_HANDSHAKE_TRAFFIC_SECRET"])
    c_hs = Seal13(0x1301, S["CLIENT_HANDSHAKE_TRAFFIC_SECRET"])
    alps_settings = b"\x00\x03\x00\x00\x00\x64"  # HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS 100
    server_ee = hs(8, vec(ext(16, vec(vec(b"h2", 1), 2)) + ext(17513, alps_settings), 2))
    client_ee = hs(8, vec(ext(17513, alps_settings), 2))
    wire = [
        ("c2s", client_hello()),
        ("s2c", server_hello(0x1301) + CCS + s_hs(22, server_ee) + s_hs(22, CERT13 + CV + FIN)),
        ("c2s", CCS + c_hs(22, client_ee + FIN)),
    ]
    session = TlsSession(keylog(S))
    results = drive(session, wire)
    client_hs = [m for r in results if r.direction == "c2s" for m in r.handshake]
    assert [type(m) for m in client_hs][-2:] == [EncryptedExtensions, Finished]
    s = session.summary()
    assert s.alpn == "h2" and s.handshake_complete
    assert session.encrypted_extensions is not None and session.encrypted_extensions.alpn == "h2"
    assert session.client_encrypted_extensions is not None


class SealDraft(Seal13):
    """A TLS 1.3 draft sender: HKDF-Expand-Label prefix and AEAD additional data of the
    draft (draft-ietf-tls-tls13-19/-20 §7.1; -24/-25 §5.2), written out here."""

    def __init__(self, suite_id: int, secret: bytes, *, prefix: bytes, header_aad: bool) -> None:
        self.prefix, self.header_aad = prefix, header_aad
        super().__init__(suite_id, secret)

    def _keys(self) -> None:
        h, n = self.suite.prf_hash, self.suite.key_length
        key = hkdf_expand_label(h, self.secret, "key", b"", n, prefix=self.prefix)
        self.iv = hkdf_expand_label(h, self.secret, "iv", b"", 12, prefix=self.prefix)
        self.aead = ChaCha20Poly1305(key) if "CHACHA" in self.suite.cipher else AESGCM(key)

    def __call__(self, ctype: int, content: bytes, pad: int = 0) -> bytes:
        inner = content + bytes((ctype,)) + bytes(pad)
        header = bytes((23, 3, 1)) + u16(len(inner) + 16)
        nonce = bytes(a ^ b for a, b in zip(self.iv, self.seq.to_bytes(12, "big"), strict=True))
        self.seq += 1
        return header + self.aead.encrypt(nonce, inner, header if self.header_aad else b"")


def draft_connection(version: int, suite_id: int = 0x1303) -> list[tuple[str, bytes]]:
    """SYNTHETIC: a TLS 1.3 draft handshake and one request each way.  Drafts before 22
    send the short ServerHello (version, random, suite, extensions) and no CCS."""
    draft = version & 0xFF if version >> 8 == 0x7F else {0xFB17: 23, 0xFB1A: 26}.get(version, 28)
    prefix = b"TLS 1.3, " if draft < 20 else b"tls13 "
    seal = {k: SealDraft(suite_id, v, prefix=prefix, header_aad=draft >= 25) for k, v in S.items()}
    ks = ext(51, u16(0x001D) + vec(bytes(32), 2))
    if draft < 22:
        body = u16(version) + SR + u16(suite_id) + vec(ks, 2)
    else:
        body = u16(0x0303) + SR + vec(b"", 1) + u16(suite_id) + b"\x00"
        body += vec(ext(43, u16(version)) + ks, 2)
    ch = client_hello(suites=(suite_id,), versions=(version, 0x0303))
    s_hs, c_hs = seal["SERVER_HANDSHAKE_TRAFFIC_SECRET"], seal["CLIENT_HANDSHAKE_TRAFFIC_SECRET"]
    s_ap, c_ap = seal["SERVER_TRAFFIC_SECRET_0"], seal["CLIENT_TRAFFIC_SECRET_0"]
    return [
        ("c2s", ch),
        ("s2c", record(22, hs(2, body)) + s_hs(22, EE) + s_hs(22, CERT13 + CV + FIN)),
        ("c2s", c_hs(22, FIN) + c_ap(23, b"GET / HTTP/1.1\r\n\r\n")),
        ("s2c", s_ap(23, b"HTTP/1.1 200 OK\r\n\r\n")),
    ]


@pytest.mark.parametrize(
    "version", [0x7F12, 0x7F14, 0x7F17, 0x7F1A, 0x7F1C, 0xFB17, 0xFB1A], ids=hex
)
def test_tls13_drafts_are_read_and_decrypted(version: int) -> None:
    """SYNTHETIC (issue 13 class 6): a ServerHello of a TLS 1.3 draft (0x7f14 = draft-20,
    ChaCha20) is a ServerHello; the draft's key schedule decrypts what Wireshark does."""
    session = TlsSession(keylog(S))
    results = drive(session, draft_connection(version))
    assert session.server_hello is not None and session.server_hello.version == version
    protected = [r for r in results if r.content_type == 23]
    assert [r.status for r in protected] == [D.DECRYPTED] * len(protected) and len(protected) == 5
    assert [r.plaintext for r in protected if r.inner_content_type == 23] == [
        b"GET / HTTP/1.1\r\n\r\n",
        b"HTTP/1.1 200 OK\r\n\r\n",
    ]
    s = session.summary()
    assert s.version == version and s.cipher_suite_name == "TLS_CHACHA20_POLY1305_SHA256"
    assert s.alpn == "h2" and s.handshake_complete and s.decrypted and session.anomalies == []
    without_keys = TlsSession(KeyLog())
    drive(without_keys, draft_connection(version))
    assert without_keys.summary().why_not == "missing_key"  # never no_handshake


def test_tls13_experiment_variant_is_recognised_not_decrypted() -> None:
    """SYNTHETIC: Google's 2017 TLS 1.3 experiment versions (0x7e0x) carry TLS 1.3 in a
    TLS 1.2-looking ServerHello; their key schedule is not documented: unsupported_version."""
    session = TlsSession(keylog(S))
    drive(session, draft_connection(0x7E02))
    s = session.summary()
    assert s.server_hello and s.version == 0x7E02 and s.why_not == "unsupported_version"


def test_wrong_handshake_key_is_reported_and_the_application_epoch_still_found() -> None:
    session = TlsSession(keylog(S, SERVER_HANDSHAKE_TRAFFIC_SECRET=bytes([7]) * 32))
    results = drive(session, tls13_connection())
    s2c = [r for r in results if r.direction == "s2c" and r.content_type == 23]
    assert [r.status for r in s2c[:3]] == [D.WRONG_KEY] * 3
    assert all(r.plaintext is None and r.inner_content_type is None for r in s2c[:3])
    assert [r.status for r in s2c[3:]] == [D.DECRYPTED] * 4  # found by trial at sequence 0
    assert s2c[3].epoch is Epoch.APPLICATION and s2c[3].seq == 0
    summary = session.summary()
    assert (
        not summary.decrypted
        and summary.why_not == "wrong_key"
        and summary.undecrypted_records == 3
    )


def test_missing_keys() -> None:
    session = TlsSession(KeyLog())
    results = drive(session, tls13_connection())
    assert {r.status for r in results if r.content_type == 23} == {D.MISSING_KEY}
    assert all(r.plaintext is None for r in results if r.content_type == 23)
    assert session.summary().why_not == "missing_key"
    no_keylog = TlsSession(None)
    assert {r.status for r in drive(no_keylog, tls13_connection()) if r.content_type == 23} == {
        D.MISSING_KEY
    }


def test_psk_only_tls13() -> None:
    wire = [
        ("c2s", client_hello(psk=True)),
        ("s2c", server_hello(0x1301, psk=True, key_share=False) + record(23, bytes(40))),
    ]
    session = TlsSession(KeyLog())
    results = drive(session, wire)
    assert results[-1].status is D.PSK_ONLY
    s = session.summary()
    assert (
        s.key_exchange == "PSK"
        and s.resumption_offered
        and s.resumption_accepted
        and s.resumption_kind == "psk"
    )


def test_unknown_tls13_suite_is_unsupported() -> None:
    wire = [("c2s", client_hello()), ("s2c", server_hello(0x13FF) + record(23, bytes(40)))]
    results = drive(TlsSession(keylog(S)), wire)
    assert results[-1].status is D.UNSUPPORTED_SUITE


def test_record_overflow_in_tls13() -> None:
    s_hs = Seal13(0x1301, S["SERVER_HANDSHAKE_TRAFFIC_SECRET"])
    big = s_hs(23, bytes((1 << 14) + 300))  # legal for TLS 1.2, over the 2^14 + 256 of TLS 1.3
    session = TlsSession(keylog(S))
    results = drive(session, [("c2s", client_hello()), ("s2c", server_hello(0x1301) + big)])
    assert results[-1].status is D.BAD_RECORD
    assert [a.name for a in results[-1].anomalies] == ["tls_record_overflow"]


# ---------------------------------------------------------------------------------------
# 0-RTT
# ---------------------------------------------------------------------------------------
def early_connection(accept: bool) -> list[tuple[str, bytes]]:
    e = Seal13(0x1301, S["CLIENT_EARLY_TRAFFIC_SECRET"])
    s_hs, c_hs = (
        Seal13(0x1301, S["SERVER_HANDSHAKE_TRAFFIC_SECRET"]),
        Seal13(0x1301, S["CLIENT_HANDSHAKE_TRAFFIC_SECRET"]),
    )
    c_ap = Seal13(0x1301, S["CLIENT_TRAFFIC_SECRET_0"])
    wire = [
        (
            "c2s",
            client_hello(early=True, psk=True, suites=(0x1302, 0x1301))
            + CCS
            + e(23, b"GET /early"),
        ),
        (
            "s2c",
            server_hello(0x1301, psk=True) + s_hs(22, EE_EARLY if accept else EE) + s_hs(22, FIN),
        ),
        ("c2s", e(23, b"more early data")),
    ]
    if accept:
        wire.append(("c2s", e(22, hs(5, b""))))  # EndOfEarlyData
    wire += [("c2s", c_hs(22, FIN)), ("c2s", c_ap(23, b"GET /late"))]
    return wire


def test_early_data_accepted_and_decrypted_before_the_server_hello() -> None:
    session = TlsSession(keylog(S))
    results = drive(session, early_connection(accept=True))
    c2s = [r for r in results if r.direction == "c2s" and r.content_type == 23]
    assert [(r.status.value, r.epoch.value, r.early_data) for r in c2s] == [
        ("decrypted", "early", True), ("decrypted", "early", True), ("decrypted", "early", True),
        ("decrypted", "handshake", False), ("decrypted", "application", False),
    ]  # fmt: skip
    assert [r.plaintext for r in c2s][:2] == [b"GET /early", b"more early data"]
    s = session.summary()
    assert s.early_data_offered and s.early_data_accepted is True and s.resumption_accepted


def test_early_data_without_its_key_then_rejected() -> None:
    session = TlsSession(keylog(S, CLIENT_EARLY_TRAFFIC_SECRET=None))
    results = drive(session, early_connection(accept=False))
    c2s = [r for r in results if r.direction == "c2s" and r.content_type == 23]
    # Before the EncryptedExtensions the decision is unknown: the key is simply missing;
    # after it, the server is known to have skipped 0-RTT (RFC 8446 §4.2.10).
    assert [(r.status.value, r.epoch.value) for r in c2s] == [
        ("missing_key", "early"), ("early_data_rejected", "early"),
        ("decrypted", "handshake"), ("decrypted", "application"),
    ]  # fmt: skip
    assert c2s[-1].plaintext == b"GET /late"
    assert session.summary().early_data_accepted is False


def test_hello_retry_request_rejects_early_data() -> None:
    hrr = server_hello(0x1301, random=HRR_RANDOM)
    s_hs = Seal13(0x1301, S["SERVER_HANDSHAKE_TRAFFIC_SECRET"])
    wire = [
        ("c2s", client_hello(early=True, psk=True)),
        ("s2c", hrr + CCS),
        ("c2s", CCS + client_hello()),
        ("s2c", server_hello(0x1301) + s_hs(22, EE) + s_hs(22, FIN)),
    ]
    session = TlsSession(keylog(S))
    results = drive(session, wire)
    assert [r.status for r in results if r.content_type == 23] == [D.DECRYPTED, D.DECRYPTED]
    s = session.summary()
    assert s.hello_retry_request and s.early_data_offered and s.early_data_accepted is False


# ---------------------------------------------------------------------------------------
# Gaps
# ---------------------------------------------------------------------------------------
def app_records(n: int) -> list[bytes]:
    c_ap = Seal13(0x1301, S["CLIENT_TRAFFIC_SECRET_0"])
    return [c_ap(23, f"message {i}".encode() * 3) for i in range(n)]


def handshake_prefix() -> list[tuple[str, bytes | int]]:
    s_hs, c_hs = (
        Seal13(0x1301, S["SERVER_HANDSHAKE_TRAFFIC_SECRET"]),
        Seal13(0x1301, S["CLIENT_HANDSHAKE_TRAFFIC_SECRET"]),
    )
    return [
        ("c2s", client_hello()),
        ("s2c", server_hello(0x1301) + s_hs(22, EE) + s_hs(22, FIN)),
        ("c2s", c_hs(22, FIN)),
    ]


def test_hole_inside_a_record_keeps_the_sequence_numbers() -> None:
    recs = app_records(4)
    stream = b"".join(recs)
    cut = len(recs[0]) + 10
    wire = [*handshake_prefix(), ("c2s", stream[:cut]), ("c2s", 7), ("c2s", stream[cut + 7 :])]
    results = drive(TlsSession(keylog(S)), wire)
    app = results[-4:]
    assert [r.status for r in app] == [D.DECRYPTED, D.INCOMPLETE, D.DECRYPTED, D.DECRYPTED]
    assert [r.seq for r in app] == [0, 1, 2, 3]
    assert app[2].plaintext == b"message 2" * 3


@pytest.mark.parametrize("scan", [False, True])
def test_lost_boundary(scan: bool) -> None:
    recs = app_records(8)
    stream = b"".join(recs)
    cut = sum(len(r) for r in recs[:2])  # the hole starts at record 2's header
    wire = [*handshake_prefix(), ("c2s", stream[:cut]), ("c2s", 20), ("c2s", stream[cut + 20 :])]
    session = TlsSession(keylog(S), scan_after_gap=scan)
    results = drive(session, wire)
    app = [r for r in results if r.direction == "c2s" and r.epoch is Epoch.APPLICATION]
    if not scan:
        assert [r.seq for r in app] == [0, 1]  # nothing after the lost boundary is invented
        return
    # Resynchronised at record 3; the sequence number is recovered by trial decryption.
    assert [(r.status, r.seq) for r in app] == [(D.DECRYPTED, i) for i in (0, 1, 3, 4, 5, 6, 7)]
    c2s_prefix = sum(len(data) for d, data in handshake_prefix() if d == "c2s")  # type: ignore[arg-type]
    assert app[2].plaintext == b"message 3" * 3
    assert app[2].offset == c2s_prefix + cut + len(recs[2])


def test_record_level_feed_with_gaps_and_incomplete_items() -> None:
    session = TlsSession(keylog(S))
    for direction, data in handshake_prefix():
        assert isinstance(data, bytes)
        session.feed_data(direction, data)
    recs = app_records(3)
    inc = IncompleteRecord(
        offset=1000, length=len(recs[0]), content_type=23, version=0x0303, missing=5
    )
    r0 = session.feed("c2s", inc)
    assert r0 is not None and r0.status is D.INCOMPLETE and r0.seq == 0
    r1 = session.feed(
        "c2s",
        TlsRecord(
            offset=2000, length=len(recs[1]), content_type=23, version=0x0303, fragment=recs[1][5:]
        ),
    )
    assert r1 is not None and r1.status is D.DECRYPTED and r1.seq == 1
    assert (
        session.feed(
            "c2s", StreamGap(offset=3000, length=500, reason="resynchronised", missing=500)
        )
        is None
    )
    r2 = session.feed(
        "c2s",
        TlsRecord(
            offset=3500, length=len(recs[2]), content_type=23, version=0x0303, fragment=recs[2][5:]
        ),
    )
    assert r2 is not None and r2.status is D.DECRYPTED and r2.seq == 2


# ---------------------------------------------------------------------------------------
# TLS 1.2
# ---------------------------------------------------------------------------------------
CERT12 = hs(11, vec(vec(b"C" * 500, 3), 3))
SHD = hs(14, b"")


def tls12_full(
    cr: bytes, session_id: bytes, *, ticket_ext: bytes | None = None
) -> list[tuple[str, bytes]]:
    c = Seal12Gcm(0xC02F, MASTER, cr, SR, client=True)
    s = Seal12Gcm(0xC02F, MASTER, cr, SR, client=False)
    return [
        ("c2s", client_hello(cr=cr, tls13=False, ticket=ticket_ext, suites=(0xC02F,))),
        (
            "s2c",
            server_hello(0xC02F, tls13=False, session_id=session_id) + record(22, CERT12 + SHD),
        ),
        ("c2s", record(22, hs(16, vec(bytes(32), 1))) + CCS + c(22, hs(20, b"v" * 12))),
        (
            "s2c",
            record(22, hs(4, struct.pack("!I", 300) + vec(b"TICKET", 2)))
            + CCS
            + s(22, hs(20, b"w" * 12)),
        ),
        ("c2s", c(23, b"GET / HTTP/1.1\r\n\r\n")),
        ("s2c", s(23, b"HTTP/1.1 200 OK\r\n\r\n") + s(21, b"\x01\x00")),
    ]


def tls12_abbreviated(
    cr: bytes, session_id: bytes, ticket: bytes | None
) -> list[tuple[str, bytes]]:
    c = Seal12Gcm(0xC02F, MASTER, cr, SR, client=True)
    s = Seal12Gcm(0xC02F, MASTER, cr, SR, client=False)
    return [
        (
            "c2s",
            client_hello(
                cr=cr, tls13=False, session_id=session_id, ticket=ticket, suites=(0xC02F,)
            ),
        ),
        (
            "s2c",
            server_hello(0xC02F, tls13=False, session_id=session_id)
            + CCS
            + s(22, hs(20, b"w" * 12)),
        ),
        ("c2s", CCS + c(22, hs(20, b"v" * 12)) + c(23, b"resumed request")),
    ]


def test_tls12_full_handshake() -> None:
    session = TlsSession(keylog({"CLIENT_RANDOM": MASTER}))
    results = drive(session, tls12_full(CR, b"S" * 32))
    protected = [r for r in results if r.status is not D.NOT_ENCRYPTED]
    assert all(r.status is D.DECRYPTED for r in protected) and len(protected) == 5
    assert [r.plaintext for r in protected if r.inner_content_type == 23] == [
        b"GET / HTTP/1.1\r\n\r\n",
        b"HTTP/1.1 200 OK\r\n\r\n",
    ]
    assert [r.seq for r in protected] == [0, 0, 1, 1, 2]  # interleaved: c2s 0, 1 / s2c 0, 1, 2
    s = session.summary()
    assert s.version == 0x0303 and s.cipher_suite_name == "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"
    assert not s.resumption_accepted and s.handshake_complete and s.decrypted
    assert s.alerts == (("s2c", 1, 0),)


def test_tls12_master_secret_from_a_session_id_key_line() -> None:
    """The old NSS "RSA Session-ID:<id> Master-Key:<secret>" lines, which Wireshark still
    reads: the master secret is found by the ServerHello's session id."""
    line = f"RSA Session-ID:{(b'S' * 32).hex()} Master-Key:{MASTER.hex()}\n"
    session = TlsSession(KeyLog.from_text(line))
    protected = [
        r for r in drive(session, tls12_full(CR, b"S" * 32)) if r.epoch is Epoch.APPLICATION
    ]
    assert protected and all(r.status is D.DECRYPTED for r in protected)


def test_tls12_resumption_by_session_id_and_ticket() -> None:
    cache = ResumptionCache()
    first = TlsSession(keylog({"CLIENT_RANDOM": MASTER}), resumption_cache=cache)
    drive(first, tls12_full(CR, b"S" * 32, ticket_ext=b""))
    assert len(cache) == 2  # by session id and by ticket
    cr2, cr3 = bytes([2]) * 32, bytes([3]) * 32
    # The key log has no line for the resumed connections: the cache supplies the master secret.
    by_id = TlsSession(keylog({"CLIENT_RANDOM": MASTER}, cr=bytes(32)), resumption_cache=cache)
    results = drive(by_id, tls12_abbreviated(cr2, b"S" * 32, None))
    assert results[-1].status is D.DECRYPTED and results[-1].plaintext == b"resumed request"
    s = by_id.summary()
    assert s.resumption_offered and s.resumption_accepted and s.resumption_kind == "session_id"
    by_ticket = TlsSession(KeyLog(), resumption_cache=cache)
    results = drive(by_ticket, tls12_abbreviated(cr3, b"R" * 32, b"TICKET"))
    assert results[-1].status is D.DECRYPTED
    assert (
        by_ticket.summary().resumption_kind == "ticket" and by_ticket.summary().resumption_accepted
    )
    # Without the cache (and without a key log line) the same connection cannot be decrypted.
    alone = TlsSession(KeyLog())
    assert drive(alone, tls12_abbreviated(cr3, b"R" * 32, b"TICKET"))[-1].status is D.MISSING_KEY


def test_tls12_statuses_by_key_exchange() -> None:
    def run(suite: int) -> DecryptStatus:
        wire = [
            ("c2s", client_hello(tls13=False, suites=(suite,))),
            ("s2c", server_hello(suite, tls13=False) + CCS + record(22, bytes(40))),
        ]
        return drive(TlsSession(KeyLog()), wire)[-1].status

    assert run(0x002F) is D.RSA_KEY_EXCHANGE_NO_KEYLOG  # TLS_RSA_WITH_AES_128_CBC_SHA
    assert run(0x00A8) is D.PSK_ONLY  # TLS_PSK_WITH_AES_128_GCM_SHA256
    assert run(0xC02F) is D.MISSING_KEY  # ECDHE: the key log is the only way in
    assert run(0x0005) is D.UNSUPPORTED_SUITE  # TLS_RSA_WITH_RC4_128_SHA


def test_tls12_wrong_master_secret() -> None:
    session = TlsSession(keylog({"CLIENT_RANDOM": bytes([8]) * 48}))
    results = drive(session, tls12_full(CR, b""))
    assert {r.status for r in results if r.status is not D.NOT_ENCRYPTED} == {D.WRONG_KEY}
    assert session.summary().why_not == "wrong_key"


def test_no_handshake_seen() -> None:
    session = TlsSession(keylog(S))
    results = drive(session, [("s2c", record(23, bytes(30))), ("c2s", record(23, bytes(30)))])
    assert [r.status for r in results] == [D.NO_HANDSHAKE] * 2
    s = session.summary()
    assert not s.client_hello and not s.decrypted and s.why_not == "no_handshake"


# ---------------------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------------------
def test_malformed_record_stops_only_its_direction() -> None:
    session = TlsSession(keylog(S))
    wire = tls13_connection()
    out = session.feed_data("c2s", wire[0][1] + b"\x99\x03\x03\x00\x01x" + record(22, b"ignored"))
    assert len(out) == 1 and out[0].handshake  # the ClientHello before the bad header
    assert [a.name for a in session.anomalies] == ["tls_record_malformed"]
    assert session.feed_data("c2s", record(22, b"more")) == []
    s2c = session.feed_data("s2c", wire[1][1])
    assert [r.status for r in s2c if r.content_type == 23] == [D.DECRYPTED] * 3


def test_swapped_roles_are_detected_from_the_first_hello() -> None:
    flip = {"c2s": "s2c", "s2c": "c2s"}
    reference = drive(TlsSession(keylog(S)), tls13_connection())
    session = TlsSession(keylog(S))
    results = drive(session, [(flip[d], data) for d, data in tls13_connection()])
    assert [(flip[r.direction], r.status, r.plaintext) for r in results] == [
        (r.direction, r.status, r.plaintext) for r in reference
    ]
    assert session.roles_swapped and session.summary().roles_swapped and session.summary().decrypted
    assert [a.name for a in session.anomalies] == ["tls_roles_swapped"]


def test_session_rejects_unknown_directions() -> None:
    with pytest.raises(ValueError):
        TlsSession().feed_data("up", b"")


@given(st.lists(st.tuples(st.sampled_from(["c2s", "s2c"]), st.binary(max_size=300)), max_size=8))
@settings(max_examples=300, deadline=None)
def test_garbage_never_raises(chunks: list[tuple[str, bytes]]) -> None:
    session = TlsSession(keylog(S))
    for direction, data in chunks:
        for r in session.feed_data(direction, data):
            assert r.plaintext is None or r.status in (D.DECRYPTED, D.NOT_ENCRYPTED)
    session.close()
    session.summary()


@given(st.data())
@settings(max_examples=60, deadline=None)
def test_session_results_do_not_depend_on_chunking(data: st.DataObject) -> None:
    wire = tls13_connection()
    reference = drive(TlsSession(keylog(S)), wire)
    split: list[tuple[str, bytes | int]] = []
    for direction, chunk in wire:
        cuts = sorted(
            data.draw(st.lists(st.integers(min_value=0, max_value=len(chunk)), max_size=4))
        )
        bounds = [0, *cuts, len(chunk)]
        split += [
            (direction, chunk[a:b]) for a, b in zip(bounds, bounds[1:], strict=False) if b > a
        ]
    assert drive(TlsSession(keylog(S)), split) == reference
