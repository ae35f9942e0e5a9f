"""The HTTP layer's declared tables on real lab captures: h2_windows (HTTP/2 flow control)."""

from __future__ import annotations

from pathlib import Path

import pcapkit
from pcapkit import schema

FIX = Path(__file__).resolve().parents[2] / "fixtures"
H2_DEFAULT_WINDOW = 65_535  # RFC 9113 §6.9.2: initial stream and connection windows


def test_h2_windows_follow_data_and_window_updates() -> None:
    """The server's send windows after each frame: a DATA frame spends its length, a
    WINDOW_UPDATE from the client adds its increment (RFC 9113 §6.9), from 65,535."""
    with pcapkit.open(FIX / "h2_flow_control" / "client.pcapng") as t:
        w = t.h2_windows
        assert list(w.columns) == schema.columns("h2_windows")
        w = w[w.flow == 0].sort_values(["frame", "stream"], kind="stable")
        data = w[(w.type == "DATA") & (w.dir == "s2c")]
        updates = w[(w.type == "WINDOW_UPDATE") & (w.dir == "c2s")]
        assert len(data) >= 10 and len(updates) >= 4
        conn = stream1 = H2_DEFAULT_WINDOW
        for r in w.itertuples(index=False):
            if r.type == "DATA" and r.dir == "s2c" and r.stream == 1:
                conn -= r.length
                stream1 -= r.length
                assert (r.connection_window, r.stream_window) == (conn, stream1)
            elif r.type == "WINDOW_UPDATE" and r.dir == "c2s":
                if r.stream == 0:
                    conn += r.increment
                    assert r.connection_window == conn
                else:
                    stream1 += r.increment
                    assert r.stream_window == stream1
        assert int(data.end_stream.sum()) == 1  # one response body, ended once


def test_h2_windows_empty_without_http2() -> None:
    with pcapkit.open(FIX / "tls_sse_nagle" / "client.pcapng") as t:
        assert t.h2_windows.empty and list(t.h2_windows.columns) == schema.columns("h2_windows")
