"""The shared TCP model (pcapkit.detect.tcp_model) and constants: one direction view, one
"released by an ACK" answer, detectors that import the model and not each other.

Real traffic only: the lab fixtures, with and without their embedded keys.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import numpy as np
import pytest

import pcapkit
from pcapkit.detect import DETECTORS, cork, delayed_ack, nagle, resumption, ssr, tls_records
from pcapkit.detect.constants import (
    DELACK_TIMER_MIN_NS,
    IW_SEGMENTS,
    LAG_TOL_MIN_NS,
    LATE_SLACK_NS,
    MS,
    RFC1122_ACK_DELAY_MAX_NS,
    TCP_RTO_MIN_NS,
    ContentType,
    Coupling,
)
from pcapkit.detect.tcp_model import DirView

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "fixtures"
DETECT = ROOT / "pcapkit" / "detect"
# fixtures with Nagle holds (nagle_wwr: plain TCP; the others: TLS records)
NAGLE_FIXTURES = ["nagle_wwr", "tls_sse_nagle", "tls_record_split_write", "tls_record_whole_write"]
VANTAGES = ("client", "middle", "server")

_cache: dict[tuple[str, str, bool], pcapkit.Trace] = {}


def trace(name: str, vantage: str, keys: bool = True) -> pcapkit.Trace:
    k = (name, vantage, keys)
    if k not in _cache:
        _cache[k] = pcapkit.open(FIX / name / f"{vantage}.pcapng", embedded_keys=keys)
    return _cache[k]


@pytest.mark.parametrize("keys", [True, False], ids=["keys", "nokeys"])
@pytest.mark.parametrize("vantage", VANTAGES)
@pytest.mark.parametrize("name", NAGLE_FIXTURES)
def test_one_answer_to_released_by_an_ack(name, vantage, keys):
    """Every segment the nagle detector reports as held is, for the release classification
    tls_records uses (DirView.release), released by Nagle — by the same ACK."""
    ctx = trace(name, vantage, keys).detect_context
    found = nagle.detect(ctx)
    for f in found:
        v = DirView.build(ctx, f.flow, 0 if f.dir == "c2s" else 1)
        roles = {e.role: e.frame for e in f.evidence}
        rel = v.release(int(np.searchsorted(v.p.frame, roles["held_segment"])))
        assert rel.cause == "nagle", (f.frames, rel)
        assert rel.trigger_idx is not None
        assert int(v.p.frame[rel.trigger_idx]) == roles["releasing_ack"]
        assert f.details["d_x_ms"] == round(v.d_x / MS, 3)
        assert f.details["tolerance_ms"] == round(v.tolerance() / MS, 3)


@pytest.mark.parametrize("vantage", VANTAGES)
def test_coalesced_records_use_the_model_legs(vantage):
    """tls_records prints the d_X it classified with: the refined leg nagle uses."""
    ctx = trace("tls_sse_nagle", vantage).detect_context
    (co,) = [f for f in tls_records.detect(ctx) if f.kind == "tls_records_coalesced"]
    (na,) = [f for f in nagle.detect(ctx) if f.kind == "nagle_delayed_ack"]
    assert f"d_X = {na.details['d_x_ms']:.2f} ms" in co.explanation


@pytest.mark.parametrize("vantage", ["client", "middle"])
@pytest.mark.parametrize("name", ["tls_record_whole_write", "tls_record_split_write"])
def test_session_tickets_answer_the_finished_without_keys(name, vantage):
    """Without keys the server's two NewSessionTicket records read as application records
    in one push unit.  They left one leg after the client's ACK of the server's flight,
    but also after the client's Finished had reached the server (frames 8–9): the server
    answers the Finished (OpenSSL sends tickets on reading it), nothing held them.  The
    release classification says "response", as the nagle detector's own rule does."""
    ctx = trace(name, vantage, keys=False).detect_context
    assert not [f for f in tls_records.detect(ctx) if f.kind == "tls_records_coalesced"]


def test_views_are_shared_across_detectors():
    ctx = trace("tls_sse_nagle", "server").detect_context
    v = DirView.timed(ctx, 0, 1)
    assert v is not None and v is DirView.build(ctx, 0, 1)
    rv = tls_records.record_view(ctx, 0, 1)
    assert rv is not None and rv.tcp is v
    assert v.legs_known and v.mss > 0


def test_detectors_import_the_model_not_each_other():
    detectors = {d.name for d in DETECTORS}
    assert {"nagle", "cork", "delayed_ack", "tls_records"} <= detectors
    for d in DETECTORS:
        tree = ast.parse(Path(d.module.__file__).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
                assert node.module.split(".")[0] not in detectors, (d.name, node.module)


def test_threshold_defaults_come_from_the_constants():
    def default(fn, name):
        return inspect.signature(fn).parameters[name].default

    assert default(cork.detect, "rto_min_ms") == TCP_RTO_MIN_NS / MS == 200.0
    assert default(ssr.detect, "rto_min_ns") == TCP_RTO_MIN_NS
    assert default(ssr.detect, "iw_segments") == IW_SEGMENTS == 10
    assert default(resumption.detect, "initial_window_segments") == IW_SEGMENTS
    c = Coupling()  # the one coupling window, a setting of the model (tcp.*)
    assert c.tol_min_ms == LAG_TOL_MIN_NS / MS == 0.5
    assert c.late_slack_ms == LATE_SLACK_NS / MS == 2.0 and c.late_ns == LATE_SLACK_NS
    for fn in (nagle.detect, delayed_ack.detect, cork.detect):
        assert "tol_min_ms" not in inspect.signature(fn).parameters
    for fn in (nagle.detect, delayed_ack.detect):
        assert default(fn, "delack_timer_min_ms") == DELACK_TIMER_MIN_NS / MS == 30.0
        assert default(fn, "ack_delay_max_ms") == RFC1122_ACK_DELAY_MAX_NS / MS == 500.0


def test_content_types_are_the_dissectors():
    from dissectors.tls.record import ContentType as Dissected

    assert ContentType is Dissected
    assert ContentType.APPLICATION_DATA == 23 and ContentType.CHANGE_CIPHER_SPEC == 20
