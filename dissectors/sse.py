"""Server-Sent Events (``text/event-stream``), sans-I/O.

The event stream format and its interpretation follow the WHATWG HTML Living
Standard §9.2.5–§9.2.6 ("Parsing an event stream", "Interpreting an event
stream"):

* the stream is UTF-8 (a leading BOM is dropped; invalid sequences decode to
  U+FFFD, never an error); lines end with CRLF, LF or CR;
* a line starting with ``:`` is a comment (servers send them as heart-beats);
* ``field: value`` — one leading space of the value is removed; the fields
  ``event``, ``data``, ``id`` (ignored when it contains NULL) and ``retry`` (ASCII
  digits only) are interpreted, others ignored; a line without a colon is a field
  with an empty value;
* an empty line dispatches the event: its data is the ``data`` lines joined by
  LF; an event with no data is not dispatched (but resets the event type).

Offsets are in the coordinates of the body bytes fed (the caller maps them to
stream offsets and frames).  An event's ``end`` is the offset just past the line
terminator that dispatched it — the byte whose arrival made it visible to the
application, which is where the event is stamped in time.  When that terminator
is CR of a CRLF, the LF is not counted (a browser dispatches at the CR), which
keeps the parser chunking-invariant.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._wire import Buffer, ascii_decimal
from .errors import LimitExceeded

__all__ = ["MAX_EVENT_BYTES", "SseComment", "SseEvent", "SseParser", "SseItem"]

# The standard sets no limit; browsers buffer until memory runs out.  An event larger
# than 16 MiB in a capture is a framing error (e.g. a non-SSE body labelled as one),
# and buffering it would cost memory for nothing.
MAX_EVENT_BYTES = 16 * 1024 * 1024

_BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True, slots=True, kw_only=True)
class SseEvent:
    """A dispatched event: body bytes ``[offset, end)`` from its first line to the
    empty line that dispatched it; ``index`` counts dispatched events from 0."""

    offset: int
    length: int
    index: int
    event: str
    data: str
    id: str | None
    retry_ms: int | None
    comments: int

    @property
    def end(self) -> int:
        return self.offset + self.length


@dataclass(frozen=True, slots=True, kw_only=True)
class SseComment:
    """A comment line (``:`` …) at body bytes ``[offset, offset+length)``."""

    offset: int
    length: int
    text: str

    @property
    def end(self) -> int:
        return self.offset + self.length


SseItem = SseEvent | SseComment


class SseParser:
    """Streaming event-stream parser; ``feed(bytes) -> [SseEvent | SseComment]``."""

    __slots__ = (
        "_buf",
        "_buf_start",
        "_skip_lf",
        "_bom_checked",
        "_data",
        "_event",
        "_last_id",
        "_retry",
        "_ev_start",
        "_comments",
        "_count",
        "_pending_bytes",
    )

    def __init__(self, *, start_offset: int = 0) -> None:
        self._buf = bytearray()
        self._buf_start = start_offset
        self._skip_lf = False  # previous line ended with CR: a following LF belongs to it
        self._bom_checked = False
        self._data: list[str] = []
        self._event = ""
        self._last_id: str | None = None
        self._retry: int | None = None
        self._ev_start: int | None = None
        self._comments = 0
        self._count = 0
        self._pending_bytes = 0

    @property
    def events(self) -> int:
        """Events dispatched so far."""
        return self._count

    @property
    def last_event_id(self) -> str | None:
        return self._last_id

    def feed(self, data: Buffer) -> list[SseItem]:
        out: list[SseItem] = []
        self._buf += data
        b = self._buf
        if not self._bom_checked:
            if len(b) < 3 and _BOM.startswith(bytes(b)):
                return out
            self._bom_checked = True
            if b[:3] == _BOM:
                del b[:3]
                self._buf_start += 3
        i = 0
        n = len(b)
        while i < n:
            if self._skip_lf:
                self._skip_lf = False
                if b[i] == 0x0A:
                    i += 1
                    continue
            cr = b.find(b"\r", i)
            lf = b.find(b"\n", i)
            if cr < 0 and lf < 0:
                break
            j = lf if cr < 0 else cr if lf < 0 else min(cr, lf)
            line_start = self._buf_start + i
            line_end = self._buf_start + j + 1
            self._line(bytes(b[i:j]), line_start, line_end, out)
            if b[j] == 0x0D:
                self._skip_lf = True
            i = j + 1
        del b[:i]
        self._buf_start += i
        if self._ev_start is not None:
            self._pending_bytes = self._buf_start + len(b) - self._ev_start
        if len(b) > MAX_EVENT_BYTES or self._pending_bytes > MAX_EVENT_BYTES:
            raise LimitExceeded(
                f"event-stream event larger than {MAX_EVENT_BYTES} bytes", offset=self._buf_start
            )
        return out

    def _line(self, raw: bytes, start: int, end: int, out: list[SseItem]) -> None:
        if not raw:
            self._dispatch(end, out)
            return
        if self._ev_start is None:
            self._ev_start = start
        line = raw.decode("utf-8", "replace")
        if line.startswith(":"):
            self._comments += 1
            out.append(SseComment(offset=start, length=end - start, text=line[1:].lstrip(" ")))
            return
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\x00" not in value:
                self._last_id = value
        elif name == "retry":
            # HTML §9.2.6: "If the field value consists of only ASCII digits" (a value
            # too long to be a delay in ms is ignored like any other non-number)
            ms = ascii_decimal(value)
            if ms is not None:
                self._retry = ms

    def _dispatch(self, end: int, out: list[SseItem]) -> None:
        start = self._ev_start
        if self._data and start is not None:
            out.append(
                SseEvent(
                    offset=start,
                    length=end - start,
                    index=self._count,
                    event=self._event or "message",
                    data="\n".join(self._data),
                    id=self._last_id,
                    retry_ms=self._retry,
                    comments=self._comments,
                )
            )
            self._count += 1
        self._data = []
        self._event = ""
        self._retry = None
        self._ev_start = None
        self._comments = 0
        self._pending_bytes = 0
