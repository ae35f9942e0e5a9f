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
