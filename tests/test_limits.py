"""Named resource limits (issue 15, :mod:`pcapkit.limits`): one registry, settable like
the detector thresholds, each exceeded limit an anomaly (never a MemoryError).  The
inputs are SYNTHETIC (``fuzz.build``, ``fuzz.hostile``) and small: each test sets the
limit low, or builds just past the default."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import pcapkit
from fuzz.build import Tcp, ip4, write_pcap
from fuzz.hostile import gzip_bomb
from pcapkit.cli import cli
from pcapkit.limits import LIMITS, LimitError, describe, resolve
from pcapkit.report.json import write_analysis_json

ROOT = Path(__file__).resolve().parent.parent


def test_every_limit_is_documented_and_settable() -> None:
    d = describe()
    assert list(d["name"]) == [x.name for x in LIMITS]
    assert (d["reason"].str.len() > 80).all()
    readme = (ROOT / "README.md").read_text()
    for x in LIMITS:
        assert f"`{x.name}`" in readme, x.name
    lim = resolve({"connections": "50", "h2_streams": 7})
    assert lim["connections"] == 50 and lim["h2_streams"] == 7 and lim["gzip_ratio"] == 100
    with pytest.raises(LimitError, match="did you mean connections"):
        resolve({"conections": 5})
    with pytest.raises(LimitError, match="whole number"):
        resolve({"connections": 0})
    with pytest.raises(LimitError, match="not a number"):
        resolve({"connections": "many"})
    with pytest.raises(ValueError):  # before the file is read
        pcapkit.open(ROOT / "does-not-exist.pcap", limits={"nope": 1})


def test_cli_limits_and_usage_errors(tmp_path: Path) -> None:
    r = CliRunner().invoke(cli, ["limits", "--format", "json"])
    assert r.exit_code == 0
    assert [x["name"] for x in json.loads(r.stdout)] == [x.name for x in LIMITS]
    cap = ROOT / "fixtures" / "nagle_wwr" / "client.pcapng"
    r = CliRunner().invoke(cli, ["analyze", str(cap), "--limit", "h2_stream=3"])
    assert r.exit_code == 2 and "did you mean h2_streams" in r.stderr
    r = CliRunner().invoke(cli, ["records", str(cap), "--limit", "connections=1"])
    assert r.exit_code == 0


def test_gzip_bomb_stops_at_the_ratio(tmp_path: Path) -> None:
    p = gzip_bomb(tmp_path / "bomb.pcap.gz", 48 << 20)  # 48 MiB of zero-length records
    assert p.stat().st_size < 200_000
    with pcapkit.open(p) as t:
        assert t.frames == (16 << 20) // 16 - 2  # the grace, less the file header
        an = t.anomalies
        row = an[an["name"] == "gzip_limit_exceeded"].iloc[0]
        assert "past the gzip_ratio limit (100x): a decompression bomb" in row["detail"]
        assert int(row["offset"]) == 16 << 20


def test_gzip_ratio_counts_compressed_bytes_consumed_not_read(tmp_path: Path, monkeypatch) -> None:
    """The ratio divides by the compressed bytes inflated so far, not by the whole chunk
    read: with the grace at 1 MiB, a 64 MiB bomb (its ~64 KB read at once) stops at
    1 MiB — dividing by the bytes read let it run to ~7 MiB (the full-size 1 GB bomb
    reached 100 MiB, 6.6 M frames, and ran out of a 2 GB address space)."""
    from pcapkit.io import reader

    monkeypatch.setattr(reader, "GZIP_RATIO_GRACE", 1 << 20)
    p = gzip_bomb(tmp_path / "bomb.pcap.gz", 64 << 20)
    with pcapkit.open(p) as t:
        assert t.frames == (1 << 20) // 16 - 2  # the grace, less the file header
        an = t.anomalies
        assert int(an[an["name"] == "gzip_limit_exceeded"].iloc[0]["offset"]) == 1 << 20


def test_gzip_bytes_and_an_ordinary_gzip(tmp_path: Path) -> None:
    raw = (ROOT / "fixtures" / "h2_sse_drop" / "client.pcapng").read_bytes()
    p = tmp_path / "c.pcapng.gz"
    p.write_bytes(gzip.compress(raw))
    with pcapkit.open(p) as t:
        assert "gzip_limit_exceeded" not in set(t.anomalies["name"])
    with pcapkit.open(p, limits={"gzip_bytes": 40_000}) as t:
        an = t.anomalies
        assert "inflates past the gzip_bytes limit (40000 bytes)" in " ".join(an["detail"])
        assert t.frames < 134


def _many_connections(path: Path, idle: int, busy: int) -> None:
    frames = []
    for i in range(idle):  # SYN and SYN/ACK only
        c = Tcp(cip=ip4(10, 1, i >> 8, i & 255), cport=30000 + i, sport=80)
        c._frame(True, c.cisn, 0, 0x02)  # noqa: SLF001 - a bare SYN
        frames += c.frames
    for i in range(busy):
        c = Tcp(cip=ip4(10, 2, 0, i), cport=40000 + i, sport=80, t_ns=2_000_000_000_000_000_000)
        c.handshake().send(True, b"GET /%d HTTP/1.1\r\nHost: x\r\n\r\n" % i)
        c.send(False, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        frames += c.frames
    write_pcap(path, frames)


def test_connections_beyond_the_limit_are_counted_not_detailed(tmp_path: Path) -> None:
    p = tmp_path / "many.pcap"
    _many_connections(p, idle=40, busy=10)
    with pcapkit.open(p, limits={"connections": 20}) as t:
        assert len(t.flows) == 50  # every connection keeps its row
        detail = t.flows_in_detail
        assert len(detail) == 20
        # those that carried payload come first, even though the idle ones came first
        assert set(t.requests["flow"]) == set(range(40, 50)) <= set(detail["flow"])
        an = t.anomalies
        row = an[an["name"] == "connection_limit_exceeded"].iloc[0]
        assert (
            "50 connections, the connections limit is 20: 30 more (30 packets, 0 payload"
            in (row["detail"])
        )
        out = io.StringIO()
        write_analysis_json(t, out)
        doc = json.loads(out.getvalue())
        assert len(doc["flows"]) == 20 and doc["capture"]["flows"] == 50
    with pcapkit.open(p) as t:  # the default: all in detail, no row
        assert len(t.flows_in_detail) == 50
        assert "connection_limit_exceeded" not in set(t.anomalies["name"])


# -- per connection: HTTP/2 streams, messages, handshake bytes, QUIC streams and CRYPTO ----
def _h2frame(ftype: int, flags: int, sid: int, payload: bytes = b"") -> bytes:
    return (
        len(payload).to_bytes(3, "big") + bytes([ftype, flags]) + sid.to_bytes(4, "big") + payload
    )


def test_h2_streams_beyond_the_limit_are_counted(tmp_path: Path) -> None:
    block = bytes([0x82, 0x86, 0x84])  # :method GET, :scheme http, :path /
    data = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + _h2frame(4, 0, 0)
    data += b"".join(_h2frame(1, 5, 1 + 2 * i, block) for i in range(50))
    c = Tcp(sport=80).handshake().send(True, data)
    write_pcap(tmp_path / "h2.pcap", c.frames)
    with pcapkit.open(tmp_path / "h2.pcap", limits={"h2_streams": 10}) as t:
        assert t.requests["stream"].tolist() == [1 + 2 * i for i in range(10)]
        row = t.anomalies[t.anomalies["name"] == "h2_stream_limit_exceeded"].iloc[0]
        assert "50 streams, the h2_streams limit is 10: 40 more (40 frames)" in row["detail"]
        assert int(row["flow"]) == 0


def test_messages_beyond_the_limit_are_counted(tmp_path: Path) -> None:
    c = Tcp(sport=80).handshake().send(True, b"GET /e HTTP/1.1\r\nHost: x\r\n\r\n")
    events = b"".join(b"data: %d\n\n" % i for i in range(30))
    c.send(False, b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n" + events)
    write_pcap(tmp_path / "sse.pcap", c.frames)
    with pcapkit.open(tmp_path / "sse.pcap", limits={"messages": 10}) as t:
        assert len(t.messages) == 10
        row = t.anomalies[t.anomalies["name"] == "message_limit_exceeded"].iloc[0]
        # request and response heads, 30 events, the end of each message
        assert "34 messages, the messages limit is 10: 24 more are counted" in row["detail"]
        assert t.requests["events"].tolist() == [30]  # the timeline still counts them all


def test_a_handshake_message_past_the_limit_is_skipped_and_counted(tmp_path: Path) -> None:
    from fuzz.hostile import tls_handshake_bomb

    p = tls_handshake_bomb(tmp_path / "hs.pcap", 0.25)  # 2^24 - 1 claimed, 256 KiB sent
    with pcapkit.open(p, limits={"handshake_message_bytes": 1 << 16}) as t:
        an = t.anomalies
        assert an["name"].tolist() == ["tls_handshake_too_large", "tls_handshake_truncated"]
        assert (
            "declares 16777215 bytes > cap 65536 at 0: its 16777219 bytes are skipped"
            in (an["detail"].iloc[0])
        )
        assert t.records["handshake"].eq("").all()  # no message invented from its bytes


def _quic_capture(path: Path, frames: bytes) -> None:
    from fuzz.build import T0_NS
    from fuzz.seeds import InitialTemplate, initial_datagram

    dcid = bytes(range(8))
    t = InitialTemplate(
        from_client=True, version=1, client_dcid=dcid, dcid=dcid, scid=b"\x01" * 8,
        token=b"", packet_number=0, plaintext=frames.ljust(1200, b"\x00"),
    )  # fmt: skip
    write_pcap(path, [(T0_NS, initial_datagram(t))])


def _varint(v: int) -> bytes:
    from dissectors._wire import encode_varint

    return encode_varint(v)


def test_quic_streams_beyond_the_limit_are_counted(tmp_path: Path) -> None:
    # STREAM frames are not allowed in Initial packets (frame_not_permitted), but they are
    # applied: the simplest SYNTHETIC way to open many streams without a key log
    stream = lambda sid: b"\x0e" + _varint(sid) + _varint(0) + _varint(3) + b"abc"  # noqa: E731
    _quic_capture(tmp_path / "q.pcap", b"".join(stream(4 * i) for i in range(8)))
    with pcapkit.open(tmp_path / "q.pcap", limits={"quic_streams": 3}) as t:
        row = t.anomalies[t.anomalies["name"] == "quic_stream_limit_exceeded"].iloc[0]
        assert (
            "8 stream directions, the quic_streams limit is 3: 5 more (15 STREAM bytes)"
            in (row["detail"])
        )


def test_a_crypto_frame_at_an_implausible_offset_is_an_anomaly(tmp_path: Path) -> None:
    crypto = b"\x06" + _varint(1 << 60) + _varint(5) + b"hello"
    _quic_capture(tmp_path / "c.pcap", crypto)
    with pcapkit.open(tmp_path / "c.pcap") as t:
        row = t.anomalies[t.anomalies["name"] == "crypto_offset_implausible"].iloc[0]
        assert f"CRYPTO at offset {1 << 60}, 5 bytes: past {4 << 18}, skipped" in row["detail"]
        assert int(row["frame"]) == 1
