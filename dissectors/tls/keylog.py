"""NSS key log format (SSLKEYLOGFILE), as written by NSS, OpenSSL, BoringSSL, Go, rustls.

Format (NSS "Key Log Format" page; draft-ietf-tls-keylogfile §3): one entry per line,
``<label> <client_random hex> <secret hex>``; lines starting with ``#`` are comments.
Labels understood here:

=================================  ====================================================
``CLIENT_RANDOM``                  TLS ≤ 1.2 master secret (48 bytes)
``CLIENT_EARLY_TRAFFIC_SECRET``    TLS 1.3 client_early_traffic_secret (RFC 8446 §7.1)
``CLIENT_HANDSHAKE_TRAFFIC_SECRET`` / ``SERVER_HANDSHAKE_TRAFFIC_SECRET``
``CLIENT_TRAFFIC_SECRET_0`` / ``SERVER_TRAFFIC_SECRET_0``   application traffic secrets
``EXPORTER_SECRET`` / ``EARLY_EXPORTER_SECRET``             exporter secrets (kept, unused)
=================================  ====================================================

Lines are read the way Wireshark reads them (``epan/dissectors/packet-tls-utils.c``,
``ssl_compile_keyfile_regex`` and ``tls_keylog_process_lines``): split at LF, a CR before
it dropped, and the entry matched from the start of the line — the label, the client
random (32 bytes in hex), then the secret as a run of hex pairs (exactly 48 bytes for
``CLIENT_RANDOM``).  Characters after the secret are ignored: a line ending in a
backslash before the newline, a CRLF, a trailing comment or a NUL padding still gives
its secret.  Such lines are counted (``trailing``) so the caller can say so.  This
parser also accepts runs of spaces or tabs between the fields and leading whitespace.

The legacy ``RSA <first 8 bytes of the encrypted pre-master secret> <pre-master secret>``
lines are tolerated, counted and kept (keyed by the 8-byte prefix); ``RSA
Session-ID:<hex> Master-Key:<hex>`` lines give a TLS ≤ 1.2 master secret by session id
(:meth:`KeyLog.session_master`); other labels, blank lines and comments are counted and
skipped; lines that do not parse are counted as malformed.  Nothing here raises on bad
input: a key log is a user's file, and the counts — per source, with the first line
numbers of each problem (:meth:`KeyLog.problems`) — let the caller say what was ignored.

Several sources (a ``--keylog`` file, ``SSLKEYLOGFILE``, each pcapng Decryption Secrets
Block) merge into one :class:`KeyLog` keyed by client_random.  The first value seen for a
(client_random, label) wins; a later different value is counted as a conflict.

Secrets are wrapped in :class:`Secret`, whose ``repr``/``str`` never show the bytes; the
:class:`KeyLog` repr shows counts only (DESIGN.md §4: never print key material).
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, fields
from typing import Final

__all__ = [
    "KNOWN_LABELS",
    "PROBLEMS",
    "KeyLog",
    "KeyLogProblem",
    "KeyLogStats",
    "Secret",
]

CLIENT_RANDOM: Final = "CLIENT_RANDOM"
CLIENT_EARLY_TRAFFIC_SECRET: Final = "CLIENT_EARLY_TRAFFIC_SECRET"
CLIENT_HANDSHAKE_TRAFFIC_SECRET: Final = "CLIENT_HANDSHAKE_TRAFFIC_SECRET"
SERVER_HANDSHAKE_TRAFFIC_SECRET: Final = "SERVER_HANDSHAKE_TRAFFIC_SECRET"
CLIENT_TRAFFIC_SECRET_0: Final = "CLIENT_TRAFFIC_SECRET_0"
SERVER_TRAFFIC_SECRET_0: Final = "SERVER_TRAFFIC_SECRET_0"
EXPORTER_SECRET: Final = "EXPORTER_SECRET"
EARLY_EXPORTER_SECRET: Final = "EARLY_EXPORTER_SECRET"

KNOWN_LABELS: Final = frozenset(
    {
        CLIENT_RANDOM,
        CLIENT_EARLY_TRAFFIC_SECRET,
        CLIENT_HANDSHAKE_TRAFFIC_SECRET,
        SERVER_HANDSHAKE_TRAFFIC_SECRET,
        CLIENT_TRAFFIC_SECRET_0,
        SERVER_TRAFFIC_SECRET_0,
        EXPORTER_SECRET,
        EARLY_EXPORTER_SECRET,
    }
)
# Secret sizes: a TLS 1.2 master secret is 48 bytes (RFC 5246 §8.1); TLS 1.3 secrets are
# Hash.length (32 for SHA-256, 48 for SHA-384; 64 allowed for SHA-512 based suites).
_SECRET_LENGTHS: Final = {CLIENT_RANDOM: frozenset({48})}
_TLS13_SECRET_LENGTHS: Final = frozenset({32, 48, 64})
_HEX: Final = frozenset("0123456789abcdefABCDEF")
_LABEL: Final = re.compile(r"[A-Z][A-Z0-9_]*")
_NEWLINE: Final = re.compile(r"\r\n|\n|\r")  # Wireshark splits at LF and drops a CR before it
_HEX_PAIRS: Final = re.compile(r"(?:[0-9A-Fa-f]{2})+")
_SESSION_LINE: Final = re.compile(r"RSA\s+Session-ID:((?:[0-9A-Fa-f]{2})+)\s+Master-Key:")
#: Line numbers kept per (source, problem) for reports; the counts are complete.
MAX_PROBLEM_LINES: Final = 5
#: Problems with key-log lines, by the :class:`KeyLogStats` field that counts them.
PROBLEMS: Final = {
    "malformed": "lines that do not parse (not used)",
    "unknown_labels": "lines with a label this tool does not use",
    "rsa": "legacy RSA pre-master lines (RSA key exchange is not decrypted)",
    "conflicts": "second, different secrets for a client random and label (the first is used)",
    "trailing": "lines with characters after the secret (ignored, as Wireshark does)",
}


class Secret:
    """Key material that does not print itself.  ``reveal()`` gives the bytes."""

    __slots__ = ("_value",)

    def __init__(self, value: bytes) -> None:
        self._value = bytes(value)

    def reveal(self) -> bytes:
        return self._value

    def __len__(self) -> int:
        return len(self._value)

    def __repr__(self) -> str:
        return f"<Secret: {len(self._value)} bytes, redacted>"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Secret):
            return NotImplemented
        return hmac.compare_digest(self._value, other._value)

    __hash__ = None  # type: ignore[assignment]

    def __reduce__(self) -> tuple[type[Secret], tuple[bytes]]:
        return (Secret, (self._value,))


@dataclass(slots=True, kw_only=True)
class KeyLogStats:
    """What a key log source contained (all counts of lines unless noted)."""

    lines: int = 0
    entries: int = 0  # secrets added
    comments: int = 0
    blank: int = 0
    rsa: int = 0  # legacy RSA lines
    unknown_labels: int = 0
    malformed: int = 0
    duplicates: int = 0  # same (client_random, label) with the same value again
    conflicts: int = 0  # same (client_random, label) with a different value (first kept)
    trailing: int = 0  # entries used although other characters followed the secret
    session_ids: int = 0  # "RSA Session-ID:… Master-Key:…" lines (master secret by session id)

    def add(self, other: KeyLogStats) -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


@dataclass(frozen=True, slots=True, kw_only=True)
class KeyLogProblem:
    """Lines of one source that could not be used as they were (never their contents)."""

    source: str
    kind: str  # a key of PROBLEMS
    count: int
    lines: tuple[int, ...]  # the first line numbers (1-based), at most MAX_PROBLEM_LINES


def _unhex(text: str) -> bytes | None:
    if not text or len(text) % 2 or not _HEX.issuperset(text):
        return None
    return bytes.fromhex(text)


class KeyLog:
    """Secrets by client_random (32 bytes) and label."""

    __slots__ = ("_by_random", "_rsa", "_by_session", "stats", "_sources", "_unknown", "_problems")

    def __init__(self) -> None:
        self._by_random: dict[bytes, dict[str, Secret]] = {}
        self._rsa: dict[bytes, Secret] = {}
        self._by_session: dict[bytes, Secret] = {}
        self.stats = KeyLogStats()
        self._sources: list[str] = []
        self._unknown: set[str] = set()
        self._problems: list[KeyLogProblem] = []

    # -- building ------------------------------------------------------------
    @classmethod
    def from_text(cls, text: str | bytes, *, source: str = "") -> KeyLog:
        kl = cls()
        kl.add_text(text, source=source)
        return kl

    def add_text(self, text: str | bytes, *, source: str = "") -> KeyLogStats:
        """Add the lines of one source (file contents or a DSB payload); return its counts."""
        if isinstance(text, bytes | bytearray | memoryview):
            text = bytes(text).decode("ascii", errors="replace")
        name = source or f"source {len(self._sources) + 1}"
        st = KeyLogStats()
        where: dict[str, list[int]] = {k: [] for k in PROBLEMS}
        for number, raw in enumerate(_NEWLINE.split(text), 1):
            st.lines += 1
            before = (st.malformed, st.unknown_labels, st.rsa, st.conflicts, st.trailing)
            self._line(raw, st)
            after = (st.malformed, st.unknown_labels, st.rsa, st.conflicts, st.trailing)
            for kind, b, a in zip(PROBLEMS, before, after, strict=True):
                if a > b and len(where[kind]) < MAX_PROBLEM_LINES:
                    where[kind].append(number)
        if not text or text.endswith(("\n", "\r")):
            st.lines -= 1  # the empty string after the last newline is not a line
            st.blank -= 1
        self.stats.add(st)
        self._sources.append(name)
        for kind in PROBLEMS:
            n = getattr(st, kind)
            if n:
                self._problems.append(
                    KeyLogProblem(source=name, kind=kind, count=n, lines=tuple(where[kind]))
                )
        return st

    def _line(self, raw: str, st: KeyLogStats) -> None:
        line = raw.strip().strip("\x00").strip()
        if not line:
            st.blank += 1
            return
        if line.startswith("#"):
            st.comments += 1
            return
        parts = line.split(None, 2)
        label = parts[0]
        if label == "RSA":
            self._add_rsa(line, parts, st)
            return
        if label not in KNOWN_LABELS:
            if len(parts) == 3 and _LABEL.fullmatch(label) and _unhex(parts[1]) is not None:
                st.unknown_labels += 1
                self._unknown.add(label)
            else:
                st.malformed += 1
            return
        if len(parts) != 3:
            st.malformed += 1
            return
        client_random = _unhex(parts[1])
        m = _HEX_PAIRS.match(parts[2])
        if client_random is None or len(client_random) != 32 or m is None:
            st.malformed += 1
            return
        hexits = m.group(0)
        if label == CLIENT_RANDOM:
            hexits = hexits[:96]  # Wireshark: exactly 48 bytes, the rest is not the secret
        secret = bytes.fromhex(hexits)
        allowed = _SECRET_LENGTHS.get(label, _TLS13_SECRET_LENGTHS)
        if len(secret) not in allowed:
            st.malformed += 1
            return
        if parts[2][len(hexits) :].strip():
            st.trailing += 1
        self._put(client_random, label, Secret(secret), st)

    def add_secret(self, client_random: bytes, label: str, secret: bytes) -> None:
        """Add one secret programmatically (tests, or secrets from another channel)."""
        if label not in KNOWN_LABELS:
            raise ValueError(f"unknown key log label {label!r}")
        if len(client_random) != 32:
            raise ValueError("client_random must be 32 bytes")
        st = KeyLogStats()
        self._put(bytes(client_random), label, Secret(secret), st)
        self.stats.add(st)

    def merge(self, other: KeyLog) -> None:
        """Merge another key log into this one (first value wins, conflicts counted)."""
        st = KeyLogStats()
        for cr, secrets in other._by_random.items():
            for label, secret in secrets.items():
                self._put(cr, label, secret, st)
        for prefix, pms in other._rsa.items():
            self._rsa.setdefault(prefix, pms)
        # Line-level counts come over as they were; entries/duplicates/conflicts are recounted.
        counted = KeyLogStats(**{f.name: getattr(other.stats, f.name) for f in fields(other.stats)})
        counted.entries, counted.duplicates, counted.conflicts = (
            st.entries,
            st.duplicates,
            st.conflicts,
        )
        self.stats.add(counted)
        for sid, master in other._by_session.items():
            self._by_session.setdefault(sid, master)
        self._sources.extend(other._sources)
        self._unknown |= other._unknown
        self._problems.extend(other._problems)

    def _put(self, client_random: bytes, label: str, secret: Secret, st: KeyLogStats) -> None:
        slot = self._by_random.setdefault(client_random, {})
        old = slot.get(label)
        if old is None:
            slot[label] = secret
            st.entries += 1
        elif old == secret:
            st.duplicates += 1
        else:
            st.conflicts += 1

    def _add_rsa(self, line: str, parts: list[str], st: KeyLogStats) -> None:
        m = _SESSION_LINE.match(line)
        if m is not None:
            # "RSA Session-ID:<session id> Master-Key:<48-byte master secret>" (NSS's old
            # format, still read by Wireshark): a TLS <= 1.2 master secret by session id
            m2 = _HEX_PAIRS.match(line, m.end())
            sid = bytes.fromhex(m.group(1))
            if m2 is None or len(m2.group(0)) < 96 or not 1 <= len(sid) <= 32:
                st.malformed += 1
                return
            if line[m2.start() + 96 :].strip():
                st.trailing += 1
            st.session_ids += 1
            self._by_session.setdefault(sid, Secret(bytes.fromhex(m2.group(0)[:96])))
            return
        if len(parts) != 3:
            st.malformed += 1
            return
        prefix = _unhex(parts[1])
        pm = _HEX_PAIRS.match(parts[2])
        if prefix is None or len(prefix) != 8 or pm is None or len(pm.group(0)) < 96:
            st.malformed += 1
            return
        if parts[2][96:].strip():
            st.trailing += 1
        st.rsa += 1
        self._rsa.setdefault(prefix, Secret(bytes.fromhex(pm.group(0)[:96])))

    # -- lookup --------------------------------------------------------------
    def get(self, client_random: bytes, label: str) -> Secret | None:
        slot = self._by_random.get(bytes(client_random))
        return None if slot is None else slot.get(label)

    def secrets_for(self, client_random: bytes) -> Mapping[str, Secret]:
        return dict(self._by_random.get(bytes(client_random), {}))

    def labels_for(self, client_random: bytes) -> frozenset[str]:
        return frozenset(self._by_random.get(bytes(client_random), {}))

    def session_master(self, session_id: bytes) -> Secret | None:
        """The master secret of an ``RSA Session-ID:… Master-Key:…`` line, if any."""
        return self._by_session.get(bytes(session_id)) if session_id else None

    def problems(self) -> list[KeyLogProblem]:
        """What could not be used as it was, per source and kind (see :data:`PROBLEMS`)."""
        return list(self._problems)

    def rsa_premaster(self, encrypted_premaster_prefix: bytes) -> Secret | None:
        """The pre-master secret of a legacy ``RSA`` line (first 8 bytes of the encrypted PMS)."""
        return self._rsa.get(bytes(encrypted_premaster_prefix[:8]))

    def client_randoms(self) -> Iterator[bytes]:
        return iter(self._by_random)

    @property
    def sources(self) -> tuple[str, ...]:
        return tuple(self._sources)

    @property
    def unknown_labels(self) -> frozenset[str]:
        return frozenset(self._unknown)

    def __contains__(self, client_random: object) -> bool:
        return (
            isinstance(client_random, bytes | bytearray) and bytes(client_random) in self._by_random
        )

    def __len__(self) -> int:
        return len(self._by_random)

    def __repr__(self) -> str:
        n = sum(len(v) for v in self._by_random.values())
        return (
            f"<KeyLog: {len(self._by_random)} client randoms, {n} secrets, {len(self._rsa)} RSA, "
            f"{len(self._sources)} sources; values redacted>"
        )

    __str__ = __repr__
