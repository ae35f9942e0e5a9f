"""QPACK (RFC 9204) for a passive observer: instruction parsing plus decoding via ``pylsqpack``.

Implements:

* RFC 9204 §4.1.1 — prefixed integers (RFC 7541 §5.1) and §4.1.2 — string literals
  (Huffman-coded per RFC 7541 §5.2, decoded with the ``hpack`` library's table);
* RFC 9204 §4.3 — encoder instructions (Set Dynamic Table Capacity, Insert with Name
  Reference, Insert with Literal Name, Duplicate) and §4.4 — decoder instructions (Section
  Acknowledgment, Stream Cancellation, Insert Count Increment), one-shot
  ``parse_encoder_instruction(buf, offset)`` / ``parse_decoder_instruction(buf, offset)``;
* RFC 9204 §4.5.1 — the encoded field section prefix (Required Insert Count, Base) with the
  §4.5.1.1 decoding of the Required Insert Count;
* :class:`QpackDecoder` — one direction's decoder state (RFC 9204 §2.2) wrapping
  ``pylsqpack.Decoder`` (ls-qpack): encoder-stream instructions in, field sections out, and
  blocked streams (§2.1.2) reported instead of raised.

Everything here raises only :class:`~dissectors.errors.DissectError` subclasses.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import pylsqpack
from hpack.exceptions import HPACKDecodingError
from hpack.huffman_table import decode_huffman

from ._wire import Buffer
from .errors import DissectError, LimitExceeded, Malformed, Truncated

__all__ = [
    "DEFAULT_BLOCKED_STREAMS",
    "DEFAULT_MAX_TABLE_CAPACITY",
    "MAX_INSTRUCTION_LENGTH",
    "DecodedFieldSection",
    "FieldSectionPrefix",
    "QpackBlockedError",
    "QpackDecoder",
    "QpackError",
    "QpackInstruction",
    "decode_prefix_int",
    "decode_required_insert_count",
    "parse_decoder_instruction",
    "parse_encoder_instruction",
    "parse_field_section_prefix",
]

#: RFC 9204 §5: SETTINGS_QPACK_MAX_TABLE_CAPACITY and SETTINGS_QPACK_BLOCKED_STREAMS both
#: default to zero (no dynamic table, no blocking).
DEFAULT_MAX_TABLE_CAPACITY: Final = 0
DEFAULT_BLOCKED_STREAMS: Final = 0
#: RFC 9204 §4.1.1: "QPACK implementations MUST be able to decode integers up to and
#: including 62 bits long."  Longer ones are refused rather than grown without bound.
MAX_INT_BITS: Final = 62
#: Cap on one encoder instruction (an inserted name + value).  The protocol bounds an entry
#: only by the table capacity, which is a varint; 1 MiB is far above any real header field
#: and bounds what a hostile encoder stream can make a streaming parser buffer.
MAX_INSTRUCTION_LENGTH: Final = 1 << 20

# RFC 9204 §4.3 / §4.4 instruction names (stable snake_case, used in rows)
SET_DYNAMIC_TABLE_CAPACITY: Final = "set_dynamic_table_capacity"
INSERT_WITH_NAME_REFERENCE: Final = "insert_with_name_reference"
INSERT_WITH_LITERAL_NAME: Final = "insert_with_literal_name"
DUPLICATE: Final = "duplicate"
SECTION_ACKNOWLEDGMENT: Final = "section_acknowledgment"
STREAM_CANCELLATION: Final = "stream_cancellation"
INSERT_COUNT_INCREMENT: Final = "insert_count_increment"
_INSERTS: Final = frozenset({INSERT_WITH_NAME_REFERENCE, INSERT_WITH_LITERAL_NAME, DUPLICATE})


class QpackError(Malformed):
    """ls-qpack refused an encoder instruction or a field section (RFC 9204 §6:
    QPACK_DECOMPRESSION_FAILED / QPACK_ENCODER_STREAM_ERROR)."""


class QpackBlockedError(DissectError):
    """Internal signal: the field section references entries not yet inserted (§2.1.2)."""


# ---------------------------------------------------------------------------------------
# Primitives
# ---------------------------------------------------------------------------------------
def decode_prefix_int(buf: Buffer, offset: int, prefix_bits: int) -> tuple[int, int]:
    """RFC 9204 §4.1.1 / RFC 7541 §5.1 N-bit prefix integer at ``buf[offset]``.

    Returns ``(value, next_offset)``; the bits above the prefix in the first octet are
    ignored (the caller reads them).  Raises :class:`Truncated` or :class:`Malformed`
    (more than 62 bits).
    """
    if offset >= len(buf):
        raise Truncated("prefix integer past end", offset=offset)
    mask = (1 << prefix_bits) - 1
    value = buf[offset] & mask
    pos = offset + 1
    if value < mask:
        return value, pos
    shift = 0
    while True:
        if pos >= len(buf):
            raise Truncated("prefix integer continues past end", offset=pos)
        b = buf[pos]
        pos += 1
        value += (b & 0x7F) << shift
        shift += 7
        if value >= 1 << MAX_INT_BITS or shift > MAX_INT_BITS + 7:
            raise Malformed("prefix integer longer than 62 bits", offset=offset)
        if not b & 0x80:
            return value, pos


def _string(buf: Buffer, offset: int, prefix_bits: int) -> tuple[bytes, bool, int]:
    """RFC 9204 §4.1.2 string literal: H bit just above an N-bit length prefix."""
    if offset >= len(buf):
        raise Truncated("string literal past end", offset=offset)
    huffman = bool(buf[offset] & (1 << prefix_bits))
    n, pos = decode_prefix_int(buf, offset, prefix_bits)
    if n > MAX_INSTRUCTION_LENGTH:
        raise LimitExceeded(f"string literal of {n} octets", offset=offset)
    if pos + n > len(buf):
        raise Truncated(f"string literal needs {n} octets", offset=pos)
    raw = bytes(buf[pos : pos + n])
    if huffman:
        try:
            raw = decode_huffman(raw)
        except (HPACKDecodingError, ValueError, IndexError, KeyError) as e:
            raise Malformed(f"bad Huffman string: {e}", offset=pos) from None
    return raw, huffman, pos + n


@dataclass(frozen=True, slots=True, kw_only=True)
class QpackInstruction:
    """One encoder (RFC 9204 §4.3) or decoder (§4.4) stream instruction.

    ``offset``/``length`` are in the QPACK stream's coordinates (including its stream-type
    octet).  ``kind`` is one of the snake_case instruction names.  ``value`` is the
    instruction's integer: the capacity, the name index (``static`` tells which table for
    Insert with Name Reference), the relative index (Duplicate), the stream id (Section
    Acknowledgment, Stream Cancellation) or the increment.  Inserts carry ``name`` (None
    for a name reference) and ``value_bytes``.  ``raw`` is the instruction's octets (what is
    fed to the decoder).  ``frame``/``ts_ns`` are the capture frame whose bytes completed it.
    """

    stream_id: int
    direction: str
    offset: int
    length: int
    kind: str
    value: int
    raw: bytes
    static: bool | None = None
    name: bytes | None = None
    value_bytes: bytes | None = None
    frame: int | None = None
    ts_ns: int | None = None

    @property
    def end(self) -> int:
        return self.offset + self.length

    @property
    def inserts(self) -> int:
        """Dynamic-table insertions done by this instruction (0 or 1)."""
        return 1 if self.kind in _INSERTS else 0


def parse_encoder_instruction(buf: Buffer, offset: int = 0) -> tuple[dict[str, object], int]:
    """One RFC 9204 §4.3 encoder instruction at ``buf[offset:]``: (fields, next_offset).

    The fields dict holds ``kind``, ``value`` and, for inserts, ``static``/``name``/
    ``value_bytes``.  Raises :class:`Truncated` when the instruction is incomplete.
    """
    if offset >= len(buf):
        raise Truncated("encoder instruction past end", offset=offset)
    first = buf[offset]
    if first & 0x80:  # 1Txxxxxx: Insert with Name Reference (§4.3.2)
        index, pos = decode_prefix_int(buf, offset, 6)
        value, _, pos = _string(buf, pos, 7)
        return {
            "kind": INSERT_WITH_NAME_REFERENCE,
            "value": index,
            "static": bool(first & 0x40),
            "value_bytes": value,
        }, pos
    if first & 0x40:  # 01Hxxxxx: Insert with Literal Name (§4.3.3)
        name, _, pos = _string(buf, offset, 5)
        value, _, pos = _string(buf, pos, 7)
        return {
            "kind": INSERT_WITH_LITERAL_NAME,
            "value": 0,
            "name": name,
            "value_bytes": value,
        }, pos
    if first & 0x20:  # 001xxxxx: Set Dynamic Table Capacity (§4.3.1)
        cap, pos = decode_prefix_int(buf, offset, 5)
        return {"kind": SET_DYNAMIC_TABLE_CAPACITY, "value": cap}, pos
    index, pos = decode_prefix_int(buf, offset, 5)  # 000xxxxx: Duplicate (§4.3.4)
    return {"kind": DUPLICATE, "value": index}, pos


def parse_decoder_instruction(buf: Buffer, offset: int = 0) -> tuple[dict[str, object], int]:
    """One RFC 9204 §4.4 decoder instruction at ``buf[offset:]``: (fields, next_offset)."""
    if offset >= len(buf):
        raise Truncated("decoder instruction past end", offset=offset)
    first = buf[offset]
    if first & 0x80:  # 1xxxxxxx: Section Acknowledgment (§4.4.1)
        sid, pos = decode_prefix_int(buf, offset, 7)
        return {"kind": SECTION_ACKNOWLEDGMENT, "value": sid}, pos
    if first & 0x40:  # 01xxxxxx: Stream Cancellation (§4.4.2)
        sid, pos = decode_prefix_int(buf, offset, 6)
        return {"kind": STREAM_CANCELLATION, "value": sid}, pos
    inc, pos = decode_prefix_int(buf, offset, 6)  # 00xxxxxx: Insert Count Increment (§4.4.3)
    if inc == 0:
        # §4.4.3: "An encoder that receives an Increment field equal to zero ... MUST treat
        # this as a connection error of type QPACK_DECODER_STREAM_ERROR."
        raise Malformed("Insert Count Increment of zero", offset=offset)
    return {"kind": INSERT_COUNT_INCREMENT, "value": inc}, pos


@dataclass(frozen=True, slots=True, kw_only=True)
class FieldSectionPrefix:
    """RFC 9204 §4.5.1: the Encoded Required Insert Count and the Base of a field section."""

    encoded_insert_count: int
    sign: bool
    delta_base: int
    length: int  # octets of the prefix


def parse_field_section_prefix(buf: Buffer, offset: int = 0) -> FieldSectionPrefix:
    """Parse the two-integer prefix of an encoded field section (§4.5.1)."""
    ric, pos = decode_prefix_int(buf, offset, 8)
    if pos >= len(buf):
        raise Truncated("field section prefix: Delta Base missing", offset=pos)
    sign = bool(buf[pos] & 0x80)
    delta, end = decode_prefix_int(buf, pos, 7)
    return FieldSectionPrefix(
        encoded_insert_count=ric, sign=sign, delta_base=delta, length=end - offset
    )


def decode_required_insert_count(
    encoded: int, *, max_table_capacity: int, total_inserts: int
) -> int:
    """RFC 9204 §4.5.1.1: the Required Insert Count from its encoded form.

    ``max_table_capacity`` is the decoder's SETTINGS_QPACK_MAX_TABLE_CAPACITY (MaxEntries =
    capacity // 32); ``total_inserts`` the inserts the decoder has received so far.
    """
    if encoded == 0:
        return 0
    max_entries = max_table_capacity // 32
    full_range = 2 * max_entries
    if encoded > full_range:
        raise Malformed(f"Encoded Required Insert Count {encoded} > 2*MaxEntries {full_range}")
    max_value = total_inserts + max_entries
    max_wrapped = (max_value // full_range) * full_range
    req = max_wrapped + encoded - 1
    if req > max_value:
        if req <= full_range:
            raise Malformed("Required Insert Count wraps below zero")
        req -= full_range
    if req == 0:
        raise Malformed("Required Insert Count decodes to zero with a non-zero encoding")
    return req


# ---------------------------------------------------------------------------------------
# The decoder
# ---------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class DecodedFieldSection:
    """A decoded field section: (name, value) pairs as UTF-8 text (bad octets escaped)."""

    headers: tuple[tuple[str, str], ...]
    required_insert_count: int | None
    decoder_stream: bytes  # what the receiving decoder would emit (§4.4); informational


def _text(b: bytes) -> str:
    return b.decode("utf-8", "backslashreplace")


class QpackDecoder:
    """One direction's QPACK decoder (RFC 9204 §2.2) over ``pylsqpack.Decoder``.

    ``max_table_capacity`` / ``blocked_streams`` are the values the *receiving* endpoint
    advertised (SETTINGS_QPACK_MAX_TABLE_CAPACITY / SETTINGS_QPACK_BLOCKED_STREAMS): the
    encoder's Required Insert Count encoding depends on the former (§4.5.1.1).

    :meth:`feed_encoder` takes encoder-stream octets (whole instructions give the most
    precise unblocking report) and returns the stream ids unblocked; :meth:`decode` returns
    ``None`` when the section is blocked (§2.1.2), then :meth:`resume` once unblocked.
    ``total_inserts`` counts inserts seen on the encoder stream.  After an encoder-stream
    error ``failed`` is set: the dynamic table is unknown from then on.
    """

    def __init__(self, max_table_capacity: int, blocked_streams: int) -> None:
        self.max_table_capacity = max_table_capacity
        self.blocked_streams = blocked_streams
        try:
            self._dec = pylsqpack.Decoder(max_table_capacity, blocked_streams)
        except (OverflowError, ValueError) as e:
            raise Malformed(f"bad QPACK settings: {e}") from None
        self.total_inserts = 0
        self.encoder_bytes = 0
        self.failed: str | None = None
        self._pending: dict[int, int | None] = {}  # blocked stream -> required insert count
        self._ibuf = bytearray()  # encoder-stream tail (an incomplete instruction)

    def feed_encoder(self, data: Buffer) -> list[int]:
        """Apply encoder-stream octets (§4.3); return the stream ids this unblocked.

        Any chunking works; feeding whole instructions makes "unblocked by which
        instruction" exact.  Inserts are counted for :meth:`required_insert_count`.
        """
        if self.failed:
            raise QpackError(f"encoder stream already failed: {self.failed}")
        data = bytes(data)
        try:
            unblocked = self._dec.feed_encoder(data)
        except pylsqpack.EncoderStreamError as e:
            self.failed = f"encoder stream error: {e}"
            raise QpackError(self.failed) from None
        self.encoder_bytes += len(data)
        self._ibuf += data
        pos = 0
        while pos < len(self._ibuf):
            try:
                fields, pos2 = parse_encoder_instruction(self._ibuf, pos)
            except Truncated:
                break
            except DissectError:  # ls-qpack accepted it; stop counting rather than guess
                self._ibuf.clear()
                pos = 0
                break
            if fields["kind"] in _INSERTS:
                self.total_inserts += 1
            pos = pos2
        del self._ibuf[:pos]
        return list(unblocked)

    def required_insert_count(self, field_section: bytes) -> int | None:
        """The section's Required Insert Count (§4.5.1.1), or None if its prefix is bad."""
        try:
            p = parse_field_section_prefix(field_section)
            return decode_required_insert_count(
                p.encoded_insert_count,
                max_table_capacity=self.max_table_capacity,
                total_inserts=self.total_inserts,
            )
        except DissectError:
            return None

    def decode(self, stream_id: int, field_section: bytes) -> DecodedFieldSection | None:
        """Decode one encoded field section (§4.5); ``None`` when blocked (§2.1.2)."""
        ric = self.required_insert_count(field_section)
        try:
            control, headers = self._dec.feed_header(stream_id, bytes(field_section))
        except pylsqpack.StreamBlocked:
            self._pending[stream_id] = ric
            return None
        except pylsqpack.DecompressionFailed as e:
            raise QpackError(f"decompression failed: {e}") from None
        except (ValueError, OverflowError, RuntimeError) as e:
            raise QpackError(f"decoder refused the section: {e}") from None
        return DecodedFieldSection(
            headers=tuple((_text(k), _text(v)) for k, v in headers),
            required_insert_count=ric,
            decoder_stream=bytes(control),
        )

    def resume(self, stream_id: int) -> DecodedFieldSection:
        """Finish a section that :meth:`feed_encoder` reported unblocked."""
        ric = self._pending.pop(stream_id, None)
        try:
            control, headers = self._dec.resume_header(stream_id)
        except pylsqpack.DecompressionFailed as e:
            raise QpackError(f"decompression failed: {e}") from None
        except (ValueError, OverflowError, RuntimeError, pylsqpack.StreamBlocked) as e:
            raise QpackError(f"cannot resume stream {stream_id}: {e}") from None
        return DecodedFieldSection(
            headers=tuple((_text(k), _text(v)) for k, v in headers),
            required_insert_count=ric,
            decoder_stream=bytes(control),
        )

    def cancel(self, stream_id: int) -> None:
        """Forget a blocked section (its stream was reset or the capture ended)."""
        if self._pending.pop(stream_id, "absent") != "absent":
            try:
                self._dec.cancel_stream(stream_id)
            except Exception:  # noqa: BLE001 - ls-qpack state is being discarded anyway
                pass

    @property
    def blocked(self) -> dict[int, int | None]:
        """Blocked stream id -> its Required Insert Count (None when unknown)."""
        return dict(self._pending)
