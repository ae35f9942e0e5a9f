"""The report says what it could read: a clean verdict only for a capture it read."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

import pcapkit
import pcapkit.schema
from pcapkit.cli import cli
from pcapkit.report.coverage import coverage, coverage_line
from pcapkit.report.text import verdict
from pcapkit.sessions.tls import DECRYPT_STATUSES

FIX = Path(__file__).resolve().parent.parent / "fixtures"


def test_coverage_with_and_without_keys() -> None:
    path = FIX / "tls_sse_nagle" / "client.pcapng"
    with pcapkit.open(path) as t:
        cov = coverage(t)
        assert (cov["tls_sessions"], cov["tls_decrypted"]) == (1, 1)
        assert cov["not_decrypted_because"] == {}
        assert cov["frames_in_readable_connections"] == cov["frames_in_flows"] == len(t.packets)
        assert "could not be decrypted" not in verdict(t.findings, cov)
    with pcapkit.open(path, embedded_keys=False) as t:
        cov = coverage(t)
        assert (cov["tls_sessions"], cov["tls_decrypted"]) == (1, 0)
        assert cov["not_decrypted_because"] == {"missing_key": 1}
        assert cov["frames_in_readable_connections"] == 0
        line = coverage_line(cov)
        assert "TLS 0/1 decrypted" in line and "missing_key ×1" in line
        v = verdict(t.findings, cov)
        assert "1 TLS/QUIC connection(s) could not be decrypted" in v


def test_no_clean_verdict_on_what_could_not_be_read() -> None:
    """A control capture without its keys: nothing found, but the verdict says that
    the inside of the connection was not seen, never a plain "no pathology"."""
    path = FIX / "tls_sse_nodelay" / "client.pcapng"
    with pcapkit.open(path) as t:
        assert verdict(t.findings, coverage(t)) == "verdict: no latency pathology found"
    with pcapkit.open(path, embedded_keys=False) as t:
        v = verdict(t.findings, coverage(t))
        assert v.startswith("verdict: no latency pathology found in what could be read; ")
        assert "--keylog" in v


def test_json_report_has_coverage() -> None:
    r = CliRunner().invoke(
        cli, ["analyze", str(FIX / "h3_sse_drop" / "client.pcapng"), "--format", "json"]
    )
    assert r.exit_code == 0
    cov = json.loads(r.output)["coverage"]
    assert cov["quic_connections"] == cov["quic_decrypted"] == 1
    assert cov["udp_flows"] >= 1


def _old_app_flows(recs: pd.DataFrame) -> set[int]:
    """The rule before issue 16's memory work: nullable masks over the whole table."""
    app = (recs.content_type == 23) & (recs.status == "decrypted")
    return set(recs.flow[app].tolist())


@pytest.mark.parametrize(
    ("content_type", "status", "read"),
    [
        ([22, 23, 23], ["decrypted", "decrypted", "decrypted"], True),
        ([22, 22, 21], ["decrypted", "decrypted", "decrypted"], False),  # no app data
        ([23, 23, 23], ["missing_key", "incomplete", "bad_record"], False),  # not decrypted
        ([None, 22, None], ["decrypted", "decrypted", "decrypted"], False),  # NA type
        ([None, 23, 23], ["incomplete", "missing_key", "decrypted"], True),  # the last one
    ],
)
def test_decrypted_application_records_rule(
    content_type: list[int | None], status: list[str], read: bool
) -> None:
    """SYNTHETIC records (labelled cases) of the one TLS session of a capture opened
    without its keys: a session counts as read iff one of its records is decrypted
    application data — as the rule before the codes-based one (issue 16) said."""
    with pcapkit.open(FIX / "tls_sse_nagle" / "client.pcapng", embedded_keys=False) as t:
        f = int(t.tls.flow.iloc[0])
        recs = pcapkit.schema.frame(
            "records",
            {
                "flow": np.full(3, f, np.int64),
                "content_type": pd.array(content_type, dtype="Int16"),
                "status": pcapkit.schema.categorical(
                    np.array([DECRYPT_STATUSES.index(s) for s in status]), DECRYPT_STATUSES
                ),
            },
            3,
        )
        trace = SimpleNamespace(
            flows=t.flows,
            tls=t.tls,
            quic=t.quic,
            requests=t.requests,
            packets=t.packets,
            records=recs,
        )
        cov = coverage(trace)  # type: ignore[arg-type]
    assert cov["tls_decrypted"] == int(read) == len(_old_app_flows(recs))
