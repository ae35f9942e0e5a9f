"""The JSON report is streamed row by row (issue 15: a million-connection capture made one
``json.dumps(indent=2)`` string and ran out of memory), byte for byte what the document
dumped at once would be."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

import pcapkit
from pcapkit.report.json import analysis_json, records, write_analysis_json, write_records_json

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("fixture", ["h2_sse_drop", "h3_sse_drop", "nagle_wwr"])
def test_streamed_report_equals_the_document(fixture: str) -> None:
    with pcapkit.open(ROOT / "fixtures" / fixture / "client.pcapng") as t:
        out = io.StringIO()
        write_analysis_json(t, out)
        assert out.getvalue() == json.dumps(analysis_json(t), indent=2) + "\n"
        for table in ("records", "requests", "flows", "anomalies"):
            df = getattr(t, table)
            out = io.StringIO()
            write_records_json(df, out)
            assert out.getvalue() == json.dumps(records(df), indent=2) + "\n"
            out = io.StringIO()
            write_records_json(df.iloc[:0], out)
            assert out.getvalue() == "[]\n"
