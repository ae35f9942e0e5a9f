"""Per-connection TLS state machine: hellos, epochs, keys from a key log, decryption.

Sans-I/O: :class:`TlsSession` is fed the records of *both* directions of one TCP
connection, interleaved in wire order (``feed(direction, item)`` with items from
:class:`~dissectors.tls.record.RecordParser`), or raw stream bytes with
``feed_data(direction, data)`` / ``feed_gap(direction, length)`` / ``close()``, in which
case it runs one record parser per direction itself.  Every record gives a
:class:`RecordResult`: its status from a fixed vocabulary (:class:`DecryptStatus`), the
inner content type, the plaintext (only when it authenticated) and the handshake messages
and alerts it completed.  :meth:`TlsSession.summary` describes the session.

Epochs (the key a record is protected with) follow RFC 8446 §2 and §7.3 for TLS 1.3:

* client → server: plaintext ClientHello; ``early`` (client_early_traffic_secret, when the
  ClientHello offers early_data, §4.2.10) until EndOfEarlyData; ``handshake`` until the
  client Finished; then ``application`` generation 0, 1, … (one per KeyUpdate, §4.6.3).
* server → client: plaintext ServerHello; ``handshake`` until the server Finished; then
  ``application`` generations.
* A key change happens after the record that carries the message (§5.1: those messages
  "MUST [be sent] in alignment with a record boundary").

TLS 1.0–1.2 (RFC 5246 §7.1): records are plaintext until the ChangeCipherSpec of their
direction, then protected with the pending keys (epoch ``application``, whose first record
is the Finished).  The key block comes from the key log's ``CLIENT_RANDOM`` master secret,
the randoms and the suite; an abbreviated (resumed) handshake works the same because NSS
logs the resumed master secret under the new client random.  An optional
:class:`ResumptionCache` shared between sessions also recovers it from the original
connection by session id or ticket (what Wireshark does).

Trial decryption, and why it is honest: AEAD tags and CBC MACs authenticate, so a record
that decrypts under a key *was* protected with that key.  The session uses this where the
wire does not say which key applies:

* early data before the ServerHello: the suite is not known yet, so each TLS 1.3 suite the
  ClientHello offers whose hash matches the secret's length is tried;
* when the current epoch's key is missing or fails, the *next* epoch's key is tried at
  sequence number 0 (§4.2.10: a server that rejected 0-RTT "skip[s] past early data by
  attempting to deprotect received records using the handshake traffic key"); records
  before the switch keep their status (``missing_key``, ``early_data_rejected``, …);
* after a :class:`~dissectors.tls.record.StreamGap` the sequence number is unknown; the
  next record is tried at the sequence numbers the lost bytes could have held (capped by
  :data:`MAX_SEQ_SEARCH`) — otherwise ``lost_sync``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Final, Literal

from ..errors import DissectError, Malformed
from .crypto import (
    CIPHER_SUITES,
    AuthenticationFailed,
    CipherSuite,
    RecordProtection,
    Tls13Protection,
    make_tls12_protection,
    tls12_key_block,
    tls13_next_traffic_secret,
)
from .handshake import (
    MAX_HANDSHAKE_MESSAGE_LENGTH,
    Alert,
    Certificate,
    ClientHello,
    DecodedHandshake,
    EncryptedExtensions,
    EndOfEarlyData,
    Finished,
    HandshakeLimitExceeded,
    HandshakeMessage,
    HandshakeReassembler,
    HelloRetryRequest,
    KeyUpdate,
    NewSessionTicket,
    ServerHello,
    ServerHelloDone,
    ServerKeyExchange,
    decode_handshake,
    parse_alerts,
)
from .keylog import (
    CLIENT_EARLY_TRAFFIC_SECRET,
    CLIENT_HANDSHAKE_TRAFFIC_SECRET,
    CLIENT_RANDOM,
    CLIENT_TRAFFIC_SECRET_0,
    SERVER_HANDSHAKE_TRAFFIC_SECRET,
    SERVER_TRAFFIC_SECRET_0,
    KeyLog,
    Secret,
)
from .record import (
    HEADER_LENGTH,
    MAX_CIPHERTEXT_LENGTH,
    MAX_PLAINTEXT_LENGTH,
    MAX_TLS13_CIPHERTEXT_LENGTH,
    IncompleteRecord,
    RecordItem,
    RecordMalformed,
    RecordParser,
    Sslv2ClientHello,
    StreamGap,
    TlsRecord,
)
from .suites import cipher_suite_name
from .versions import (
    is_tls13,
    tls13_label_prefix,
    tls13_record_aad,
    tls13_schedule_known,
)

__all__ = [
    "C2S",
    "MAX_HANDSHAKE_MESSAGES",
    "MAX_SEQ_SEARCH",
    "S2C",
    "Anomaly",
    "DecryptStatus",
    "Direction",
    "Epoch",
    "RecordResult",
    "ResumptionCache",
    "TlsSession",
    "TlsSummary",
]

Direction = Literal["c2s", "s2c"]
C2S: Final = "c2s"
S2C: Final = "s2c"

#: Sequence numbers tried for the first record after a lost record boundary.  A record
#: is at least 22 bytes on the wire (5 header + 1 type + 16 tag), so a hole of L bytes hid
#: at most L // 22 records; the cap bounds the work (each trial is one AEAD/MAC check).
MAX_SEQ_SEARCH: Final = 4096
#: Handshake messages reassembled per session: a handshake is ~10 messages, a long
#: connection adds tickets and KeyUpdates; a hostile peer can send millions of empty
#: ones (4 bytes each).  Beyond, handshake bytes are counted, not reassembled.
MAX_HANDSHAKE_MESSAGES: Final = 200_000
_MIN_PROTECTED_RECORD: Final = 22


class DecryptStatus(str, Enum):
    """Why a record does or does not come with plaintext (stable snake_case values)."""

    DECRYPTED = "decrypted"  # authenticated and decrypted
    NOT_ENCRYPTED = "not_encrypted"  # sent in the clear (hellos, CCS, plaintext alerts)
    MISSING_KEY = "missing_key"  # the key log has no secret for this epoch
    WRONG_KEY = "wrong_key"  # a secret exists but the AEAD tag / MAC does not verify
    UNSUPPORTED_SUITE = "unsupported_suite"  # the negotiated suite is not implemented
    UNSUPPORTED_VERSION = "unsupported_version"  # SSL 3.0, TLS 1.3 experiments, unknown
    PSK_ONLY = "psk_only"  # no key log entry, and the only secret is a PSK
    RSA_KEY_EXCHANGE_NO_KEYLOG = "rsa_key_exchange_no_keylog"  # RSA key transport, no key log
    NO_HANDSHAKE = "no_handshake"  # protected record, but the hellos were never seen
    EARLY_DATA_REJECTED = "early_data_rejected"  # 0-RTT record the server skipped (§4.2.10)
    INCOMPLETE = "incomplete"  # bytes of the record were not captured
    LOST_SYNC = "lost_sync"  # after a lost record boundary, no sequence number fits
    BAD_RECORD = "bad_record"  # the record violates the record protocol (length, inner type)


_DECRYPTION_FAILURES: Final = frozenset(
    {
        DecryptStatus.MISSING_KEY,
        DecryptStatus.WRONG_KEY,
        DecryptStatus.UNSUPPORTED_SUITE,
        DecryptStatus.UNSUPPORTED_VERSION,
        DecryptStatus.PSK_ONLY,
        DecryptStatus.RSA_KEY_EXCHANGE_NO_KEYLOG,
        DecryptStatus.NO_HANDSHAKE,
        DecryptStatus.EARLY_DATA_REJECTED,
        DecryptStatus.INCOMPLETE,
        DecryptStatus.LOST_SYNC,
        DecryptStatus.BAD_RECORD,
    }
)


class Epoch(str, Enum):
    PLAINTEXT = "plaintext"
    EARLY = "early"
    HANDSHAKE = "handshake"
    APPLICATION = "application"


@dataclass(frozen=True, slots=True, kw_only=True)
class Anomaly:
    """Something that did not parse or violates the protocol (an ``anomalies`` row)."""

    name: str
    direction: str | None
    offset: int | None
    detail: str


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordResult:
    """What the session made of one record.

    ``offset``/``length`` are the record's stream offset and wire length (header included),
    ``content_type`` the outer type; ``inner_content_type`` is the real type (TLS 1.3
    hides it inside the protected record) or ``None`` when unknown.  ``plaintext`` is set
    only for authenticated or unprotected records.  ``seq`` is the record sequence number
    within its epoch (``None`` for plaintext or unknown); ``key_generation`` counts TLS 1.3
    KeyUpdates of the direction.
    """

    direction: str
    offset: int
    length: int
    content_type: int
    version: int
    status: DecryptStatus
    epoch: Epoch
    key_generation: int = 0
    seq: int | None = None
    inner_content_type: int | None = None
    plaintext: bytes | None = None
    handshake: tuple[DecodedHandshake, ...] = ()
    alerts: tuple[Alert, ...] = ()
    anomalies: tuple[Anomaly, ...] = ()
    early_data: bool = False

    @property
    def plaintext_len(self) -> int | None:
        return None if self.plaintext is None else len(self.plaintext)

    @property
    def is_application_data(self) -> bool:
        return self.inner_content_type == 23


@dataclass(frozen=True, slots=True, kw_only=True)
class TlsSummary:
    """One row of ``Trace.tls``: what was negotiated and whether it could be decrypted."""

    client_hello: bool
    server_hello: bool
    version: int | None
    offered_versions: tuple[int, ...]
    cipher_suite: int | None
    cipher_suite_name: str | None
    cipher_suites_offered: tuple[int, ...]  # the ClientHello's list, in its order
    key_exchange: str | None
    key_share_group: int | None
    key_exchange_group: int | None  # key_share (TLS 1.3) or ServerKeyExchange named curve
    sni: str | None
    alpn_offered: tuple[str, ...]
    alpn: str | None
    hello_retry_request: bool
    resumption_offered: bool
    resumption_accepted: bool
    resumption_kind: str | None  # "session_id", "ticket" (TLS ≤ 1.2) or "psk" (TLS 1.3)
    early_data_offered: bool
    early_data_accepted: bool | None  # None: offered but the decision was not seen
    handshake_complete: bool
    server_certificate_lengths: tuple[int, ...]
    client_random: bytes | None
    key_updates: int
    alerts: tuple[tuple[str, int, int], ...]  # (direction, level, description)
    records: int
    decrypted_records: int
    undecrypted_records: int
    records_by_status: Mapping[str, int]
    decrypted: bool  # every protected record decrypted (and at least one existed)
    why_not: str | None  # the first failure status when not decrypted
    anomalies: int
    roles_swapped: bool = False


class ResumptionCache:
    """TLS ≤ 1.2 master secrets by session id and by ticket, shared between sessions.

    Only consulted when the key log has no ``CLIENT_RANDOM`` line for a resumed connection;
    connections must then be fed in time order (the original before the resumption).
    """

    __slots__ = ("_by_id", "_by_ticket")

    def __init__(self) -> None:
        self._by_id: dict[bytes, Secret] = {}
        self._by_ticket: dict[bytes, Secret] = {}

    def store(self, master_secret: Secret, *, session_id: bytes = b"", ticket: bytes = b"") -> None:
        if session_id:
            self._by_id[bytes(session_id)] = master_secret
        if ticket:
            self._by_ticket[bytes(ticket)] = master_secret

    def lookup(self, *, session_id: bytes = b"", ticket: bytes = b"") -> Secret | None:
        if ticket and ticket in self._by_ticket:
            return self._by_ticket[ticket]
        if session_id:
            return self._by_id.get(bytes(session_id))
        return None

    def __len__(self) -> int:
        return len(self._by_id) + len(self._by_ticket)

    def __repr__(self) -> str:
        return f"<ResumptionCache: {len(self._by_id)} session ids, {len(self._by_ticket)} tickets; redacted>"


# ---------------------------------------------------------------------------------------
# Internal state
# ---------------------------------------------------------------------------------------
@dataclass(slots=True)
class _Keys:
    """One epoch's protection, or why there is none."""

    protection: RecordProtection | None
    reason: DecryptStatus | None  # set when protection is None
    epoch: Epoch
    generation: int = 0


@dataclass(slots=True)
class _Dir:
    name: str  # the role: "c2s" = sent by the TLS client
    wire: str  # the caller's label for this direction (differs only if roles were swapped)
    hs: HandshakeReassembler = field(
        default_factory=lambda: HandshakeReassembler(skip_oversize=True)
    )
    keys: _Keys | None = None  # current protection; None = plaintext
    seq: int = 0
    seq_unknown: int = 0  # >0: sequence number lost; how many to try
    pending_switch: tuple[Epoch, int] | None = None
    parser: RecordParser | None = None
    halted: bool = False


_TLS13_SUITES: Final = tuple(s for s in CIPHER_SUITES.values() if s.tls13)


class TlsSession:
    """Sans-I/O TLS session: feed records of both directions in wire order.

    Usage with reassembled streams::

        session = TlsSession(keylog)
        for direction, chunk in segments_in_wire_order:     # direction: "c2s" | "s2c"
            for result in session.feed_data(direction, chunk):   # or feed_gap(direction, n)
                ...                                            # one RecordResult per record
        session.close()
        row = session.summary()
    """

    def __init__(
        self,
        keylog: KeyLog | None = None,
        *,
        resumption_cache: ResumptionCache | None = None,
        start_offsets: Mapping[str, int] | None = None,
        scan_after_gap: bool = False,
        resync: bool = False,
        max_handshake_message: int = MAX_HANDSHAKE_MESSAGE_LENGTH,
        max_messages: int = MAX_HANDSHAKE_MESSAGES,
    ) -> None:
        self._keylog = keylog
        self._cache = resumption_cache
        self._scan = scan_after_gap
        self._resync = resync
        self._max_messages = max_messages
        self._hs_messages = 0  # handshake messages reassembled, both directions
        self._hs_over_bytes = 0  # handshake bytes past max_messages (counted only)
        starts = dict(start_offsets or {})
        self._dirs: dict[str, _Dir] = {
            d: _Dir(
                d,
                d,
                HandshakeReassembler(max_message_length=max_handshake_message, skip_oversize=True),
            )
            for d in (C2S, S2C)
        }
        self.roles_swapped = False
        self._starts = {d: starts.get(d, 0) for d in (C2S, S2C)}
        self.anomalies: list[Anomaly] = []
        # Handshake state.
        self.client_hello: ClientHello | None = None
        self.server_hello: ServerHello | None = None
        self.hello_retry_request: HelloRetryRequest | None = None
        self.encrypted_extensions: EncryptedExtensions | None = None
        self.client_encrypted_extensions: EncryptedExtensions | None = None
        self.server_key_exchange: ServerKeyExchange | None = None
        self.server_certificate: Certificate | None = None
        self.tickets: list[NewSessionTicket] = []
        self._full_handshake_seen = False  # TLS ≤ 1.2: server sent ServerHelloDone
        self._resumed12 = False
        self._finished: set[str] = set()
        self._early_accepted: bool | None = None
        self._early_offered = False
        self._psk_offered = False
        self._early_suite: CipherSuite | None = None
        self._key_updates = 0
        self._alerts: list[tuple[str, int, int]] = []
        self._status_counts: Counter[str] = Counter()
        self._first_failure: DecryptStatus | None = None
        self._records = 0
        self._master12: Secret | None = None
        self._last_seq: int | None = None

    # -- public properties ----------------------------------------------------
    @property
    def version(self) -> int | None:
        """Negotiated version (from the ServerHello), or ``None`` before it."""
        return self.server_hello.version if self.server_hello is not None else None

    @property
    def suite(self) -> CipherSuite | None:
        if self.server_hello is None:
            return None
        return CIPHER_SUITES.get(self.server_hello.cipher_suite)

    @property
    def client_random(self) -> bytes | None:
        return self.client_hello.random if self.client_hello is not None else None

    # -- byte-level driving -----------------------------------------------------
    def _parser(self, direction: str) -> RecordParser:
        d = self._dir(direction)
        if d.parser is None:
            d.parser = RecordParser(
                start_offset=self._starts[direction], scan_after_gap=self._scan, resync=self._resync
            )
        return d.parser

    def feed_data(self, direction: str, data: bytes | bytearray | memoryview) -> list[RecordResult]:
        """Feed stream bytes of one direction; return the records they completed.

        A header that cannot be TLS ends that direction: a ``tls_record_malformed``
        anomaly is recorded, the records before it are returned, and later bytes of the
        direction are ignored (the TCP analysis goes on; DESIGN.md §4) — unless the session
        was made with ``resync=True``: then the bytes up to the next chain of record headers
        are skipped (the anomaly says how many), and a record whose only fault is its length
        is kept and flagged (``tls_record_overflow``).
        """
        d = self._dir(direction)
        if d.halted:
            return []
        try:
            items = self._parser(direction).feed(data)
        except RecordMalformed as exc:
            items = list(exc.records)
            d.halted = True
            self._anomaly("tls_record_malformed", direction, exc.offset, str(exc))
        return self._feed_items(direction, items)

    def feed_gap(self, direction: str, length: int) -> list[RecordResult]:
        """``length`` bytes of the direction were not captured (a hole in reassembly)."""
        d = self._dir(direction)
        if d.halted:
            return []
        return self._feed_items(direction, self._parser(direction).feed_gap(length))

    def close(self) -> list[RecordResult]:
        """End of both streams: report records cut short and partial handshake messages."""
        out: list[RecordResult] = []
        for direction in (C2S, S2C):
            d = self._dirs[direction]
            if d.parser is not None and not d.halted:
                out.extend(self._feed_items(direction, d.parser.close()))
            for partial in d.hs.close():
                self._anomaly(
                    "tls_handshake_truncated",
                    direction,
                    None,
                    f"handshake message at handshake offset {partial.offset} cut short "
                    f"({partial.received} of {partial.length if partial.length is not None else '?'} bytes)",
                )
        if self._hs_over_bytes:
            self._anomaly(
                "message_limit_exceeded",
                None,
                None,
                f"more than {self._max_messages} handshake messages: {self._hs_over_bytes} "
                "handshake bytes after them are counted, not reassembled",
            )
        return out

    def _feed_items(self, direction: str, items: Iterable[RecordItem]) -> list[RecordResult]:
        out: list[RecordResult] = []
        for item in items:
            res = self.feed(direction, item)
            if res is not None:
                out.append(res)
        return out

    # -- record-level driving ---------------------------------------------------
    def feed(self, direction: str, item: RecordItem) -> RecordResult | None:
        """Process one record-layer item of ``direction`` ("c2s" or "s2c").

        Returns ``None`` for a :class:`StreamGap` (it is not a record; it makes the next
        record's sequence number unknown).
        """
        d = self._dir(direction)
        if isinstance(item, StreamGap):
            self._on_stream_gap(d, item)
            return None
        if isinstance(item, IncompleteRecord):
            res = self._incomplete(d, item)
        elif isinstance(item, Sslv2ClientHello):
            self._maybe_swap_roles(d, 1, item.offset)
            res = self._sslv2_hello(d, item)
        else:
            # Only the first byte of a direction's handshake stream is a message type.
            if (
                item.content_type == 22
                and d.keys is None
                and d.hs.position == 0
                and len(item.fragment)
            ):
                self._maybe_swap_roles(d, item.fragment[0], item.offset)
            res = self._record(d, item)
            # §5.1: key changes happen at record boundaries, after the record that asked.
            self._apply_pending_switch(d)
        self._records += 1
        self._status_counts[res.status.value] += 1
        if res.status in _DECRYPTION_FAILURES and res.status is not DecryptStatus.INCOMPLETE:
            if self._first_failure is None:
                self._first_failure = res.status
        return res

    # -- internals ------------------------------------------------------------
    def _dir(self, direction: str) -> _Dir:
        try:
            return self._dirs[direction]
        except KeyError:
            raise ValueError(f"direction must be 'c2s' or 's2c', not {direction!r}") from None

    def _role(self, role: str) -> _Dir:
        return next(d for d in self._dirs.values() if d.name == role)

    def _maybe_swap_roles(self, d: _Dir, hello_type: int | None, offset: int) -> None:
        """The caller's client/server guess is wrong if the first hello comes the other way.

        Only before any hello was seen: a ClientHello (type 1) from the "server" or a
        ServerHello (type 2) from the "client" swaps the roles (results keep the caller's
        direction labels; an anomaly and ``roles_swapped`` say so).
        """
        if self.client_hello is not None or self.server_hello is not None:
            return
        if (hello_type == 1 and d.name == S2C) or (hello_type == 2 and d.name == C2S):
            for x in self._dirs.values():
                x.name = S2C if x.name == C2S else C2S
            self.roles_swapped = True
            self._anomaly(
                "tls_roles_swapped", d.wire, offset, "the first hello came from the other side"
            )

    def _anomaly(
        self, name: str, direction: str | None, offset: int | None, detail: str
    ) -> Anomaly:
        a = Anomaly(name=name, direction=direction, offset=offset, detail=detail)
        self.anomalies.append(a)
        return a

    def _is_tls13(self) -> bool:
        return is_tls13(self.version)

    def _on_stream_gap(self, d: _Dir, gap: StreamGap) -> None:
        # every captured byte given up on is an anomaly with its offset and count
        where = (
            f"records resume at offset {gap.end}"
            if gap.reason == "resynchronised"
            else "no record header follows in the direction"
        )
        if gap.cause == "malformed_header":
            self._anomaly(
                "tls_record_malformed",
                d.wire,
                gap.offset,
                f"{gap.detail}; {gap.skipped} bytes skipped, {where}",
            )
        elif gap.reason == "truncated_header":
            self._anomaly(
                "tls_record_incomplete",
                d.wire,
                gap.offset,
                f"the stream ends inside a record header ({gap.skipped} of 5 bytes)",
            )
        elif gap.skipped > 0:
            self._anomaly(
                "tls_record_sync_lost",
                d.wire,
                gap.offset,
                f"a hole of {gap.missing} bytes covered a record header; {gap.skipped} "
                f"captured bytes skipped, {where}",
            )
        dropped = d.hs.reset()
        if dropped is not None:
            self._anomaly(
                "tls_handshake_lost", d.wire, gap.offset, "handshake message cut by a capture gap"
            )
        lost_records = gap.length // _MIN_PROTECTED_RECORD + 2
        d.seq_unknown = min(MAX_SEQ_SEARCH, lost_records)

    def _sslv2_hello(self, d: _Dir, v2: Sslv2ClientHello) -> RecordResult:
        """RFC 5246 E.2: the SSLv2-compatible hello stands for a ClientHello without
        extensions whose random is the challenge, right-justified."""
        ch = ClientHello(
            offset=d.hs.position,
            length=v2.length,
            legacy_version=v2.version,
            random=v2.client_random,
            session_id=v2.session_id,
            cipher_suites=v2.cipher_suites,
            compression_methods=b"\x00",
            extensions=(),
        )
        if d.name == C2S and self.client_hello is None:
            self.client_hello = ch
        return RecordResult(
            direction=d.wire,
            offset=v2.offset,
            length=v2.length,
            content_type=22,
            version=v2.version,
            status=DecryptStatus.NOT_ENCRYPTED,
            epoch=Epoch.PLAINTEXT,
            inner_content_type=22,
            handshake=(ch,),
            anomalies=(
                self._anomaly(
                    "tls_sslv2_client_hello",
                    d.wire,
                    v2.offset,
                    "SSL 2.0-compatible ClientHello (legacy)",
                ),
            ),
        )

    def _incomplete(self, d: _Dir, rec: IncompleteRecord) -> RecordResult:
        """The record exists but some bytes are missing: count its sequence number."""
        if d.keys is None and rec.content_type == 23 and self._is_tls13():
            self._init_tls13_epoch(d)
        epoch = d.keys.epoch if d.keys is not None else Epoch.PLAINTEXT
        seq = None
        if d.keys is not None and not d.seq_unknown:
            seq = d.seq
            d.seq += 1
        elif d.keys is not None:
            d.seq_unknown += 1
        dropped = d.hs.reset()
        anomalies = [
            self._anomaly(
                "tls_record_incomplete",
                d.wire,
                rec.offset,
                f"{rec.missing} of {rec.length} bytes not captured",
            )
        ]
        if dropped is not None:
            anomalies.append(
                self._anomaly(
                    "tls_handshake_lost", d.wire, rec.offset, "handshake message cut by a gap"
                )
            )
        return RecordResult(
            direction=d.wire,
            offset=rec.offset,
            length=rec.length,
            content_type=rec.content_type,
            version=rec.version,
            status=DecryptStatus.INCOMPLETE,
            epoch=epoch,
            key_generation=d.keys.generation if d.keys is not None else 0,
            seq=seq,
            anomalies=tuple(anomalies),
        )

    def _record(self, d: _Dir, rec: TlsRecord) -> RecordResult:
        ctype = rec.content_type
        anomalies: list[Anomaly] = []
        fragment_len = rec.length - HEADER_LENGTH
        tls13 = self._is_tls13()
        # TLS 1.3 context: negotiated, or client records while 0-RTT may be in flight.
        context13 = tls13 or (
            d.name == C2S
            and self.server_hello is None
            and self.client_hello is not None
            and self.client_hello.early_data
        )

        if fragment_len > MAX_CIPHERTEXT_LENGTH:
            # RFC 5246 §6.2.3: "The length MUST NOT exceed 2^14 + 2048." (RFC 8446 §5.2:
            # 2^14 + 256.)  Not decrypted; its header still frames it, so the records after
            # it are read (RecordParser(resync=True) hands such records over).
            seq = None
            if d.keys is not None and not d.seq_unknown:
                seq = d.seq
                d.seq += 1
            anomalies.append(
                self._anomaly(
                    "tls_record_overflow",
                    d.wire,
                    rec.offset,
                    f"record of {fragment_len} bytes > 2^14 + 2048: skipped, not decrypted",
                )
            )
            return self._result(
                d, rec, DecryptStatus.BAD_RECORD, Epoch.PLAINTEXT, seq=seq, anomalies=anomalies
            )

        if tls13 and fragment_len > MAX_TLS13_CIPHERTEXT_LENGTH:
            # RFC 8446 §5.2: "The length MUST NOT exceed 2^14 + 256 bytes.  An endpoint that
            # receives a record that exceeds this length MUST terminate the connection with a
            # "record_overflow" alert."
            anomalies.append(
                self._anomaly(
                    "tls_record_overflow",
                    d.wire,
                    rec.offset,
                    f"{fragment_len} > 2^14 + 256 in TLS 1.3",
                )
            )
            return self._result(
                d, rec, DecryptStatus.BAD_RECORD, Epoch.PLAINTEXT, anomalies=anomalies
            )

        if ctype == 20 and (d.keys is None or context13):
            # ChangeCipherSpec: the epoch switch of TLS <= 1.2 (RFC 5246 §7.1); in TLS 1.3
            # only a middlebox-compatibility no-op, never protected (RFC 8446 §5, App. D.4).
            if bytes(rec.fragment) != b"\x01":
                # RFC 8446 §5: "An implementation which receives any other change_cipher_spec
                # value than a single byte 0x01 ... MUST abort the handshake"
                anomalies.append(
                    self._anomaly(
                        "tls_ccs_malformed", d.wire, rec.offset, "CCS fragment is not 0x01"
                    )
                )
            elif not context13 and self.server_hello is not None:
                self._activate_tls12(d)
            return self._result(
                d, rec, DecryptStatus.NOT_ENCRYPTED, Epoch.PLAINTEXT, inner=ctype, plaintext=bytes(rec.fragment),
                anomalies=anomalies,
            )  # fmt: skip

        if context13:
            # RFC 8446 §5.2: "The outer opaque_type field of a TLSCiphertext record is always
            # set to the value 23 (application_data)": any other type is plaintext.
            if ctype == 23:
                return self._protected(d, rec, anomalies)
        elif d.keys is not None:
            return self._protected(d, rec, anomalies)
        elif ctype == 23:
            # Application data before keys: the capture started mid-connection (or the
            # hellos / ChangeCipherSpec were lost).  Not an anomaly of the traffic.
            return self._result(
                d, rec, DecryptStatus.NO_HANDSHAKE, Epoch.PLAINTEXT, anomalies=anomalies
            )

        # Plaintext record.
        if fragment_len > MAX_PLAINTEXT_LENGTH:
            # RFC 8446 §5.1: "The length MUST NOT exceed 2^14 bytes."
            anomalies.append(
                self._anomaly(
                    "tls_record_overflow", d.wire, rec.offset, f"plaintext record of {fragment_len}"
                )
            )
        plaintext = bytes(rec.fragment)
        hs, alerts = self._content(d, rec, ctype, plaintext, anomalies)
        return self._result(
            d, rec, DecryptStatus.NOT_ENCRYPTED, Epoch.PLAINTEXT, inner=ctype, plaintext=plaintext,
            handshake=hs, alerts=alerts, anomalies=anomalies,
        )  # fmt: skip

    # -- protected records --------------------------------------------------------
    def _protected(self, d: _Dir, rec: TlsRecord, anomalies: list[Anomaly]) -> RecordResult:
        if d.keys is None:
            self._init_tls13_epoch(d)
        keys = d.keys
        if keys is None:
            return self._result(
                d, rec, DecryptStatus.NO_HANDSHAKE, Epoch.PLAINTEXT, anomalies=anomalies
            )
        fragment = bytes(rec.fragment)
        outcome = self._try_epochs(d, rec, fragment)
        if isinstance(outcome, DecryptStatus):
            dropped = d.hs.reset()
            if dropped is not None:
                anomalies.append(
                    self._anomaly(
                        "tls_handshake_lost",
                        d.wire,
                        rec.offset,
                        "handshake continues in an undecrypted record",
                    )
                )
            if outcome is DecryptStatus.BAD_RECORD:
                anomalies.append(
                    self._anomaly(
                        "tls_bad_record", d.wire, rec.offset, "protected record is malformed"
                    )
                )
            keys = d.keys
            assert keys is not None
            early = keys.epoch is Epoch.EARLY
            return self._result(
                d, rec, outcome, keys.epoch, generation=keys.generation, seq=self._last_seq,
                anomalies=anomalies, early=early,
            )  # fmt: skip
        inner, plaintext = outcome
        keys = d.keys
        assert keys is not None
        epoch, generation, seq = keys.epoch, keys.generation, self._last_seq
        limit = MAX_PLAINTEXT_LENGTH + (
            0 if keys.protection is not None and keys.protection.suite.tls13 else 1024
        )
        if len(plaintext) > limit:
            anomalies.append(
                self._anomaly(
                    "tls_record_overflow", d.wire, rec.offset, f"plaintext of {len(plaintext)}"
                )
            )
        hs, alerts = self._content(d, rec, inner, plaintext, anomalies)
        res = self._result(
            d, rec, DecryptStatus.DECRYPTED, epoch, generation=generation, seq=seq, inner=inner,
            plaintext=plaintext, handshake=hs, alerts=alerts, anomalies=anomalies, early=epoch is Epoch.EARLY,
        )  # fmt: skip
        return res

    def _try_epochs(
        self, d: _Dir, rec: TlsRecord, fragment: bytes
    ) -> tuple[int, bytes] | DecryptStatus:
        """Decrypt with the current epoch, else trial the next one (see the module doc)."""
        keys = d.keys
        assert keys is not None
        seqs = self._seq_candidates(d)
        self._last_seq = None if d.seq_unknown else d.seq
        status: DecryptStatus | None = keys.reason
        if keys.protection is not None:
            for seq in seqs:
                try:
                    result = keys.protection.decrypt(rec.content_type, rec.version, fragment, seq)
                except AuthenticationFailed:
                    status = DecryptStatus.WRONG_KEY
                    continue
                except Malformed:
                    status = DecryptStatus.BAD_RECORD
                    break
                d.seq = seq + 1
                d.seq_unknown = 0
                self._last_seq = seq
                return result
        # Next epoch at sequence 0 (or the trial window after a lost boundary).
        nxt = self._next_keys(d)
        if nxt is not None and nxt.protection is not None:
            window = range(d.seq_unknown) if d.seq_unknown else range(1)
            for seq in window:
                try:
                    result = nxt.protection.decrypt(rec.content_type, rec.version, fragment, seq)
                except DissectError:
                    continue
                self._switch(d, nxt)
                d.seq = seq + 1
                d.seq_unknown = 0
                self._last_seq = seq
                return result
        # Nothing authenticated: the record stays in the current epoch.
        if d.seq_unknown:
            d.seq_unknown += 1
            return (
                DecryptStatus.LOST_SYNC
                if keys.protection is not None
                else (status or DecryptStatus.LOST_SYNC)
            )
        d.seq += 1
        if (
            keys.epoch is Epoch.EARLY
            and self._early_accepted is False
            and status is not DecryptStatus.BAD_RECORD
        ):
            return DecryptStatus.EARLY_DATA_REJECTED
        return status or DecryptStatus.WRONG_KEY

    def _seq_candidates(self, d: _Dir) -> range:
        if d.seq_unknown:
            return range(d.seq, d.seq + d.seq_unknown)
        return range(d.seq, d.seq + 1)

    def _result(
        self,
        d: _Dir,
        rec: TlsRecord,
        status: DecryptStatus,
        epoch: Epoch,
        *,
        generation: int = 0,
        seq: int | None = None,
        inner: int | None = None,
        plaintext: bytes | None = None,
        handshake: tuple[DecodedHandshake, ...] = (),
        alerts: tuple[Alert, ...] = (),
        anomalies: list[Anomaly] | None = None,
        early: bool = False,
    ) -> RecordResult:
        return RecordResult(
            direction=d.wire,
            offset=rec.offset,
            length=rec.length,
            content_type=rec.content_type,
            version=rec.version,
            status=status,
            epoch=epoch,
            key_generation=generation,
            seq=seq,
            inner_content_type=inner,
            plaintext=plaintext,
            handshake=handshake,
            alerts=alerts,
            anomalies=tuple(anomalies or ()),
            early_data=early,
        )

    # -- content of plaintext / decrypted records -----------------------------------
    def _content(
        self, d: _Dir, rec: TlsRecord, ctype: int, plaintext: bytes, anomalies: list[Anomaly]
    ) -> tuple[tuple[DecodedHandshake, ...], tuple[Alert, ...]]:
        if ctype == 22:
            if not plaintext:
                anomalies.append(
                    self._anomaly("tls_empty_handshake_record", d.wire, rec.offset, "zero-length")
                )
                return (), ()
            if self._hs_messages >= self._max_messages:
                # past the message cap: counted, not reassembled nor decoded
                self._hs_over_bytes += len(plaintext)
                return (), ()
            try:
                messages = d.hs.feed(plaintext, record_offset=rec.offset)
            except HandshakeLimitExceeded as exc:  # skipped by its length (skip_oversize)
                messages = list(exc.messages)
                anomalies.append(
                    self._anomaly("tls_handshake_too_large", d.wire, rec.offset, str(exc))
                )
            self._hs_messages += len(messages)
            decoded: list[DecodedHandshake] = []
            for msg in messages:
                item = self._decode(d, rec, msg, anomalies)
                if item is not None:
                    decoded.append(item)
            return tuple(decoded), ()
        if ctype == 21:
            try:
                alerts = parse_alerts(plaintext)
            except DissectError as exc:
                anomalies.append(self._anomaly("tls_alert_malformed", d.wire, rec.offset, str(exc)))
                return (), ()
            for a in alerts:
                self._alerts.append((d.wire, a.level, a.description))
            return (), tuple(alerts)
        if ctype == 20:
            if self._is_tls13():
                # RFC 8446 §5: "An implementation may receive an unencrypted record of type
                # change_cipher_spec ... [an] encrypted "change_cipher_spec" record MUST [be
                # treated] as an "unexpected_message""
                anomalies.append(
                    self._anomaly(
                        "tls_unexpected_ccs", d.wire, rec.offset, "protected ChangeCipherSpec"
                    )
                )
            else:
                # TLS <= 1.2 renegotiation: the CCS is protected by the current keys and
                # switches to the keys of the new handshake.
                self._activate_tls12(d)
        return (), ()

    def _decode(
        self, d: _Dir, rec: TlsRecord, msg: HandshakeMessage, anomalies: list[Anomaly]
    ) -> DecodedHandshake | None:
        try:
            m = decode_handshake(msg, tls13=self._is_tls13())
        except DissectError as exc:
            anomalies.append(
                self._anomaly(
                    "tls_handshake_malformed",
                    d.wire,
                    rec.offset,
                    f"message type {msg.msg_type}: {exc}",
                )
            )
            return None
        tls13 = self._is_tls13()
        if isinstance(m, ClientHello) and d.name == C2S:
            if self.client_hello is None or self.hello_retry_request is not None:
                # After a HelloRetryRequest the second ClientHello replaces the first
                # (same random, RFC 8446 §4.1.2); what was *offered* is remembered.
                self.client_hello = m
                self._early_offered |= m.early_data
                self._psk_offered |= bool(m.psk_identities)
        elif isinstance(m, HelloRetryRequest) and d.name == S2C:
            self.hello_retry_request = m
            if self._early_offered:
                # RFC 8446 §4.2.10: early data is rejected by a HelloRetryRequest.
                self._early_accepted = False
        elif isinstance(m, ServerHello) and d.name == S2C:
            self.server_hello = m
            self._on_server_hello(m)
        elif isinstance(m, EncryptedExtensions) and d.name == C2S:
            # The client's own EncryptedExtensions (Chrome's ALPS, application_settings
            # 17513/17613, draft-vvv-tls-alps §4) come after the server's flight; they
            # negotiate nothing and must not replace the server's (ALPN, early_data).
            self.client_encrypted_extensions = m
        elif isinstance(m, EncryptedExtensions):
            self.encrypted_extensions = m
            if self._early_offered and self._early_accepted is not False:
                # §4.2.10: the server accepts 0-RTT by sending early_data in EncryptedExtensions.
                self._early_accepted = m.early_data
        elif isinstance(m, Certificate) and d.name == S2C:
            self.server_certificate = m
        elif isinstance(m, ServerHelloDone):
            self._full_handshake_seen = True
        elif isinstance(m, ServerKeyExchange) and d.name == S2C:
            self.server_key_exchange = m
        elif isinstance(m, Finished):
            self._finished.add(d.name)
            if tls13 and d.keys is not None and d.keys.epoch is Epoch.HANDSHAKE:
                d.pending_switch = (Epoch.APPLICATION, 0)
        elif isinstance(m, EndOfEarlyData) and d.name == C2S and tls13:
            d.pending_switch = (Epoch.HANDSHAKE, 0)
        elif isinstance(m, KeyUpdate) and tls13:
            if d.keys is not None and d.keys.epoch is Epoch.APPLICATION:
                d.pending_switch = (Epoch.APPLICATION, d.keys.generation + 1)
                self._key_updates += 1
        elif isinstance(m, NewSessionTicket) and d.name == S2C:
            self.tickets.append(m)
            if not tls13 and self._cache is not None and self._master12 is not None:
                self._cache.store(self._master12, ticket=m.ticket)
        return m

    def _on_server_hello(self, sh: ServerHello) -> None:
        if is_tls13(sh.version):
            ch = self.client_hello
            if ch is not None and ch.early_data and sh.selected_identity is None:
                # Early data needs the PSK of the first identity (§4.2.10); no PSK, no 0-RTT.
                self._early_accepted = False
            # TLS 1.3: the server's next records use the handshake epoch (§7.3).
            s2c = self._role(S2C)
            s2c.pending_switch = (Epoch.HANDSHAKE, 0)

    def _apply_pending_switch(self, d: _Dir) -> None:
        if d.pending_switch is None:
            return
        epoch, generation = d.pending_switch
        d.pending_switch = None
        self._switch(d, self._tls13_keys(d.name, epoch, generation))

    def _switch(self, d: _Dir, keys: _Keys) -> None:
        if d.hs.buffered:
            # RFC 8446 §5.1: "Handshake messages MUST NOT span key changes."
            self._anomaly(
                "tls_handshake_spans_key_change", d.wire, None, f"{d.hs.buffered} bytes dropped"
            )
            d.hs.reset()
        d.keys = keys
        d.seq = 0

    # -- TLS 1.3 keys -----------------------------------------------------------------
    def _init_tls13_epoch(self, d: _Dir) -> None:
        """First protected record of a direction without an explicit switch."""
        ch = self.client_hello
        if (
            d.name == C2S
            and ch is not None
            and ch.early_data
            and (self.server_hello is None or self._is_tls13())
        ):
            d.keys = self._tls13_keys(C2S, Epoch.EARLY, 0)
            d.seq = 0
        elif self._is_tls13():
            d.keys = self._tls13_keys(d.name, Epoch.HANDSHAKE, 0)
            d.seq = 0

    def _next_keys(self, d: _Dir) -> _Keys | None:
        keys = d.keys
        if keys is None or not self._is_tls13():
            return None
        if keys.epoch is Epoch.EARLY:
            return self._tls13_keys(d.name, Epoch.HANDSHAKE, 0)
        if keys.epoch is Epoch.HANDSHAKE:
            return self._tls13_keys(d.name, Epoch.APPLICATION, 0)
        return None

    def _missing_reason(self, *, tls13: bool) -> DecryptStatus:
        """Why there is no key: refine missing_key by the key exchange (see the vocabulary)."""
        if tls13:
            sh = self.server_hello
            if sh is not None and sh.selected_identity is not None and sh.key_share_group is None:
                return DecryptStatus.PSK_ONLY  # psk_ke: no (EC)DHE, the PSK is the only secret
            return DecryptStatus.MISSING_KEY
        suite = self.suite
        if suite is not None and suite.key_exchange in ("RSA", "RSA_PSK"):
            return DecryptStatus.RSA_KEY_EXCHANGE_NO_KEYLOG
        if suite is not None and suite.key_exchange == "PSK":
            return DecryptStatus.PSK_ONLY
        return DecryptStatus.MISSING_KEY

    def _secret(self, label: str) -> Secret | None:
        cr = self.client_random
        if cr is None or self._keylog is None:
            return None
        return self._keylog.get(cr, label)

    def _tls13_keys(self, direction: str, epoch: Epoch, generation: int) -> _Keys:
        client = direction == C2S
        label = {
            Epoch.EARLY: CLIENT_EARLY_TRAFFIC_SECRET,
            Epoch.HANDSHAKE: CLIENT_HANDSHAKE_TRAFFIC_SECRET
            if client
            else SERVER_HANDSHAKE_TRAFFIC_SECRET,
            Epoch.APPLICATION: CLIENT_TRAFFIC_SECRET_0 if client else SERVER_TRAFFIC_SECRET_0,
        }[epoch]
        if self.client_hello is None:
            return _Keys(None, DecryptStatus.NO_HANDSHAKE, epoch, generation)
        secret = self._secret(label)
        if secret is None:
            return _Keys(None, self._missing_reason(tls13=True), epoch, generation)
        value = secret.reveal()
        if epoch is Epoch.EARLY:
            return self._early_keys(value)
        suite = self.suite
        if suite is None or not suite.tls13:
            return _Keys(None, DecryptStatus.UNSUPPORTED_SUITE, epoch, generation)
        version = self.version
        if not tls13_schedule_known(version):
            # a pre-RFC variant whose key schedule is not documented (versions.py)
            return _Keys(None, DecryptStatus.UNSUPPORTED_VERSION, epoch, generation)
        if len(value) != suite.hash_length:
            self._anomaly(
                "tls_keylog_secret_length", direction, None, f"{label} has {len(value)} bytes"
            )
            return _Keys(None, DecryptStatus.WRONG_KEY, epoch, generation)
        prefix = tls13_label_prefix(version)
        for _ in range(generation):
            value = tls13_next_traffic_secret(suite.prf_hash, value, prefix=prefix)
        protection = Tls13Protection(
            suite, value, prefix=prefix, header_aad=tls13_record_aad(version)
        )
        return _Keys(protection, None, epoch, generation)

    def _early_keys(self, secret: bytes) -> _Keys:
        """0-RTT keys: the suite is the PSK's, known for sure only from the ServerHello."""
        if self._early_suite is not None:
            return _Keys(Tls13Protection(self._early_suite, secret), None, Epoch.EARLY)
        candidates: list[CipherSuite] = []
        if self.suite is not None and self.suite.tls13:
            candidates.append(self.suite)
        ch = self.client_hello
        offered = ch.cipher_suites if ch is not None else ()
        for s in _TLS13_SUITES:
            if s.id in offered and s not in candidates:
                candidates.append(s)
        candidates = [s for s in candidates if s.hash_length == len(secret)]
        if not candidates:
            return _Keys(None, DecryptStatus.UNSUPPORTED_SUITE, Epoch.EARLY)
        return _Keys(
            _TrialProtection(self, [Tls13Protection(s, secret) for s in candidates]),
            None,
            Epoch.EARLY,
        )

    # -- TLS 1.2 keys -----------------------------------------------------------------
    def _activate_tls12(self, d: _Dir) -> None:
        """ChangeCipherSpec of direction ``d`` (RFC 5246 §7.1): switch to the pending keys."""
        d.seq = 0
        d.seq_unknown = 0
        if d.name == S2C and not self._full_handshake_seen:
            self._resumed12 = True
        if d.hs.buffered:
            self._anomaly(
                "tls_handshake_spans_key_change", d.wire, None, f"{d.hs.buffered} bytes dropped"
            )
            d.hs.reset()
        d.keys = self._tls12_keys(d.name)

    def _tls12_keys(self, direction: str) -> _Keys:
        epoch = Epoch.APPLICATION
        sh, ch = self.server_hello, self.client_hello
        if sh is None or ch is None:
            return _Keys(None, DecryptStatus.NO_HANDSHAKE, epoch)
        version = sh.version
        if not 0x0301 <= version <= 0x0303:
            return _Keys(None, DecryptStatus.UNSUPPORTED_VERSION, epoch)
        suite = CIPHER_SUITES.get(sh.cipher_suite)
        if suite is None or suite.tls13 or not suite.supported:
            return _Keys(None, DecryptStatus.UNSUPPORTED_SUITE, epoch)
        master = self._secret(CLIENT_RANDOM)
        if master is None and self._keylog is not None and sh.session_id:
            # an "RSA Session-ID:… Master-Key:…" key-log line (Wireshark reads them too)
            master = self._keylog.session_master(sh.session_id)
        if master is None and self._cache is not None:
            ticket = ch.session_ticket or b""
            master = self._cache.lookup(
                session_id=sh.session_id if sh.session_id == ch.session_id else b"", ticket=ticket
            )
        if master is None:
            return _Keys(None, self._missing_reason(tls13=False), epoch)
        self._master12 = master
        if self._cache is not None:
            self._cache.store(master, session_id=sh.session_id)
        keys = tls12_key_block(suite, version, master.reveal(), ch.random, sh.random)
        etm = suite.mode == "cbc" and ch.encrypt_then_mac and sh.encrypt_then_mac
        try:
            protection = make_tls12_protection(
                suite, version, keys, client=direction == C2S, encrypt_then_mac=etm
            )
        except ValueError:
            return _Keys(None, DecryptStatus.UNSUPPORTED_SUITE, epoch)
        return _Keys(protection, None, epoch)

    # -- summary -----------------------------------------------------------------
    def summary(self) -> TlsSummary:
        ch, sh = self.client_hello, self.server_hello
        suite = self.suite
        version = self.version
        tls13 = is_tls13(version)
        resumption_offered = False
        kind: str | None = None
        accepted = False
        if ch is not None:
            if ch.psk_identities or self._psk_offered:
                resumption_offered, kind = True, "psk"
            elif ch.session_ticket:
                resumption_offered, kind = True, "ticket"
            elif ch.session_id and not ch.offers_tls13:
                resumption_offered, kind = True, "session_id"
        if sh is not None:
            if tls13:
                accepted = sh.selected_identity is not None
                kind = "psk" if accepted else kind
            else:
                accepted = self._resumed12 or (
                    bool(sh.session_id)
                    and ch is not None
                    and sh.session_id == ch.session_id
                    and not self._full_handshake_seen
                    and S2C in self._finished
                )
                if accepted and kind is None:
                    kind = "session_id"
                if accepted:
                    resumption_offered = True
        kx: str | None = None
        if suite is not None:
            if suite.tls13 and sh is not None:
                if sh.selected_identity is not None:
                    kx = "PSK_DHE" if sh.key_share_group is not None else "PSK"
                else:
                    kx = (
                        "ECDHE"
                        if sh.key_share_group is not None and sh.key_share_group < 0x100
                        else "DHE"
                    )
            else:
                kx = suite.key_exchange
        early_offered = self._early_offered
        decrypted_n = self._status_counts.get(DecryptStatus.DECRYPTED.value, 0)
        failures = sum(
            n for s, n in self._status_counts.items() if DecryptStatus(s) in _DECRYPTION_FAILURES
        )
        why: str | None = None
        decrypted = decrypted_n > 0 and failures == 0
        if not decrypted:
            if self._first_failure is not None:
                why = self._first_failure.value
            elif failures:
                why = DecryptStatus.INCOMPLETE.value
            else:
                why = "no_protected_records"
        cert = self.server_certificate
        ske = self.server_key_exchange
        ske_group = None
        if ske is not None and sh is not None:
            # RFC 8422 §5.4: a named_curve ServerKeyExchange (ECDHE suites only: a DHE
            # body starts with the prime's length, which may begin with the same byte)
            kx_name = cipher_suite_name(sh.cipher_suite)
            if "_ECDHE_" in kx_name or "_ECDH_anon_" in kx_name:
                ske_group = ske.named_group
        return TlsSummary(
            client_hello=ch is not None,
            server_hello=sh is not None,
            version=version,
            offered_versions=(ch.supported_versions or (ch.legacy_version,)) if ch is not None else (),
            cipher_suite=sh.cipher_suite if sh is not None else None,
            cipher_suite_name=cipher_suite_name(sh.cipher_suite) if sh is not None else None,
            cipher_suites_offered=ch.cipher_suites if ch is not None else (),
            key_exchange=kx,
            key_share_group=sh.key_share_group if sh is not None else None,
            key_exchange_group=ske_group if sh is None or sh.key_share_group is None
            else sh.key_share_group,
            sni=ch.server_name if ch is not None else None,
            alpn_offered=ch.alpn if ch is not None else (),
            alpn=(self.encrypted_extensions.alpn if tls13 and self.encrypted_extensions is not None
                  else (sh.alpn if sh is not None else None)),
            hello_retry_request=self.hello_retry_request is not None,
            resumption_offered=resumption_offered,
            resumption_accepted=accepted,
            resumption_kind=kind if resumption_offered or accepted else None,
            early_data_offered=early_offered,
            early_data_accepted=self._early_accepted if early_offered else None,
            handshake_complete={C2S, S2C} <= self._finished,
            server_certificate_lengths=cert.certificate_lengths if cert is not None else (),
            client_random=ch.random if ch is not None else None,
            key_updates=self._key_updates,
            alerts=tuple(self._alerts),
            records=self._records,
            decrypted_records=decrypted_n,
            undecrypted_records=failures,
            records_by_status=dict(self._status_counts),
            decrypted=decrypted,
            why_not=why,
            anomalies=len(self.anomalies),
            roles_swapped=self.roles_swapped,
        )  # fmt: skip


class _TrialProtection:
    """Early-data protection before the suite is known: the first candidate that
    authenticates is pinned for the rest of the epoch (AEAD tags make this unambiguous)."""

    __slots__ = ("suite", "_session", "_candidates")

    def __init__(self, session: TlsSession, candidates: list[Tls13Protection]) -> None:
        self._session = session
        self._candidates = candidates
        self.suite = candidates[0].suite

    def decrypt(
        self, content_type: int, version: int, fragment: bytes, seq: int
    ) -> tuple[int, bytes]:
        last: DissectError | None = None
        for i, p in enumerate(self._candidates):
            try:
                result = p.decrypt(content_type, version, fragment, seq)
            except AuthenticationFailed as exc:
                last = exc
                continue
            if i or len(self._candidates) > 1:
                self._candidates = [p]
                self.suite = p.suite
                self._session._early_suite = p.suite
            return result
        raise last if last is not None else AuthenticationFailed("no candidate suite")
