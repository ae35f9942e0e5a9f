"""Resource limits: named, documented, settable (issue 15; DESIGN.md §4).

A hostile or degenerate capture must not exhaust memory or time: every quantity that
grows with the input beyond what the per-packet columns hold has a limit here, with its
default and the reason for that value.  Exceeding a limit is never an error: the analysis
goes on with what fits, and one ``anomalies`` row (``*_limit_exceeded``) says which limit,
where, and how much was only counted.  Set them like detector thresholds:
``pcapkit.open(path, limits={"h2_streams": 50_000})``, ``pcapkit analyze --limit
h2_streams=50000``; ``pcapkit limits`` lists them.

The dissectors keep their own caps as named constants (they import nothing from
pcapkit); the session layer passes these values down to them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from difflib import get_close_matches
from typing import Any

import pandas as pd


class LimitError(ValueError):
    """An unknown limit name or a value the limit does not allow."""


@dataclass(frozen=True, slots=True)
class Limit:
    name: str
    default: int
    unit: str
    reason: str
    minimum: int = 1


LIMITS: tuple[Limit, ...] = (
    Limit(
        "gzip_ratio",
        100,
        "ratio",
        "inflated / compressed bytes of a .gz input, checked once 16 MiB are inflated: "
        "real captures compress 1.1x (encrypted) to ~40x (the lab's zero-filled payloads); "
        "deflate tops out near 1032x, so a file past 100x is a decompression bomb "
        "(Apache POI's zip-bomb ratio).  Reading stops there",
    ),
    Limit(
        "gzip_bytes",
        16 << 30,
        "bytes",
        "inflated bytes of a .gz input (they go to a temporary file on disk, then are "
        "mapped): 16 GiB bounds the disk a small hostile file can claim.  Reading stops "
        "there",
    ),
    Limit(
        "connections",
        20_000,
        "count",
        "connections analysed in detail (TLS, QUIC and HTTP dissection, every detector): "
        "a capture of one service's traffic holds hundreds to a few thousand (the 1M-"
        "packet benchmark: 1,683); each costs ~1 ms of detector time and kilobytes of "
        "memory even without payload (10^6 SYNs: minutes and GBs).  Connections that "
        "carried payload come first, in capture order; the others are counted, listed "
        "in Trace.flows and summarised in the reports",
    ),
    Limit(
        "h2_streams",
        10_000,
        "count",
        "HTTP/2 streams per connection kept in detail (a request row, frames, windows): "
        "browsers and gRPC channels open hundreds to thousands over a connection's life; "
        "200,000 HEADERS on new streams took minutes and GBs.  Frames of later streams "
        "are framed and their headers decoded (HPACK state) but only counted",
    ),
    Limit(
        "quic_streams",
        10_000,
        "count",
        "QUIC streams per connection reassembled (RFC 9000 lets a peer open up to 2^60; "
        "an HTTP/3 connection opens one per request).  Data of later streams is counted, "
        "not kept",
    ),
    Limit(
        "handshake_message_bytes",
        1 << 18,
        "bytes",
        "a TLS (or QUIC CRYPTO) handshake message buffered for reassembly: RFC 8446 "
        "allows 2^24 - 1, OpenSSL refuses certificate lists over 100 KiB and every other "
        "message is far smaller.  A longer message's bytes are skipped and counted; "
        "its framing is kept",
        minimum=1 << 14,
    ),
    Limit(
        "messages",
        200_000,
        "count",
        "messages per connection: rows of the messages table (HTTP/1.1 heads, SSE "
        "events, HTTP/2 and HTTP/3 frames, gRPC messages, QUIC frames) and TLS handshake "
        "messages decoded; a long-lived streaming connection sends tens of thousands of "
        "events, a hostile one millions of empty frames.  Later ones are counted",
    ),
)
BY_NAME: dict[str, Limit] = {x.name: x for x in LIMITS}


@dataclass(frozen=True)
class Limits:
    """The limits in force: the defaults with the user's settings applied."""

    values: Mapping[str, int]

    def __getitem__(self, name: str) -> int:
        return int(self.values[name])

    @classmethod
    def default(cls) -> Limits:
        return cls({x.name: x.default for x in LIMITS})


def resolve(settings: Mapping[str, Any] | None) -> Limits:
    """The limits with ``settings`` (``{"h2_streams": 50000}``; values may be strings)
    applied.  Raises :class:`LimitError` for an unknown name or a bad value."""
    values = {x.name: x.default for x in LIMITS}
    for name, raw in (settings or {}).items():
        lim = BY_NAME.get(name)
        if lim is None:
            close = get_close_matches(name, BY_NAME, n=3)
            hint = f"did you mean {', '.join(close)}?" if close else "valid: " + ", ".join(BY_NAME)
            raise LimitError(f"unknown limit {name!r}; {hint} (pcapkit limits)")
        try:
            v = float(raw.strip()) if isinstance(raw, str) else raw
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise TypeError
        except (TypeError, ValueError):
            raise LimitError(f"{name}: {raw!r} is not a number ({lim.unit})") from None
        if v != int(v) or v < lim.minimum:
            raise LimitError(f"{name}: {raw!r} must be a whole number >= {lim.minimum}")
        values[name] = int(v)
    return Limits(values)


def parse_settings(items: list[str] | tuple[str, ...]) -> dict[str, str]:
    """``["h2_streams=50000", …]`` (the CLI's ``--limit``) as a mapping."""
    out: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip() or not value.strip():
            raise LimitError(f"want NAME=VALUE, not {item!r} (pcapkit limits)")
        out[name.strip()] = value.strip()
    return out


def describe() -> pd.DataFrame:
    """Every limit with its default, unit and reason."""
    rows = [(x.name, x.default, x.unit, x.reason) for x in LIMITS]
    out: pd.DataFrame = pd.DataFrame(rows, columns=["name", "default", "unit", "reason"])
    return out


def limit_anomaly(
    name: str, detail: str, *, flow: int | None = None, frame: int | None = None
) -> dict[str, Any]:
    """The anomalies row ``name`` (a ``*_limit_exceeded`` name of
    :mod:`pcapkit.anomalies`) of a limit reached."""
    return {"name": name, "frame": frame, "flow": flow, "offset": None, "detail": detail}
