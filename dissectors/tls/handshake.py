"""TLS handshake and alert protocols: RFC 8446 §4 (TLS 1.3), RFC 5246 §7.4 (TLS 1.2), §6 alerts.

Handshake messages travel in the fragments of handshake-type records; one message can span
several records and one record can hold several messages (RFC 8446 §5.1, RFC 5246 §6.2.1).
:class:`HandshakeReassembler` rebuilds the message stream of one direction from the
(plaintext) fragments, independently of the record layer:

* ``feed(fragment, record_offset=...) -> list[HandshakeMessage]`` and ``close()``, chunking
  invariant like every streaming parser (DESIGN.md §5).  ``HandshakeMessage.offset`` and
  ``length`` are in *handshake-stream coordinates*: bytes of handshake fragments fed so far
  in that direction (handshake messages inside encrypted records have no TCP stream
  offset).  ``first_record_offset`` / ``last_record_offset`` are the TCP stream offsets of
  the records that carried the message's first and last byte (not part of equality).
* :func:`decode_handshake` turns a message into a typed record: ClientHello (§4.1.2),
  ServerHello and HelloRetryRequest (§4.1.3, recognised by the special random; the
  shorter ServerHello of TLS 1.3 drafts before 22 too, :mod:`.versions`),
  EncryptedExtensions (§4.3.1), Certificate (§4.4.2; TLS 1.2 form RFC 5246 §7.4.2),
  CertificateVerify (§4.4.3), Finished (§4.4.4), NewSessionTicket (§4.6.1; TLS 1.2 form
  RFC 5077 §3.3), KeyUpdate (§4.6.3), EndOfEarlyData (§4.5), ServerKeyExchange /
  ClientKeyExchange (RFC 5246 §7.4.3, §7.4.7, kept raw), CertificateRequest (raw),
  CompressedCertificate (RFC 8879), ServerHelloDone, HelloRequest; anything else becomes
  :class:`UnknownHandshake`.

Extensions are kept raw, in order, as ``(type, bytes)`` pairs; the ones the analysis needs
are decoded into fields: server_name (RFC 6066 §3), ALPN (RFC 7301 §3.1),
supported_versions (RFC 8446 §4.2.1), supported_groups (§4.2.7), key_share (§4.2.8),
pre_shared_key (§4.2.11), psk_key_exchange_modes (§4.2.9), early_data (§4.2.10),
session_ticket (RFC 5077 §3.2), record_size_limit (RFC 8449 §4), extended_master_secret
(RFC 7627 §5.1), encrypt_then_mac (RFC 7366 §2), signature_algorithms (§4.2.3), cookie
(§4.2.2).  A hello whose *extension* bodies do not parse is still returned (the random
and cipher suites matter for decryption); the types that failed are listed in
``malformed_extensions`` and repeated types in ``duplicate_extensions`` (RFC 8446 §4.2:
"There MUST NOT be more than one extension of the same type in a given extension block" —
reported, not enforced: real captures repeat GREASE types).

Alerts (RFC 8446 §6, RFC 5246 §7.2): :func:`parse_alert` and :func:`parse_alerts`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import Final

from .._wire import Buffer, Cursor
from ..errors import DissectError, LimitExceeded, Malformed, Truncated
from .versions import is_tls13, tls13_draft

__all__ = [
    "HRR_RANDOM",
    "MAX_HANDSHAKE_MESSAGE_LENGTH",
    "Alert",
    "AlertDescription",
    "AlertLevel",
    "Certificate",
    "CertificateRequest",
    "CertificateVerify",
    "ClientHello",
    "ClientKeyExchange",
    "CompressedCertificate",
    "DecodedHandshake",
    "EncryptedExtensions",
    "EndOfEarlyData",
    "ExtensionType",
    "Finished",
    "HandshakeLimitExceeded",
    "HandshakeMessage",
    "HandshakeReassembler",
    "HandshakeType",
    "HelloRequest",
    "HelloRetryRequest",
    "IncompleteHandshake",
    "KeyUpdate",
    "NewSessionTicket",
    "PskIdentity",
    "ServerHello",
    "ServerHelloDone",
    "ServerKeyExchange",
    "UnknownHandshake",
    "decode_handshake",
    "parse_alert",
    "parse_alerts",
]

#: Per-message cap.  RFC 8446 allows 2^24-1 bytes, but OpenSSL refuses certificate lists
#: over 100 KiB (``SSL_CTX_set_max_cert_list`` default) and every other message is far
#: smaller; 256 KiB leaves headroom while bounding the memory held per flow direction.
MAX_HANDSHAKE_MESSAGE_LENGTH: Final = 1 << 18

#: RFC 8446 §4.1.3: a ServerHello with this random is a HelloRetryRequest
#: (SHA-256 of "HelloRetryRequest").
HRR_RANDOM: Final = bytes.fromhex(
    "cf21ad74e59a6111be1d8c021e65b891c2a211167abb8c5e079e09e2c8a8339c"
)
#: RFC 8446 §4.1.3 downgrade sentinels in the last 8 bytes of ServerHello.random.
_DOWNGRADE_TLS12: Final = bytes.fromhex("444f574e47524401")
_DOWNGRADE_TLS11: Final = bytes.fromhex("444f574e47524400")


class HandshakeType(IntEnum):
    HELLO_REQUEST = 0
    CLIENT_HELLO = 1
    SERVER_HELLO = 2
    HELLO_VERIFY_REQUEST = 3
    NEW_SESSION_TICKET = 4
    END_OF_EARLY_DATA = 5
    ENCRYPTED_EXTENSIONS = 8
    CERTIFICATE = 11
    SERVER_KEY_EXCHANGE = 12
    CERTIFICATE_REQUEST = 13
    SERVER_HELLO_DONE = 14
    CERTIFICATE_VERIFY = 15
    CLIENT_KEY_EXCHANGE = 16
    FINISHED = 20
    CERTIFICATE_URL = 21
    CERTIFICATE_STATUS = 22
    SUPPLEMENTAL_DATA = 23
    KEY_UPDATE = 24
    COMPRESSED_CERTIFICATE = 25
    MESSAGE_HASH = 254


class ExtensionType(IntEnum):
    SERVER_NAME = 0
    MAX_FRAGMENT_LENGTH = 1
    STATUS_REQUEST = 5
    SUPPORTED_GROUPS = 10
    EC_POINT_FORMATS = 11
    SIGNATURE_ALGORITHMS = 13
    USE_SRTP = 14
    HEARTBEAT = 15
    APPLICATION_LAYER_PROTOCOL_NEGOTIATION = 16
    SIGNED_CERTIFICATE_TIMESTAMP = 18
    PADDING = 21
    ENCRYPT_THEN_MAC = 22
    EXTENDED_MASTER_SECRET = 23
    COMPRESS_CERTIFICATE = 27
    RECORD_SIZE_LIMIT = 28
    SESSION_TICKET = 35
    PRE_SHARED_KEY = 41
    EARLY_DATA = 42
    SUPPORTED_VERSIONS = 43
    COOKIE = 44
    PSK_KEY_EXCHANGE_MODES = 45
    CERTIFICATE_AUTHORITIES = 47
    POST_HANDSHAKE_AUTH = 49
    SIGNATURE_ALGORITHMS_CERT = 50
    KEY_SHARE = 51
    QUIC_TRANSPORT_PARAMETERS = 57
    ENCRYPTED_CLIENT_HELLO = 0xFE0D
    RENEGOTIATION_INFO = 0xFF01


class AlertLevel(IntEnum):
    WARNING = 1
    FATAL = 2


class AlertDescription(IntEnum):
    CLOSE_NOTIFY = 0
    UNEXPECTED_MESSAGE = 10
    BAD_RECORD_MAC = 20
    DECRYPTION_FAILED = 21
    RECORD_OVERFLOW = 22
    DECOMPRESSION_FAILURE = 30
    HANDSHAKE_FAILURE = 40
    NO_CERTIFICATE = 41
    BAD_CERTIFICATE = 42
    UNSUPPORTED_CERTIFICATE = 43
    CERTIFICATE_REVOKED = 44
    CERTIFICATE_EXPIRED = 45
    CERTIFICATE_UNKNOWN = 46
    ILLEGAL_PARAMETER = 47
    UNKNOWN_CA = 48
    ACCESS_DENIED = 49
    DECODE_ERROR = 50
    DECRYPT_ERROR = 51
    EXPORT_RESTRICTION = 60
    PROTOCOL_VERSION = 70
    INSUFFICIENT_SECURITY = 71
    INTERNAL_ERROR = 80
    INAPPROPRIATE_FALLBACK = 86
    USER_CANCELED = 90
    NO_RENEGOTIATION = 100
    MISSING_EXTENSION = 109
    UNSUPPORTED_EXTENSION = 110
    CERTIFICATE_UNOBTAINABLE = 111
    UNRECOGNIZED_NAME = 112
    BAD_CERTIFICATE_STATUS_RESPONSE = 113
    BAD_CERTIFICATE_HASH_VALUE = 114
    UNKNOWN_PSK_IDENTITY = 115
    CERTIFICATE_REQUIRED = 116
    NO_APPLICATION_PROTOCOL = 120


Extensions = tuple[tuple[int, bytes], ...]


# ---------------------------------------------------------------------------------------
# Reassembly
# ---------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class HandshakeMessage:
    """One handshake message: 4-byte header (msg_type, uint24 length) plus ``body``.

    ``offset``/``length`` are handshake-stream coordinates and include the header.
    """

    offset: int
    length: int
    msg_type: int
    body: bytes
    first_record_offset: int | None = field(default=None, compare=False)
    last_record_offset: int | None = field(default=None, compare=False)

    @property
    def raw(self) -> bytes:
        """The message as it enters the transcript hash (header + body)."""
        n = len(self.body)
        return bytes((self.msg_type, n >> 16, (n >> 8) & 0xFF, n & 0xFF)) + self.body


@dataclass(frozen=True, slots=True, kw_only=True)
class IncompleteHandshake:
    """What :meth:`HandshakeReassembler.close` reports for a message cut short.

    ``msg_type``/``length`` are ``None`` while the 4-byte header itself is incomplete.
    """

    offset: int
    msg_type: int | None
    length: int | None
    received: int


class HandshakeLimitExceeded(LimitExceeded):
    """A message longer than :data:`MAX_HANDSHAKE_MESSAGE_LENGTH`.

    ``messages`` holds the messages the same ``feed`` call completed before it (with
    ``skip_oversize``: every message that call completed, before and after).
    """

    def __init__(
        self,
        message: str,
        *,
        offset: int | None = None,
        messages: tuple[HandshakeMessage, ...] = (),
    ) -> None:
        super().__init__(message, offset=offset)
        self.messages = messages


class HandshakeReassembler:
    """Rebuild handshake messages from the handshake fragments of one direction.

    A message whose header declares more than ``max_message_length`` bytes raises
    :class:`HandshakeLimitExceeded`, and the reassembler stops — or, with
    ``skip_oversize``, its bytes are skipped by the length its header declares (never
    buffered; :attr:`skipped` counts them) and the messages after it parse as usual: the
    exception is raised once, at the end of the ``feed`` call that met the header, with
    every message that call completed.
    """

    __slots__ = (
        "_buf", "_start", "_pos", "_first_record", "_max", "_error", "_skip_oversize",
        "_skip", "_skip_msg", "skipped",
    )  # fmt: skip

    def __init__(
        self,
        *,
        start_offset: int = 0,
        max_message_length: int = MAX_HANDSHAKE_MESSAGE_LENGTH,
        skip_oversize: bool = False,
    ) -> None:
        self._buf = bytearray()
        self._start = start_offset  # handshake-stream offset of _buf[0]
        self._pos = start_offset
        self._first_record: int | None = None
        self._max = max_message_length
        self._error: tuple[str, int] | None = None
        self._skip_oversize = skip_oversize
        self._skip = 0  # bytes of an oversize message still to skip
        self._skip_msg: tuple[int, int, int] | None = None  # its (offset, type, length)
        self.skipped = 0  # bytes of oversize messages skipped so far

    @property
    def buffered(self) -> int:
        """Bytes of a message in progress (must be 0 at a TLS 1.3 key change, §5.1)."""
        return len(self._buf)

    @property
    def position(self) -> int:
        return self._pos

    def feed(self, data: Buffer, *, record_offset: int | None = None) -> list[HandshakeMessage]:
        if self._error is not None:
            why, off = self._error
            raise HandshakeLimitExceeded(f"reassembler stopped: {why}", offset=off)
        out: list[HandshakeMessage] = []
        if len(data) == 0:
            return out
        if self._skip:  # the rest of an oversize message: counted, never buffered
            k = min(self._skip, len(data))
            self._skip -= k
            self.skipped += k
            self._pos += k
            self._start += k
            data = memoryview(data)[k:]
            if not data:
                return out
        if not self._buf:
            self._first_record = record_offset
        self._buf += data
        self._pos += len(data)
        b = self._buf
        i = 0
        over: list[tuple[str, int]] = []
        while len(b) - i >= 4:
            n = (b[i + 1] << 16) | (b[i + 2] << 8) | b[i + 3]
            if n > self._max:
                off = self._start + i
                why = f"handshake message type {b[i]} declares {n} bytes > cap {self._max} at {off}"
                if not self._skip_oversize:
                    self._error = (why, off)
                    self._buf = bytearray()
                    raise HandshakeLimitExceeded(why, offset=off, messages=tuple(out))
                take = min(len(b) - i, 4 + n)  # skip it by its declared length
                self._skip_msg = (off, b[i], 4 + n)
                self._skip = 4 + n - take
                self.skipped += take
                i += take
                over.append((f"{why}: its {4 + n} bytes are skipped, not buffered", off))
                continue
            if len(b) - i < 4 + n:
                break
            out.append(
                HandshakeMessage(
                    offset=self._start + i,
                    length=4 + n,
                    msg_type=b[i],
                    body=bytes(b[i + 4 : i + 4 + n]),
                    first_record_offset=self._first_record,
                    last_record_offset=record_offset,
                )
            )
            i += 4 + n
            self._first_record = record_offset
        if i:
            del b[:i]
            self._start += i
        if over:
            raise HandshakeLimitExceeded(over[0][0], offset=over[0][1], messages=tuple(out))
        return out

    def reset(self, skip: int = 0) -> IncompleteHandshake | None:
        """Drop a partial message (e.g. after a record that could not be decrypted).

        ``skip`` advances the handshake-stream position by bytes that will never be fed.
        Returns what was dropped, if anything.
        """
        dropped = self._incomplete()
        self._buf = bytearray()
        self._skip = 0
        self._pos += skip
        self._start = self._pos
        return dropped

    def close(self) -> list[IncompleteHandshake]:
        """End of input: a message still in progress is reported, not raised."""
        dropped = self._incomplete()
        self._buf = bytearray()
        self._skip = 0
        self._start = self._pos
        return [dropped] if dropped is not None else []

    def _incomplete(self) -> IncompleteHandshake | None:
        if self._skip and self._skip_msg is not None:  # an oversize message, cut short
            off, t, length = self._skip_msg
            return IncompleteHandshake(
                offset=off, msg_type=t, length=length, received=length - self._skip
            )
        b = self._buf
        if not b:
            return None
        if len(b) < 4:
            return IncompleteHandshake(
                offset=self._start, msg_type=None, length=None, received=len(b)
            )
        n = (b[1] << 16) | (b[2] << 8) | b[3]
        return IncompleteHandshake(offset=self._start, msg_type=b[0], length=4 + n, received=len(b))


# ---------------------------------------------------------------------------------------
# Decoded messages
# ---------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class PskIdentity:
    """One entry of OfferedPsks.identities (RFC 8446 §4.2.11)."""

    identity: bytes
    obfuscated_ticket_age: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientHello:
    offset: int
    length: int
    legacy_version: int
    random: bytes
    session_id: bytes
    cipher_suites: tuple[int, ...]
    compression_methods: bytes
    extensions: Extensions
    server_name: str | None = None
    alpn: tuple[str, ...] = ()
    supported_versions: tuple[int, ...] = ()
    supported_groups: tuple[int, ...] = ()
    key_share_groups: tuple[int, ...] = ()
    signature_algorithms: tuple[int, ...] = ()
    session_ticket: bytes | None = None
    psk_identities: tuple[PskIdentity, ...] = ()
    psk_key_exchange_modes: tuple[int, ...] = ()
    early_data: bool = False
    record_size_limit: int | None = None
    extended_master_secret: bool = False
    encrypt_then_mac: bool = False
    duplicate_extensions: tuple[int, ...] = ()
    malformed_extensions: tuple[int, ...] = ()

    @property
    def offers_tls13(self) -> bool:
        """TLS 1.3 (or one of its drafts, :mod:`.versions`) is in supported_versions."""
        return any(is_tls13(v) for v in self.supported_versions)

    @property
    def extension_types(self) -> tuple[int, ...]:
        return tuple(t for t, _ in self.extensions)


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerHello:
    offset: int
    length: int
    legacy_version: int
    random: bytes
    session_id: bytes
    cipher_suite: int
    compression_method: int
    extensions: Extensions
    selected_version: int | None = None
    key_share_group: int | None = None
    selected_identity: int | None = None
    alpn: str | None = None
    session_ticket: bool = False
    record_size_limit: int | None = None
    extended_master_secret: bool = False
    encrypt_then_mac: bool = False
    duplicate_extensions: tuple[int, ...] = ()
    malformed_extensions: tuple[int, ...] = ()

    @property
    def version(self) -> int:
        """The negotiated version: supported_versions if present (RFC 8446 §4.2.1), else legacy."""
        return self.selected_version if self.selected_version is not None else self.legacy_version

    @property
    def downgrade_sentinel(self) -> int | None:
        """0x0303 / 0x0302 if the random carries an RFC 8446 §4.1.3 downgrade sentinel."""
        tail = self.random[-8:]
        if tail == _DOWNGRADE_TLS12:
            return 0x0303
        if tail == _DOWNGRADE_TLS11:
            return 0x0302
        return None


@dataclass(frozen=True, slots=True, kw_only=True)
class HelloRetryRequest:
    """A ServerHello whose random is :data:`HRR_RANDOM` (RFC 8446 §4.1.3)."""

    offset: int
    length: int
    legacy_version: int
    session_id: bytes
    cipher_suite: int
    extensions: Extensions
    selected_version: int | None = None
    selected_group: int | None = None
    cookie: bytes | None = None
    duplicate_extensions: tuple[int, ...] = ()
    malformed_extensions: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class EncryptedExtensions:
    offset: int
    length: int
    extensions: Extensions
    alpn: str | None = None
    early_data: bool = False
    server_name_acknowledged: bool = False
    record_size_limit: int | None = None
    supported_groups: tuple[int, ...] = ()
    duplicate_extensions: tuple[int, ...] = ()
    malformed_extensions: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Certificate:
    """Certificate chain: TLS 1.3 form (request context, entries with extensions) or 1.2."""

    offset: int
    length: int
    tls13: bool
    request_context: bytes
    certificates: tuple[bytes, ...]

    @property
    def chain_length(self) -> int:
        return len(self.certificates)

    @property
    def certificate_lengths(self) -> tuple[int, ...]:
        return tuple(len(c) for c in self.certificates)


@dataclass(frozen=True, slots=True, kw_only=True)
class CompressedCertificate:
    """RFC 8879 §4: the chain is compressed; sizes are known only after decompression."""

    offset: int
    length: int
    algorithm: int
    uncompressed_length: int
    compressed_length: int


@dataclass(frozen=True, slots=True, kw_only=True)
class CertificateVerify:
    offset: int
    length: int
    algorithm: int
    signature: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class CertificateRequest:
    offset: int
    length: int
    body: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerKeyExchange:
    """Kept raw; ``named_group`` is read when the body is an ECDHE named_curve (RFC 8422 §5.4)."""

    offset: int
    length: int
    body: bytes
    named_group: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientKeyExchange:
    offset: int
    length: int
    body: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerHelloDone:
    offset: int
    length: int


@dataclass(frozen=True, slots=True, kw_only=True)
class HelloRequest:
    offset: int
    length: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Finished:
    offset: int
    length: int
    verify_data: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class NewSessionTicket:
    """TLS 1.3 form (RFC 8446 §4.6.1) or TLS 1.2 form (RFC 5077 §3.3: lifetime hint + ticket)."""

    offset: int
    length: int
    tls13: bool
    lifetime: int
    ticket: bytes
    age_add: int | None = None
    nonce: bytes | None = None
    extensions: Extensions = ()
    max_early_data_size: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class KeyUpdate:
    offset: int
    length: int
    request_update: int


@dataclass(frozen=True, slots=True, kw_only=True)
class EndOfEarlyData:
    offset: int
    length: int


@dataclass(frozen=True, slots=True, kw_only=True)
class UnknownHandshake:
    offset: int
    length: int
    msg_type: int
    body: bytes


DecodedHandshake = (
    ClientHello
    | ServerHello
    | HelloRetryRequest
    | EncryptedExtensions
    | Certificate
    | CompressedCertificate
    | CertificateVerify
    | CertificateRequest
    | ServerKeyExchange
    | ClientKeyExchange
    | ServerHelloDone
    | HelloRequest
    | Finished
    | NewSessionTicket
    | KeyUpdate
    | EndOfEarlyData
    | UnknownHandshake
)


# ---------------------------------------------------------------------------------------
# Extension helpers
# ---------------------------------------------------------------------------------------
def _pull_extensions(cur: Cursor) -> tuple[Extensions, tuple[int, ...]]:
    """``Extension extensions<0..2^16-1>`` (RFC 8446 §4.2); absent at end of body = none."""
    if cur.eof():
        return (), ()
    exts: list[tuple[int, bytes]] = []
    seen: set[int] = set()
    dups: list[int] = []
    with cur.pull_block(2) as blk:
        while not blk.eof():
            t = blk.pull_u16()
            data = blk.pull_vector(2)
            if t in seen and t not in dups:
                dups.append(t)
            seen.add(t)
            exts.append((t, data))
    return tuple(exts), tuple(dups)


def _u16_list(data: bytes, len_bytes: int) -> tuple[int, ...]:
    cur = Cursor(data)
    out: list[int] = []
    with cur.pull_block(len_bytes) as blk:
        if blk.remaining % 2:
            raise Malformed("odd-length uint16 list")
        while not blk.eof():
            out.append(blk.pull_u16())
    _done(cur)
    return tuple(out)


def _u8_list(data: bytes) -> tuple[int, ...]:
    cur = Cursor(data)
    out = tuple(cur.pull_vector(1))
    _done(cur)
    return out


def _done(cur: Cursor) -> None:
    if not cur.eof():
        raise Malformed(f"{cur.remaining} trailing bytes in extension", offset=cur.pos)


def _empty(data: bytes) -> bool:
    if data:
        raise Malformed("extension must be empty")
    return True


def _text(raw: bytes) -> str:
    return raw.decode("ascii", errors="backslashreplace")


def _server_name(data: bytes) -> str | None:
    """RFC 6066 §3 ServerNameList; the first host_name (type 0)."""
    cur = Cursor(data)
    name: str | None = None
    with cur.pull_block(2) as blk:
        while not blk.eof():
            name_type = blk.pull_u8()
            value = blk.pull_vector(2)
            if name_type == 0 and name is None:
                name = _text(value)
    _done(cur)
    return name


def _alpn(data: bytes) -> tuple[str, ...]:
    """RFC 7301 §3.1 ProtocolNameList."""
    cur = Cursor(data)
    names: list[str] = []
    with cur.pull_block(2) as blk:
        while not blk.eof():
            value = blk.pull_vector(1)
            if not value:
                # RFC 7301 §3.1: "Empty strings MUST NOT be included"
                raise Malformed("empty ALPN protocol name")
            names.append(_text(value))
    _done(cur)
    return tuple(names)


def _record_size_limit(data: bytes) -> int:
    cur = Cursor(data)
    value = cur.pull_u16()
    _done(cur)
    if value < 64:
        # RFC 8449 §4: "Endpoints MUST NOT send a "record_size_limit" extension with a value
        # smaller than 64.  An endpoint MUST treat receipt of a smaller value as a fatal error"
        raise Malformed(f"record_size_limit {value} < 64")
    return value


def _client_key_share_groups(data: bytes) -> tuple[int, ...]:
    cur = Cursor(data)
    groups: list[int] = []
    with cur.pull_block(2) as blk:
        while not blk.eof():
            groups.append(blk.pull_u16())
            blk.pull_vector(2)
    _done(cur)
    return tuple(groups)


def _offered_psks(data: bytes) -> tuple[PskIdentity, ...]:
    cur = Cursor(data)
    ids: list[PskIdentity] = []
    with cur.pull_block(2) as blk:
        while not blk.eof():
            identity = blk.pull_vector(2)
            ids.append(PskIdentity(identity=identity, obfuscated_ticket_age=blk.pull_u32()))
    with cur.pull_block(2) as blk:
        binders = 0
        while not blk.eof():
            blk.pull_vector(1)
            binders += 1
    _done(cur)
    if binders != len(ids):
        # RFC 8446 §4.2.11: binders is "A series of HMAC values, one for each value in the
        # identities list and in the same order"
        raise Malformed(f"{len(ids)} PSK identities but {binders} binders")
    return tuple(ids)


def _u16(data: bytes) -> int:
    cur = Cursor(data)
    v = cur.pull_u16()
    _done(cur)
    return v


# ---------------------------------------------------------------------------------------
# Decoders
# ---------------------------------------------------------------------------------------
def _decode_client_hello(msg: HandshakeMessage) -> ClientHello:
    cur = Cursor(msg.body)
    legacy_version = cur.pull_u16()
    random = cur.pull_bytes(32)
    session_id = cur.pull_vector(1)
    if len(session_id) > 32:
        raise Malformed(f"session id of {len(session_id)} bytes > 32", offset=msg.offset)
    suites_raw = cur.pull_vector(2)
    if len(suites_raw) % 2:
        raise Malformed("odd cipher_suites length", offset=msg.offset)
    cipher_suites = tuple(
        (suites_raw[i] << 8) | suites_raw[i + 1] for i in range(0, len(suites_raw), 2)
    )
    compression = cur.pull_vector(1)
    extensions, dups = _pull_extensions(cur)
    _done(cur)
    fields: dict[str, object] = {}
    bad: list[int] = []
    for t, data in extensions:
        try:
            if t == ExtensionType.SERVER_NAME:
                fields.setdefault("server_name", _server_name(data))
            elif t == ExtensionType.APPLICATION_LAYER_PROTOCOL_NEGOTIATION:
                fields.setdefault("alpn", _alpn(data))
            elif t == ExtensionType.SUPPORTED_VERSIONS:
                fields.setdefault("supported_versions", _u16_list(data, 1))
            elif t == ExtensionType.SUPPORTED_GROUPS:
                fields.setdefault("supported_groups", _u16_list(data, 2))
            elif t == ExtensionType.KEY_SHARE:
                fields.setdefault("key_share_groups", _client_key_share_groups(data))
            elif t == ExtensionType.SIGNATURE_ALGORITHMS:
                fields.setdefault("signature_algorithms", _u16_list(data, 2))
            elif t == ExtensionType.SESSION_TICKET:
                fields.setdefault("session_ticket", data)
            elif t == ExtensionType.PRE_SHARED_KEY:
                fields.setdefault("psk_identities", _offered_psks(data))
            elif t == ExtensionType.PSK_KEY_EXCHANGE_MODES:
                fields.setdefault("psk_key_exchange_modes", _u8_list(data))
            elif t == ExtensionType.EARLY_DATA:
                fields.setdefault("early_data", _empty(data))
            elif t == ExtensionType.RECORD_SIZE_LIMIT:
                fields.setdefault("record_size_limit", _record_size_limit(data))
            elif t == ExtensionType.EXTENDED_MASTER_SECRET:
                fields.setdefault("extended_master_secret", _empty(data))
            elif t == ExtensionType.ENCRYPT_THEN_MAC:
                fields.setdefault("encrypt_then_mac", _empty(data))
        except DissectError:
            bad.append(t)
    return ClientHello(
        offset=msg.offset,
        length=msg.length,
        legacy_version=legacy_version,
        random=random,
        session_id=session_id,
        cipher_suites=cipher_suites,
        compression_methods=compression,
        extensions=extensions,
        duplicate_extensions=dups,
        malformed_extensions=tuple(bad),
        **fields,  # type: ignore[arg-type]
    )


def _decode_server_hello(msg: HandshakeMessage) -> ServerHello | HelloRetryRequest:
    cur = Cursor(msg.body)
    legacy_version = cur.pull_u16()
    random = cur.pull_bytes(32)
    d = tls13_draft(legacy_version)
    if d is not None and 0 < d < 22:
        # draft-ietf-tls-tls13-21 §4.1.3: "struct { ProtocolVersion version; Random random;
        # CipherSuite cipher_suite; Extension extensions<6..2^16-1>; } ServerHello;" —
        # no session id echo, no compression; the first field is the negotiated version.
        session_id = b""
        cipher_suite = cur.pull_u16()
        compression = 0
    else:
        session_id = cur.pull_vector(1)
        if len(session_id) > 32:
            raise Malformed(f"session id of {len(session_id)} bytes > 32", offset=msg.offset)
        cipher_suite = cur.pull_u16()
        compression = cur.pull_u8()
    extensions, dups = _pull_extensions(cur)
    _done(cur)
    hrr = random == HRR_RANDOM
    fields: dict[str, object] = {}
    bad: list[int] = []
    for t, data in extensions:
        try:
            if t == ExtensionType.SUPPORTED_VERSIONS:
                fields.setdefault("selected_version", _u16(data))
            elif t == ExtensionType.KEY_SHARE:
                if hrr:
                    fields.setdefault("selected_group", _u16(data))
                else:
                    c = Cursor(data)
                    group = c.pull_u16()
                    c.pull_vector(2)
                    _done(c)
                    fields.setdefault("key_share_group", group)
            elif t == ExtensionType.COOKIE and hrr:
                c = Cursor(data)
                cookie = c.pull_vector(2)
                _done(c)
                fields.setdefault("cookie", cookie)
            elif hrr:
                continue
            elif t == ExtensionType.PRE_SHARED_KEY:
                fields.setdefault("selected_identity", _u16(data))
            elif t == ExtensionType.APPLICATION_LAYER_PROTOCOL_NEGOTIATION:
                names = _alpn(data)
                if len(names) != 1:
                    # RFC 7301 §3.1: the server's list "MUST contain exactly one" name
                    raise Malformed("ServerHello ALPN must name exactly one protocol")
                fields.setdefault("alpn", names[0])
            elif t == ExtensionType.SESSION_TICKET:
                fields.setdefault("session_ticket", _empty(data))
            elif t == ExtensionType.RECORD_SIZE_LIMIT:
                fields.setdefault("record_size_limit", _record_size_limit(data))
            elif t == ExtensionType.EXTENDED_MASTER_SECRET:
                fields.setdefault("extended_master_secret", _empty(data))
            elif t == ExtensionType.ENCRYPT_THEN_MAC:
                fields.setdefault("encrypt_then_mac", _empty(data))
        except DissectError:
            bad.append(t)
    if hrr:
        return HelloRetryRequest(
            offset=msg.offset,
            length=msg.length,
            legacy_version=legacy_version,
            session_id=session_id,
            cipher_suite=cipher_suite,
            extensions=extensions,
            duplicate_extensions=dups,
            malformed_extensions=tuple(bad),
            **fields,  # type: ignore[arg-type]
        )
    return ServerHello(
        offset=msg.offset,
        length=msg.length,
        legacy_version=legacy_version,
        random=random,
        session_id=session_id,
        cipher_suite=cipher_suite,
        compression_method=compression,
        extensions=extensions,
        duplicate_extensions=dups,
        malformed_extensions=tuple(bad),
        **fields,  # type: ignore[arg-type]
    )


def _decode_encrypted_extensions(msg: HandshakeMessage) -> EncryptedExtensions:
    cur = Cursor(msg.body)
    if cur.eof():
        raise Truncated("EncryptedExtensions needs an extensions vector", offset=msg.offset)
    extensions, dups = _pull_extensions(cur)
    _done(cur)
    fields: dict[str, object] = {}
    bad: list[int] = []
    for t, data in extensions:
        try:
            if t == ExtensionType.APPLICATION_LAYER_PROTOCOL_NEGOTIATION:
                names = _alpn(data)
                if len(names) != 1:
                    # RFC 7301 §3.1: the server's list "MUST contain exactly one" name
                    raise Malformed("EncryptedExtensions ALPN must name exactly one protocol")
                fields.setdefault("alpn", names[0])
            elif t == ExtensionType.EARLY_DATA:
                fields.setdefault("early_data", _empty(data))
            elif t == ExtensionType.SERVER_NAME:
                fields.setdefault("server_name_acknowledged", _empty(data))
            elif t == ExtensionType.RECORD_SIZE_LIMIT:
                fields.setdefault("record_size_limit", _record_size_limit(data))
            elif t == ExtensionType.SUPPORTED_GROUPS:
                fields.setdefault("supported_groups", _u16_list(data, 2))
        except DissectError:
            bad.append(t)
    return EncryptedExtensions(
        offset=msg.offset,
        length=msg.length,
        extensions=extensions,
        duplicate_extensions=dups,
        malformed_extensions=tuple(bad),
        **fields,  # type: ignore[arg-type]
    )


def _decode_certificate(msg: HandshakeMessage, tls13: bool) -> Certificate:
    cur = Cursor(msg.body)
    context = cur.pull_vector(1) if tls13 else b""
    certs: list[bytes] = []
    with cur.pull_block(3) as blk:
        while not blk.eof():
            certs.append(blk.pull_vector(3))
            if tls13:
                blk.pull_vector(2)  # per-entry extensions (OCSP, SCT)
    _done(cur)
    return Certificate(
        offset=msg.offset,
        length=msg.length,
        tls13=tls13,
        request_context=context,
        certificates=tuple(certs),
    )


def _decode_new_session_ticket(msg: HandshakeMessage, tls13: bool) -> NewSessionTicket:
    cur = Cursor(msg.body)
    lifetime = cur.pull_u32()
    if not tls13:
        ticket = cur.pull_vector(2)
        _done(cur)
        return NewSessionTicket(
            offset=msg.offset, length=msg.length, tls13=False, lifetime=lifetime, ticket=ticket
        )
    age_add = cur.pull_u32()
    nonce = cur.pull_vector(1)
    ticket = cur.pull_vector(2)
    if not ticket:
        raise Malformed("empty TLS 1.3 session ticket", offset=msg.offset)  # ticket<1..2^16-1>
    if cur.eof():
        raise Truncated("NewSessionTicket needs an extensions vector", offset=msg.offset)
    extensions, _ = _pull_extensions(cur)
    _done(cur)
    max_early: int | None = None
    for t, data in extensions:
        if t == ExtensionType.EARLY_DATA:
            c = Cursor(data)
            max_early = c.pull_u32()
            _done(c)
    return NewSessionTicket(
        offset=msg.offset,
        length=msg.length,
        tls13=True,
        lifetime=lifetime,
        ticket=ticket,
        age_add=age_add,
        nonce=nonce,
        extensions=extensions,
        max_early_data_size=max_early,
    )


def decode_handshake(msg: HandshakeMessage, *, tls13: bool = False) -> DecodedHandshake:
    """Decode one reassembled message.

    ``tls13`` selects the TLS 1.3 form of Certificate and NewSessionTicket (the only
    messages whose layout depends on the version); the session passes the negotiated
    version.  Raises :class:`Truncated` / :class:`Malformed` on a body that does not fit.
    """
    t = msg.msg_type
    off, length = msg.offset, msg.length
    body = msg.body
    if t == HandshakeType.CLIENT_HELLO:
        return _decode_client_hello(msg)
    if t == HandshakeType.SERVER_HELLO:
        return _decode_server_hello(msg)
    if t == HandshakeType.ENCRYPTED_EXTENSIONS:
        return _decode_encrypted_extensions(msg)
    if t == HandshakeType.CERTIFICATE:
        return _decode_certificate(msg, tls13)
    if t == HandshakeType.COMPRESSED_CERTIFICATE:
        cur = Cursor(body)
        algorithm = cur.pull_u16()
        uncompressed = cur.pull_u24()
        compressed = cur.pull_vector(3)
        _done(cur)
        return CompressedCertificate(
            offset=off,
            length=length,
            algorithm=algorithm,
            uncompressed_length=uncompressed,
            compressed_length=len(compressed),
        )
    if t == HandshakeType.CERTIFICATE_VERIFY:
        cur = Cursor(body)
        algorithm = cur.pull_u16()
        signature = cur.pull_vector(2)
        _done(cur)
        return CertificateVerify(
            offset=off, length=length, algorithm=algorithm, signature=signature
        )
    if t == HandshakeType.FINISHED:
        if not body:
            raise Malformed("empty Finished", offset=off)
        return Finished(offset=off, length=length, verify_data=body)
    if t == HandshakeType.NEW_SESSION_TICKET:
        return _decode_new_session_ticket(msg, tls13)
    if t == HandshakeType.KEY_UPDATE:
        cur = Cursor(body)
        request = cur.pull_u8()
        _done(cur)
        if request not in (0, 1):
            # RFC 8446 §4.6.3: "If an implementation receives any other value [than 0 or 1],
            # it MUST terminate the connection with an "illegal_parameter" alert."
            raise Malformed(f"KeyUpdate request_update {request}", offset=off)
        return KeyUpdate(offset=off, length=length, request_update=request)
    if t in (
        HandshakeType.END_OF_EARLY_DATA,
        HandshakeType.SERVER_HELLO_DONE,
        HandshakeType.HELLO_REQUEST,
    ):
        if body:
            raise Malformed(f"{HandshakeType(t).name} must have an empty body", offset=off)
        if t == HandshakeType.END_OF_EARLY_DATA:
            return EndOfEarlyData(offset=off, length=length)
        if t == HandshakeType.SERVER_HELLO_DONE:
            return ServerHelloDone(offset=off, length=length)
        return HelloRequest(offset=off, length=length)
    if t == HandshakeType.SERVER_KEY_EXCHANGE:
        group = (body[1] << 8) | body[2] if len(body) >= 3 and body[0] == 3 else None
        return ServerKeyExchange(offset=off, length=length, body=body, named_group=group)
    if t == HandshakeType.CLIENT_KEY_EXCHANGE:
        return ClientKeyExchange(offset=off, length=length, body=body)
    if t == HandshakeType.CERTIFICATE_REQUEST:
        return CertificateRequest(offset=off, length=length, body=body)
    return UnknownHandshake(offset=off, length=length, msg_type=t, body=body)


# ---------------------------------------------------------------------------------------
# Alerts
# ---------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class Alert:
    """One alert (RFC 8446 §6).  ``offset`` is in the coordinates of the buffer parsed
    (the record plaintext); the session reports the record's stream offset beside it."""

    offset: int
    length: int
    level: int
    description: int

    @property
    def fatal(self) -> bool:
        return self.level == AlertLevel.FATAL


def parse_alert(buf: Buffer, offset: int = 0) -> tuple[Alert, int]:
    cur = Cursor(buf, offset)
    level = cur.pull_u8()
    description = cur.pull_u8()
    return Alert(offset=offset, length=2, level=level, description=description), cur.pos


def parse_alerts(fragment: Buffer) -> list[Alert]:
    """All alerts of one alert record.

    RFC 8446 §5.1: "Alert messages MUST NOT be fragmented across records, and multiple alert
    messages MUST NOT be coalesced into a single TLSPlaintext record" — so a record is
    exactly one alert in TLS 1.3; TLS 1.2 allowed coalescing, hence the list.  An odd
    length means a fragmented alert, which this parser rejects.
    """
    if len(fragment) == 0 or len(fragment) % 2:
        raise Malformed(f"alert record of {len(fragment)} bytes (must be a non-zero multiple of 2)")
    out: list[Alert] = []
    off = 0
    while off < len(fragment):
        alert, off = parse_alert(fragment, off)
        out.append(alert)
    return out
