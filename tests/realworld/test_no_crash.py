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
from shared_captures import ROOT, SHARED, capture_files, captures

import pcapkit
from pcapkit.anomalies import ANOMALIES
from pcapkit.errors import PcapkitError
from pcapkit.report.json import analysis_json
from pcapkit.report.text import analysis_text
from pcapkit.schema import SCHEMAS


def cases() -> list[object]:
    out: list[object] = [
        pytest.param(p, None, id=p.relative_to(ROOT).as_posix())
        for p in capture_files(ROOT / "fixtures")
    ]
    out += [pytest.param(p, key, id=name) for name, p, key in captures()]
    return out


def test_shared_captures_are_present() -> None:
    if not SHARED.is_dir():
        pytest.skip(f"../shared not found at {SHARED}")
    assert len(capture_files(SHARED / "realworld")) >= 101


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
