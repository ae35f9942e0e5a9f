"""No crash on any capture: every declared table and both reports, on every capture under
``../shared/realworld``, ``../shared/corpus`` (when present) and ``fixtures/``.

DESIGN.md §4: analysis never crashes on input; what cannot be parsed becomes an
``anomalies`` row with a declared name.  A whole-file problem (not a capture) is a
:class:`pcapkit.errors.PcapkitError` at open, which is a clean refusal, not a crash.
Corpus captures whose key log is a separate file (``../shared/corpus/MANIFEST.md``) are
opened once more with it, so the decryption paths run too.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

import pcapkit
from pcapkit.anomalies import ANOMALIES
from pcapkit.errors import PcapkitError
from pcapkit.report.json import analysis_json
from pcapkit.report.text import analysis_text
from pcapkit.schema import SCHEMAS

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


def _captures(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.name.endswith(SUFFIXES))


def cases() -> list[object]:
    out: list[object] = []
    for p in _captures(ROOT / "fixtures"):
        out.append(pytest.param(p, None, id=p.relative_to(ROOT).as_posix()))
    for sub in ("realworld", "corpus"):
        for p in _captures(SHARED / sub):
            rel = p.relative_to(SHARED).as_posix()
            out.append(pytest.param(p, None, id=rel))
            key = (
                CORPUS_KEYS.get(p.relative_to(SHARED / "corpus").as_posix())
                if sub == "corpus"
                else None
            )
            if key:
                out.append(pytest.param(p, SHARED / "corpus" / key, id=rel + "#keys"))
    return out


def test_shared_captures_are_present() -> None:
    if not SHARED.is_dir():
        pytest.skip(f"../shared not found at {SHARED}")
    assert len(_captures(SHARED / "realworld")) >= 101


@pytest.mark.parametrize(("path", "keylog"), cases())
def test_every_table_and_report(path: Path, keylog: Path | None) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            t = pcapkit.open(path, keylog)
        except PcapkitError:
            return  # a whole-file refusal (DESIGN.md §4), not a crash
        with t:
            for name in SCHEMAS:
                table = getattr(t, name)
                assert list(table.columns) == [c for c, _, _ in SCHEMAS[name]], name
            undeclared = set(t.anomalies["name"]) - set(ANOMALIES)
            assert not undeclared, f"undeclared anomaly names: {sorted(undeclared)}"
            json.dumps(analysis_json(t), default=str)
            assert analysis_text(t)
