"""Request/response shortcuts shared by the HTTP/2 and HTTP/3 stream records.

Both :class:`dissectors.http2.H2Stream` and :class:`dissectors.http3.H3Stream` hold
a request and a response header block (``.get(name)`` on lowercase names, RFC 9113
§8.2 / RFC 9114 §4.2) and per-direction bodies; the pseudo-header lookups and body
helpers read the same way for both (RFC 9113 §8.3, RFC 9114 §4.3).
"""

from __future__ import annotations

from typing import Any

from ._wire import ascii_decimal


class HeaderFields:
    """Mixin for a decoded header block with ``headers`` (lower-case names, in order,
    or None when it could not be decoded): HTTP/2 and HTTP/3 share the lookup."""

    __slots__ = ()

    headers: tuple[tuple[str, str], ...] | None

    def get(self, name: str) -> str | None:
        """First value of ``name`` (lower-case, RFC 9113 §8.2.1 / RFC 9114 §4.2), or ``None``."""
        if self.headers is None:
            return None
        for k, v in self.headers:
            if k == name:
                return v
        return None


class HttpExchange:
    """Mixin for a stream dataclass with ``request_headers``, ``response_headers``,
    ``body_bytes`` and ``body_chunks`` (``"c2s"`` / ``"s2c"`` keyed)."""

    __slots__ = ()

    request_headers: Any
    response_headers: Any
    body_bytes: Any  # {"c2s": int, "s2c": int} (Literal-keyed in the streams)
    body_chunks: Any  # {"c2s": [chunk], "s2c": [chunk]}, chunk.data bytes or None

    def _req(self, name: str) -> str | None:
        return self.request_headers.get(name) if self.request_headers else None

    @property
    def method(self) -> str | None:
        return self._req(":method")

    @property
    def scheme(self) -> str | None:
        return self._req(":scheme")

    @property
    def authority(self) -> str | None:
        return self._req(":authority") or self._req("host")

    @property
    def path(self) -> str | None:
        return self._req(":path")

    @property
    def status(self) -> int | None:
        v = self.response_headers.get(":status") if self.response_headers else None
        return ascii_decimal(v)  # RFC 9113 §8.3.2 / RFC 9114 §4.3.2: 3DIGIT

    @property
    def content_type(self) -> str | None:
        return self.response_headers.get("content-type") if self.response_headers else None

    @property
    def request_body_bytes(self) -> int:
        return int(self.body_bytes["c2s"])

    @property
    def response_body_bytes(self) -> int:
        return int(self.body_bytes["s2c"])

    def body(self, direction: str) -> bytes:
        """The reassembled body of one direction (missing octets are simply absent)."""
        return b"".join(c.data for c in self.body_chunks[direction] if c.data is not None)
