"""One byte cursor used by every parser in :mod:`dissectors`.

All integers are network byte order (big-endian) unless a method says otherwise.
Reading past the end raises :class:`~dissectors.errors.Truncated`, never
``IndexError`` or ``struct.error``.  QUIC variable-length integers follow
RFC 9000 §16.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from .errors import Malformed, Truncated

Buffer = bytes | bytearray | memoryview


class Cursor:
    """A read cursor over ``buf[start:end]``.

    ``pos`` is absolute in ``buf``; :meth:`pull_block` narrows the end for a
    length-prefixed sub-structure and checks that it was consumed exactly.
    """

    __slots__ = ("buf", "pos", "end")

    def __init__(self, buf: Buffer, pos: int = 0, end: int | None = None) -> None:
        self.buf = memoryview(buf) if not isinstance(buf, memoryview) else buf
        self.pos = pos
        self.end = len(self.buf) if end is None else end
        if not 0 <= pos <= self.end <= len(self.buf):
            raise Truncated(
                f"cursor window [{pos}, {end}) outside buffer of {len(self.buf)}", offset=pos
            )

    # -- state -------------------------------------------------------------
    @property
    def remaining(self) -> int:
        return self.end - self.pos

    def eof(self) -> bool:
        return self.pos >= self.end

    def _need(self, n: int) -> int:
        if n < 0:
            raise Malformed(f"negative length {n}", offset=self.pos)
        p = self.pos
        if p + n > self.end:
            raise Truncated(f"need {n} bytes at offset {p}, have {self.end - p}", offset=p)
        self.pos = p + n
        return p

    # -- fixed-size integers ----------------------------------------------
    def pull_u8(self) -> int:
        p = self._need(1)
        return self.buf[p]

    def pull_u16(self) -> int:
        p = self._need(2)
        b = self.buf
        return (b[p] << 8) | b[p + 1]

    def pull_u24(self) -> int:
        p = self._need(3)
        b = self.buf
        return (b[p] << 16) | (b[p + 1] << 8) | b[p + 2]

    def pull_u32(self) -> int:
        p = self._need(4)
        return int.from_bytes(self.buf[p : p + 4], "big")

    def pull_u64(self) -> int:
        p = self._need(8)
        return int.from_bytes(self.buf[p : p + 8], "big")

    def pull_uint(self, n: int) -> int:
        p = self._need(n)
        return int.from_bytes(self.buf[p : p + n], "big")

    def pull_varint(self) -> int:
        """QUIC variable-length integer (RFC 9000 §16): 2-bit length prefix."""
        p = self._need(1)
        first = self.buf[p]
        size = 1 << (first >> 6)
        if size == 1:
            return first & 0x3F
        self.pos = p  # re-read with the full size
        q = self._need(size)
        v = first & 0x3F
        for i in range(1, size):
            v = (v << 8) | self.buf[q + i]
        return v

    # -- bytes -------------------------------------------------------------
    def pull_bytes(self, n: int) -> bytes:
        p = self._need(n)
        return bytes(self.buf[p : p + n])

    def pull_view(self, n: int) -> memoryview:
        """Like :meth:`pull_bytes` without copying."""
        p = self._need(n)
        return self.buf[p : p + n]

    def pull_vector(self, len_bytes: int) -> bytes:
        """A ``<len_bytes>``-byte length prefix followed by that many bytes."""
        n = self.pull_uint(len_bytes)
        return self.pull_bytes(n)

    def skip(self, n: int) -> None:
        self._need(n)

    def peek_u8(self) -> int:
        if self.pos >= self.end:
            raise Truncated("peek past end", offset=self.pos)
        return self.buf[self.pos]

    def rest(self) -> bytes:
        p = self.pos
        self.pos = self.end
        return bytes(self.buf[p : self.end])

    @contextmanager
    def pull_block(self, len_bytes: int) -> Iterator[Cursor]:
        """Read a ``len_bytes`` length prefix and yield a cursor limited to that block.

        On exit the block must be consumed exactly (RFC 8446 §3 vectors are
        self-delimiting); leftovers raise :class:`Malformed`.
        """
        n = self.pull_uint(len_bytes)
        start = self._need(n)
        sub = Cursor(self.buf, start, start + n)
        yield sub
        if sub.pos != sub.end:
            raise Malformed(f"{sub.end - sub.pos} unread bytes in a {n}-byte block", offset=sub.pos)


def encode_varint(value: int) -> bytes:
    """Encode a QUIC variable-length integer (RFC 9000 §16), shortest form."""
    if value < 0:
        raise ValueError("varint must be non-negative")
    if value < 1 << 6:
        return value.to_bytes(1, "big")
    if value < 1 << 14:
        return (value | 0x4000).to_bytes(2, "big")
    if value < 1 << 30:
        return (value | 0x8000_0000).to_bytes(4, "big")
    if value < 1 << 62:
        return (value | 0xC000_0000_0000_0000).to_bytes(8, "big")
    raise ValueError("varint too large")


#: Digits accepted by :func:`ascii_decimal` by default: every protocol number we read
#: (a body length, a status code, a gRPC status, a retry delay) fits in 19 digits
#: (< 2^63); longer is not a number any peer sends, and ``int()`` of a hostile
#: 100,000-digit string costs quadratic time (Python 3.11 refuses past 4,300 digits).
MAX_DECIMAL_DIGITS = 19


def ascii_decimal(
    text: str | bytes | bytearray | None, *, max_digits: int = MAX_DECIMAL_DIGITS
) -> int | None:
    """The value of a protocol integer written as ``1*DIGIT``, or None.

    The one parser of every decimal number on the wire (HTTP/1.1 Content-Length and
    status, HTTP/2 and HTTP/3 ``:status``, ``grpc-status``, SSE ``retry``,
    ``Retry-After``).  DIGIT is ASCII ``0``–``9`` only (RFC 5234 Appendix B.1, used by
    RFC 9110 §5.6.1 and RFC 9112); ``str.isdigit()`` also accepts ``²`` and ``٣`` (and
    ``int()`` then raises on the first and reads the second), ``int()`` accepts
    ``" 7"``, ``"+7"`` and ``"7_0"``.  None for an empty string, anything else than
    ASCII digits, or more than ``max_digits`` of them.
    """
    if text is None:
        return None
    if isinstance(text, str):
        if not text.isascii():
            return None
        raw = text.encode("ascii")
    else:
        raw = bytes(text)
    if not 0 < len(raw) <= max_digits or not raw.isdigit():  # bytes.isdigit: ASCII only
        return None
    return int(raw)
