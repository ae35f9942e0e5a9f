"""The captures under ``../shared`` that the realworld tests read: one list for all of them.

``captures()`` gives (name, capture, key log) for every capture of ``../shared/realworld``,
then of ``../shared/corpus`` — the corpus captures whose key log is a separate file twice,
without and with it (``name#keys``).  Names are paths relative to ``../shared``.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHARED = (ROOT.parent / "shared").resolve()
SUFFIXES = (".pcap", ".pcapng", ".pcap.gz", ".pcapng.gz", ".cap")
# corpus captures whose key log is a separate file (../shared/corpus/MANIFEST.md)
CORPUS_KEYS = {
    "wireshark/tls13-rfc8446.pcap": "wireshark/keys/tls13-rfc8446.keys",
    "wireshark/tls12-chacha20poly1305.pcap": "wireshark/keys/tls12-chacha20poly1305.keys",
    "wireshark/http2-data-reassembly.pcap": "wireshark/keys/http2-data-reassembly.keys",
    "illustrated-tls12/capture.pcap": "illustrated-tls12/keylog.txt",
    "illustrated-tls13/capture.pcap": "illustrated-tls13/keylog.txt",
    "illustrated-quic/capture.pcap": "illustrated-quic/keylog.txt",
}


def capture_files(folder: Path) -> list[Path]:
    """Every capture file below ``folder`` (none when it is absent), sorted."""
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.name.endswith(SUFFIXES))


def captures() -> list[tuple[str, Path, Path | None]]:
    """(name, capture, key log) of every shared capture: realworld, then corpus (with and
    without its key log)."""
    out: list[tuple[str, Path, Path | None]] = []
    for p in capture_files(SHARED / "realworld"):
        out.append((p.relative_to(SHARED).as_posix(), p, None))
    corpus = SHARED / "corpus"
    for p in capture_files(corpus):
        name = p.relative_to(SHARED).as_posix()
        out.append((name, p, None))
        key = CORPUS_KEYS.get(p.relative_to(corpus).as_posix())
        if key:
            out.append((name + "#keys", p, corpus / key))
    return out
