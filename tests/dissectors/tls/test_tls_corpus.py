"""The external corpus (../shared/corpus, see its MANIFEST.md): byte-exact plaintext against
the illustrated-tls ``caps/``, the PEER facts of the Wireshark captures, and a differential
test against tshark's record lengths.  Skipped when the corpus is absent."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from dissectors.tls.handshake import ClientHello
from dissectors.tls.keylog import KeyLog
from dissectors.tls.record import RecordParser, TlsRecord
from dissectors.tls.session import DecryptStatus, RecordResult, TlsSession

D = DecryptStatus
pytestmark = pytest.mark.corpus


@dataclass
class Decrypted:
    session: TlsSession
    client_port: int
    server_port: int
    results: list[tuple[int, RecordResult]] = field(default_factory=list)  # (frame, result)

    def app(self, direction: str) -> bytes:
        return b"".join(
            r.plaintext or b""
            for _, r in self.results
            if r.direction == direction and r.inner_content_type == 23
        )


def decrypt_capture(capture: type, path: Path, keylog: KeyLog | None) -> list[Decrypted]:
    out = []
    for conn in capture.tcp_connections(capture.read_capture(path)):
        d = Decrypted(TlsSession(keylog), conn.client[1], conn.server[1])
        for frame, direction, data in conn.events():
            res = (
                d.session.feed_gap(direction, data)
                if isinstance(data, int)
                else d.session.feed_data(direction, data)
            )
            d.results += [(frame, r) for r in res]
        d.results += [(-1, r) for r in d.session.close()]
        out.append(d)
    return out


def follow_raw(path: Path, server_port: int) -> dict[str, bytes]:
    """Parse a ``tshark -z follow,tls,raw`` dump into plaintext per direction."""
    lines = path.read_text().splitlines()
    node0 = next(line for line in lines if line.startswith("Node 0:"))
    node0_is_server = node0.rsplit(":", 1)[1].strip() == str(server_port)
    data = {"c2s": b"", "s2c": b""}
    for line in lines:
        text = line.strip()
        if not text or not all(c in "0123456789abcdef" for c in text):
            continue
        from_node0 = not line.startswith("\t")
        direction = "s2c" if from_node0 == node0_is_server else "c2s"
        data[direction] += bytes.fromhex(text)
    return data


# ---------------------------------------------------------------------------------------
# illustrated-tls13 / illustrated-tls12: caps/ byte-exact
# ---------------------------------------------------------------------------------------
TLS13_WIRE = [
    ("c2s", "clienthello", None),
    ("s2c", "serverhello", None),
    ("s2c", "serverccs", None),
    ("s2c", "serverencextensions", "serverextensions"),
    ("s2c", "serverenccert", "servercert"),
    ("s2c", "serverenccertverify", "servercertverify"),
    ("s2c", "serverencfinished", "serverfinished"),
    ("c2s", "clientccs", None),
    ("c2s", "clientencfinished", "clientfinished"),
    ("c2s", "clientencdata", "clientdata"),
    ("s2c", "serverencticket1", "serverticket1"),
    ("s2c", "serverencticket2", "serverticket2"),
    ("s2c", "serverencdata", "serverdata"),
]


def test_illustrated_tls13_caps_byte_exact(corpus: Path) -> None:
    base = corpus / "illustrated-tls13"
    session = TlsSession(KeyLog.from_text((base / "keylog.txt").read_text()))
    for direction, wire_name, plain_name in TLS13_WIRE:
        [res] = session.feed_data(direction, (base / "caps" / wire_name).read_bytes())
        if plain_name is None:
            assert res.status is D.NOT_ENCRYPTED
            continue
        assert res.status is D.DECRYPTED, wire_name
        assert res.inner_content_type is not None and res.plaintext is not None
        # caps/ hold TLSInnerPlaintext: the content followed by the real content type.
        assert (
            res.plaintext + bytes((res.inner_content_type,))
            == (base / "caps" / plain_name).read_bytes()
        ), wire_name
    s = session.summary()
    assert s.sni == "example.ulfheim.net" and s.decrypted and s.key_share_group == 0x001D


TLS12_WIRE = [
    ("c2s", "clienthello"),
    ("s2c", "serverhello"),
    ("s2c", "servercert"),
    ("s2c", "serverkeyexchange"),
    ("s2c", "serverhellodone"),
    ("c2s", "clientkeyexchange"),
    ("c2s", "clientccs"),
    ("c2s", "clientfinished"),
    ("s2c", "serverccs"),
    ("s2c", "serverfinished"),
    ("c2s", "clientdata"),
    ("s2c", "serverdata"),
    ("c2s", "clientalert"),
]


def test_illustrated_tls12_caps_byte_exact(corpus: Path) -> None:
    base = corpus / "illustrated-tls12"
    session = TlsSession(KeyLog.from_text((base / "keylog.txt").read_text()))
    got: dict[str, RecordResult] = {}
    for direction, name in TLS12_WIRE:
        [got[name]] = session.feed_data(direction, (base / "caps" / name).read_bytes())
    caps = base / "caps"
    assert got["clientfinished"].plaintext == (caps / "clientfinishedplain").read_bytes()
    # The other *plain files also carry the CBC record's MAC and padding after the content.
    for name, content in [
        ("serverfinished", None),
        ("clientdata", b"ping"),
        ("serverdata", b"pong"),
        ("clientalert", b"\x01\x00"),
    ]:
        res = got[name]
        assert res.status is D.DECRYPTED and res.plaintext is not None
        assert (caps / f"{name}plain").read_bytes().startswith(res.plaintext)
        if content is not None:
            assert res.plaintext == content
    assert len(got["serverfinished"].plaintext or b"") == 16
    s = session.summary()
    assert s.cipher_suite == 0xC013 and s.decrypted and s.sni == "example.ulfheim.net"


@pytest.mark.parametrize("name", ["illustrated-tls12", "illustrated-tls13"])
def test_illustrated_captures_from_the_pcap(corpus: Path, capture: type, name: str) -> None:
    base = corpus / name
    [conn] = decrypt_capture(
        capture, base / "capture.pcap", KeyLog.from_text((base / "keylog.txt").read_text())
    )
    app = [(frame, r.plaintext) for frame, r in conn.results if r.inner_content_type == 23]
    assert (
        app == [(13, b"ping"), (15, b"pong")]
        if name.endswith("12")
        else [(11, b"ping"), (17, b"pong")]
    )
    assert conn.session.summary().decrypted
    expected = follow_raw(base / "expected" / "follow_tls_raw_0.tshark4.0.txt", conn.server_port)
    assert (conn.app("c2s"), conn.app("s2c")) == (expected["c2s"], expected["s2c"])


# ---------------------------------------------------------------------------------------
# Wireshark captures
# ---------------------------------------------------------------------------------------
def test_tls13_rfc8446_with_and_without_the_early_secret(corpus: Path, capture: type) -> None:
    w = corpus / "wireshark"
    full = decrypt_capture(
        capture,
        w / "tls13-rfc8446.pcap",
        KeyLog.from_text((w / "keys/tls13-rfc8446.keys").read_text()),
    )
    requests = {
        f: r.plaintext
        for c in full
        for f, r in c.results
        if r.direction == "c2s" and r.inner_content_type == 23
    }
    assert {f: (p or b"").split(b"\r\n")[0] for f, p in requests.items()} == {
        5: b"GET /first HTTP/1.1",
        8: b"GET /early HTTP/1.1",
        12: b"GET /second HTTP/1.1",
    }
    bodies = [c.app("s2c") for c in full]
    assert b"Request for /first, version TLSv1.3, Early data: no\n" in bodies[0]
    assert b"Request for /early, version TLSv1.3, Early data: yes\n" in bodies[1]
    assert b"Request for /second, version TLSv1.3, Early data: yes\n" in bodies[1]
    early = next(r for f, r in full[1].results if f == 8 and r.content_type == 23)
    assert early.early_data and early.epoch.value == "early"
    summary = full[1].session.summary()
    assert summary.early_data_accepted and summary.resumption_accepted and summary.decrypted
    assert not full[0].session.summary().resumption_offered

    noearly = decrypt_capture(
        capture,
        w / "tls13-rfc8446.pcap",
        KeyLog.from_text((w / "keys/tls13-rfc8446-noearly.keys").read_text()),
    )
    frame8 = [r for f, r in noearly[1].results if f == 8 and r.content_type == 23]
    assert [(r.status, r.plaintext) for r in frame8] == [(D.MISSING_KEY, None)]
    requests = [
        f
        for c in noearly
        for f, r in c.results
        if r.direction == "c2s" and r.inner_content_type == 23
    ]
    assert requests == [5, 12]
    assert noearly[1].session.summary().why_not == "missing_key"


def test_tls12_dsb_keys_from_the_decryption_secrets_blocks(corpus: Path, capture: type) -> None:
    path = corpus / "wireshark" / "tls12-dsb.pcapng"
    kl = KeyLog()
    for i, payload in enumerate(capture.read_capture(path).dsb):
        kl.add_text(payload, source=f"DSB {i}")
    conns = decrypt_capture(capture, path, kl)
    heads = [
        (f, r.plaintext)
        for c in conns
        for f, r in c.results
        if r.direction == "c2s" and r.inner_content_type == 23
    ]
    assert [(f, (p or b"").split(b"\r\n")[:2]) for f, p in heads] == [
        (6, [b"HEAD / HTTP/1.1", b"Host: example.com"]),
        (14, [b"HEAD / HTTP/1.1", b"Host: example.net"]),
    ]
    for c in conns:
        response = c.app("s2c")
        assert (
            response.startswith(b"HTTP/1.1 200 OK\r\n") and b"Content-Length: 606\r\n" in response
        )
        assert c.session.summary().decrypted


CHACHA_SUITES = [
    (0xCCA9, "ECDHE-ECDSA-CHACHA20-POLY1305"),
    (0xCCA8, "ECDHE-RSA-CHACHA20-POLY1305"),
    (0xCCAA, "DHE-RSA-CHACHA20-POLY1305"),
    (0xCCAE, "RSA-PSK-CHACHA20-POLY1305"),
    (0xCCAD, "DHE-PSK-CHACHA20-POLY1305"),
    (0xCCAC, "ECDHE-PSK-CHACHA20-POLY1305"),
    (0xCCAB, "PSK-CHACHA20-POLY1305"),
]


def test_tls12_chacha20_poly1305_all_seven_streams(corpus: Path, capture: type) -> None:
    w = corpus / "wireshark"
    kl = KeyLog.from_text((w / "keys/tls12-chacha20poly1305.keys").read_text())
    conns = decrypt_capture(capture, w / "tls12-chacha20poly1305.pcap", kl)
    assert len(conns) == 7
    for conn, (suite, openssl_name) in zip(conns, CHACHA_SUITES, strict=True):
        s = conn.session.summary()
        assert s.cipher_suite == suite and s.decrypted, (hex(suite), s.why_not)
        assert f"Cipher is {openssl_name}".encode() in conn.app("s2c")
    expected = follow_raw(
        w / "expected/tls12-chacha20poly1305.follow_tls_raw_0.txt", conns[0].server_port
    )
    assert (conns[0].app("c2s"), conns[0].app("s2c")) == (expected["c2s"], expected["s2c"])


def test_fragmented_handshakes_give_the_1000_extension_values_in_order(
    corpus: Path, capture: type
) -> None:
    conns = decrypt_capture(
        capture, corpus / "wireshark" / "tls-fragmented-handshakes.pcap.gz", None
    )
    values = [
        data.hex() for c in conns for _, r in c.results for m in r.handshake if isinstance(m, ClientHello)
        for _, data in m.extensions
    ]  # fmt: skip
    assert values == [f"{i:04x}" for i in range(1, 1001)]
    assert all(not c.session.anomalies for c in conns)


def test_retransmitted_tls_record(corpus: Path, capture: type) -> None:
    [conn] = decrypt_capture(capture, corpus / "wireshark" / "retrans-tls.pcap", None)
    [(frame, res)] = conn.results
    assert (frame, res.length - 5, res.status) == (2, 16, D.NO_HANDSHAKE)


def test_psk_capture_says_why(corpus: Path, capture: type) -> None:
    [conn] = decrypt_capture(capture, corpus / "wireshark" / "tls12-aes128ccm.pcap", KeyLog())
    protected = [r for _, r in conn.results if r.status is not D.NOT_ENCRYPTED]
    assert protected and {r.status for r in protected} == {D.PSK_ONLY}
    s = conn.session.summary()
    assert s.cipher_suite_name == "TLS_PSK_WITH_AES_128_CCM" and s.why_not == "psk_only"


def test_rsa_snakeoil_capture_parses_and_says_why(corpus: Path, capture: type) -> None:
    conns = decrypt_capture(capture, corpus / "wireshark" / "rsasnakeoil2.pcap", KeyLog())
    assert conns
    for conn in conns:
        s = conn.session.summary()
        assert s.client_hello and s.server_hello and s.key_exchange == "RSA"
        # SSL 3.0 is outside what the decryptor implements; no record is passed off as plaintext.
        assert s.version == 0x0300 and s.why_not == "unsupported_version" and not s.decrypted
        assert not any(r.plaintext for _, r in conn.results if r.status is not D.NOT_ENCRYPTED)
        assert {a.name for a in conn.session.anomalies} <= {"tls_sslv2_client_hello"}
    # The first connection opens with an SSLv2-compatible ClientHello (RFC 5246 E.2).
    assert [a.name for a in conns[0].session.anomalies] == ["tls_sslv2_client_hello"]


def _h2_frames(data: bytes) -> list[tuple[int, int, int]]:
    """(type, stream, length) of the HTTP/2 frames after the client preface."""
    out, i = [], 0
    while i + 9 <= len(data):
        n = int.from_bytes(data[i : i + 3], "big")
        out.append((data[i + 3], int.from_bytes(data[i + 5 : i + 9], "big") & 0x7FFFFFFF, n))
        i += 9 + n
    assert i == len(data)
    return out


def test_http2_over_tls12_data_frames(corpus: Path, capture: type) -> None:
    w = corpus / "wireshark"
    [conn] = decrypt_capture(
        capture,
        w / "http2-data-reassembly.pcap",
        KeyLog.from_text((w / "keys/http2-data-reassembly.keys").read_text()),
    )
    assert conn.session.summary().decrypted and conn.session.summary().alpn == "h2"
    data = [n for t, sid, n in _h2_frames(conn.app("s2c")) if t == 0 and sid == 1]
    assert data == [16384, 16384, 16384, 16384, 10555, 0]


# ---------------------------------------------------------------------------------------
# Differential: record lengths per connection and direction against tshark
# ---------------------------------------------------------------------------------------
@pytest.mark.tshark
@pytest.mark.parametrize(
    "name",
    [
        "tls13-rfc8446.pcap",
        "tls12-chacha20poly1305.pcap",
        "tls12-dsb.pcapng",
        "http2-data-reassembly.pcap",
        "tls12-aes128ccm.pcap",
    ],
)
def test_record_lengths_match_tshark(corpus: Path, capture: type, name: str) -> None:
    if shutil.which("tshark") is None:
        pytest.skip("tshark not installed")
    path = corpus / "wireshark" / name
    out = subprocess.run(
        ["tshark", "-r", str(path), "-Y", "tls", "-T", "fields", "-e", "tcp.stream", "-e", "tcp.dstport", "-e", "tls.record.length"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    theirs: dict[tuple[int, int], list[int]] = {}
    for line in out.splitlines():
        stream, dport, lengths = line.split("\t")
        if lengths:
            theirs.setdefault((int(stream), int(dport)), []).extend(
                int(x) for x in lengths.split(",")
            )
    conns = capture.tcp_connections(capture.read_capture(path))
    ours: dict[tuple[int, int], list[int]] = {}
    for i, conn in enumerate(conns):
        parsers = {"c2s": RecordParser(), "s2c": RecordParser()}
        for _, direction, data in conn.events():
            assert isinstance(data, bytes)
            for item in parsers[direction].feed(data):
                assert isinstance(item, TlsRecord)
                port = conn.server[1] if direction == "c2s" else conn.client[1]
                ours.setdefault((i, port), []).append(item.length - 5)
    assert ours == theirs
