"""QUIC transport parameters (RFC 9000 §18), carried in the TLS extension 57
(``quic_transport_parameters``, RFC 9001 §8.2) of the ClientHello and of the server's
EncryptedExtensions."""

from __future__ import annotations

from typing import Any

from .._wire import Buffer, Cursor
from ..errors import DissectError, Malformed
from .packet import quic_draft

EXTENSION_TYPE = 0x39  # RFC 9001 §8.2
# draft implementations (before draft-33) used the private codepoint 0xffa5 for it
EXTENSION_TYPE_DRAFT = 0xFFA5

# RFC 9000 §18.2: parameters whose value is a single variable-length integer
_VARINT = {
    0x01: "max_idle_timeout",
    0x03: "max_udp_payload_size",
    0x04: "initial_max_data",
    0x05: "initial_max_stream_data_bidi_local",
    0x06: "initial_max_stream_data_bidi_remote",
    0x07: "initial_max_stream_data_uni",
    0x08: "initial_max_streams_bidi",
    0x09: "initial_max_streams_uni",
    0x0A: "ack_delay_exponent",
    0x0B: "max_ack_delay",
    0x0E: "active_connection_id_limit",
    0x20: "max_datagram_frame_size",  # RFC 9221 §3
}
_BYTES = {
    0x00: "original_destination_connection_id",
    0x02: "stateless_reset_token",
    0x0D: "preferred_address",
    0x0F: "initial_source_connection_id",
    0x10: "retry_source_connection_id",
    0x11: "version_information",  # RFC 9368 §3
}
_FLAGS = {0x0C: "disable_active_migration"}
# RFC 9000 §18.2 defaults for the parameters the detectors use
DEFAULTS = {
    "initial_max_data": 0,
    "initial_max_stream_data_bidi_local": 0,
    "initial_max_stream_data_bidi_remote": 0,
    "initial_max_stream_data_uni": 0,
    "ack_delay_exponent": 3,
    "max_ack_delay": 25,
}


def parse_transport_parameters(data: Buffer, *, legacy: bool = False) -> dict[str, Any]:
    """Name → value (int for integer parameters, bytes otherwise, True for flags);
    unknown ids appear as ``"0x…"`` keys with their bytes (RFC 9000 §18.1: ignored).

    ``legacy``: the encoding of drafts before 27 (draft-ietf-quic-transport-26 §18: a
    2-byte length of the whole list, then 2-byte ids and 2-byte value lengths; integer
    values were already variable-length integers)."""
    cur = Cursor(data)
    if legacy:
        total = cur.pull_u16()
        if total != cur.remaining:
            raise Malformed(f"transport parameters list of {total} bytes, {cur.remaining} given")
    out: dict[str, Any] = {}
    while not cur.eof():
        pid = cur.pull_u16() if legacy else cur.pull_varint()
        ln = cur.pull_u16() if legacy else cur.pull_varint()
        start = cur.pos
        raw = bytes(cur.pull_bytes(ln))
        if pid in _VARINT:
            sub = Cursor(raw)
            try:
                v = sub.pull_varint()
            except DissectError as exc:
                raise Malformed(
                    f"transport parameter 0x{pid:x} is not a varint", offset=start
                ) from exc
            if not sub.eof():
                raise Malformed(f"transport parameter 0x{pid:x} has trailing bytes", offset=start)
            out[_VARINT[pid]] = v
        elif pid in _BYTES:
            out[_BYTES[pid]] = raw
        elif pid in _FLAGS:
            out[_FLAGS[pid]] = True
        else:
            out[f"0x{pid:x}"] = raw
    return out


def from_extensions(extensions: Any, version: int | None = None) -> dict[str, Any] | None:
    """The transport parameters in a decoded ClientHello / EncryptedExtensions, if any;
    ``version`` (the connection's QUIC version) selects the encoding of drafts before 27."""
    d = quic_draft(version)
    for t, body in extensions or ():
        if t in (EXTENSION_TYPE, EXTENSION_TYPE_DRAFT):
            return parse_transport_parameters(body, legacy=d is not None and d < 27)
    return None
