"""Handshake reassembly and message decoding (RFC 8446 §4, RFC 5246 §7.4), alerts (§6)."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dissectors.errors import DissectError, LimitExceeded, Malformed
from dissectors.tls.handshake import (
    HRR_RANDOM,
    Certificate,
    ClientHello,
    ClientKeyExchange,
    CompressedCertificate,
    EncryptedExtensions,
    EndOfEarlyData,
    HandshakeLimitExceeded,
    HandshakeMessage,
    HandshakeReassembler,
    HelloRetryRequest,
    IncompleteHandshake,
    KeyUpdate,
    NewSessionTicket,
    PskIdentity,
    ServerHello,
    ServerHelloDone,
    ServerKeyExchange,
    UnknownHandshake,
    decode_handshake,
    parse_alerts,
)


# -- builders (written from the RFC structures, independently of the decoder) ----------
def u8(n: int) -> bytes:
    return bytes((n,))


def u16(n: int) -> bytes:
    return struct.pack("!H", n)


def u24(n: int) -> bytes:
    return struct.pack("!I", n)[1:]


def vec8(b: bytes) -> bytes:
    return u8(len(b)) + b


def vec16(b: bytes) -> bytes:
    return u16(len(b)) + b


def vec24(b: bytes) -> bytes:
    return u24(len(b)) + b


def ext(t: int, data: bytes) -> bytes:
    return u16(t) + vec16(data)


def msg(t: int, body: bytes) -> bytes:
    return u8(t) + vec24(body)


def decode(raw: bytes, *, tls13: bool = False) -> object:
    [m] = HandshakeReassembler().feed(raw)
    return decode_handshake(m, tls13=tls13)


RANDOM = bytes(range(32))
FULL_CLIENT_HELLO_EXTENSIONS = [
    ext(0x0A0A, b""),  # GREASE
    ext(0, vec16(u8(0) + vec16(b"example.com"))),
    ext(16, vec16(vec8(b"h2") + vec8(b"http/1.1"))),
    ext(43, vec8(u16(0x0304) + u16(0x0303))),
    ext(10, vec16(u16(0x001D) + u16(0x0017))),
    ext(51, vec16(u16(0x001D) + vec16(bytes(32)) + u16(0x0017) + vec16(bytes(65)))),
    ext(13, vec16(u16(0x0403) + u16(0x0804))),
    ext(35, b"old-ticket"),
    ext(45, vec8(u8(1))),
    ext(42, b""),
    ext(28, u16(0x4001)),
    ext(23, b""),
    ext(22, b""),
    ext(0x0A0A, b""),  # GREASE again: a duplicate type
    ext(41, vec16(vec16(b"id-1") + struct.pack("!I", 7) + vec16(b"id-2") + struct.pack("!I", 9))
        + vec16(vec8(bytes(32)) + vec8(bytes(32)))),
]  # fmt: skip


def client_hello(extensions: list[bytes], session_id: bytes = b"\x01" * 32) -> bytes:
    body = (
        u16(0x0303) + RANDOM + vec8(session_id) + vec16(u16(0x1301) + u16(0xC02F)) + vec8(b"\x00")
    )
    return msg(1, body + vec16(b"".join(extensions)))


# ---------------------------------------------------------------------------------------
# Reassembly
# ---------------------------------------------------------------------------------------
def test_messages_across_records_and_several_per_record() -> None:
    m1, m2, m3 = msg(1, b"a" * 10), msg(14, b""), msg(20, b"f" * 12)
    stream = m1 + m2 + m3
    r = HandshakeReassembler()
    out = r.feed(stream[:6], record_offset=100)  # m1 header + 2 body bytes
    assert out == [] and r.buffered == 6
    out = r.feed(stream[6:20], record_offset=200)  # rest of m1, all of m2, 2 bytes of m3
    assert [(m.offset, m.length, m.msg_type) for m in out] == [(0, 14, 1), (14, 4, 14)]
    assert (out[0].first_record_offset, out[0].last_record_offset) == (100, 200)
    assert (out[1].first_record_offset, out[1].last_record_offset) == (200, 200)
    out = r.feed(stream[20:], record_offset=300)
    assert [(m.offset, m.msg_type, m.body) for m in out] == [(18, 20, b"f" * 12)]
    assert (out[0].first_record_offset, out[0].last_record_offset) == (200, 300)
    assert out[0].raw == m3
    assert r.close() == []


def test_close_reports_partial_messages() -> None:
    r = HandshakeReassembler(start_offset=50)
    r.feed(msg(11, b"x" * 100)[:30])
    assert r.close() == [IncompleteHandshake(offset=50, msg_type=11, length=104, received=30)]
    r = HandshakeReassembler()
    r.feed(b"\x0b\x00")
    assert r.close() == [IncompleteHandshake(offset=0, msg_type=None, length=None, received=2)]


def test_oversized_message_is_limit_exceeded_after_earlier_messages() -> None:
    r = HandshakeReassembler(max_message_length=1000)
    with pytest.raises(HandshakeLimitExceeded) as info:
        r.feed(msg(14, b"") + u8(11) + u24(1001))
    assert isinstance(info.value, LimitExceeded)
    assert [m.msg_type for m in info.value.messages] == [14]
    assert info.value.offset == 4
    with pytest.raises(LimitExceeded):
        r.feed(b"more")


messages_st = st.lists(
    st.builds(
        lambda t, b: msg(t, b), st.integers(min_value=0, max_value=255), st.binary(max_size=200)
    ),
    max_size=10,
).map(b"".join)


def _feed_all(
    chunks: list[bytes],
) -> tuple[list[HandshakeMessage], list[IncompleteHandshake], int | None]:
    r = HandshakeReassembler(max_message_length=5000)
    out: list[HandshakeMessage] = []
    try:
        for i, c in enumerate(chunks):
            out += r.feed(c, record_offset=i)
    except HandshakeLimitExceeded as exc:
        return out + list(exc.messages), [], exc.offset
    return out, r.close(), None


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    bounds = [0, *points, len(data)]
    return [data[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


@given(messages_st, st.lists(st.integers(min_value=0), max_size=15))
@settings(max_examples=200, deadline=None)
def test_reassembly_is_chunking_invariant(data: bytes, cuts: list[int]) -> None:
    whole = _feed_all([data])
    assert whole[1] == [] and whole[2] is None
    assert b"".join(m.raw for m in whole[0]) == data
    assert _feed_all(_split(data, cuts)) == whole
    assert _feed_all([data[i : i + 1] for i in range(len(data))]) == whole


@given(st.binary(max_size=400), st.lists(st.integers(min_value=0), max_size=15))
@settings(max_examples=300, deadline=None)
def test_garbage_reassembly_invariant_and_only_dissect_errors(data: bytes, cuts: list[int]) -> None:
    whole = _feed_all([data])
    assert _feed_all(_split(data, cuts)) == whole
    assert _feed_all([data[i : i + 1] for i in range(len(data))]) == whole
    for m in whole[0]:
        for tls13 in (False, True):
            try:
                decode_handshake(m, tls13=tls13)
            except DissectError:
                pass


@given(
    st.sampled_from([1, 2, 4, 5, 8, 11, 12, 13, 14, 15, 16, 20, 24, 25, 0, 99]),
    st.binary(max_size=300),
)
@settings(max_examples=500, deadline=None)
def test_decoders_raise_only_dissect_errors(msg_type: int, body: bytes) -> None:
    m = HandshakeMessage(offset=0, length=4 + len(body), msg_type=msg_type, body=body)
    for tls13 in (False, True):
        try:
            decode_handshake(m, tls13=tls13)
        except DissectError:
            pass


# ---------------------------------------------------------------------------------------
# Hellos
# ---------------------------------------------------------------------------------------
def test_client_hello_extensions_decoded() -> None:
    ch = decode(client_hello(FULL_CLIENT_HELLO_EXTENSIONS))
    assert isinstance(ch, ClientHello)
    assert ch.random == RANDOM and ch.session_id == b"\x01" * 32
    assert ch.cipher_suites == (0x1301, 0xC02F) and ch.compression_methods == b"\x00"
    assert ch.server_name == "example.com"
    assert ch.alpn == ("h2", "http/1.1")
    assert ch.supported_versions == (0x0304, 0x0303) and ch.offers_tls13
    assert ch.supported_groups == (0x001D, 0x0017)
    assert ch.key_share_groups == (0x001D, 0x0017)
    assert ch.signature_algorithms == (0x0403, 0x0804)
    assert ch.session_ticket == b"old-ticket"
    assert ch.psk_key_exchange_modes == (1,)
    assert ch.early_data and ch.extended_master_secret and ch.encrypt_then_mac
    assert ch.record_size_limit == 0x4001
    assert ch.psk_identities == (
        PskIdentity(identity=b"id-1", obfuscated_ticket_age=7),
        PskIdentity(identity=b"id-2", obfuscated_ticket_age=9),
    )
    assert ch.extension_types == (0x0A0A, 0, 16, 43, 10, 51, 13, 35, 45, 42, 28, 23, 22, 0x0A0A, 41)
    assert ch.extensions[1] == (0, FULL_CLIENT_HELLO_EXTENSIONS[1][4:])
    assert ch.duplicate_extensions == (0x0A0A,)
    assert ch.malformed_extensions == ()


def test_client_hello_without_extensions_and_with_bad_ones() -> None:
    body = u16(0x0301) + RANDOM + vec8(b"") + vec16(u16(0x002F)) + vec8(b"\x00")
    ch = decode(msg(1, body))
    assert isinstance(ch, ClientHello) and ch.extensions == () and ch.legacy_version == 0x0301
    bad = [
        ext(16, vec16(vec8(b""))),  # empty ALPN name (RFC 7301 §3.1 MUST NOT)
        ext(28, u16(63)),  # record_size_limit below 64 (RFC 8449 §4)
        ext(41, vec16(vec16(b"id") + bytes(4)) + vec16(b"")),  # identities without binders
        ext(0, b"\x00"),  # truncated server_name list
        ext(42, b"x"),  # early_data must be empty in a ClientHello
    ]
    ch = decode(client_hello(bad))
    assert isinstance(ch, ClientHello)
    assert ch.malformed_extensions == (16, 28, 41, 0, 42)
    assert (
        ch.alpn == ()
        and ch.record_size_limit is None
        and ch.server_name is None
        and not ch.early_data
    )


def test_client_hello_framing_errors_are_malformed() -> None:
    fixed = u16(0x0303) + RANDOM + vec8(b"") + vec16(u16(0x1301)) + vec8(b"\x00")
    with pytest.raises(DissectError):
        decode(msg(1, fixed + u16(10) + ext(0, b"")))  # extensions block shorter than announced
    with pytest.raises(Malformed):
        decode(msg(1, fixed + vec16(ext(0, b"")) + b"\x00"))  # trailing byte after extensions
    body = u16(0x0303) + RANDOM + vec8(bytes(33)) + vec16(u16(0x1301)) + vec8(b"\x00")
    with pytest.raises(Malformed):
        decode(msg(1, body))  # session id longer than 32
    body = u16(0x0303) + RANDOM + vec8(b"") + vec16(b"\x13") + vec8(b"\x00")
    with pytest.raises(Malformed):
        decode(msg(1, body))  # odd cipher_suites length


def server_hello(random: bytes, extensions: list[bytes], suite: int = 0x1301) -> bytes:
    body = u16(0x0303) + random + vec8(b"\x02" * 32) + u16(suite) + u8(0)
    return msg(2, body + vec16(b"".join(extensions)))


def test_server_hello_tls13_and_psk() -> None:
    sh = decode(
        server_hello(
            b"\x55" * 32,
            [ext(43, u16(0x0304)), ext(51, u16(0x001D) + vec16(bytes(32))), ext(41, u16(0))],
        )
    )
    assert isinstance(sh, ServerHello)
    assert sh.version == 0x0304 and sh.selected_version == 0x0304
    assert sh.key_share_group == 0x001D and sh.selected_identity == 0


def test_server_hello_tls12_extensions_and_downgrade_sentinel() -> None:
    random = bytes(24) + b"DOWNGRD\x01"
    exts = [
        ext(16, vec16(vec8(b"h2"))),
        ext(23, b""),
        ext(22, b""),
        ext(35, b""),
        ext(0xFF01, b"\x00"),
    ]
    sh = decode(server_hello(random, exts, suite=0xC02F))
    assert isinstance(sh, ServerHello)
    assert sh.version == 0x0303 and sh.selected_version is None
    assert (
        sh.alpn == "h2" and sh.extended_master_secret and sh.encrypt_then_mac and sh.session_ticket
    )
    assert sh.downgrade_sentinel == 0x0303
    two = decode(server_hello(bytes(32), [ext(16, vec16(vec8(b"h2") + vec8(b"h3")))]))
    assert isinstance(two, ServerHello) and two.malformed_extensions == (16,)


def test_hello_retry_request_is_recognised_by_its_random() -> None:
    hrr = decode(
        server_hello(
            HRR_RANDOM, [ext(43, u16(0x0304)), ext(51, u16(0x0017)), ext(44, vec16(b"cookie"))]
        )
    )
    assert isinstance(hrr, HelloRetryRequest)
    assert (
        hrr.selected_group == 0x0017 and hrr.cookie == b"cookie" and hrr.selected_version == 0x0304
    )
    assert hrr.cipher_suite == 0x1301


def test_encrypted_extensions() -> None:
    ee = decode(
        msg(8, vec16(ext(16, vec16(vec8(b"h2"))) + ext(42, b"") + ext(0, b"") + ext(28, u16(1000))))
    )
    assert isinstance(ee, EncryptedExtensions)
    assert (
        ee.alpn == "h2"
        and ee.early_data
        and ee.server_name_acknowledged
        and ee.record_size_limit == 1000
    )
    none = decode(msg(8, vec16(b"")))
    assert isinstance(none, EncryptedExtensions) and not none.early_data and none.alpn is None
    with pytest.raises(DissectError):
        decode(msg(8, b""))


# ---------------------------------------------------------------------------------------
# Other messages
# ---------------------------------------------------------------------------------------
def test_certificate_tls12_and_tls13_forms() -> None:
    c12 = decode(msg(11, vec24(vec24(b"A" * 300) + vec24(b"B" * 200))))
    assert isinstance(c12, Certificate) and not c12.tls13
    assert c12.chain_length == 2 and c12.certificate_lengths == (300, 200)
    c13 = decode(
        msg(
            11,
            vec8(b"")
            + vec24(vec24(b"A" * 300) + vec16(b"") + vec24(b"B" * 10) + vec16(ext(5, b"ocsp"))),
        ),
        tls13=True,
    )
    assert isinstance(c13, Certificate) and c13.tls13
    assert c13.certificate_lengths == (300, 10) and c13.request_context == b""
    with pytest.raises(DissectError):
        decode(msg(11, vec24(vec24(b"A" * 300) + vec16(b""))))  # 1.3 body read as 1.2


def test_new_session_ticket_forms() -> None:
    n12 = decode(msg(4, struct.pack("!I", 7200) + vec16(b"T" * 100)))
    assert isinstance(n12, NewSessionTicket) and not n12.tls13
    assert n12.lifetime == 7200 and n12.ticket == b"T" * 100 and n12.nonce is None
    body = (
        struct.pack("!II", 300, 12345)
        + vec8(b"\x00\x01")
        + vec16(b"T" * 50)
        + vec16(ext(42, struct.pack("!I", 16384)))
    )
    n13 = decode(msg(4, body), tls13=True)
    assert isinstance(n13, NewSessionTicket) and n13.tls13
    assert (n13.lifetime, n13.age_add, n13.nonce, n13.max_early_data_size) == (
        300,
        12345,
        b"\x00\x01",
        16384,
    )
    with pytest.raises(DissectError):
        decode(msg(4, body[:-6]), tls13=True)  # extensions vector missing


def test_key_update_end_of_early_data_and_empty_messages() -> None:
    for value in (0, 1):
        ku = decode(msg(24, u8(value)))
        assert isinstance(ku, KeyUpdate) and ku.request_update == value
    with pytest.raises(Malformed):
        decode(msg(24, u8(2)))
    assert isinstance(decode(msg(5, b"")), EndOfEarlyData)
    assert isinstance(decode(msg(14, b"")), ServerHelloDone)
    with pytest.raises(Malformed):
        decode(msg(5, b"x"))


def test_raw_and_unknown_messages() -> None:
    ske = decode(msg(12, u8(3) + u16(0x001D) + vec8(bytes(32)) + u16(0x0804) + vec16(b"sig")))
    assert isinstance(ske, ServerKeyExchange) and ske.named_group == 0x001D
    cke = decode(msg(16, vec8(bytes(32))))
    assert isinstance(cke, ClientKeyExchange) and cke.body == vec8(bytes(32))
    cc = decode(msg(25, u16(2) + u24(5000) + vec24(b"z" * 100)))
    assert isinstance(cc, CompressedCertificate) and (
        cc.algorithm,
        cc.uncompressed_length,
        cc.compressed_length,
    ) == (2, 5000, 100)
    unknown = decode(msg(99, b"what"))
    assert (
        isinstance(unknown, UnknownHandshake) and unknown.msg_type == 99 and unknown.body == b"what"
    )


# ---------------------------------------------------------------------------------------
# Alerts
# ---------------------------------------------------------------------------------------
def test_alerts() -> None:
    [a] = parse_alerts(b"\x02\x28")
    assert (a.level, a.description, a.fatal) == (2, 40, True)
    assert [(x.offset, x.description) for x in parse_alerts(b"\x01\x00\x01\x5a")] == [
        (0, 0),
        (2, 90),
    ]
    for bad in (b"", b"\x01", b"\x01\x00\x02"):
        with pytest.raises(Malformed):
            parse_alerts(bad)


def test_oversize_message_is_skipped_by_its_length_with_skip_oversize() -> None:
    # issue 15: a message claiming 2^24 - 1 bytes; before, the session restarted the
    # reassembler at the next record and read the message's own bytes as new messages
    r = HandshakeReassembler(max_message_length=1000, skip_oversize=True)
    big = u8(1) + u24(3000) + b"\x00" * 3000
    data = msg(14, b"") + big + msg(20, b"f" * 12)
    got: list[HandshakeMessage] = []
    raised = 0
    for i in range(0, len(data), 700):
        try:
            got += r.feed(data[i : i + 700])
        except HandshakeLimitExceeded as exc:
            raised += 1
            got += list(exc.messages)
            assert "its 3004 bytes are skipped, not buffered" in str(exc)
    assert raised == 1
    assert [(m.msg_type, m.offset) for m in got] == [(14, 0), (20, 4 + 3004)]
    assert r.skipped == 3004 and r.buffered == 0
    assert r.close() == []


def test_an_oversize_message_cut_by_the_end_is_incomplete() -> None:
    r = HandshakeReassembler(max_message_length=1000, skip_oversize=True)
    with pytest.raises(HandshakeLimitExceeded):
        r.feed(u8(11) + u24((1 << 24) - 1) + b"\x00" * 500)
    r.feed(b"\x00" * 500)
    assert r.close() == [
        IncompleteHandshake(offset=0, msg_type=11, length=(1 << 24) + 3, received=1004)
    ]
