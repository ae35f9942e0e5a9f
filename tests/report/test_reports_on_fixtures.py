"""On every fixture (every finding kind with one, TLS/QUIC tables, requests, gaps,
counterfactuals, anomalies; client and server vantage) the JSON and text reports of
issue 16's writers are main's, byte for byte (json_oracle.py, text_oracle.py)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import json_oracle
import pytest
import text_oracle

import pcapkit
from pcapkit.report import json as columnar
from pcapkit.report import text
from pcapkit.report.narrow import narrow

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = sorted(p.name for p in (ROOT / "fixtures").iterdir() if p.is_dir())


def _json_identical(t: pcapkit.Trace, path: Path) -> None:
    want = io.StringIO()
    json_oracle.write_analysis_json(t, want)
    got = io.StringIO()
    columnar.write_analysis_json(t, got)
    assert got.getvalue() == want.getvalue(), path
    for table in ("flows", "tls", "quic", "requests", "findings", "records"):
        df = getattr(t, table)
        want = io.StringIO()
        json_oracle.write_records_json(df, want)
        got = io.StringIO()
        columnar.write_records_json(df, got)
        assert got.getvalue() == want.getvalue(), (path, table)


def _text_identical(t: pcapkit.Trace, **kw: Any) -> None:
    assert text.analysis_text(t, **kw) == text_oracle.analysis_text(t, **kw), kw


@pytest.mark.parametrize("fixture", FIXTURES)
def test_reports_identical(fixture: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # chunk boundaries inside every table: 3 rows, then about 2 kB of text a chunk
    monkeypatch.setattr(columnar, "CHUNK_FIRST", 3)
    monkeypatch.setattr(columnar, "CHUNK_BYTES", 2048)
    paths = sorted((ROOT / "fixtures" / fixture).glob("*.pcap*"))
    assert paths
    for path in paths:
        with pcapkit.open(path) as t:
            _json_identical(t, path)
            f = t.findings
            _text_identical(t)
            _text_identical(t, max_flows=None)
            _text_identical(t, max_flows=1)
            _text_identical(t, findings=f.iloc[::-1])  # the worst last: another grouping
            _text_identical(t, findings=narrow(f, min_severity="medium"))
            flows = t.flows.flow.tolist()
            if flows:
                _text_identical(t, findings=narrow(f, flows={flows[0]}), only_flows={flows[0]})
            assert text.summary_lines(f, t.flows) == text_oracle.summary_lines(f, t.flows)
            assert text.verdict(f) == text_oracle.verdict(f)
            assert text.time_lost_ms(f) == text_oracle.time_lost_ms(f)
