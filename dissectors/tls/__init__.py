"""Sans-I/O TLS dissectors: record layer, handshake, key logs, decryption.

* :mod:`.record` — record framing (RFC 8446 §5.1, RFC 5246 §6.2)
* :mod:`.handshake` — handshake reassembly and messages (RFC 8446 §4), alerts (§6)
* :mod:`.keylog` — NSS key log files and DSB payloads
* :mod:`.crypto` — key schedules and record protection (RFC 8446 §5, §7; RFC 5246 §5, §6)
* :mod:`.session` — per-connection state machine (:class:`TlsSession`)
"""

from .crypto import CIPHER_SUITES, AuthenticationFailed, CipherSuite, cipher_suite
from .handshake import (
    Alert,
    AlertDescription,
    AlertLevel,
    ExtensionType,
    HandshakeMessage,
    HandshakeReassembler,
    HandshakeType,
    decode_handshake,
)
from .keylog import KeyLog, KeyLogStats, Secret
from .record import (
    ContentType,
    IncompleteRecord,
    ProtocolVersion,
    RecordMalformed,
    RecordParser,
    Sslv2ClientHello,
    StreamGap,
    TlsRecord,
    code_name,
    is_record_header,
    parse_record,
)
from .session import (
    Anomaly,
    DecryptStatus,
    Epoch,
    RecordResult,
    ResumptionCache,
    TlsSession,
    TlsSummary,
)

__all__ = [
    "CIPHER_SUITES",
    "Alert",
    "AlertDescription",
    "AlertLevel",
    "Anomaly",
    "AuthenticationFailed",
    "CipherSuite",
    "ContentType",
    "DecryptStatus",
    "Epoch",
    "ExtensionType",
    "HandshakeMessage",
    "HandshakeReassembler",
    "HandshakeType",
    "IncompleteRecord",
    "KeyLog",
    "KeyLogStats",
    "ProtocolVersion",
    "RecordMalformed",
    "RecordParser",
    "RecordResult",
    "ResumptionCache",
    "Secret",
    "Sslv2ClientHello",
    "StreamGap",
    "TlsRecord",
    "TlsSession",
    "TlsSummary",
    "cipher_suite",
    "code_name",
    "decode_handshake",
    "is_record_header",
    "parse_record",
]
