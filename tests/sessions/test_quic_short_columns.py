"""run_quic's columnar path for 1-RTT datagrams no key can open (issue 16).

Without a key log (or before the ClientHello), a short-header datagram changes nothing
in a :class:`dissectors.quic.QuicConnection`: each would be one undecrypted record.
``pcapkit.sessions.quic.run_quic`` takes runs of them as columns instead of feeding
each.  Every QUIC table must be the same as when every datagram is fed (the path
forced here by making ``QuicConnection.unkeyed_1rtt`` answer "keys may exist").
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

import pcapkit
from dissectors.quic.connection import QuicConnection
from pcapkit.io.writer import write_pcap

from synth import C_IP, S_IP
from tshark_util import CORPUS, needs_corpus

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
TABLES = (
    "quic",
    "quic_packets",
    "quic_frames",
    "quic_tls",
    "quic_handshake",
    "quic_messages",
    "anomalies",
)


def _tables(path: Path, **kw: object) -> dict[str, pd.DataFrame]:
    with pcapkit.open(path, **kw) as t:  # type: ignore[arg-type]
        out = {name: getattr(t, name).copy() for name in TABLES}
        out["_short"] = pd.DataFrame({"n": [sum(q.short_pos.shape[0] for q in t._quic)]})
    return out


def _compare(path: Path, monkeypatch: pytest.MonkeyPatch, **kw: object) -> int:
    """Tables on the columnar path and on the fed path; returns the short rows taken."""
    fast = _tables(path, **kw)
    with monkeypatch.context() as m:
        m.setattr(QuicConnection, "unkeyed_1rtt", lambda self, direction: None)
        fed = _tables(path, **kw)
    assert int(fed["_short"]["n"].iloc[0]) == 0
    for name in TABLES:
        pd.testing.assert_frame_equal(fast[name], fed[name], check_exact=True, obj=name)
    return int(fast["_short"]["n"].iloc[0])


@pytest.mark.parametrize(
    "fixture", ["h3_streams_drop/client", "h3_sse_drop/server", "h3_resumed_0rtt/client"]
)
def test_h3_fixture_without_keys_same_tables(fixture: str, monkeypatch: pytest.MonkeyPatch):
    path = FIXTURES / f"{fixture}.pcapng"
    n = _compare(path, monkeypatch, embedded_keys=False)
    with pcapkit.open(path, embedded_keys=False) as t:
        qp = t.quic_packets
        one_rtt = int(((qp["packet_type"] == "1rtt") & (qp["coalesced_index"] == 0)).sum())
    assert n == one_rtt > 10  # every short-header datagram went the columnar way


def test_h3_fixture_with_keys_feeds_everything(monkeypatch: pytest.MonkeyPatch):
    path = FIXTURES / "h3_streams_drop/client.pcapng"
    assert _compare(path, monkeypatch) == 0  # keys: nothing is taken as columns


@needs_corpus
def test_illustrated_quic_without_keys(monkeypatch: pytest.MonkeyPatch):
    assert _compare(CORPUS / "illustrated-quic" / "capture.pcap", monkeypatch) > 0


def _initial(dcid: bytes, scid: bytes, size: int = 1200) -> bytes:
    head = bytes([0xC3, 0, 0, 0, 1, len(dcid)]) + dcid + bytes([len(scid)]) + scid + b"\x00"
    rest = size - len(head) - 2
    return head + (0x4000 | rest).to_bytes(2, "big") + bytes(range(256)) * 5
    # (truncated to ``size`` below: opaque bytes, the Initial does not authenticate)


def _short(body: bytes) -> bytes:
    return bytes([0x43]) + body


def test_dcid_lengths_unknown_and_malformed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Short headers before any server CID (length unknown), matching the server's
    5-byte CID, not matching it (most common length), too short for it (malformed,
    an anomaly), empty datagrams, and the client's 8-byte CID in the other direction."""
    d8, c8, s5 = b"\xd0" * 8, b"\xc0" * 7 + b"\x01", b"\x5e\x11\x22\x33\x44"
    c2s, s2c = (C_IP, S_IP, 40000, 443), (S_IP, C_IP, 443, 40000)
    dgrams = [
        (c2s, _initial(d8, c8)[:1200]),
        (c2s, _short(b"\x99" * 30)),  # no server CID yet: unknown
        (s2c, _initial(c8, s5)[:1200]),
        (c2s, _short(s5 + b"\x01" * 30)),  # the server's CID: 5 bytes
        (c2s, _short(b"\x77" * 30)),  # no match: the most common length, 5
        (c2s, _short(b"\x01\x02\x03")),  # 3 bytes after the first: malformed
        (c2s, b""),  # empty UDP payload: not a packet
        (s2c, _short(c8 + b"\x02" * 25)),  # the client's CID: 8 bytes
        (s2c, _short(c8)),  # exactly the CID
        (c2s, _short(s5)),
    ]
    p = tmp_path / "short.pcap"
    write_pcap(
        p,
        [
            (
                1_000_000_000 + i * 1_000_000,
                bytes(Ether() / IP(src=a, dst=z) / UDP(sport=sp, dport=dp) / Raw(b)),
            )
            for i, ((a, z, sp, dp), b) in enumerate(dgrams)
        ],
        1,
    )
    assert _compare(p, monkeypatch) == 6
    with pcapkit.open(p) as t:
        qp = t.quic_packets
        assert qp["frame"].tolist() == [1, 2, 3, 4, 5, 6, 8, 9, 10]
        assert qp["dcid"].tolist()[3:9] == [
            s5.hex(),
            (b"\x77" * 5).hex(),
            "",
            c8.hex(),
            c8.hex(),
            s5.hex(),
        ]
        why = qp["why_not"].tolist()
        assert (
            why[1]
            == "unknown DCID length for short header (no keys for 1-RTT: ClientHello not seen)"
        )
        assert why[3] == "no keys for 1-RTT: ClientHello not seen"
        assert why[5].startswith("malformed header")
        assert qp["datagram"].tolist() == [0, 1, 2, 3, 4, 5, 7, 8, 9]
        q = t.quic.iloc[0]
        assert q.packets == q.undecrypted_packets == 9  # the malformed one too
        assert q.why_not == "authentication failed"  # the first Initial's, frame 1
        assert "malformed_packet" in set(t.anomalies["name"])


def test_detector_view_keeps_undecrypted_1rtt_out_of_key_packets():
    """pcapkit.detect.quic_rows: key_packets = every row but undecrypted 1-RTT ones,
    pk = every row as arrays, packets = every row (built on demand), capture order."""
    from pcapkit.detect.quic_rows import connections

    path = FIXTURES / "h3_streams_drop/client.pcapng"
    with pcapkit.open(path, embedded_keys=False) as t:
        qp = t.quic_packets
        (qc,) = connections(t.detect_context)
        assert len(qc.packets) == len(qp) == qc.pk.frame.shape[0]
        assert [p.frame for p in qc.packets] == qp["frame"].tolist() == qc.pk.frame.tolist()
        assert qc.pk.c2s.tolist() == [p.qdir == "c2s" for p in qc.packets]
        hidden = (qp["packet_type"] == "1rtt") & ~qp["decrypted"]
        assert 10 < int(hidden.sum()) < len(qp)
        assert [p.frame for p in qc.key_packets] == qp["frame"][~hidden].tolist()
        assert all(p.packet_type != "1rtt" or p.decrypted for p in qc.key_packets)


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_random_datagrams_same_tables(seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Seeded random connections: Initials with CIDs of 0–20 bytes (NEW CIDs mid-way),
    short headers of random length (shorter than their DCID too) whose bytes match a
    CID, a CID's prefix, or nothing, empty datagrams — same tables both ways."""
    import random

    rnd = random.Random(seed)
    c2s, s2c = (C_IP, S_IP, 40000, 443), (S_IP, C_IP, 443, 40000)
    ccid = rnd.randbytes(rnd.choice([0, 4, 8, 20]))
    scids = [rnd.randbytes(rnd.choice([0, 5, 8, 18, 20]))]
    dgrams = [(c2s, _initial(rnd.randbytes(8), ccid)[:1200])]
    for _ in range(60):
        kind = rnd.random()
        if kind < 0.1:
            scids.append(rnd.randbytes(rnd.choice([3, 8, 16, 20])))
            dgrams.append((s2c, _initial(ccid, scids[-1])[:1200]))
        elif kind < 0.15:
            dgrams.append((rnd.choice([c2s, s2c]), b""))
        else:
            way = rnd.choice([c2s, s2c])
            cid = rnd.choice(scids) if way == c2s else ccid
            body = rnd.choice([cid, cid[: len(cid) // 2], rnd.randbytes(8)])
            body += rnd.randbytes(rnd.choice([0, 1, 30]))
            dgrams.append((way, _short(body)))
    p = tmp_path / f"random{seed}.pcap"
    write_pcap(
        p,
        [
            (
                1_000_000_000 + i * 1_000_000,
                bytes(Ether() / IP(src=a, dst=z) / UDP(sport=sp, dport=dp) / Raw(b)),
            )
            for i, ((a, z, sp, dp), b) in enumerate(dgrams)
        ],
        1,
    )
    assert _compare(p, monkeypatch) > 20
