"""Issue 15's crash sites, each with its reproducer (SYNTHETIC captures built with
``fuzz.build``): the whole pipeline — every table, the text and JSON reports — runs
without a traceback and says what it could not read.

* the HTTP/2 wire order of a connection whose server sent nothing (``zip()`` of a
  direction's unit starts and ends of different lengths);
* integers written with non-ASCII digits that ``str.isdigit()`` accepts and ``int()``
  rejects (``Content-Length: ²``, ``:status: ²00``, ``grpc-status: ²``,
  ``Retry-After: ²``) or too many digits for ``int()`` (an SSE ``retry`` of 5,000);
* the reader's zero-complete-frames case is in ``tests/io/test_reader.py``.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import hpack
import pytest

import pcapkit
from fuzz.build import Tcp, write_pcap
from pcapkit.report import analysis_json, analysis_text

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def h2frame(ftype: int, flags: int, sid: int, payload: bytes = b"") -> bytes:
    return (
        struct.pack("!I", len(payload))[1:]
        + bytes([ftype, flags])
        + struct.pack("!I", sid)
        + payload
    )


def _request(enc: hpack.Encoder, extra: list[tuple[str, str]] = ()) -> bytes:
    hb = enc.encode(
        [(":method", "POST"), (":path", "/s"), (":scheme", "http"), (":authority", "x"), *extra]
    )
    return PREFACE + h2frame(4, 0, 0) + h2frame(1, 4, 1, hb)


def _everything(path: Path) -> pcapkit.Trace:
    t = pcapkit.open(path)
    for name in ("packets", "flows", "records", "tls", "messages", "requests", "findings", "gaps"):
        getattr(t, name)
    json.dumps(analysis_json(t))
    analysis_text(t)
    return t


def test_h2_server_sent_nothing(tmp_path: Path) -> None:
    c = Tcp(sport=80).handshake().send(True, _request(hpack.Encoder()))
    write_pcap(tmp_path / "silent.pcap", c.frames)
    t = _everything(tmp_path / "silent.pcap")
    rq = t.requests
    assert len(rq) == 1 and rq["method"].iloc[0] == "POST" and rq["status"].isna().all()


@pytest.mark.parametrize("status", ["²00", "２００", "٢٠٠", "+200", " 200", "2_0"])
def test_h2_status_with_non_ascii_digits(tmp_path: Path, status: str) -> None:
    c = Tcp(sport=80).handshake().send(True, _request(hpack.Encoder()))
    block = hpack.Encoder().encode([(":status", status)])
    c.send(False, h2frame(4, 0, 0) + h2frame(1, 4, 1, block) + h2frame(0, 1, 1, b"hi"))
    write_pcap(tmp_path / "s.pcap", c.frames)
    t = _everything(tmp_path / "s.pcap")
    assert t.requests["status"].isna().all()  # not a status code, never 200 by accident


def test_grpc_status_with_non_ascii_digit(tmp_path: Path) -> None:
    grpc = [("content-type", "application/grpc"), ("te", "trailers")]
    c = Tcp(sport=80).handshake()
    c.send(True, _request(hpack.Encoder(), grpc) + h2frame(0, 1, 1, b"\x00\x00\x00\x00\x01a"))
    enc = hpack.Encoder()
    head = enc.encode([(":status", "200"), ("content-type", "application/grpc")])
    trailers = enc.encode([("grpc-status", "²"), ("grpc-message", "x")])
    body = h2frame(0, 0, 1, b"\x00\x00\x00\x00\x02ok")
    c.send(False, h2frame(4, 0, 0) + h2frame(1, 4, 1, head) + body + h2frame(1, 5, 1, trailers))
    write_pcap(tmp_path / "g.pcap", c.frames)
    t = _everything(tmp_path / "g.pcap")
    assert t.requests["status"].tolist() == [200]


@pytest.mark.parametrize("value", [b"\xb2", b"1\xb2", b"9" * 5000, b"+5", b"5_0"])
def test_http1_content_length_not_ascii_digits(tmp_path: Path, value: bytes) -> None:
    c = Tcp(sport=80).handshake().send(True, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    c.send(False, b"HTTP/1.1 200 OK\r\nContent-Length: " + value + b"\r\n\r\nab")
    write_pcap(tmp_path / "h1.pcap", c.frames)
    t = _everything(tmp_path / "h1.pcap")
    assert "http1_malformed" in t.anomalies["name"].tolist()


def test_retry_after_not_ascii_digits(tmp_path: Path) -> None:
    c = Tcp(sport=80).handshake().send(True, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    c.send(False, b"HTTP/1.1 429 Too Many\r\nRetry-After: \xb2\r\nContent-Length: 0\r\n\r\n")
    write_pcap(tmp_path / "r.pcap", c.frames)
    t = _everything(tmp_path / "r.pcap")
    assert t.requests["status"].tolist() == [429]


def test_sse_retry_of_five_thousand_digits(tmp_path: Path) -> None:
    c = Tcp(sport=80).handshake().send(True, b"GET /e HTTP/1.1\r\nHost: x\r\n\r\n")
    c.send(
        False,
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n"
        + b"retry: " + b"7" * 5000 + b"\n\ndata: a\n\n",
    )  # fmt: skip
    write_pcap(tmp_path / "e.pcap", c.frames)
    t = _everything(tmp_path / "e.pcap")
    assert t.requests["events"].tolist() == [1]
