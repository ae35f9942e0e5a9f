"""One QUIC connection, sans-I/O: datagrams in, packet records and reassembled streams out.

:class:`QuicConnection` is fed the UDP payloads of one connection (the caller groups
datagrams by UDP 5-tuple and passes both directions in capture order) and, for each
datagram, returns a :class:`PacketRecord` per coalesced packet (RFC 9000 §12.2).  It:

* derives Initial keys from the client's first Destination Connection ID (RFC 9001 §5.2;
  after a Retry, from the Retry's Source Connection ID, RFC 9000 §17.2.5.2) and verifies
  Retry integrity tags (RFC 9001 §5.8);
* takes Handshake, 0-RTT and 1-RTT secrets from an NSS key log keyed by the ClientHello
  random (``CLIENT_HANDSHAKE_TRAFFIC_SECRET``, ``SERVER_HANDSHAKE_TRAFFIC_SECRET``,
  ``CLIENT_EARLY_TRAFFIC_SECRET``, ``CLIENT_TRAFFIC_SECRET_0``, ``SERVER_TRAFFIC_SECRET_0``)
  with the suite of the ServerHello (RFC 9001 §5.1); follows key updates (RFC 9001 §6);
* removes header protection and reconstructs packet numbers per space and direction
  (RFC 9001 §5.4, RFC 9000 App. A.3);
* reassembles CRYPTO data per packet number space into TLS handshake messages (RFC 9001
  §4.1.3) and decodes ClientHello / ServerHello / EncryptedExtensions for the client
  random, SNI, ALPN and cipher suite;
* reassembles STREAM data per (stream id, direction) with retransmissions and holes
  (RFC 9000 §2.2) and keeps one :class:`StreamFrameRow` per STREAM frame;
* learns connection IDs (long-header SCIDs and NEW_CONNECTION_ID, RFC 9000 §5.1.1) to
  find the DCID length of short headers: client→server short headers carry a
  server-issued CID, server→client ones a client-issued CID.

A packet that cannot be decrypted is a record with ``decrypted=False`` and a ``reason``
("no keys for 1-RTT: …", "authentication failed", …), never garbage.  Nothing here
raises on bad input; what does not parse becomes a reason or an :class:`Anomaly` row.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from ..errors import DissectError
from ..tls.handshake import (
    MAX_HANDSHAKE_MESSAGE_LENGTH,
    ClientHello,
    EncryptedExtensions,
    HandshakeLimitExceeded,
    HandshakeMessage,
    HandshakeReassembler,
    HandshakeType,
    HelloRetryRequest,
    ServerHello,
    decode_handshake,
)
from ..tls.keylog import KeyLog, Secret
from ..tls.suites import cipher_suite_name
from .crypto import (
    QUIC_SUITES,
    AuthenticationFailed,
    PacketProtection,
    QuicSuite,
    UnsupportedVersion,
    initial_protection,
    verify_retry,
)
from .frames import (
    ConnectionClose,
    Crypto,
    Frame,
    FrameError,
    HandshakeDone,
    NewConnectionId,
    ResetStream,
    Stream,
    frame_allowed,
    frame_name,
    parse_frames,
)
from .packet import (
    MAX_CID_LENGTH,
    DcidLength,
    DcidLengthUnknown,
    PacketHeader,
    PacketSpace,
    PacketType,
    parse_packet_header,
    version_name,
)
from .reassembly import MAX_REASSEMBLY_BYTES, Reassembler, StreamData

__all__ = [
    "Anomaly",
    "HandshakeEvent",
    "HandshakeTiming",
    "KeylogSecrets",
    "PacketRecord",
    "QuicConnection",
    "StreamFrameRow",
    "TlsMessageRow",
]

C2S: Final = "c2s"
S2C: Final = "s2c"
_PEER: Final = {C2S: S2C, S2C: C2S}

#: RFC 9000 §14.1: "A server MUST discard an Initial packet that is carried in a UDP
#: datagram with a payload that is smaller than the smallest allowed maximum datagram
#: size of 1200 bytes."
MIN_INITIAL_DATAGRAM: Final = 1200

#: Streams reassembled per connection (:meth:`QuicConnection.streams`).  RFC 9000 §4.6
#: lets a peer open up to 2^60; an HTTP/3 connection opens one per request.  Data of
#: later streams is counted (:attr:`QuicConnection.stream_bytes_over_limit`), not kept.
MAX_STREAMS: Final = 10_000
#: A CRYPTO frame ending past this offset of its packet number space is implausible: a
#: handshake flight is a few kilobytes (a long certificate chain ~100 KiB), and a
#: receiver may close with CRYPTO_BUFFER_EXCEEDED past its buffer (RFC 9000 §7.5).
#: Its data is not buffered; a ``crypto_offset_implausible`` anomaly counts it.
MAX_CRYPTO_OFFSET: Final = 4 * MAX_HANDSHAKE_MESSAGE_LENGTH

#: Secrets by client_random: a :class:`KeyLog` or ``{client_random: {label: bytes}}``.
KeylogSecrets = KeyLog | Mapping[bytes, Mapping[str, Any]] | None

_LABELS: Final = {
    (PacketSpace.HANDSHAKE, C2S): "CLIENT_HANDSHAKE_TRAFFIC_SECRET",
    (PacketSpace.HANDSHAKE, S2C): "SERVER_HANDSHAKE_TRAFFIC_SECRET",
    ("0rtt", C2S): "CLIENT_EARLY_TRAFFIC_SECRET",
    (PacketSpace.APPLICATION, C2S): "CLIENT_TRAFFIC_SECRET_0",
    (PacketSpace.APPLICATION, S2C): "SERVER_TRAFFIC_SECRET_0",
}
_KEY_NAMES: Final = {
    PacketType.INITIAL: "Initial",
    PacketType.HANDSHAKE: "Handshake",
    PacketType.ZERO_RTT: "0-RTT",
    PacketType.ONE_RTT: "1-RTT",
}


# ---------------------------------------------------------------------------------------
# Records
# ---------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class PacketRecord:
    """One QUIC packet of a datagram.

    ``offset``/``length`` locate the packet in its datagram; ``index`` is its position
    among the datagram's coalesced packets.  ``packet_number`` is known once header
    protection is removed; ``decrypted`` with ``reason`` None means the payload
    authenticated and ``frames`` are its frames.  Retry and Version Negotiation packets
    are not encrypted (``decrypted`` False, ``reason`` says so).
    """

    frame: int
    ts_ns: int
    direction: str
    index: int
    offset: int
    length: int
    packet_type: PacketType | None
    version: int | None
    dcid: bytes
    scid: bytes
    packet_number: int | None = None
    pn_length: int | None = None
    key_phase: int | None = None
    decrypted: bool = False
    reason: str | None = None
    payload_length: int | None = None
    token: bytes = b""
    frames: tuple[Frame, ...] = ()
    supported_versions: tuple[int, ...] = ()
    retry_integrity_ok: bool | None = None
    anomalies: tuple[str, ...] = ()
    header: bytes = b""  # the unprotected header (first byte .. packet number), once decrypted
    plaintext: bytes | None = field(default=None, repr=False)  # kept with keep_plaintext=True

    @property
    def space(self) -> PacketSpace | None:
        return {
            PacketType.INITIAL: PacketSpace.INITIAL,
            PacketType.HANDSHAKE: PacketSpace.HANDSHAKE,
            PacketType.ZERO_RTT: PacketSpace.APPLICATION,
            PacketType.ONE_RTT: PacketSpace.APPLICATION,
        }.get(self.packet_type)  # type: ignore[arg-type]

    @property
    def frame_types(self) -> tuple[int, ...]:
        return tuple(f.frame_type for f in self.frames)

    @property
    def frame_names(self) -> tuple[str, ...]:
        return tuple(frame_name(f.frame_type) for f in self.frames)


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamFrameRow:
    """One STREAM frame as received; ``direction`` is the sender's (c2s / s2c).

    ``retransmission`` is True when some of its bytes were already received (or it
    repeats a known FIN with no data); ``contiguous_end`` is the first missing stream
    offset after this frame (what the application could have read).
    """

    frame: int
    ts_ns: int
    direction: str
    packet_number: int
    stream_id: int
    offset: int
    length: int
    fin: bool
    retransmission: bool
    new_bytes: int
    duplicate_bytes: int
    contiguous_end: int


@dataclass(frozen=True, slots=True, kw_only=True)
class TlsMessageRow:
    """A TLS handshake message completed by the CRYPTO data of ``frame``."""

    frame: int
    ts_ns: int
    direction: str
    space: PacketSpace
    msg_type: int
    name: str
    offset: int
    length: int
    decoded: Any = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Anomaly:
    name: str
    frame: int | None
    detail: str


@dataclass(frozen=True, slots=True, kw_only=True)
class HandshakeEvent:
    frame: int
    ts_ns: int


@dataclass(frozen=True, slots=True, kw_only=True)
class HandshakeTiming:
    """When the handshake steps were seen (first occurrence of each)."""

    client_initial: HandshakeEvent | None = None
    version_negotiation: HandshakeEvent | None = None
    retry: HandshakeEvent | None = None
    server_initial: HandshakeEvent | None = None
    client_hello: HandshakeEvent | None = None  # ClientHello complete (last CRYPTO byte)
    server_hello: HandshakeEvent | None = None
    server_finished: HandshakeEvent | None = None
    client_finished: HandshakeEvent | None = None
    handshake_done: HandshakeEvent | None = None
    first_1rtt_c2s: HandshakeEvent | None = None
    first_1rtt_s2c: HandshakeEvent | None = None

    @staticmethod
    def _ms(a: HandshakeEvent | None, b: HandshakeEvent | None) -> float | None:
        return None if a is None or b is None else (b.ts_ns - a.ts_ns) / 1e6

    @property
    def handshake_ms(self) -> float | None:
        """Client's first Initial → client Finished (the client's handshake complete)."""
        return self._ms(self.client_initial, self.client_finished)

    @property
    def confirmed_ms(self) -> float | None:
        """Client's first Initial → HANDSHAKE_DONE (RFC 9001 §4.1.2 handshake confirmed)."""
        return self._ms(self.client_initial, self.handshake_done)

    @property
    def server_hello_ms(self) -> float | None:
        return self._ms(self.client_initial, self.server_hello)


# ---------------------------------------------------------------------------------------
# Key state
# ---------------------------------------------------------------------------------------
class _Phases:
    """1-RTT keys of one direction for one suite: current phase, next, previous (§6)."""

    __slots__ = ("current", "phase", "previous", "_next", "updates")

    def __init__(self, prot: PacketProtection) -> None:
        self.current = prot
        self.phase = 0
        self.previous: PacketProtection | None = None
        self._next: PacketProtection | None = None
        self.updates = 0

    @property
    def next(self) -> PacketProtection:
        if self._next is None:
            self._next = self.current.next_phase()
        return self._next

    def rotate(self) -> None:
        self.previous = self.current
        self.current = self.next
        self._next = None
        self.phase ^= 1
        self.updates += 1


class _Dir:
    __slots__ = ("largest", "crypto", "hs", "hs_failed", "prot", "phases", "cids", "first_pn")

    def __init__(self, max_bytes: int, max_message: int) -> None:
        self.largest = {s: -1 for s in PacketSpace}
        self.crypto = {s: Reassembler(max_bytes=max_bytes) for s in PacketSpace}
        self.hs = {
            s: HandshakeReassembler(max_message_length=max_message, skip_oversize=True)
            for s in PacketSpace
        }
        self.hs_failed: set[PacketSpace] = set()
        # candidate protections per key kind ("handshake", "0rtt"), narrowed to one on success
        self.prot: dict[str, list[PacketProtection]] = {}
        self.phases: list[_Phases] | None = None
        self.cids: set[bytes] = set()  # connection IDs issued by this endpoint
        self.first_pn: dict[PacketSpace, int] = {}


class _NoKeys(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


# ---------------------------------------------------------------------------------------
# The connection
# ---------------------------------------------------------------------------------------
class QuicConnection:
    """Sans-I/O dissector of one QUIC connection (see the module docstring).

    ``keylog_secrets`` maps client_random → {key log label: secret} (a
    :class:`~dissectors.tls.keylog.KeyLog` works as is); without it only Initial packets
    decrypt.  ``keep_plaintext`` keeps each packet's decrypted payload in its record.
    """

    def __init__(
        self,
        keylog_secrets: KeylogSecrets = None,
        *,
        max_stream_bytes: int = MAX_REASSEMBLY_BYTES,
        keep_plaintext: bool = False,
        max_streams: int = MAX_STREAMS,
        max_handshake_message: int = MAX_HANDSHAKE_MESSAGE_LENGTH,
    ) -> None:
        self._keylog = keylog_secrets
        self._keep_plaintext = keep_plaintext
        self._max_bytes = max_stream_bytes
        self._max_streams = max_streams
        self._max_message = max_handshake_message
        self._max_crypto = 4 * max_handshake_message
        self._over: set[tuple[int, str]] = set()  # (stream, dir) beyond max_streams
        #: STREAM data bytes of the streams beyond ``max_streams`` (counted, not kept)
        self.stream_bytes_over_limit = 0
        self.packets: list[PacketRecord] = []
        self.stream_frames: list[StreamFrameRow] = []
        self.tls_messages: list[TlsMessageRow] = []
        self.anomalies: list[Anomaly] = []
        self.version: int | None = None  # the version the connection uses (known versions)
        self.first_version: int | None = None  # of the first long header, known or not
        self.client_dcid: bytes | None = None  # DCID of the client's first Initial
        self.client_random: bytes | None = None
        self.sni: str | None = None
        self.alpn_offered: tuple[str, ...] = ()
        self.tls_versions_offered: tuple[int, ...] = ()  # the ClientHello's supported_versions
        self.alpn: str | None = None
        self.cipher_suite: int | None = None
        self.key_share_group: int | None = None  # the ServerHello's key_share (RFC 8446 §4.2.8)
        self.client_scid: bytes | None = None  # SCID of the client's first Initial
        self.server_scid: bytes | None = None  # SCID of the server's first Initial/Handshake
        self.hello_retry_request = False
        self.supported_versions: tuple[int, ...] = ()  # from Version Negotiation
        self.retry_scid: bytes | None = None
        self.close: ConnectionClose | None = None
        self._timing: dict[str, HandshakeEvent] = {}
        self._dirs = {
            C2S: _Dir(max_stream_bytes, max_handshake_message),
            S2C: _Dir(max_stream_bytes, max_handshake_message),
        }
        self._key_dcid: bytes | None = None
        self._client_version: int | None = None  # version of the client's latest Initial
        # DCIDs of the client's Initials, in order (the ODCIDs a Retry may answer)
        self._initial_dcids: dict[bytes, None] = {}
        self._initial: dict[tuple[int, bytes], tuple[PacketProtection, PacketProtection]] = {}
        self._streams: dict[tuple[int, str], Reassembler] = {}
        self._resets: dict[tuple[int, str], int] = {}
        self._dcid_cache: dict[str, tuple[int, list[bytes], int]] = {}

    # -- public views --------------------------------------------------------------
    @property
    def client_dcid_hex(self) -> str | None:
        return None if self.client_dcid is None else self.client_dcid.hex()

    @property
    def version_name(self) -> str:
        return version_name(self.version)

    @property
    def cipher_name(self) -> str | None:
        if self.cipher_suite is None:
            return None
        return cipher_suite_name(self.cipher_suite)

    @property
    def handshake(self) -> HandshakeTiming:
        return HandshakeTiming(**self._timing)

    @property
    def key_updates(self) -> dict[str, int]:
        """Key phase changes seen per direction (RFC 9001 §6)."""
        out = {}
        for d, st in self._dirs.items():
            out[d] = st.phases[0].updates if st.phases and len(st.phases) == 1 else 0
        return out

    def connection_ids(self, direction: str) -> frozenset[bytes]:
        """CIDs issued by the endpoint that sends ``direction`` (its SCIDs + NEW_CONNECTION_ID)."""
        return frozenset(self._dirs[direction].cids)

    def streams(self) -> list[tuple[int, str]]:
        """(stream_id, direction) of every stream that carried STREAM frames, sorted
        (at most ``max_streams``)."""
        return sorted(self._streams)

    @property
    def streams_over_limit(self) -> int:
        """Stream directions beyond ``max_streams`` (their data counted, not kept)."""
        return len(self._over)

    def stream_bytes(self, stream_id: int, direction: str) -> StreamData:
        """Reassembled data of one stream direction (``c2s``/``s2c``), holes listed."""
        if direction not in _PEER:
            raise ValueError(f"direction must be 'c2s' or 's2c', not {direction!r}")
        r = self._streams.get((stream_id, direction))
        if r is None:
            return StreamData(data=b"", chunks=(), gaps=(), final_size=None, fin=False)
        return r.snapshot()

    def crypto_bytes(self, space: PacketSpace, direction: str) -> StreamData:
        return self._dirs[direction].crypto[space].snapshot()

    # -- input ---------------------------------------------------------------------
    def feed(
        self, datagram: bytes | bytearray | memoryview, frame: int, ts_ns: int, from_client: bool
    ) -> list[PacketRecord]:
        """Dissect one UDP payload; return (and keep in :attr:`packets`) its packet records."""
        d = C2S if from_client else S2C
        buf = bytes(datagram)
        out: list[PacketRecord] = []
        off = 0
        first: PacketHeader | None = None
        while off < len(buf):
            if off and not any(buf[off:]):
                break  # zero bytes after the last packet: padding, not a packet
            try:
                hdr, nxt = parse_packet_header(buf, off, dcid_length=self._dcid_length(d, first))
            except DcidLengthUnknown:
                out.append(self._unknown_short(d, buf, off, frame, ts_ns, len(out)))
                break
            except DissectError as e:
                out.append(
                    PacketRecord(
                        frame=frame, ts_ns=ts_ns, direction=d, index=len(out), offset=off,
                        length=len(buf) - off, packet_type=None, version=None, dcid=b"",
                        scid=b"", reason=f"malformed header: {e}",
                    )
                )  # fmt: skip
                self._anomaly("malformed_packet", frame, f"{d} datagram offset {off}: {e}")
                break
            notes: list[str] = []
            if first is None:
                first = hdr
            elif hdr.dcid != first.dcid and hdr.packet_type is not PacketType.ONE_RTT:
                # RFC 9000 §12.2: "Receivers SHOULD ignore any subsequent packets with a
                # different Destination Connection ID than the first packet in the datagram."
                notes.append("coalesced_dcid_mismatch")
                self._anomaly("coalesced_dcid_mismatch", frame, f"{d} packet {len(out)}")
            out.append(self._packet(d, buf, hdr, frame, ts_ns, len(out), notes))
            off = nxt
        self.packets.extend(out)
        return out

    # -- internals: headers and CIDs ------------------------------------------------
    def short_dcid_candidates(self, direction: str) -> tuple[list[bytes], int] | None:
        """How the DCID length of a short header sent in ``direction`` is found now: the
        receiver's connection IDs longest first (the first that prefixes the bytes after
        the first byte gives the length) and the most common length (when none does);
        None while the receiver issued none (the length is unknown)."""
        cids = self._dirs[_PEER[direction]].cids  # the receiver issued the CIDs it is sent
        if not cids:
            return None
        # the sets only grow: their size says whether the answer changed
        got = self._dcid_cache.get(direction)
        if got is None or got[0] != len(cids):
            ordered = sorted(cids, key=len, reverse=True)
            got = (len(cids), ordered, Counter(len(c) for c in cids).most_common(1)[0][0])
            self._dcid_cache[direction] = got
        return got[1], got[2]

    def unkeyed_1rtt(self, direction: str) -> tuple[str, str] | None:
        """Why a 1-RTT packet sent in ``direction`` cannot be opened in the current state,
        when only :meth:`feed` can change that (no key log, or its ClientHello not seen):
        the ``reason`` of its record when the DCID length is known, and when it is not.
        None when keys may exist (the packet must be fed).  No side effect.

        Such a packet changes nothing in the connection: a caller may take a run of them
        as columns instead of feeding each (``pcapkit.sessions.quic.run_quic``)."""
        if self._dirs[direction].phases:
            return None
        why = self._one_rtt_missing(direction)
        if why is None:
            return None
        return why, f"unknown DCID length for short header ({why})"

    def _one_rtt_missing(self, d: str) -> str | None:
        """Why no 1-RTT keys of ``d`` can be derived now (before any were), or None."""
        try:
            self._key_precheck("1-RTT")
        except _NoKeys as e:
            return e.reason
        label = _LABELS[(PacketSpace.APPLICATION, d)]
        if self._secret(label) is None:
            return f"no keys for 1-RTT: key log has no {label} for this ClientHello"
        if self.version is None:
            return "no keys for 1-RTT: version unknown (no long header seen)"
        return None

    def _dcid_length(self, d: str, first: PacketHeader | None) -> DcidLength:
        if first is not None:
            return len(first.dcid)
        got = self.short_dcid_candidates(d)
        if got is None:
            return None
        ordered, common = got

        def resolve(rest: bytes) -> int:
            for c in ordered:
                if rest.startswith(c):
                    return len(c)
            return common

        return resolve

    def _unknown_short(
        self, d: str, buf: bytes, off: int, frame: int, ts_ns: int, index: int
    ) -> PacketRecord:
        """A short header before any CID of the receiver is known: guess the DCID length
        by trying each possible length against the 1-RTT keys."""
        try:
            phases = self._one_rtt(d)
        except _NoKeys as e:
            return PacketRecord(
                frame=frame, ts_ns=ts_ns, direction=d, index=index, offset=off,
                length=len(buf) - off, packet_type=PacketType.ONE_RTT, version=None, dcid=b"",
                scid=b"", reason=f"unknown DCID length for short header ({e.reason})",
            )  # fmt: skip
        for n in range(MAX_CID_LENGTH + 1):
            try:
                hdr, _ = parse_packet_header(buf, off, dcid_length=n)
            except DissectError:
                break
            rec = self._packet(d, buf, hdr, frame, ts_ns, index, [], phases_only=phases)
            if rec.decrypted:
                self._dirs[_PEER[d]].cids.add(hdr.dcid)
                return rec
        return PacketRecord(
            frame=frame, ts_ns=ts_ns, direction=d, index=index, offset=off,
            length=len(buf) - off, packet_type=PacketType.ONE_RTT, version=None, dcid=b"",
            scid=b"", reason="unknown DCID length for short header (no length decrypts)",
        )  # fmt: skip

    # -- internals: keys -------------------------------------------------------------
    def _secret(self, label: str) -> bytes | None:
        kl = self._keylog
        cr = self.client_random
        if kl is None or cr is None:
            return None
        s: Any
        if isinstance(kl, KeyLog):
            s = kl.get(cr, label)
        else:
            s = (kl.get(cr) or {}).get(label)
        if s is None:
            return None
        return s.reveal() if isinstance(s, Secret) else bytes(s)

    def _suites_for(self, secret: bytes) -> list[QuicSuite]:
        if self.cipher_suite is not None:
            s = QUIC_SUITES.get(self.cipher_suite)
            if s is None:
                raise _NoKeys(f"unsupported cipher suite 0x{self.cipher_suite:04x}")
            return [s]
        # suite not seen yet (e.g. 0-RTT, or ServerHello lost): every suite of that hash
        return [s for s in QUIC_SUITES.values() if s.hash_length == len(secret)]

    def _tls_keys(self, d: str, kind: str, version: int) -> list[PacketProtection]:
        st = self._dirs[d]
        have = st.prot.get(kind)
        if have:
            return have
        space: Any = PacketSpace.HANDSHAKE if kind == "handshake" else "0rtt"
        label = _LABELS.get((space, d))
        what = "Handshake" if kind == "handshake" else "0-RTT"
        if label is None:
            raise _NoKeys(f"no keys for {what}: not sent in this direction")
        self._key_precheck(what)
        secret = self._secret(label)
        if secret is None:
            raise _NoKeys(f"no keys for {what}: key log has no {label} for this ClientHello")
        prots = [PacketProtection(version, s, secret) for s in self._suites_for(secret)]
        st.prot[kind] = prots
        return prots

    def _key_precheck(self, what: str) -> None:
        if self._keylog is None:
            raise _NoKeys(f"no keys for {what}: no key log")
        if self.client_random is None:
            raise _NoKeys(f"no keys for {what}: ClientHello not seen")

    def _one_rtt(self, d: str) -> list[_Phases]:
        st = self._dirs[d]
        if st.phases:
            return st.phases
        why = self._one_rtt_missing(d)
        if why is not None:
            raise _NoKeys(why)
        secret = self._secret(_LABELS[(PacketSpace.APPLICATION, d)])
        version = self.version
        assert secret is not None and version is not None
        st.phases = [
            _Phases(PacketProtection(version, s, secret)) for s in self._suites_for(secret)
        ]
        return st.phases

    def _new_attempt(self) -> None:
        """After Version Negotiation the client starts over in another version (RFC 9000
        §6.2, RFC 9368 §2.1): a new ClientHello at CRYPTO offset 0, with its own random
        (the key log's key); the Initial CRYPTO streams and the hello facts restart."""
        for st in self._dirs.values():
            st.crypto[PacketSpace.INITIAL] = Reassembler(max_bytes=self._max_bytes)
            st.hs[PacketSpace.INITIAL] = HandshakeReassembler(
                max_message_length=self._max_message, skip_oversize=True
            )
            st.hs_failed.discard(PacketSpace.INITIAL)
            st.largest[PacketSpace.INITIAL] = -1
        self.client_random = None
        self.sni = None
        self.alpn_offered = ()
        self.tls_versions_offered = ()

    def _initial_keys(self, d: str, version: int, dcid: bytes) -> PacketProtection:
        pair = self._initial.get((version, dcid))
        if pair is None:
            pair = initial_protection(version, dcid)
            self._initial[(version, dcid)] = pair
        return pair[0] if d == C2S else pair[1]

    # -- internals: packets -----------------------------------------------------------
    def _packet(
        self,
        d: str,
        buf: bytes,
        hdr: PacketHeader,
        frame: int,
        ts_ns: int,
        index: int,
        notes: list[str],
        *,
        phases_only: list[_Phases] | None = None,
    ) -> PacketRecord:
        st = self._dirs[d]
        pt = hdr.packet_type
        base: dict[str, Any] = {
            "frame": frame, "ts_ns": ts_ns, "direction": d, "index": index,
            "offset": hdr.offset, "length": hdr.length, "packet_type": pt,
            "version": hdr.version, "dcid": hdr.dcid, "scid": hdr.scid, "token": hdr.token,
        }  # fmt: skip
        if hdr.long_header and pt is not PacketType.VERSION_NEGOTIATION:
            if self.first_version is None:
                self.first_version = hdr.version
        if hdr.long_header and pt not in (
            PacketType.VERSION_NEGOTIATION,
            PacketType.UNKNOWN_VERSION,
        ):
            st.cids.add(hdr.scid)
            if pt is not PacketType.RETRY and (d == S2C or self.version is None):
                self.version = hdr.version
        if pt is PacketType.VERSION_NEGOTIATION:
            self.supported_versions = hdr.supported_versions
            self._event("version_negotiation", frame, ts_ns)
            return PacketRecord(
                **base,
                supported_versions=hdr.supported_versions,
                reason="Version Negotiation packets are not protected",
            )
        if pt is PacketType.UNKNOWN_VERSION:
            if d == C2S:
                # the client's first packet opens the connection (an Initial, RFC 9000 §7)
                # even in a version this package cannot read: a Version Negotiation that
                # answers it costs the round trip from here
                self._event("client_initial", frame, ts_ns)
            return PacketRecord(**base, reason=f"unsupported version 0x{hdr.version or 0:08x}")
        if pt is PacketType.RETRY:
            return self._retry(d, buf, hdr, base, frame, ts_ns)
        if pt in (PacketType.INITIAL, PacketType.HANDSHAKE) and d == S2C:
            if self.server_scid is None:
                self.server_scid = hdr.scid
        if pt is PacketType.INITIAL:
            if d == C2S:
                if (
                    self._client_version is not None
                    and hdr.version != self._client_version
                    and "version_negotiation" in self._timing
                ):
                    self._new_attempt()
                self._client_version = hdr.version
                if self.client_dcid is None:
                    self.client_dcid = hdr.dcid
                    self.client_scid = hdr.scid
                    self._event("client_initial", frame, ts_ns)
                if self._key_dcid is None:
                    self._key_dcid = hdr.dcid
                self._initial_dcids.setdefault(hdr.dcid, None)
                if len(buf) < MIN_INITIAL_DATAGRAM:
                    notes.append("small_initial_datagram")
                    self._anomaly(
                        "small_initial_datagram",
                        frame,
                        f"client Initial in a {len(buf)}-byte datagram",
                    )
            else:
                self._event("server_initial", frame, ts_ns)
        space = hdr.space
        assert space is not None and hdr.pn_offset is not None
        pkt = memoryview(buf)[hdr.offset : hdr.end]
        pn_off = hdr.pn_offset - hdr.offset
        largest = st.largest[space]
        key_phase: int | None = None
        try:
            if pt is PacketType.ONE_RTT:
                phases = phases_only if phases_only is not None else self._one_rtt(d)
                header, pn, payload, key_phase = self._open_1rtt(st, phases, pkt, pn_off, largest)
            else:
                assert hdr.version is not None
                prots = self._long_keys(d, pt, hdr)
                header, pn, payload = self._open_long(d, st, pt, prots, hdr, pkt, pn_off, largest)
        except _NoKeys as e:
            return PacketRecord(**base, reason=e.reason, anomalies=tuple(notes))
        except AuthenticationFailed:
            return PacketRecord(**base, reason="authentication failed", anomalies=tuple(notes))
        except DissectError as e:
            return PacketRecord(**base, reason=f"malformed: {e}", anomalies=tuple(notes))
        first = header[0]
        if first & (0x0C if hdr.long_header else 0x18):
            # RFC 9000 §17.2 / §17.3.1: "An endpoint MUST treat receipt of a packet that has
            # a non-zero value for these bits after removing both packet and header
            # protection as a connection error of type PROTOCOL_VIOLATION."
            notes.append("reserved_bits_set")
            self._anomaly("reserved_bits_set", frame, f"{d} {pt.value} pn {pn}")
        if pn > largest:
            st.largest[space] = pn
        st.first_pn.setdefault(space, pn)
        if pt is PacketType.ONE_RTT:
            self._event("first_1rtt_" + d, frame, ts_ns)
        reason = None
        try:
            frames = tuple(parse_frames(payload))
        except FrameError as e:
            frames = e.frames
            reason = f"malformed: {e}"
            notes.append("malformed_frame")
            self._anomaly("malformed_frame", frame, f"{d} {pt.value} pn {pn}: {e}")
        else:
            self._apply(d, pt, space, pn, frames, frame, ts_ns, notes)
        return PacketRecord(
            **base,
            packet_number=pn,
            pn_length=(first & 3) + 1,
            key_phase=key_phase,
            decrypted=True,
            reason=reason,
            payload_length=len(payload),
            frames=frames,
            anomalies=tuple(notes),
            header=header,
            plaintext=payload if self._keep_plaintext else None,
        )

    def _long_keys(self, d: str, pt: PacketType, hdr: PacketHeader) -> list[PacketProtection]:
        assert hdr.version is not None
        if pt is PacketType.INITIAL:
            if self._key_dcid is None:
                raise _NoKeys("no keys for Initial: client's first Initial not seen")
            try:
                return [self._initial_keys(d, hdr.version, self._key_dcid)]
            except UnsupportedVersion as e:
                raise _NoKeys(f"no keys for Initial: {e}") from None
        if pt is PacketType.HANDSHAKE:
            return self._tls_keys(d, "handshake", hdr.version)
        return self._tls_keys(d, "0rtt", hdr.version)

    def _open_long(
        self,
        d: str,
        st: _Dir,
        pt: PacketType,
        prots: list[PacketProtection],
        hdr: PacketHeader,
        pkt: memoryview,
        pn_off: int,
        largest: int,
    ) -> tuple[bytes, int, bytes]:
        for p in prots:
            try:
                header, pn, payload = p.unprotect(pkt, pn_off, len(pkt), largest)
            except AuthenticationFailed:
                continue
            self._keep(st, pt, p)
            return header, pn, payload
        if pt is PacketType.INITIAL and d == C2S and hdr.version is not None:
            # A client Initial with another DCID: a Retry we did not see, or a new
            # connection attempt on the same 5-tuple.  Its own DCID may key it.
            if hdr.dcid != self._key_dcid:
                p = self._initial_keys(d, hdr.version, hdr.dcid)
                header, pn, payload = p.unprotect(pkt, pn_off, len(pkt), largest)
                self._key_dcid = hdr.dcid
                return header, pn, payload
        raise AuthenticationFailed("no key authenticates")

    def _keep(self, st: _Dir, pt: PacketType, p: PacketProtection) -> None:
        kind = "handshake" if pt is PacketType.HANDSHAKE else "0rtt"
        if pt is not PacketType.INITIAL and len(st.prot.get(kind, ())) > 1:
            st.prot[kind] = [p]

    def _open_1rtt(
        self, st: _Dir, phases: list[_Phases], pkt: memoryview, pn_off: int, largest: int
    ) -> tuple[bytes, int, bytes, int]:
        for ph in phases:
            first, pn_len, _ = ph.current.remove_header_protection(pkt, pn_off, len(pkt))
            bit = (first >> 2) & 1
            tries: list[tuple[PacketProtection, bool]] = (
                [(ph.current, False)]
                if bit == ph.phase
                else [(ph.next, True)] + ([(ph.previous, False)] if ph.previous else [])
            )
            for prot, rotate in tries:
                try:
                    header, pn, payload = prot.unprotect(pkt, pn_off, len(pkt), largest)
                except AuthenticationFailed:
                    continue
                if rotate:
                    ph.rotate()
                if len(phases) > 1:
                    st.phases = [ph]
                return header, pn, payload, bit
        raise AuthenticationFailed("no 1-RTT key authenticates")

    def _retry(
        self, d: str, buf: bytes, hdr: PacketHeader, base: dict[str, Any], frame: int, ts_ns: int
    ) -> PacketRecord:
        """RFC 9001 §5.8: the Retry Integrity Tag is computed over the Destination
        Connection ID of the client Initial the Retry answers (the ODCID).  A server may
        answer several client Initials (retransmissions of the first one) with a Retry
        each: all are keyed by the client's *original* DCID, not by the SCID of an earlier
        Retry.  RFC 9000 §17.2.5.2: "A client MUST accept and process at most one Retry
        packet for each connection attempt" — only the first valid Retry re-keys the
        Initials; later ones are verified and kept, nothing more."""
        ok: bool | None = None
        notes: list[str] = []
        candidates = [c for c in (self.client_dcid, *self._initial_dcids) if c is not None]
        if d == S2C and candidates and hdr.version is not None:
            packet = buf[hdr.offset : hdr.end]
            ok = any(verify_retry(hdr.version, c, packet) for c in dict.fromkeys(candidates))
            if ok and self.retry_scid is None:
                # RFC 9000 §17.2.5.2: the client uses the Retry's SCID as its DCID, and
                # RFC 9001 §5.2 re-derives Initial keys from it.
                self._key_dcid = hdr.scid
                self.retry_scid = hdr.scid
                self._event("retry", frame, ts_ns)
            elif not ok:
                notes.append("retry_integrity_failed")
                self._anomaly(
                    "retry_integrity_failed", frame, "Retry integrity tag does not verify"
                )
        return PacketRecord(
            **base,
            retry_integrity_ok=ok,
            reason="Retry packets are not encrypted",
            anomalies=tuple(notes),
        )

    # -- internals: frames ---------------------------------------------------------------
    def _apply(
        self,
        d: str,
        pt: PacketType,
        space: PacketSpace,
        pn: int,
        frames: tuple[Frame, ...],
        frame: int,
        ts_ns: int,
        notes: list[str],
    ) -> None:
        for f in frames:
            if not frame_allowed(f.frame_type, pt):
                notes.append("frame_not_permitted")
                self._anomaly(
                    "frame_not_permitted",
                    frame,
                    f"{frame_name(f.frame_type)} in a {pt.value} packet",
                )
            if isinstance(f, Crypto):
                self._crypto(d, space, f, frame, ts_ns)
            elif isinstance(f, Stream):
                self._stream(d, pn, f, frame, ts_ns)
            elif isinstance(f, NewConnectionId):
                self._dirs[d].cids.add(f.connection_id)
            elif isinstance(f, HandshakeDone):
                self._event("handshake_done", frame, ts_ns)
            elif isinstance(f, ConnectionClose):
                if self.close is None:
                    self.close = f
            elif isinstance(f, ResetStream):
                self._resets.setdefault((f.stream_id, d), f.final_size)

    def _stream(self, d: str, pn: int, f: Stream, frame: int, ts_ns: int) -> None:
        key = (f.stream_id, d)
        r = self._streams.get(key)
        if r is None:
            if key in self._over or len(self._streams) >= self._max_streams:
                self._over.add(key)  # beyond max_streams: counted, not reassembled
                self.stream_bytes_over_limit += f.length
                return
            r = self._streams[key] = Reassembler(max_bytes=self._max_bytes)
        had_fin = r.final_size is not None
        dropped_before = r.dropped
        res = r.add(f.offset, f.data, fin=f.fin)
        if res.dropped_bytes and not dropped_before:
            self._anomaly(
                "reassembly_limit_exceeded",
                frame,
                f"stream {f.stream_id} {d}: data past {self._max_bytes} bytes held is counted, "
                f"not kept (from offset {f.offset})",
            )
        if res.conflict:
            self._anomaly(
                "stream_data_conflict", frame, f"stream {f.stream_id} {d} at offset {f.offset}"
            )
        if res.final_size_changed or res.beyond_final_size:
            self._anomaly(
                "final_size_error", frame, f"stream {f.stream_id} {d}: data or FIN past final size"
            )
        retrans = res.retransmission or (f.length == 0 and f.fin and had_fin)
        self.stream_frames.append(
            StreamFrameRow(
                frame=frame, ts_ns=ts_ns, direction=d, packet_number=pn, stream_id=f.stream_id,
                offset=f.offset, length=f.length, fin=f.fin, retransmission=retrans,
                new_bytes=res.new_bytes, duplicate_bytes=res.duplicate_bytes,
                contiguous_end=res.contiguous_end,
            )
        )  # fmt: skip

    def _crypto(self, d: str, space: PacketSpace, f: Crypto, frame: int, ts_ns: int) -> None:
        st = self._dirs[d]
        if f.offset + f.length > self._max_crypto:
            # no handshake reaches this offset: not buffered (the gap before it would
            # stall the handshake stream anyway), counted
            self._anomaly(
                "crypto_offset_implausible",
                frame,
                f"{d} {space.value} CRYPTO at offset {f.offset}, {f.length} bytes: past "
                f"{self._max_crypto}, skipped",
            )
            return
        res = st.crypto[space].add(f.offset, f.data)
        if res.conflict:
            self._anomaly(
                "crypto_data_conflict", frame, f"{d} {space.value} CRYPTO at offset {f.offset}"
            )
        data = st.crypto[space].read()
        if not data or space in st.hs_failed:
            return
        try:
            msgs = st.hs[space].feed(data)
        except HandshakeLimitExceeded as e:  # skipped by its declared length
            self._anomaly("tls_handshake_too_large", frame, f"{d} {space.value}: {e}")
            msgs = list(e.messages)
        except DissectError as e:
            st.hs_failed.add(space)
            self._anomaly("tls_handshake_malformed", frame, f"{d} {space.value}: {e}")
            msgs = list(getattr(e, "messages", ()))
        for m in msgs:
            self._tls(d, space, m, frame, ts_ns)

    def _tls(self, d: str, space: PacketSpace, m: HandshakeMessage, frame: int, ts_ns: int) -> None:
        try:
            name = HandshakeType(m.msg_type).name
        except ValueError:
            name = f"UNKNOWN({m.msg_type})"
        decoded: Any = None
        try:
            decoded = decode_handshake(m, tls13=True)
        except DissectError as e:
            self._anomaly("tls_handshake_malformed", frame, f"{d} {name}: {e}")
        if isinstance(decoded, HelloRetryRequest):
            name = "HELLO_RETRY_REQUEST"
        self.tls_messages.append(
            TlsMessageRow(
                frame=frame, ts_ns=ts_ns, direction=d, space=space, msg_type=m.msg_type,
                name=name, offset=m.offset, length=m.length, decoded=decoded,
            )
        )  # fmt: skip
        if isinstance(decoded, ClientHello) and d == C2S:
            if self.client_random is None:
                self.client_random = decoded.random
                self.sni = decoded.server_name
                self.alpn_offered = decoded.alpn
                self.tls_versions_offered = decoded.supported_versions
            self._event("client_hello", frame, ts_ns)
        elif isinstance(decoded, HelloRetryRequest):
            self.hello_retry_request = True
            self.cipher_suite = decoded.cipher_suite
        elif isinstance(decoded, ServerHello) and d == S2C:
            self.cipher_suite = decoded.cipher_suite
            self.key_share_group = decoded.key_share_group
            self._event("server_hello", frame, ts_ns)
            for st in self._dirs.values():  # drop candidates derived before the suite was known
                st.prot.pop("handshake", None)
                st.phases = None if st.phases and len(st.phases) > 1 else st.phases
        elif isinstance(decoded, EncryptedExtensions) and d == S2C:
            self.alpn = decoded.alpn
        elif m.msg_type == HandshakeType.FINISHED:
            self._event("server_finished" if d == S2C else "client_finished", frame, ts_ns)

    # -- internals: bookkeeping ------------------------------------------------------------
    def _event(self, name: str, frame: int, ts_ns: int) -> None:
        self._timing.setdefault(name, HandshakeEvent(frame=frame, ts_ns=ts_ns))

    def _anomaly(self, name: str, frame: int | None, detail: str) -> None:
        self.anomalies.append(Anomaly(name=name, frame=frame, detail=detail))
