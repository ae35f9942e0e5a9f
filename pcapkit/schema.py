"""Declared schemas of every public table (DESIGN.md §2).

One place lists each table's columns, dtypes and meaning.  Tables are built
through :func:`frame`, which checks the columns and applies the dtypes, so an
empty capture gives empty tables with every column, never ``None``.  The column
lists double as documentation: ``pcapkit.schema.describe("flows")``.

Conventions: times are integer nanoseconds since the epoch (``*_ts_ns``);
durations inside are integer ns, in reports float milliseconds (``*_ms``).
Stream offsets count from the byte after the ISN.  ``dir`` is ``c2s`` or ``s2c``.
"""

from __future__ import annotations

import functools
from typing import Any, cast

import numpy as np
import pandas as pd

DIRS = ["c2s", "s2c"]

# (column, dtype, description).  Nullable pandas dtypes where a value can be missing.
SCHEMAS: dict[str, list[tuple[str, str, str]]] = {
    "packets": [
        ("frame", "int64", "Wireshark frame number (1-based, file order)"),
        ("ts_ns", "int64", "capture timestamp, ns since the epoch"),
        ("caplen", "int64", "captured bytes of the frame"),
        ("wire_len", "int64", "original length on the wire"),
        ("iface", "int32", "interface index (pcapng IDB order across sections)"),
        ("linktype", "int32", "link-layer header type (LINKTYPE_*)"),
        ("vlan_tags", "int8", "802.1Q/802.1ad tags stripped"),
        ("ip_version", "Int8", "4 or 6; missing when the frame carries no IP"),
        ("src", "category", "source IP address"),
        ("dst", "category", "destination IP address"),
        ("ip_proto", "Int16", "IP protocol / IPv6 last next-header"),
        ("ttl", "Int16", "IPv4 TTL / IPv6 hop limit"),
        ("ip_fragment", "bool", "IP fragment (not reassembled; also an anomaly row)"),
        ("proto", "category", "tcp, udp or missing"),
        ("sport", "Int32", "source port"),
        ("dport", "Int32", "destination port"),
        ("tcp_seq", "Int64", "raw TCP sequence number"),
        ("tcp_ack", "Int64", "raw TCP acknowledgment number"),
        ("rel_seq", "Int64", "relative sequence number (Wireshark's tcp.seq)"),
        ("rel_ack", "Int64", "relative ack number (Wireshark's tcp.ack), missing without ACK"),
        (
            "tcp_flags",
            "Int16",
            "TCP flags (FIN=1 SYN=2 RST=4 PSH=8 ACK=16 URG=32 ECE=64 CWR=128 AE=256)",
        ),
        ("tcp_window", "Int32", "raw window field"),
        ("window", "Int64", "window in bytes after scaling (missing when the scale is unknown)"),
        ("tcp_hdr_len", "Int16", "TCP header length in bytes"),
        ("mss", "Int32", "MSS option value"),
        ("wscale", "Int16", "window scale option shift"),
        ("sack_perm", "boolean", "SACK-permitted option present"),
        ("tsval", "Int64", "timestamp option TSval"),
        ("tsecr", "Int64", "timestamp option TSecr"),
        ("sack_n", "Int8", "number of SACK blocks"),
        ("payload_off", "Int64", "byte offset of the L4 payload in the capture file"),
        (
            "payload_len",
            "Int64",
            "L4 payload length on the wire (Wireshark's tcp.len / udp.length − 8)",
        ),
        ("payload_caplen", "Int64", "L4 payload bytes actually captured"),
        ("flow", "Int64", "flow id (row of Trace.flows)"),
        ("dir", "category", "c2s or s2c"),
    ],
    "flows": [
        ("flow", "int64", "flow id, global, in order of first frame"),
        ("stream", "int64", "Wireshark's tcp.stream / udp.stream index"),
        ("proto", "str", "tcp or udp"),
        ("client_ip", "str", "client address"),
        ("client_port", "int64", "client port"),
        ("server_ip", "str", "server address"),
        ("server_port", "int64", "server port"),
        ("roles_from", "str", "how the roles were decided: syn, synack, ports, first_packet"),
        ("first_frame", "int64", "first frame of the flow"),
        ("last_frame", "int64", "last frame of the flow"),
        ("first_ts_ns", "int64", "time of the first frame"),
        ("last_ts_ns", "int64", "time of the last frame"),
        ("c2s_packets", "int64", "packets client → server"),
        ("s2c_packets", "int64", "packets server → client"),
        (
            "c2s_bytes",
            "int64",
            "reassembled payload bytes client → server (captured bytes, each once)",
        ),
        ("s2c_bytes", "int64", "reassembled payload bytes server → client"),
        ("c2s_missing", "int64", "bytes of the c2s stream never captured (holes, snaplen)"),
        ("s2c_missing", "int64", "bytes of the s2c stream never captured"),
        ("handshake", "bool", "SYN and SYN/ACK both seen"),
        ("c_mss", "Int64", "MSS in the client's SYN"),
        ("s_mss", "Int64", "MSS in the server's SYN/ACK"),
        ("c_wscale", "Int64", "client window scale in use (0 when not negotiated)"),
        ("s_wscale", "Int64", "server window scale in use"),
        ("sack_permitted", "bool", "both SYNs allowed SACK"),
        ("timestamps", "bool", "both SYNs carried timestamps"),
        (
            "eff_mss",
            "Int64",
            "largest payload per wire segment (MSS − 12 with timestamps; guessed without handshake)",
        ),
        ("server_leg_ms", "Float64", "d_S: SYN → SYN/ACK at the capture point (DETECTION.md §1.1)"),
        ("client_leg_ms", "Float64", "d_C: SYN/ACK → ACK at the capture point"),
        ("rtt_ms", "Float64", "handshake RTT d_S + d_C"),
        ("vantage", "str", "client, server, middle or unknown"),
        (
            "retransmissions",
            "int64",
            "data segments resending seen bytes (incl. spurious, overlaps)",
        ),
        ("out_of_order", "int64", "data segments filling a hole within the out-of-order threshold"),
        ("fin", "bool", "a FIN was seen"),
        ("rst", "bool", "a RST was seen"),
    ],
    "segments": [
        ("flow", "int64", "flow id"),
        ("dir", "category", "c2s or s2c"),
        ("frame", "int64", "frame number"),
        ("ts_ns", "int64", "capture time"),
        ("offset", "int64", "stream offset of the first payload byte"),
        ("length", "int64", "payload bytes on the wire"),
        ("captured", "int64", "payload bytes captured"),
        ("end", "int64", "offset + length"),
        ("psh", "bool", "PSH flag"),
        ("fin", "bool", "FIN flag"),
        (
            "kind",
            "category",
            "new, prev_not_captured, out_of_order, retransmission, spurious_retransmission, "
            "overlap_same, overlap_diff, keep_alive, zero_window_probe",
        ),
        ("new_bytes", "int64", "bytes this segment delivered first"),
        (
            "gap_before",
            "int64",
            "bytes never seen between the previous highest byte and this segment",
        ),
        ("super_segment", "bool", "payload larger than the effective MSS (GSO/TSO/GRO capture)"),
        ("wire_segments", "int64", "wire segments this one stands for (1 unless super_segment)"),
        (
            "ack",
            "int64",
            "next expected offset of the reverse stream it acknowledges (-1 without ACK)",
        ),
        ("window", "int64", "advertised window in bytes (-1 if the scale is unknown)"),
    ],
    "sack_blocks": [
        ("frame", "int64", "frame of the TCP packet carrying the SACK option"),
        ("ts_ns", "int64", "its capture time"),
        ("flow", "int64", "flow id"),
        ("dir", "category", "direction of the packet (it acknowledges the other one)"),
        ("block", "int64", "position of the block in the option (0: first, RFC 2018 §4)"),
        ("left", "int64", "left edge: stream offset of the first byte received"),
        ("right", "int64", "right edge: stream offset after the last byte received"),
    ],
    "records": [
        ("flow", "int64", "flow id"),
        ("dir", "category", "c2s or s2c (TCP direction)"),
        ("offset", "int64", "stream offset of the record header"),
        ("length", "int32", "wire bytes including the 5-byte header (≤ 2^16 + 4)"),
        (
            "content_type",
            "Int16",
            "inner content type when decrypted (TLS 1.3), else the outer one",
        ),
        (
            "plaintext_len",
            "Int32",
            "plaintext bytes (decrypted, or the fragment of an unprotected record; missing otherwise)",
        ),
        ("first_frame", "int64", "frame that first carried the record's first byte"),
        (
            "last_frame",
            "int64",
            "frame at which the whole record became readable in order (Wireshark's reassembled-record frame)",
        ),
        ("segments", "int32", "segment pieces that first carried its bytes"),
        ("psh_end", "bool", "its last byte is the last byte of a PSH segment"),
        ("outer_content_type", "int16", "content type in the record header"),
        ("version", "int32", "record-layer version field"),
        (
            "status",
            "category",
            "decrypted, not_encrypted, missing_key, wrong_key, unsupported_suite, ...",
        ),
        ("epoch", "category", "plaintext, early, handshake, application"),
        ("key_generation", "int16", "TLS 1.3 KeyUpdate generation"),
        ("early_data", "bool", "0-RTT record"),
        ("handshake", "str", "handshake messages completed in this record"),
        ("first_ts_ns", "int64", "time of first_frame"),
        ("last_ts_ns", "int64", "time of last_frame"),
        (
            "last_byte_frame",
            "int64",
            "frame that first carried the record's last byte (≠ last_frame when a hole before it was filled later)",
        ),
        ("last_byte_ts_ns", "int64", "time of last_byte_frame"),
        ("push_unit", "int32", "PSH-to-PSH unit (per direction) holding the last byte"),
        ("records_in_unit", "int32", "records whose last byte is in the same push unit"),
        ("retransmitted", "bool", "a retransmitted/out-of-order/overlapping segment touched it"),
        ("missing_bytes", "int32", "bytes of the record never captured (≤ length)"),
    ],
    "tls": [
        ("flow", "int64", "flow id"),
        ("version", "str", "negotiated version, e.g. TLS 1.3"),
        ("cipher", "str", "negotiated cipher suite name"),
        (
            "record_overhead",
            "Int64",
            "fewest bytes a protected record adds to its plaintext under the negotiated "
            "suite: header, explicit IV/nonce, tag or MAC + 1 padding byte, TLS 1.3 inner "
            "type (DETECTION.md §1.7); missing when the suite's record protection is unknown",
        ),
        ("sni", "str", "server_name from the ClientHello"),
        ("alpn", "str", "negotiated ALPN protocol"),
        ("alpn_offered", "str", "ALPN protocols offered, comma-separated"),
        (
            "versions_offered",
            "str",
            "versions the ClientHello offers (supported_versions, else its legacy_version), "
            "comma-separated, GREASE included",
        ),
        (
            "key_exchange_group",
            "str",
            "(EC)DHE group: the ServerHello's key_share (TLS 1.3) or the ServerKeyExchange's "
            "named curve (TLS 1.2 ECDHE), IANA name",
        ),
        (
            "cipher_suites_offered",
            "str",
            "the ClientHello's cipher suites in its order, 0x%04x comma-separated",
        ),
        ("resumption_offered", "bool", "session id / ticket / PSK offered"),
        ("resumption_accepted", "bool", "the server resumed"),
        ("resumption_kind", "str", "session_id, ticket or psk"),
        ("early_data_offered", "bool", "0-RTT offered"),
        ("early_data_accepted", "boolean", "0-RTT accepted (missing: decision not seen)"),
        ("hello_retry_request", "bool", "the server sent a HelloRetryRequest"),
        ("handshake_complete", "bool", "both Finished messages seen (or inferred)"),
        (
            "handshake_ms",
            "Float64",
            "ClientHello to the client's Finished record at the capture point",
        ),
        (
            "handshake_network_ms",
            "Float64",
            "the handshake's network time: one round trip, client leg + server leg "
            "(pcapkit.sessions.timing)",
        ),
        (
            "handshake_server_ms",
            "Float64",
            "the server's own time before it answered the client's first flight",
        ),
        (
            "handshake_flight_ms",
            "Float64",
            "the flights on the wire: the server's first to last record, the client's first "
            "answer to its Finished (Nagle, congestion-window or loss waits are here)",
        ),
        (
            "handshake_client_ms",
            "Float64",
            "the client's own time between the server's flight and its first answer",
        ),
        ("decrypted", "bool", "every protected record decrypted"),
        ("why_not", "str", "first reason a record was not decrypted"),
        ("records", "int64", "records in both directions"),
        ("decrypted_records", "int64", "records with plaintext from decryption"),
        ("key_updates", "int64", "TLS 1.3 KeyUpdates"),
        ("cert_chain_len", "Int64", "certificates in the server's chain (when visible)"),
        (
            "pct_psh_end",
            "Float64",
            "% of records whose last byte ends a PSH segment (DETECTION.md §5.4)",
        ),
        ("pct_single_record_units", "Float64", "% of push units holding exactly one record"),
        ("records_per_unit", "object", "histogram {records per push unit: units}"),
        ("roles_swapped", "bool", "the TLS client is the TCP server"),
    ],
    "quic": [
        ("flow", "int64", "flow id (a UDP flow whose first datagram is a QUIC long header)"),
        ("version", "str", "QUIC version as 0x%08x (0x00000001 = v1, RFC 9000)"),
        ("version_name", "str", "v1, v2, draft-29, …"),
        ("client_dcid", "str", "hex DCID of the client's first Initial (keys the Initials)"),
        ("sni", "str", "server_name from the ClientHello"),
        ("alpn", "str", "negotiated ALPN protocol (EncryptedExtensions; needs keys)"),
        ("alpn_offered", "str", "ALPN protocols the ClientHello offers, comma-separated"),
        (
            "tls_versions_offered",
            "str",
            "TLS versions the ClientHello offers (supported_versions), comma-separated",
        ),
        ("cipher", "str", "negotiated cipher suite"),
        ("key_exchange_group", "str", "the ServerHello's key_share group, IANA name"),
        ("client_scid", "str", "hex Source Connection ID of the client's first Initial"),
        (
            "server_scid",
            "str",
            "hex Source Connection ID of the server's first Initial or Handshake packet",
        ),
        ("decrypted", "bool", "every protected packet decrypted"),
        ("packets", "int64", "QUIC packets (coalesced packets counted separately)"),
        ("undecrypted_packets", "int64", "protected packets that did not decrypt"),
        ("why_not", "str", "first reason a packet did not decrypt"),
        (
            "handshake_ms",
            "Float64",
            "client's first Initial → client Finished at the capture point",
        ),
        (
            "handshake_network_ms",
            "Float64",
            "one round trip of the handshake (client leg + server leg from ACK timing)",
        ),
        ("handshake_server_ms", "Float64", "the server's own time before its first Initial"),
        ("handshake_flight_ms", "Float64", "the server's flight, first Initial to its Finished"),
        (
            "handshake_client_ms",
            "Float64",
            "the client's own time between the server's Finished and its own",
        ),
        ("retry", "bool", "a Retry was seen (RFC 9000 §8.1.2, +1 RTT)"),
        ("version_negotiation", "bool", "a Version Negotiation packet was seen (+1 RTT)"),
        ("key_updates", "int64", "1-RTT key phase changes, both directions (RFC 9001 §6)"),
        ("streams", "int64", "stream ids that carried STREAM frames"),
        ("stream_bytes", "int64", "distinct STREAM bytes received at the capture point"),
        ("retransmitted_stream_bytes", "int64", "STREAM bytes seen more than once"),
        ("roles_swapped", "bool", "the QUIC client is the flow's server"),
    ],
    "tls_handshake": [
        ("flow", "int64", "flow id (a TLS session)"),
        ("client_hello_frame", "Int64", "frame of the ClientHello's first byte"),
        ("client_hello_ts_ns", "Int64", "time of that frame"),
        ("server_hello_frame", "Int64", "frame of the server's first record (its ServerHello)"),
        ("server_hello_ts_ns", "Int64", "time of that frame"),
        (
            "server_flight_end_frame",
            "Int64",
            "frame completing the server's last record before the client's Finished",
        ),
        ("server_flight_end_ts_ns", "Int64", "time of that frame"),
        (
            "client_answer_frame",
            "Int64",
            "frame carrying the first byte of the client's first record after the server's "
            "flight (TLS 1.2: ClientKeyExchange; TLS 1.3: its Finished or a ChangeCipherSpec)",
        ),
        ("client_answer_ts_ns", "Int64", "time of that frame"),
        ("client_finished_frame", "Int64", "frame completing the client's Finished record"),
        ("client_finished_ts_ns", "Int64", "time of that frame"),
    ],
    "quic_packets": [
        ("flow", "int64", "flow id (a row of Trace.quic)"),
        ("dir", "category", "c2s or s2c of the flow (Trace.flows roles; see quic.roles_swapped)"),
        (
            "from_client",
            "bool",
            "sent by the QUIC client (the endpoint of the flow's first datagram, RFC 9000 §7)",
        ),
        ("frame", "int64", "frame of the UDP datagram that carried the packet"),
        ("ts_ns", "int64", "capture time of that frame"),
        (
            "datagram",
            "int64",
            "the datagram's position in the connection (0, 1, …: frame order, both directions)",
        ),
        ("datagram_bytes", "int64", "UDP payload bytes of the datagram on the wire"),
        (
            "coalesced_index",
            "int64",
            "position among the packets coalesced in the datagram, 0 = first (RFC 9000 §12.2)",
        ),
        ("offset", "int64", "byte offset of the packet in its datagram"),
        ("length", "int64", "bytes of the packet: header, payload and AEAD tag"),
        (
            "packet_type",
            "str",
            "initial, 0rtt, handshake, retry, version_negotiation, 1rtt or unknown_version; "
            "missing when the header did not parse",
        ),
        (
            "space",
            "str",
            "packet number space: initial, handshake or application (0-RTT and 1-RTT); "
            "missing for Retry and Version Negotiation (RFC 9000 §12.3)",
        ),
        ("version", "Int64", "Version field of a long header (missing for short headers)"),
        ("dcid", "str", "Destination Connection ID, hex ('' when empty or not parsed)"),
        ("scid", "str", "Source Connection ID of a long header, hex ('' for short headers)"),
        (
            "token_bytes",
            "Int64",
            "Initial: Token Length; Retry: bytes of the Retry Token; missing for other types",
        ),
        (
            "packet_number",
            "Int64",
            "full packet number (RFC 9000 App. A.3); missing when header protection stayed on",
        ),
        ("key_phase", "Int8", "1-RTT Key Phase bit (RFC 9001 §6)"),
        ("decrypted", "bool", "the payload decrypted (its frames are rows of Trace.quic_frames)"),
        (
            "why_not",
            "str",
            "why the payload was not decrypted ('no keys for 1-RTT: …', 'authentication "
            "failed', Retry and Version Negotiation are not protected); 'malformed: …' for a "
            "decrypted payload whose frames did not all parse; missing otherwise",
        ),
    ],
    "quic_frames": [
        ("flow", "int64", "flow id (a row of Trace.quic)"),
        ("dir", "category", "c2s or s2c of the flow (Trace.flows roles; see quic.roles_swapped)"),
        ("from_client", "bool", "sent by the QUIC client"),
        ("packet", "int64", "row of Trace.quic_packets that carried the frame"),
        ("frame", "int64", "frame of the UDP datagram that carried it"),
        ("ts_ns", "int64", "capture time of that frame"),
        ("space", "str", "packet number space of its packet: initial, handshake, application"),
        ("packet_number", "int64", "packet number of its packet"),
        (
            "frame_type",
            "int64",
            "frame type code (RFC 9000 §19, RFC 9221 §4); STREAM is 0x08–0x0f (OFF/LEN/FIN bits)",
        ),
        ("type", "str", "frame type name: PADDING, PING, ACK, CRYPTO, STREAM, MAX_DATA, …"),
        ("frame_offset", "int64", "offset of the frame in its packet's decrypted payload"),
        (
            "frame_length",
            "int64",
            "bytes of the frame in the payload (PADDING: the whole run of padding bytes)",
        ),
        (
            "stream_id",
            "Int64",
            "STREAM, RESET_STREAM, STOP_SENDING, MAX_STREAM_DATA, STREAM_DATA_BLOCKED: stream id",
        ),
        ("offset", "Int64", "STREAM and CRYPTO: offset of the data in its stream"),
        ("length", "Int64", "STREAM, CRYPTO and DATAGRAM: bytes of data"),
        ("fin", "boolean", "STREAM: the FIN bit"),
        (
            "retransmission",
            "boolean",
            "STREAM: some of its bytes (or its FIN) had been received before; missing for a "
            "STREAM frame of a packet whose frames did not all parse (not reassembled)",
        ),
        ("new_bytes", "Int64", "STREAM: bytes it delivered first"),
        ("duplicate_bytes", "Int64", "STREAM: bytes already received"),
        (
            "contiguous_end",
            "Int64",
            "STREAM: first missing offset of its stream after it (what the reader could read)",
        ),
        ("largest_acknowledged", "Int64", "ACK: Largest Acknowledged (RFC 9000 §19.3)"),
        (
            "ack_delay",
            "Int64",
            "ACK: the ACK Delay field as sent, in units of 2^ack_delay_exponent µs "
            "(quic_tls.ack_delay_exponent of the sender; default 3)",
        ),
        (
            "ack_ranges",
            "object",
            "ACK: acknowledged packet numbers as ((smallest, largest), …), highest range first",
        ),
        ("ecn_ect0", "Int64", "ACK_ECN: ECT(0) count"),
        ("ecn_ect1", "Int64", "ACK_ECN: ECT(1) count"),
        ("ecn_ce", "Int64", "ACK_ECN: ECN-CE count"),
        (
            "maximum",
            "Int64",
            "MAX_DATA, MAX_STREAM_DATA: the new limit in bytes; MAX_STREAMS: in streams; "
            "DATA_BLOCKED, STREAM_DATA_BLOCKED, STREAMS_BLOCKED: the limit the sender hit",
        ),
        ("bidirectional", "boolean", "MAX_STREAMS, STREAMS_BLOCKED: bidirectional streams"),
        ("error_code", "Int64", "RESET_STREAM, STOP_SENDING, CONNECTION_CLOSE: error code"),
        ("error_frame_type", "Int64", "CONNECTION_CLOSE (0x1c): the frame type that caused it"),
        ("final_size", "Int64", "RESET_STREAM: final size of the stream in bytes"),
        ("reason", "str", "CONNECTION_CLOSE: reason phrase (UTF-8, bad bytes replaced)"),
        ("sequence_number", "Int64", "NEW_CONNECTION_ID, RETIRE_CONNECTION_ID: sequence number"),
        ("retire_prior_to", "Int64", "NEW_CONNECTION_ID: Retire Prior To"),
        ("connection_id", "str", "NEW_CONNECTION_ID: the connection id, hex"),
    ],
    "quic_tls": [
        ("flow", "int64", "flow id (a row of Trace.quic)"),
        ("dir", "category", "c2s or s2c of the flow (Trace.flows roles; see quic.roles_swapped)"),
        ("from_client", "bool", "sent by the QUIC client"),
        ("frame", "int64", "frame whose CRYPTO data completed the message"),
        ("ts_ns", "int64", "capture time of that frame"),
        ("space", "str", "packet number space of the CRYPTO data: initial, handshake, application"),
        ("msg_type", "int64", "HandshakeType code (RFC 8446 §4)"),
        (
            "name",
            "str",
            "CLIENT_HELLO, SERVER_HELLO, HELLO_RETRY_REQUEST, ENCRYPTED_EXTENSIONS, "
            "CERTIFICATE, FINISHED, NEW_SESSION_TICKET, …",
        ),
        ("offset", "int64", "offset of the message in its space's CRYPTO stream (RFC 9001 §4.1.3)"),
        ("length", "int64", "bytes of the message with its 4-byte header"),
        ("decoded", "bool", "the message body decoded (else an anomalies row says why)"),
        (
            "extensions",
            "object",
            "extension type codes in wire order (tuple); missing for messages without extensions",
        ),
        (
            "pre_shared_key",
            "bool",
            "carries pre_shared_key (41): offered (ClientHello) or accepted (ServerHello), "
            "RFC 8446 §4.2.11",
        ),
        (
            "early_data",
            "bool",
            "carries early_data (42): offered (ClientHello) or accepted (EncryptedExtensions), "
            "RFC 8446 §4.2.10",
        ),
        # quic_transport_parameters (RFC 9001 §8.2, RFC 9000 §18.2): the client's in its
        # ClientHello, the server's in EncryptedExtensions; missing when not announced
        ("initial_max_data", "Int64", "transport parameter: connection credit, bytes"),
        (
            "initial_max_stream_data_bidi_local",
            "Int64",
            "transport parameter: credit for bidirectional streams the announcer opens, bytes",
        ),
        (
            "initial_max_stream_data_bidi_remote",
            "Int64",
            "transport parameter: credit for bidirectional streams its peer opens, bytes",
        ),
        (
            "initial_max_stream_data_uni",
            "Int64",
            "transport parameter: credit for unidirectional streams its peer opens, bytes",
        ),
        ("initial_max_streams_bidi", "Int64", "transport parameter: bidirectional streams"),
        ("initial_max_streams_uni", "Int64", "transport parameter: unidirectional streams"),
        ("max_idle_timeout_ms", "Int64", "transport parameter max_idle_timeout, ms"),
        ("max_udp_payload_size", "Int64", "transport parameter: largest UDP payload, bytes"),
        ("ack_delay_exponent", "Int64", "transport parameter: ACK Delay scale, 2^x µs"),
        ("max_ack_delay_ms", "Int64", "transport parameter max_ack_delay, ms"),
        ("active_connection_id_limit", "Int64", "transport parameter: connection ids"),
        (
            "max_datagram_frame_size",
            "Int64",
            "transport parameter (RFC 9221 §3): largest DATAGRAM frame, bytes",
        ),
        ("disable_active_migration", "boolean", "transport parameter present"),
        (
            "original_destination_connection_id",
            "str",
            "transport parameter (server): the client's first DCID, hex",
        ),
        ("initial_source_connection_id", "str", "transport parameter: the announcer's SCID, hex"),
        (
            "retry_source_connection_id",
            "str",
            "transport parameter (server, after a Retry): the Retry's SCID, hex",
        ),
    ],
    "quic_handshake": [
        ("flow", "int64", "flow id (a row of Trace.quic); one row per QUIC connection"),
        ("client_initial_frame", "Int64", "the client's first Initial packet"),
        ("client_initial_ts_ns", "Int64", "its capture time"),
        ("version_negotiation_frame", "Int64", "Version Negotiation packet (RFC 9000 §6)"),
        ("version_negotiation_ts_ns", "Int64", "its capture time"),
        ("retry_frame", "Int64", "Retry with a valid integrity tag (RFC 9000 §8.1.2)"),
        ("retry_ts_ns", "Int64", "its capture time"),
        ("server_initial_frame", "Int64", "the server's first Initial packet"),
        ("server_initial_ts_ns", "Int64", "its capture time"),
        ("client_hello_frame", "Int64", "ClientHello complete (its last CRYPTO byte)"),
        ("client_hello_ts_ns", "Int64", "its capture time"),
        ("server_hello_frame", "Int64", "ServerHello complete"),
        ("server_hello_ts_ns", "Int64", "its capture time"),
        ("server_finished_frame", "Int64", "the server's Finished complete"),
        ("server_finished_ts_ns", "Int64", "its capture time"),
        ("client_finished_frame", "Int64", "the client's Finished complete"),
        ("client_finished_ts_ns", "Int64", "its capture time"),
        ("handshake_done_frame", "Int64", "first HANDSHAKE_DONE frame (RFC 9001 §4.1.2)"),
        ("handshake_done_ts_ns", "Int64", "its capture time"),
        ("client_first_1rtt_frame", "Int64", "the client's first decrypted 1-RTT packet"),
        ("client_first_1rtt_ts_ns", "Int64", "its capture time"),
        ("server_first_1rtt_frame", "Int64", "the server's first decrypted 1-RTT packet"),
        ("server_first_1rtt_ts_ns", "Int64", "its capture time"),
        (
            "confirmed_ms",
            "Float64",
            "client's first Initial → HANDSHAKE_DONE at the capture point (handshake confirmed)",
        ),
    ],
    "messages": [
        ("flow", "int64", "flow id"),
        ("dir", "category", "c2s or s2c"),
        ("stream", "Int64", "HTTP/2 / QUIC stream id; missing for HTTP/1.1"),
        ("protocol", "str", "http/1.1, sse, h2, grpc, quic or h3"),
        (
            "type",
            "str",
            "request, response, interim, end, tunnel (HTTP/1.1); event, comment (SSE); "
            "HTTP/2, gRPC or QUIC frame/message type",
        ),
        ("offset", "int64", "offset of the unit in its application stream"),
        ("length", "int64", "bytes of the unit in that stream (framing included)"),
        ("frame", "Int64", "frame at which the unit's last byte was readable in order"),
        ("ts_ns", "Int64", "time of that frame"),
        ("request", "Int64", "row of Trace.requests the unit belongs to, if any"),
        ("detail", "str", "a short summary (start line, event data prefix, frame fields)"),
    ],
    "requests": [
        (
            "request",
            "int64",
            "id of the exchange (its row): messages.request, gaps.request and "
            "findings.request refer to it",
        ),
        ("flow", "int64", "flow id"),
        ("stream", "Int64", "HTTP/2 or HTTP/3 stream id; missing for HTTP/1.1"),
        ("protocol", "str", "http/1.1, h2 or h3"),
        ("method", "str", "request method"),
        ("authority", "str", "Host / :authority"),
        ("path", "str", "request target / :path"),
        ("status", "Int64", "final response status (missing: no response seen)"),
        ("content_type", "str", "response Content-Type"),
        (
            "request_frame",
            "Int64",
            "where Wireshark shows the request: HTTP/1.1 head and body complete; HTTP/2 and "
            "HTTP/3 the header block",
        ),
        (
            "response_frame",
            "Int64",
            "where Wireshark shows the response: HTTP/1.1 head and body complete (a streamed "
            "body: its end); HTTP/2 and HTTP/3 the header block",
        ),
        ("response_head_frame", "Int64", "frame in which the response's header block completed"),
        (
            "ttfb_ms",
            "Float64",
            "request header block complete → response header block complete (capture point)",
        ),
        (
            "ttft_ms",
            "Float64",
            "request header block complete → first SSE event / gRPC message / body byte",
        ),
        ("request_body_bytes", "Int64", "request body after removing chunked/frame framing"),
        (
            "request_body_sha256",
            "str",
            "SHA-256 (hex) of that body: the same call retried has the same digest (missing: "
            "no body, or not all of it captured)",
        ),
        (
            "response_body_bytes",
            "Int64",
            "response body after removing chunked/frame framing, before content decoding",
        ),
        ("events", "Int64", "SSE events or gRPC messages in the response (missing: neither)"),
        ("gap_p50_ms", "Float64", "median gap between consecutive events/messages"),
        ("gap_p95_ms", "Float64", "95th percentile gap between consecutive events/messages"),
        ("gap_max_ms", "Float64", "largest gap between consecutive events/messages"),
        ("events_per_s", "Float64", "events per second from first to last event"),
        (
            "body_bytes_per_s",
            "Float64",
            "delivery rate: response body bytes per second from the first body byte to the "
            "last byte readable (missing: under two distinct times)",
        ),
        ("syn_ts_ns", "Int64", "the connection's SYN (missing: not captured)"),
        ("tls_done_ts_ns", "Int64", "client Finished readable (missing: no TLS / not seen)"),
        ("request_start_ts_ns", "Int64", "first byte of the request readable"),
        ("request_end_ts_ns", "Int64", "last byte of the request (incl. body) readable"),
        ("response_ts_ns", "Int64", "response header block complete (TTFB point)"),
        ("first_body_ts_ns", "Int64", "first response body byte readable"),
        ("first_event_ts_ns", "Int64", "first SSE event / gRPC message readable (TTFT point)"),
        ("last_byte_ts_ns", "Int64", "last byte of the response readable"),
        ("complete", "bool", "the response ended as its framing says"),
        (
            "request_complete",
            "boolean",
            "the request's head and body arrived whole (missing: no request seen)",
        ),
        ("grpc_status", "Int64", "grpc-status from the trailers (gRPC only)"),
        ("content_encoding", "str", "response Content-Encoding"),
        ("traceparent", "str", "W3C traceparent of the request"),
        ("request_id", "str", "x-request-id of the request, else of the response"),
        (
            "idempotency_key",
            "str",
            "Idempotency-Key (or X-Idempotency-Key) of the request: one per logical call, "
            "the same on every retry",
        ),
        ("retry_after", "str", "Retry-After of the response"),
        ("ratelimit", "str", "x-ratelimit-* / ratelimit-* response fields, 'name=value; …'"),
        ("request_headers", "object", "[(name, value)] of the request, secrets redacted"),
        ("response_headers", "object", "[(name, value)] of the final response, secrets redacted"),
    ],
    "h2_windows": [
        ("flow", "int64", "flow id"),
        ("dir", "category", "direction of the frame: c2s or s2c"),
        ("stream", "int64", "HTTP/2 stream id (0: the connection)"),
        ("frame", "Int64", "frame at which the HTTP/2 frame was readable in order"),
        ("ts_ns", "Int64", "time of that frame"),
        ("type", "str", "DATA or WINDOW_UPDATE"),
        (
            "length",
            "int64",
            "flow-controlled bytes of a DATA frame (its whole payload, RFC 9113 §6.9.1)",
        ),
        ("end_stream", "bool", "a DATA frame with END_STREAM"),
        (
            "stream_window",
            "Int64",
            "the sender's stream send window after this frame (RFC 9113 §6.9)",
        ),
        ("connection_window", "Int64", "the sender's connection send window after this frame"),
        ("increment", "Int64", "WINDOW_UPDATE Window Size Increment"),
    ],
    "qpack_blocked": [
        ("flow", "int64", "flow id (an HTTP/3 connection)"),
        ("dir", "category", "sender of the field section and of its encoder stream"),
        ("stream", "int64", "QUIC stream id of the HEADERS / PUSH_PROMISE frame"),
        ("offset", "int64", "the frame's offset on its stream"),
        ("frame_type", "int64", "HTTP/3 frame type (1 HEADERS, 5 PUSH_PROMISE)"),
        (
            "required_insert_count",
            "Int64",
            "dynamic-table inserts the section needed (RFC 9204 §4.5.1.1)",
        ),
        ("inserts_at_block", "int64", "inserts that had arrived when the section did"),
        ("blocked_frame", "Int64", "frame in which the section arrived and could not be decoded"),
        ("blocked_ts_ns", "Int64", "time of that frame"),
        ("encoder_stream", "Int64", "QUIC stream id of the sender's QPACK encoder stream"),
        (
            "unblocked_encoder_offset",
            "Int64",
            "end offset on the encoder stream of the instruction that released the section",
        ),
        ("unblocked_frame", "Int64", "frame carrying that instruction; missing if never released"),
        ("unblocked_ts_ns", "Int64", "time of that frame"),
    ],
    "hol_counterfactual": [
        ("flow", "int64", "flow id (an HTTP/2-over-TCP or an HTTP/3 connection)"),
        ("dir", "category", "c2s or s2c: the direction whose losses blocked streams"),
        ("transport", "str", "tcp (what QUIC would have saved) or quic (what it saved)"),
        ("episodes", "int64", "head-of-line findings counted (tcp_hol_blocking, quic_stream_hol)"),
        ("hol_ms", "float64", "Σ of those findings' costs (the blocking that happened)"),
        (
            "quic_saved_ms",
            "float64",
            "Σ over the streams that gained of each stream's wait avoided by per-stream "
            "delivery (tcp: QUIC would have saved; quic: TCP would have added)",
        ),
        ("max_ms", "float64", "the largest single stream's gain"),
        ("streams_saved", "object", "streams that would not wait (tcp) / did not wait (quic)"),
        ("streams_blocked", "object", "streams with bytes in the lost packets: wait either way"),
        ("assumption", "str", "what the counterfactual holds fixed (DETECTION.md §11.7)"),
    ],
    "gaps": [
        ("request", "int64", "row of Trace.requests"),
        ("flow", "int64", "flow id"),
        ("stream", "Int64", "HTTP/2 / HTTP/3 stream id"),
        ("event", "int64", "index of the event that ended the wait (0: the first event, TTFT)"),
        ("frame", "Int64", "frame of that event"),
        ("from_ts_ns", "int64", "start of the wait (request, or the previous event)"),
        ("to_ts_ns", "int64", "the event's arrival at the capture point"),
        ("gap_ms", "float64", "length of the wait"),
        ("path_ms", "float64", "round trip capture point ↔ server (first event only)"),
        ("cadence_ms", "float64", "the stream's median gap (later events only)"),
        ("network_ms", "float64", "time inside overlapping TCP/TLS findings"),
        (
            "server_ms",
            "float64",
            "the rest, where the wire shows the server sent late (capture at the server, or "
            "its TCP timestamps advanced with the wait)",
        ),
        (
            "unexplained_ms",
            "float64",
            "the rest above 20 ms that no finding explains and the wire cannot show to be the "
            "server's (the path held it, or no timestamps to tell) — never counted as server",
        ),
        ("cause", "str", "largest share: a finding kind, server, path, cadence or unexplained"),
        ("findings", "object", "kinds of the overlapping findings, costliest first"),
        ("frames", "object", "evidence frames of the costliest overlapping finding"),
        (
            "client_ms",
            "Float64",
            "two vantages: of the server's share, time it waited on the client (closed "
            "window, delayed ACK, flow-control credit)",
        ),
        (
            "c2s_ms",
            "Float64",
            "two vantages: the request on its way client → server (first event only)",
        ),
        (
            "server_side_ms",
            "Float64",
            "two vantages: the server had the request (or the last event) and had not sent",
        ),
        ("s2c_ms", "Float64", "two vantages: the event on its way server → client"),
    ],
    "one_way": [
        ("flow", "Int64", "flow id in the client capture (missing: a flow it never saw)"),
        ("server_flow", "Int64", "flow id in the server capture"),
        ("dir", "category", "c2s or s2c"),
        (
            "seq",
            "Int64",
            "relative sequence number of the first payload byte (sender's); missing for a "
            "UDP datagram",
        ),
        ("length", "int64", "payload bytes (TCP) or UDP payload length (a QUIC datagram)"),
        ("client_frame", "Int64", "frame in the client capture"),
        ("server_frame", "Int64", "frame in the server capture"),
        ("sent_ts_ns", "Int64", "seen at the sender's capture point (client clock)"),
        ("received_ts_ns", "Int64", "seen at the receiver's capture point (client clock)"),
        ("one_way_ms", "Float64", "received − sent: the path's one-way delay for this segment"),
        (
            "status",
            "str",
            "delivered; lost (seen leaving, never arriving: lost between the two capture "
            "points); receiver_only (the sender's capture missed it); resegmented (a "
            "sender's segment that arrived cut in pieces: the first piece is matched)",
        ),
        (
            "retransmission",
            "boolean",
            "the sender had sent these bytes before (its capture shows a retransmission, "
            "or bytes filling a hole in its own stream)",
        ),
        (
            "spurious",
            "boolean",
            "a retransmission whose earlier transmission reached the receiver's capture point",
        ),
        (
            "original",
            "str",
            "a retransmission's earlier transmission: delivered (so this one was spurious), "
            "lost (between the capture points) or unseen (by either capture: lost before "
            "the sender's capture point, inside its host)",
        ),
    ],
    "anomalies": [
        ("name", "str", "stable snake_case name (like Zeek's weird.log)"),
        ("frame", "Int64", "frame where it was noticed, if any"),
        ("flow", "Int64", "flow id, if any"),
        (
            "offset",
            "Int64",
            "byte offset (file offset for container problems, stream offset otherwise)",
        ),
        ("detail", "str", "human-readable explanation"),
    ],
    "findings": [
        ("kind", "str", "stable pathology name (pcapkit.detect.KINDS)"),
        ("severity", "str", "info, low, medium, high"),
        ("flow", "Int64", "flow id"),
        ("dir", "str", "direction of the affected data: c2s or s2c"),
        ("cost_ms", "Float64", "time the pathology cost"),
        ("frames", "object", "evidence frame numbers (list)"),
        ("explanation", "str", "what happened, in plain words"),
        ("remedy", "str", "what to change"),
        ("cost_method", "str", "measured_interval, lower_bound, upper_bound or estimate"),
        ("t_start_ns", "int64", "start of the affected interval"),
        ("t_end_ns", "int64", "end of the affected interval"),
        (
            "stream",
            "Int64",
            "HTTP/2 or QUIC stream id: the detector's, else its request's when that was "
            "the only exchange in flight; missing when several streams were delayed",
        ),
        (
            "request",
            "Int64",
            "the HTTP exchange it delayed (requests.request): named by the detector, else "
            "the first exchange of its flow (and stream) in flight during it, else the "
            "first one begun after it started",
        ),
        ("vantage", "str", "capture vantage the detector assumed"),
        ("confidence", "float64", "0–1"),
        ("evidence", "object", "list of {frame, role, ts_ns}"),
        ("checks", "object", "counter-hypotheses ruled out (list)"),
        ("display_filter", "str", "Wireshark display filter showing the evidence"),
        ("details", "object", "detector-specific numbers (dict)"),
    ],
}


def dtype_of(table: str, column: str) -> str:
    """The declared dtype of one column."""
    for c, dtype, _ in SCHEMAS[table]:
        if c == column:
            return dtype
    raise KeyError(f"{table}: no column {column!r}")


def is_missing(v: Any) -> bool:
    """A missing table value as rows hand it out: None, ``pd.NA`` or a float NaN."""
    return v is None or v is pd.NA or (isinstance(v, float) and v != v)


def columns(table: str) -> list[str]:
    return [c for c, _, _ in SCHEMAS[table]]


# One line per table, for describe() without a name.
TABLES: dict[str, str] = {
    "packets": "one row per frame (Wireshark frame numbers): addresses, ports, TCP fields, flow",
    "flows": "one row per TCP connection / UDP flow: roles, bytes, handshake options, RTT legs",
    "segments": "one row per TCP segment with payload, classified (new, retransmission, …)",
    "sack_blocks": "one row per SACK block of a TCP packet, edges as stream offsets",
    "records": "one row per TLS record, aligned with the TCP frames and PSH that carried it",
    "tls": "one row per TLS session: version, cipher, SNI, ALPN, resumption, decryption",
    "tls_handshake": "one row per TLS session: when each handshake milestone was seen",
    "quic": "one row per QUIC connection: version, DCID, SNI, ALPN, decryption, streams",
    "quic_packets": "one row per QUIC packet: datagram, type, packet number, decrypted or why",
    "quic_frames": "one row per QUIC frame: STREAM reassembly facts, ACK ranges, MAX_* values",
    "quic_tls": "TLS handshake messages in QUIC CRYPTO, with transport parameters",
    "quic_handshake": "one row per QUIC connection: when each handshake milestone happened",
    "messages": "HTTP/1.1 heads, SSE events, HTTP/2 frames, gRPC messages, QUIC frames",
    "requests": "one row per HTTP exchange with its timeline (TTFB, TTFT, gaps)",
    "h2_windows": "HTTP/2 DATA and WINDOW_UPDATE frames with the send windows after each",
    "qpack_blocked": "HTTP/3 field sections that waited for QPACK encoder instructions",
    "hol_counterfactual": "per connection: what QUIC saved (HTTP/3) or would have saved "
    "(HTTP/2 over TCP) of head-of-line blocking",
    "gaps": "why each streamed response waited: path, network findings, server",
    "one_way": "two vantages: each TCP segment's or UDP datagram's one-way delay, or its loss",
    "anomalies": "what could not be parsed, with a stable name (like Zeek's weird.log)",
    "findings": "pathologies: kind, cost, evidence frames, explanation, remedy",
}


def describe(table: str | None = None) -> pd.DataFrame:
    """The documented columns of ``table`` as a small DataFrame; without a name, every
    table with its one-line description."""
    if table is None:
        rows = [(t, TABLES.get(t, ""), len(cols)) for t, cols in SCHEMAS.items()]
        out: pd.DataFrame = pd.DataFrame(rows, columns=["table", "description", "columns"])
        return out
    if table not in SCHEMAS:
        raise KeyError(f"no table {table!r}; tables: {', '.join(SCHEMAS)}")
    cols: pd.DataFrame = pd.DataFrame(SCHEMAS[table], columns=["column", "dtype", "description"])
    return cols


def frame(table: str, data: dict[str, Any] | None = None, n: int | None = None) -> pd.DataFrame:
    """Build a table from column arrays, in schema order with schema dtypes.

    Columns absent from ``data`` are filled with missing values; unknown columns
    raise, so the schema stays the single source of truth.
    """
    if not data and not n:  # an empty table: a copy of the one built once
        empty: pd.DataFrame = _empty(table).copy(deep=True)
        return empty
    return _build(table, data or {}, n)


def _build(table: str, data: dict[str, Any], n: int | None) -> pd.DataFrame:
    schema = SCHEMAS[table]
    names = {c for c, _, _ in schema}
    extra = set(data) - names
    if extra:
        raise KeyError(f"{table}: columns not in the schema: {sorted(extra)}")
    if n is None:
        n = len(next(iter(data.values()))) if data else 0
    out: dict[str, Any] = {}
    for col, dtype, _ in schema:
        if col in data:
            v = data[col]
            if isinstance(v, (pd.Categorical, pd.api.extensions.ExtensionArray)):
                out[col] = v
            elif dtype == "category":
                out[col] = pd.Categorical(v)
            elif dtype == "object":
                arr = np.empty(len(v), dtype=object)
                arr[:] = list(v)
                out[col] = arr
            elif dtype == "str":
                out[col] = pd.array(list(v), dtype="str")
            elif dtype[0].isupper() or dtype == "boolean":
                out[col] = pd.array(np.asarray(v), dtype=cast(Any, dtype))
            else:
                out[col] = np.asarray(v).astype(dtype, copy=False)
        else:
            out[col] = _missing(dtype, n)
    df: pd.DataFrame = pd.DataFrame(out, copy=False)
    return df


@functools.cache
def _empty(table: str) -> pd.DataFrame:
    """``table`` with no rows; :func:`frame` hands out deep copies (building one costs
    0.3-1.1 ms, a copy ~0.2 ms, and a small capture asks for ~10 empty tables)."""
    return _build(table, {}, 0)


def _missing(dtype: str, n: int) -> Any:
    """``n`` missing values of ``dtype`` (a column absent from the data)."""
    if dtype == "bool":
        return np.zeros(n, bool)
    if dtype == "category" or dtype in ("str", "object", "boolean") or dtype[0].isupper():
        # an extension array: repeat one built missing value (building one from n Nones
        # costs 40-260 µs a column, and a capture's many empty tables have many columns)
        return _missing_template(dtype, n == 0).take(np.zeros(n, np.intp))
    return np.zeros(n, dtype)


@functools.cache
def _missing_template(dtype: str, empty: bool) -> Any:
    """The array ``_missing_built`` makes of no value (``empty``) or one; pandas infers an
    all-missing Categorical's categories from the values, so they differ."""
    return _missing_built(dtype, 0 if empty else 1)


def _missing_built(dtype: str, n: int) -> Any:
    if dtype == "category":
        return pd.Categorical([None] * n)
    if dtype == "str":
        return pd.array([None] * n, dtype="str")
    if dtype == "object":
        return pd.array([None] * n, dtype="object")
    if dtype[0].isupper() or dtype == "boolean":
        return pd.array([None] * n, dtype=cast(Any, dtype))
    if dtype == "bool":
        return np.zeros(n, bool)
    return np.zeros(n, dtype)


def masked(values: np.ndarray, missing: np.ndarray, dtype: str) -> Any:
    """A nullable extension array from values + a missing mask, without per-row objects."""
    if dtype == "boolean":
        return pd.arrays.BooleanArray(values.astype(bool), missing.astype(bool))
    if dtype == "Float64":
        return pd.arrays.FloatingArray(values.astype("float64"), missing.astype(bool))
    return pd.arrays.IntegerArray(
        values.astype(dtype.lower(), copy=False), missing.astype(bool, copy=False)
    )


def strings(codes: np.ndarray, names: list[str]) -> Any:
    """A "str" column from integer codes into ``names``, without per-row objects when
    pandas keeps strings in Arrow (a take over the few distinct values)."""
    dtype = pd.api.types.pandas_dtype("str")
    if getattr(dtype, "storage", None) == "pyarrow":
        import pyarrow as pa  # type: ignore[import-untyped]

        n = int(codes.shape[0])
        lo = int(codes.min()) if n else -1
        if lo >= 0 and lo == int(codes.max()) and names[lo] is not None:
            # one value in every row (the records' handshake column: "" but in the
            # handshake records, and no row of them in a capture that starts after the
            # handshakes): its offsets and bytes made directly — the take cost 0.18 s
            # at 7.9 M records; "" is a zeroed offsets buffer, pages the kernel maps
            # only when written
            b = str(names[lo]).encode()
            k = len(b)
            off = np.arange(0, (n + 1) * k, k, dtype=np.int64) if k else np.zeros(n + 1, np.int64)
            taken = pa.LargeStringArray.from_buffers(n, pa.py_buffer(off), pa.py_buffer(b * n))
            return pd.array(taken, dtype=dtype)
        taken = pa.array(names, pa.large_string()).take(pa.array(codes))
        return pd.array(taken, dtype=dtype)
    return pd.array(np.asarray(names, dtype=object)[codes], dtype=dtype)


def categorical(codes: np.ndarray, categories: list[str]) -> pd.Categorical:
    """Categorical from integer codes (-1 = missing) without per-row objects."""
    c = np.asarray(codes)
    return pd.Categorical.from_codes(
        c if c.dtype.kind in "iu" else c.astype(np.int64),
        categories=pd.Index(categories, dtype="str") if categories else pd.Index([], dtype="str"),
    )


def run_index(starts: np.ndarray) -> np.ndarray:
    """``np.cumsum(starts) - 1`` for a boolean mask of the rows that begin a run (the
    run each row belongs to; -1 before the first start), as int64: one ``np.repeat`` of
    the run numbers over the run lengths — a tenth of the time of the cumulative sum,
    whose bool → int64 cast goes through numpy's buffered loop (0.34 → 0.03 ms at 68k
    rows; 0.19 s of ``Trace.tls`` at sse-1M)."""
    at = np.flatnonzero(starts)
    lengths = np.diff(np.concatenate(([0], at, [starts.shape[0]])))
    return np.repeat(np.arange(-1, at.shape[0], dtype=np.int64), lengths)


_I32 = np.iinfo(np.int32)
# rows per slice of dir_keys_if_sorted: its temporaries stay in the CPU's cache
# (whole-column passes cost 0.22 s at 7.9 M records, slices of 1 << 16 rows 0.02 s)
KEY_SLICE = 1 << 16


def dir_keys_if_sorted(flow: np.ndarray, d: np.ndarray, off: np.ndarray) -> np.ndarray | None:
    """The direction key ``flow * 2 + dir`` of every row of a records table (int32 when
    every key fits: half the memory, 30 MiB at 7.9 M records; else int64) when the rows
    are in (flow, dir, offset) order, as ``Trace.records`` is; None when they are not."""
    n = flow.shape[0]
    if not n:
        return np.zeros(0, np.int64)
    lo, hi = int(flow.min()), int(flow.max())
    fits = _I32.min <= 2 * lo and 2 * hi + 1 <= _I32.max
    out = np.empty(n, np.int32 if fits else np.int64)
    for a in range(0, n, KEY_SLICE):
        b = min(a + KEY_SLICE, n)
        a0 = max(a - 1, 0)  # the row before the slice: its order with the first
        k = flow[a0:b] * 2 + d[a0:b]
        dk = k[1:] - k[:-1]
        if bool((dk < 0).any()) or bool(((dk == 0) & (off[a0 + 1 : b] < off[a0 : b - 1])).any()):
            return None
        out[a:b] = k[a - a0 :]
    return out


def dir_keys(
    flow: np.ndarray, d: np.ndarray, off: np.ndarray
) -> tuple[np.ndarray, np.ndarray | None]:
    """The direction keys of a records table's rows in (flow, dir, offset) order (int32
    when every key fits) and the permutation that puts the rows in that order: None when
    they are in it already (:func:`dir_keys_if_sorted`), as ``Trace.records`` is."""
    key = dir_keys_if_sorted(flow, d, off)
    if key is not None:
        return key, None
    d = d.astype(np.int64)
    order = np.lexsort((off, d, flow))
    key = (flow * 2 + d)[order]
    if _I32.min <= int(key.min()) and int(key.max()) <= _I32.max:
        key = key.astype(np.int32)
    return key, order


def record_dir_keys(records: pd.DataFrame) -> tuple[np.ndarray, np.ndarray | None]:
    """:func:`dir_keys` of a records table (its flow, dir and offset columns)."""
    return dir_keys(
        records["flow"].to_numpy(np.int64),
        records["dir"].cat.codes.to_numpy(),
        records["offset"].to_numpy(np.int64),
    )
