"""Dissector error hierarchy (DESIGN.md §4).

``DissectError`` > ``Truncated`` | ``Malformed`` > ``LimitExceeded``.

* :class:`Truncated` — the input ended before the unit did; a streaming parser
  keeps the tail and waits for more bytes, a one-shot parser raises it.
* :class:`Malformed` — the bytes cannot be this protocol (bad length, reserved
  value that the RFC says MUST NOT appear, …).
* :class:`LimitExceeded` — well-formed but beyond a named resource cap.
"""

from __future__ import annotations


class DissectError(Exception):
    """Base class of every error a dissector raises."""

    def __init__(self, message: str, *, offset: int | None = None) -> None:
        super().__init__(message)
        self.offset = offset


class Truncated(DissectError):
    """More bytes are needed to finish the unit being parsed."""


class Malformed(DissectError):
    """The bytes violate the protocol's framing or a MUST of its RFC."""


class LimitExceeded(Malformed):
    """A well-framed unit exceeds a resource cap (see the constant's comment)."""
