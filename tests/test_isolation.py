"""Failure isolation (issue 15): an unexpected exception while one connection is
dissected (TLS, QUIC, HTTP) or inside one detector becomes an ``internal_error`` anomaly
(layer, flow or detector, exception type and message, where) and the rest of the report
is complete; the exit code stays documented.  The failures are planted (monkeypatch) on
the lab's fixtures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import pcapkit
import pcapkit.sessions.http as http_layer
import pcapkit.sessions.tls as tls_layer
from dissectors.quic import QuicConnection
from pcapkit.cli import cli
from pcapkit.detect.registry import DETECTORS
from pcapkit.report import analysis_text

FIX = Path(__file__).resolve().parent.parent / "fixtures"
NO_REUSE = FIX / "tls_no_reuse" / "client.pcapng"  # 3 TLS 1.3 connections, 3 requests


def _internal(t: pcapkit.Trace) -> list[dict]:
    a = t.anomalies
    return a[a["name"] == "internal_error"].to_dict("records")


class Planted(RuntimeError):
    pass


def test_a_failing_detector_is_a_row_and_the_others_still_find(monkeypatch) -> None:
    det = next(d for d in DETECTORS if d.name == "reuse")

    def boom(ctx, **kw):
        raise Planted("planted detector failure")

    monkeypatch.setattr(det.module, "detect", boom)
    r = CliRunner().invoke(cli, ["analyze", str(NO_REUSE), "--format", "json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    rows = [a for a in doc["anomalies"] if a["name"] == "internal_error"]
    assert len(rows) == 1 and rows[0]["flow"] is None
    d = rows[0]["detail"]
    assert d.startswith("detect detector reuse: Planted: planted detector failure (at ")
    assert "tests/" not in d or "test_isolation.py" not in d  # where: pcapkit's own frames
    kinds = {f["kind"] for f in doc["findings"]}
    assert "connection_not_reused" not in kinds and "tls_resumption_missing" in kinds
    assert doc["capture"]["anomalies"] == len(doc["anomalies"])
    assert len(doc["flows"]) == 3 and len(doc["requests"]) == 3
    assert "1 internal error(s)" in r.stderr


def test_a_failing_tls_connection_is_a_row_and_the_others_are_read(monkeypatch) -> None:
    real = tls_layer._feed_order  # noqa: SLF001
    calls = []

    def second_fails(idx):
        calls.append(1)
        if len(calls) == 2:  # the second connection's TLS session
            raise Planted("planted TLS failure")
        return real(idx)

    monkeypatch.setattr(tls_layer, "_feed_order", second_fails)
    with pcapkit.open(NO_REUSE) as t:
        rows = _internal(t)
        assert len(rows) == 1 and rows[0]["flow"] == 1
        assert rows[0]["detail"].startswith("tls flow 1: Planted: planted TLS failure (at ")
        assert t.tls["flow"].tolist() == [0, 2] and t.tls["decrypted"].all()
        assert sorted(t.requests["flow"].tolist()) == [0, 2]
        assert len(t.flows) == 3 and len(t.findings)  # transport analysis of every flow
        analysis_text(t)


def test_a_failing_http_connection_rolls_back_its_rows(monkeypatch) -> None:
    real = http_layer._http1  # noqa: SLF001

    def fail_on_flow_2(b, af, conn_times):
        real(b, af, conn_times)  # rows are added, then it fails: they must not stay
        if af.flow == 2:
            raise Planted("planted HTTP failure")

    monkeypatch.setattr(http_layer, "_http1", fail_on_flow_2)
    with pcapkit.open(NO_REUSE) as t:
        rows = _internal(t)
        assert [(r["flow"], r["detail"].split(" (at ")[0]) for r in rows] == [
            (2, "http flow 2: Planted: planted HTTP failure")
        ]
        assert sorted(t.requests["flow"].tolist()) == [0, 1]
        assert 2 not in set(t.messages["flow"].tolist())
        assert t.tls["flow"].tolist() == [0, 1, 2]


def test_a_failing_quic_connection_is_a_row(monkeypatch) -> None:
    real = QuicConnection.feed
    seen: list[int] = []

    def fail_second(self, datagram, frame, ts_ns, from_client):
        if id(self) not in seen:
            seen.append(id(self))
        if seen.index(id(self)) == 1:
            raise Planted("planted QUIC failure")
        return real(self, datagram, frame, ts_ns, from_client)

    monkeypatch.setattr(QuicConnection, "feed", fail_second)
    with pcapkit.open(FIX / "h3_resumed_0rtt" / "client.pcapng") as t:
        rows = _internal(t)
        assert len(rows) == 1 and rows[0]["flow"] == 1
        assert rows[0]["detail"].startswith("quic flow 1: Planted: planted QUIC failure")
        assert t.quic["flow"].tolist() == [0]
        assert t.requests["flow"].tolist() == [0]
        analysis_text(t)


def test_strict_mode_raises(monkeypatch) -> None:
    det = next(d for d in DETECTORS if d.name == "reuse")
    monkeypatch.setattr(det.module, "detect", lambda ctx, **kw: 1 / 0)
    monkeypatch.setenv("PCAPKIT_STRICT", "1")
    with pcapkit.open(NO_REUSE) as t, pytest.raises(ZeroDivisionError):
        _ = t.findings


def test_a_failure_of_the_whole_analysis_is_one_line_exit_1(monkeypatch) -> None:
    import pcapkit.trace as trace_mod

    def boom(*a, **k):
        raise Planted("planted whole-capture failure")

    monkeypatch.setattr(trace_mod, "build_flows", boom)
    from pcapkit.cli import main

    monkeypatch.setattr("sys.argv", ["pcapkit", "analyze", str(NO_REUSE)])
    with pytest.raises(SystemExit) as e:
        main()
    assert e.value.code == 1


@pytest.mark.parametrize(
    "exc, expected",
    [
        # SYNTHETIC: a message quoting the capture (a terminal title escape) is escaped
        (Planted("bad \x1b]0;owned\x07 header"), "internal error: Planted: bad \\x1b]0;owned"),
        # out of memory (a full-size hostile input under a memory cap): a hint, no traceback
        (MemoryError("Unable to allocate 977. KiB"), "out of memory"),
    ],
)
def test_the_last_resort_is_one_escaped_line(monkeypatch, capsys, exc, expected) -> None:
    import pcapkit.trace as trace_mod

    def boom(*a, **k):
        raise exc

    monkeypatch.setattr(trace_mod, "build_flows", boom)
    from pcapkit.cli import main

    monkeypatch.setattr("sys.argv", ["pcapkit", "analyze", str(NO_REUSE)])
    with pytest.raises(SystemExit) as e:
        main()
    err = capsys.readouterr().err
    assert e.value.code == 1
    assert err.count("\n") == 1 and expected in err, err
    assert "\x1b" not in err and "Traceback" not in err


def test_a_finding_past_int64_nanoseconds_is_a_row_not_a_crash(monkeypatch) -> None:
    """A detector whose arithmetic runs past int64 nanoseconds on a capture (a fuzzed
    clock jump made one do so: tests/fuzz/reproducers/sse-batching-clock-jump.pcap) loses
    its findings to an internal_error row; the findings table is still built."""
    det = next(d for d in DETECTORS if d.name == "reuse")
    real = det.module.detect

    def far(ctx, **kw):
        found = real(ctx, **kw)
        for f in found:
            f.t_end_ns = 1 << 64
        return found

    monkeypatch.setattr(det.module, "detect", far)
    t = pcapkit.open(NO_REUSE)
    kinds = set(t.findings["kind"])  # built: no OverflowError from the int64 column
    assert "connection_not_reused" not in kinds and "tls_resumption_missing" in kinds
    rows = _internal(t)
    assert len(rows) == 1
    assert rows[0]["detail"].startswith("detect detector reuse: OverflowError: ")
    assert "outside int64" in rows[0]["detail"]
