"""The ``anomalies`` table and the registry of its names (DESIGN.md §4).

Every layer reports what it gave up on as rows ``{name, frame, flow, offset,
detail}``; :func:`anomalies_table` joins them into one table in frame order,
filling a row's flow from its frame when the layer did not know it.

:data:`ANOMALIES` declares every name once, with the layer that emits it and what it
means (Zeek's weird list is the model): ``pcapkit.anomalies.describe()`` lists them.
Dissectors name their own problems; the session layer adds the protocol's prefix
(:func:`qualified`) so names stay unique across protocols.  A test checks that
every name the code can emit is declared here.
"""

from __future__ import annotations

import os
import traceback
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from . import schema
from .errors import STRICT_ENV as STRICT_ENV  # re-exported


@dataclass(frozen=True, slots=True)
class Anomaly:
    name: str
    layer: str  # io, net, tls, quic, http1, sse, h2, h3, http, internal
    meaning: str


def _declare(layer: str, entries: dict[str, str]) -> list[Anomaly]:
    return [Anomaly(n, layer, m) for n, m in entries.items()]


_ALL = [
    *_declare(
        "io",
        {
            "truncated_record": "a record or block cut short (the capture ended mid-write)",
            "absurd_caplen": "a record header claims an impossible captured length; the walk "
            "stops or resynchronises there",
            "bad_block": "a pcapng block with a bad length, magic or layout; the rest of the "
            "block (or file) is skipped",
            "gzip_limit_exceeded": "a .gz input inflates past the gzip_ratio or gzip_bytes "
            "limit (a decompression bomb): the capture is read up to there",
            "gzip_truncated": "the gzip stream ends early or is corrupt part-way; the capture "
            "is read up to the last byte that inflated",
            "timestamp_out_of_range": "pcapng records whose timestamp, after the interface's "
            "if_tsresol and if_tsoffset, is past 2^63 ns (year 2262): their ts_ns wrap; one row "
            "with the first such frame and how many records",
        },
    ),
    *_declare(
        "net",
        {
            "unsupported_linktype": "frames of an interface whose link type is not decoded",
            "ip_bad_header": "an IPv4/IPv6 header that is cut short, has the wrong version or "
            "an impossible length, or an IPv6 extension chain that runs past the packet",
            "ip_length_exceeds_frame": "the IP length field is larger than the frame",
            "ip_fragment": "an IP fragment (fragments are not reassembled)",
            "tcp_truncated_header": "a TCP header cut short in the capture",
            "tcp_bad_header_len": "a TCP data offset below 5 words or beyond the IP payload",
            "tcp_bad_option": "a TCP option with a bad length",
            "snaplen_truncated_payload": "a TCP payload not fully captured (snaplen)",
            "udp_truncated_header": "a UDP header cut short in the capture",
            "udp_bad_length": "a UDP length field below 8 or beyond the IP payload",
        },
    ),
    *_declare(
        "tls",
        {
            "tls_bad_record": "bytes where a TLS record header should be; the direction's "
            "record layer is lost from there",
            "tls_record_malformed": "bytes where a record header should be that cannot be TLS "
            "(content type or version): skipped up to the next chain of record headers, or the "
            "end of the direction; the detail says how many bytes and where records resume",
            "tls_record_overflow": "a record longer than RFC 5246 §6.2.3 / RFC 8446 §5.1-§5.2 "
            "allow: not decrypted, but its header still frames the records after it",
            "tls_record_sync_lost": "a capture hole covered a record header: the captured bytes "
            "after it are skipped up to the next chain of record headers (or the end of the "
            "direction); the detail says how many",
            "tls_record_incomplete": "a record with bytes never captured (a hole)",
            "tls_empty_handshake_record": "a handshake record of zero length (RFC 8446 §5.1 "
            "forbids it)",
            "tls_handshake_malformed": "a handshake message (TLS, or QUIC CRYPTO) that does "
            "not parse",
            "tls_handshake_truncated": "a handshake message cut short at the end of the capture",
            "tls_handshake_too_large": "a handshake message above the buffering cap "
            "(handshake_message_bytes): skipped by the length its header declares, its bytes "
            "counted, never buffered",
            "tls_handshake_lost": "handshake bytes lost to a hole; the messages they held "
            "are unknown",
            "tls_handshake_spans_key_change": "a handshake message continues across a key "
            "change (RFC 8446 §5.1 forbids it)",
            "tls_alert_malformed": "an alert record that is not two bytes",
            "tls_ccs_malformed": "a ChangeCipherSpec record that is not the single byte 1",
            "tls_unexpected_ccs": "a ChangeCipherSpec where none may appear",
            "tls_sslv2_client_hello": "an SSLv2-format ClientHello (not dissected)",
            "tls_roles_swapped": "the TLS client is the TCP server",
            "tls_keylog_secret_length": "a key-log secret whose length does not fit the "
            "cipher suite's hash",
            "tls_keylog_unmatched": "a key log was given but none of its client randoms is a "
            "ClientHello's in the capture (a key log of another capture?)",
            "tls_keylog_line_malformed": "key-log lines (file, SSLKEYLOGFILE or pcapng "
            "Decryption Secrets Block) that do not parse; their secrets are not used",
            "tls_keylog_unknown_label": "key-log lines with a label this tool does not use "
            "(e.g. PMS_CLIENT_RANDOM)",
            "tls_keylog_rsa_unused": "legacy RSA pre-master key-log lines: RSA key exchange "
            "is not decrypted",
            "tls_keylog_conflict": "a second, different secret for the same client random and "
            "label; the first one is used",
            "tls_keylog_trailing_characters": "key-log lines with characters after the secret "
            "(a backslash before the newline, a comment); the secret is used and the rest "
            "ignored, as Wireshark does",
        },
    ),
    *_declare(
        "quic",
        {
            "malformed_packet": "a QUIC packet whose header does not parse; the rest of its "
            "datagram is skipped",
            "coalesced_dcid_mismatch": "a coalesced packet with another DCID than the first "
            "(RFC 9000 §12.2: ignored)",
            "reserved_bits_set": "reserved header bits set after header protection was "
            "removed (RFC 9000 §17.2)",
            "malformed_frame": "a frame in a decrypted QUIC packet that does not parse",
            "frame_not_permitted": "a frame type not allowed in its packet type (RFC 9000 §12.4)",
            "crypto_data_conflict": "retransmitted CRYPTO data that differs from the first copy",
            "stream_data_conflict": "retransmitted STREAM data that differs from the first copy",
            "final_size_error": "STREAM data or FIN past a stream's final size (RFC 9000 §4.5)",
            "retry_integrity_failed": "a Retry whose integrity tag does not verify (RFC 9001 §5.8)",
            "small_initial_datagram": "a client Initial in a datagram under 1200 bytes (RFC "
            "9000 §14.1)",
            "transport_parameters_malformed": "a quic_transport_parameters extension that "
            "does not parse (RFC 9000 §18); the connection's limits are unknown",
            "crypto_offset_implausible": "a CRYPTO frame ending past any handshake's size "
            "(4 x handshake_message_bytes): its data is skipped, the detail says how much",
            "reassembly_limit_exceeded": "a QUIC stream with more data than is held per stream "
            "(64 MiB): the rest is counted, not kept",
            "quic_stream_limit_exceeded": "a connection opened more streams than the "
            "quic_streams limit: the data of later streams is counted, not reassembled",
        },
    ),
    *_declare(
        "http1",
        {
            "http1_malformed": "bytes that cannot be HTTP/1.1 framing (start line, header "
            "field, Content-Length, chunk size); the direction stops there",
            "http1_head_too_large": "a start line and header section above the cap",
            "http1_head_incomplete": "the capture ends inside a message head (its empty "
            "line never arrived); the request is listed with request_complete false",
        },
    ),
    *_declare(
        "sse",
        {"sse_limit_exceeded": "an SSE event or line above the cap; events after it are lost"},
    ),
    *_declare(
        "h2",
        {
            "h2_bad_preface": "the client's first bytes are not the HTTP/2 preface",
            "h2_preface_truncated": "the capture ends inside the HTTP/2 preface",
            "h2_frame_truncated": "the stream ends inside an HTTP/2 frame",
            "h2_lost_boundary": "a hole covers a frame header: frame boundaries are lost for "
            "the rest of the direction",
            "h2_continuation_expected": "a header block interrupted before its CONTINUATION "
            "(RFC 9113 §6.10)",
            "h2_header_block_incomplete": "a header block never completed",
            "h2_header_block_too_large": "a header block above the cap; its headers are unknown",
            "h2_hpack_decoding_error": "HPACK could not decode a header block (RFC 7541); later "
            "blocks of that direction are unknown",
            "h2_stream_limit_exceeded": "a connection opened more streams than the h2_streams "
            "limit: frames of later streams are framed and counted, not kept",
        },
    ),
    *_declare(
        "h3",
        {
            "h3_frame_truncated": "the stream ends inside an HTTP/3 frame",
            "h3_frame_too_large": "an HTTP/3 frame payload above the cap (skipped)",
            "h3_lost_boundary": "a hole covers an HTTP/3 frame header: the stream's frames "
            "are lost from there",
            "h3_unknown_stream_type": "a unidirectional stream of an unknown type (skipped, "
            "RFC 9114 §6.2)",
            "h3_reorder_buffer_full": "too many stream bytes wait for a hole to fill",
            "h3_frame_unexpected": "a frame not allowed where it arrived (RFC 9114 "
            "H3_FRAME_UNEXPECTED)",
            "h3_frame_error": "an HTTP/3 frame that does not parse (H3_FRAME_ERROR)",
            "h3_missing_settings": "a control stream that does not start with SETTINGS",
            "h3_settings_error": "an invalid or repeated setting (H3_SETTINGS_ERROR)",
            "h3_stream_creation_error": "a stream the peer may not open (H3_STREAM_CREATION_ERROR)",
            "h3_closed_critical_stream": "a control or QPACK stream closed (RFC 9114 §6.2.1)",
            "h3_qpack_blocked_at_end": "a field section still QPACK-blocked when the capture ended",
            "h3_qpack_decompression_failed": "QPACK could not decode a field section (RFC 9204)",
            "h3_qpack_encoder_stream_error": "a QPACK encoder instruction that does not apply",
        },
    ),
    *_declare(
        "http",
        {
            "app_stream_truncated": "the application bytes of a direction stop at a hole or "
            "a record that did not decrypt; what follows is not dissected",
        },
    ),
    *_declare(
        "limits",
        {
            "connection_limit_exceeded": "more connections than the connections limit: the "
            "rest are counted and listed in flows, not dissected (TLS, QUIC, HTTP) nor "
            "examined by the detectors; the detail says how many packets and bytes",
            "message_limit_exceeded": "a connection with more messages than the messages "
            "limit (rows of the messages table, TLS handshake messages): later ones are "
            "counted, not listed",
        },
    ),
    *_declare(
        "internal",
        {
            "internal_error": "pcapkit failed on one connection or in one detector (a bug: "
            "please report it with the detail); that connection's layer or that detector's "
            "findings are missing, the rest of the analysis went on",
        },
    ),
]
ANOMALIES: dict[str, Anomaly] = {a.name: a for a in _ALL}
if len(ANOMALIES) != len(_ALL):  # pragma: no cover - a declaration error
    raise ValueError("an anomaly name is declared twice")

# the prefix the session layer gives a dissector's own names
PREFIXES = {"http1": "http1_", "h2": "h2_", "h3": "h3_"}


def qualified(protocol: str, name: str) -> str:
    """A dissector's anomaly name with its protocol's prefix, once (``h3_`` names from
    RFC 9114 error codes already carry it)."""
    prefix = PREFIXES[protocol]
    return name if name.startswith(prefix) else prefix + name


# the detail keeps this much of an exception's message (it may quote captured bytes)
INTERNAL_DETAIL_CHARS = 200


def isolate(
    layer: str, exc: Exception, *, flow: int | None = None, what: str = ""
) -> dict[str, Any]:
    """The ``internal_error`` row of an unexpected exception while ``layer`` worked on one
    connection (``flow``) or one detector (``what``): the caller drops that unit's output
    and goes on (Wireshark marks a malformed packet and goes on).  The detail names the
    layer, the unit, the exception's type and message and where it was raised.  With
    ``PCAPKIT_STRICT=1`` in the environment the exception is raised again instead."""
    if os.environ.get(STRICT_ENV):
        raise exc
    where = ""
    for fs in traceback.extract_tb(exc.__traceback__):
        parts = fs.filename.replace(os.sep, "/").split("/")
        for root in ("pcapkit", "dissectors"):
            if root in parts:
                where = "/".join(parts[parts.index(root) :]) + f":{fs.lineno}"
    msg = str(exc)
    if len(msg) > INTERNAL_DETAIL_CHARS:
        msg = msg[: INTERNAL_DETAIL_CHARS - 1] + "…"
    unit = " ".join(x for x in (what, "" if flow is None else f"flow {flow}") if x)
    detail = f"{layer}{' ' + unit if unit else ''}: {type(exc).__name__}: {msg}"
    if where:
        detail += f" (at {where})"
    return {"name": "internal_error", "frame": None, "flow": flow, "offset": None, "detail": detail}


def describe() -> pd.DataFrame:
    """Every anomaly name with its layer and meaning."""
    rows = [(a.name, a.layer, a.meaning) for a in _ALL]
    out: pd.DataFrame = pd.DataFrame(rows, columns=["name", "layer", "meaning"])
    return out


def anomalies_table(rows: Iterable[dict[str, Any]], pkt_flow: np.ndarray) -> pd.DataFrame:
    """The anomalies table of ``rows``; ``pkt_flow`` is each frame's flow (-1: none)."""
    rows = [dict(r) for r in rows]
    for r in rows:
        if r.get("flow") is None and r.get("frame") is not None and 0 < r["frame"] <= len(pkt_flow):
            fl = int(pkt_flow[r["frame"] - 1])
            r["flow"] = fl if fl >= 0 else None
    rows.sort(key=lambda r: (r["frame"] is None, r["frame"] or 0))
    n = len(rows)
    if n == 0:
        return schema.frame("anomalies", n=0)

    def col(k: str) -> list[Any]:
        return [r.get(k) for r in rows]

    return schema.frame(
        "anomalies",
        {
            "name": col("name"),
            "frame": pd.array(col("frame"), dtype="Int64"),
            "flow": pd.array(col("flow"), dtype="Int64"),
            "offset": pd.array(col("offset"), dtype="Int64"),
            "detail": col("detail"),
        },
        n,
    )
