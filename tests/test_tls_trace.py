"""TLS through the whole pipeline: records aligned with frames, decryption with every key
source, and the facts the corpus MANIFEST states; differential against tshark."""

from __future__ import annotations

import collections
from pathlib import Path

import pytest

import pcapkit

from tshark_util import CORPUS, fields, follow_tls, needs_corpus, needs_tshark

WS = CORPUS / "wireshark"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
TLS_FIXTURES = sorted(
    p for p in FIXTURES.glob("*/*.pcapng") if (p.parent / "scenario.json").exists()
)


def tls_files() -> list[Path]:
    files = list(TLS_FIXTURES)
    if CORPUS.is_dir():
        names = [
            "illustrated-tls12/capture.pcap",
            "illustrated-tls13/capture.pcap",
            "wireshark/http2-brotli.pcapng",
            "wireshark/http2-data-reassembly.pcap",
            "wireshark/retrans-tls.pcap",
            "wireshark/rsasnakeoil2.pcap",
            "wireshark/tls-fragmented-handshakes.pcap.gz",
            "wireshark/tls12-aes128ccm.pcap",
            "wireshark/tls12-chacha20poly1305.pcap",
            "wireshark/tls12-dsb.pcapng",
            "wireshark/tls13-rfc8446.pcap",
        ]
        files += [CORPUS / n for n in names]
    return files


@needs_tshark
@pytest.mark.tshark
@pytest.mark.parametrize("path", tls_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_records_match_tshark(path):
    """Same records per connection and direction, same lengths, same frame for each
    record's last byte: where tshark, reassembling out-of-order segments, shows the
    record — the frame that made it readable in order."""
    t = pcapkit.open(path)
    r, fl = t.records, t.flows
    if "tls_" in str(path.parent.name) or path.parent.name.startswith("illustrated"):
        assert not r.empty
    ports = sorted(set(fl.server_port[fl.flow.isin(r.flow.unique())]))
    extra = [x for p in ports for x in ("-d", f"tcp.port=={p},tls")] + [
        "-o",
        "tcp.reassemble_out_of_order:TRUE",
    ]
    theirs = collections.defaultdict(list)
    for fr, st, sp, lens in fields(
        path,
        "frame.number",
        "tcp.stream",
        "tcp.srcport",
        "tls.record.length",
        display_filter="tls",
        extra=extra,
    ):
        for ln in filter(None, lens.split(",")):
            theirs[(int(st), int(sp))].append((int(fr), int(ln)))
    ours = collections.defaultdict(list)
    s0 = {}
    for x in r.itertuples():
        f = fl.iloc[x.flow]
        sp = f.client_port if x.dir == "c2s" else f.server_port
        if (x.flow, x.dir) not in s0:
            s0[(x.flow, x.dir)] = t.stream(int(x.flow), x.dir)[:1]
        sslv2 = x.offset == 0 and s0[(x.flow, x.dir)][:1] >= b"\x80"  # 2-byte SSLv2 header
        ours[(int(f.stream), int(sp))].append(
            (int(x.last_frame), int(x.length) - (2 if sslv2 else 5))
        )
    assert dict(ours) == dict(theirs)


@needs_corpus
def test_illustrated_tls13_ping_pong():
    t = pcapkit.open(
        CORPUS / "illustrated-tls13/capture.pcap", keylog=CORPUS / "illustrated-tls13/keylog.txt"
    )
    app = t.records[(t.records.content_type == 23) & (t.records.status == "decrypted")]
    assert app[["dir", "last_frame", "plaintext_len"]].values.tolist() == [
        ["c2s", 11, 4],
        ["s2c", 17, 4],
    ]
    assert t.plaintext(0, "c2s") == b"ping" and t.plaintext(0, "s2c") == b"pong"
    nst = t.records[t.records.handshake == "NewSessionTicket"]
    assert nst.last_frame.tolist() == [13, 15]
    row = t.tls.iloc[0]
    assert (row.version, row.sni, row.decrypted) == ("TLS 1.3", "example.ulfheim.net", True)


@needs_corpus
def test_illustrated_tls12_ping_pong():
    t = pcapkit.open(
        CORPUS / "illustrated-tls12/capture.pcap", keylog=CORPUS / "illustrated-tls12/keylog.txt"
    )
    app = t.records[(t.records.content_type == 23)]
    assert app.last_frame.tolist() == [13, 15]
    assert (t.plaintext(0, "c2s"), t.plaintext(0, "s2c")) == (b"ping", b"pong")
    assert t.tls.cipher.iloc[0] == "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA"


@needs_corpus
@pytest.mark.parametrize(
    "keys,early", [("tls13-rfc8446.keys", True), ("tls13-rfc8446-noearly.keys", False)]
)
def test_tls13_early_data_only_with_early_secret(keys, early):
    t = pcapkit.open(WS / "tls13-rfc8446.pcap", keylog=WS / "keys" / keys)
    c2s = t.plaintext(1, "c2s")
    assert (b"GET /early" in c2s) is early
    assert b"GET /second" in c2s
    assert b"Early data: no" in t.plaintext(0, "s2c")
    e = t.records[t.records.early_data]
    assert (e.status == "decrypted").all() if early else (e.status != "decrypted").all()
    assert not e.empty
    assert bool(t.tls.early_data_offered.iloc[1])


@needs_corpus
def test_keys_from_two_dsbs():
    t = pcapkit.open(WS / "tls12-dsb.pcapng")
    assert t.tls.decrypted.tolist() == [True, True]
    hosts = [t.plaintext(f, "c2s") for f in range(2)]
    assert b"Host: example.com" in hosts[0] and b"Host: example.net" in hosts[1]
    assert all(h.startswith(b"HEAD / HTTP/1.1") for h in hosts)
    req = t.records[(t.records.dir == "c2s") & (t.records.content_type == 23)]
    assert req.last_frame.tolist() == [6, 14]
    assert "2 pcapng decryption secrets block(s)" in t.key_sources


@needs_corpus
def test_keys_from_sslkeylogfile(monkeypatch):
    monkeypatch.setenv("SSLKEYLOGFILE", str(WS / "keys" / "tls12-chacha20poly1305.keys"))
    t = pcapkit.open(WS / "tls12-chacha20poly1305.pcap")
    assert t.tls.decrypted.all() and len(t.tls) == 7
    names = [
        "ECDHE-ECDSA-CHACHA20-POLY1305",
        "ECDHE-RSA-CHACHA20-POLY1305",
        "DHE-RSA-CHACHA20-POLY1305",
        "RSA-PSK-CHACHA20-POLY1305",
        "DHE-PSK-CHACHA20-POLY1305",
        "ECDHE-PSK-CHACHA20-POLY1305",
        "PSK-CHACHA20-POLY1305",
    ]
    for s, name in enumerate(names):
        f = int(t.flows.flow[t.flows.stream == s].iloc[0])
        assert b"Cipher is " + name.encode() in t.plaintext(f, "s2c") + t.plaintext(f, "c2s")


@needs_corpus
def test_retrans_tls_one_record_at_frame_2():
    t = pcapkit.open(WS / "retrans-tls.pcap")
    r = t.records
    assert len(r) == 1
    assert (int(r.length.iloc[0]) - 5, int(r.last_frame.iloc[0])) == (16, 2)
    assert bool(r.retransmitted.iloc[0])


@needs_corpus
@pytest.mark.parametrize(
    "name,why", [("tls12-aes128ccm.pcap", "psk_only"), ("rsasnakeoil2.pcap", "unsupported_version")]
)
def test_undecryptable_captures_say_why(name, why):
    t = pcapkit.open(WS / name)
    assert len(t.records) > 5
    assert not t.tls.decrypted.any()
    assert set(t.tls.why_not) == {why}


@needs_corpus
def test_wrong_key_is_reported_not_garbage(tmp_path):
    bad = tmp_path / "bad.keys"
    text = (CORPUS / "illustrated-tls13/keylog.txt").read_text()
    # flip one hex digit of every secret
    bad.write_text(
        "\n".join(
            ln[:-1] + ("0" if ln[-1] != "0" else "1") if ln and not ln.startswith("#") else ln
            for ln in text.splitlines()
        )
    )
    t = pcapkit.open(CORPUS / "illustrated-tls13/capture.pcap", keylog=bad)
    assert t.plaintext(0, "c2s") == b""
    assert "wrong_key" in set(t.records.status)
    assert t.tls.why_not.iloc[0] == "wrong_key"


@needs_tshark
@pytest.mark.tshark
@pytest.mark.parametrize(
    "path",
    [p for p in TLS_FIXTURES if p.parent.name.startswith(("tls", "h2"))],
    ids=lambda p: f"{p.parent.name}/{p.name}",
)
def test_fixture_plaintext_matches_tshark(path):
    """Each TLS fixture decrypts with its embedded keys; tshark agrees on the bytes."""
    t = pcapkit.open(path)
    f = int(t.records.flow.iloc[0])
    ours = {t.plaintext(f, "c2s"), t.plaintext(f, "s2c")}
    assert all(ours)
    stream = int(t.flows.stream.iloc[f])
    assert set(follow_tls(path, stream, ["-o", "tcp.reassemble_out_of_order:TRUE"])) == ours


def test_records_table_is_empty_without_tls(tmp_path):
    from pcapkit.io.writer import write_pcap

    from synth import Conn

    c = Conn(sport=80)
    c.handshake()
    c.c2s(30_000, b"GET / HTTP/1.1\r\n\r\n")
    p = tmp_path / "plain.pcap"
    write_pcap(p, c.frames, 1)
    t = pcapkit.open(p)
    assert t.records.empty and t.tls.empty
    assert list(t.records.columns)[:10] == [
        "flow",
        "dir",
        "offset",
        "length",
        "content_type",
        "plaintext_len",
        "first_frame",
        "last_frame",
        "segments",
        "psh_end",
    ]
    assert t.plaintext(0, "c2s") == b""


@pytest.mark.parametrize("path", tls_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_bulk_header_walk_equals_full_session(path, monkeypatch):
    """Without keys the header walk takes over after the handshake; it must give the
    same records as feeding every record through the TLS session."""
    import pcapkit.sessions.tls as st

    cols = [
        "flow",
        "dir",
        "offset",
        "length",
        "content_type",
        "status",
        "first_frame",
        "last_frame",
        "psh_end",
    ]
    fast = pcapkit.open(path, keylog=b"").records[cols]
    monkeypatch.setattr(st, "_HOPELESS", frozenset())
    monkeypatch.setattr(st, "FAST_NO_HANDSHAKE", False)
    slow = pcapkit.open(path, keylog=b"").records[cols]
    # the session marks a cut-off last record "incomplete"; so does the walk
    assert fast.astype(str).values.tolist() == slow.astype(str).values.tolist()


def test_no_handshake_fast_path_equals_full_session(tmp_path, monkeypatch):
    """A SYNTHETIC mid-stream TLS connection (no handshake captured): the header walk from
    offset 0 gives the records the session would, with status no_handshake."""
    import pcapkit.sessions.tls as st
    from pcapkit.io.writer import write_pcap

    from synth import Conn

    c = Conn()
    c.handshake()
    recs = b"".join(
        b"\x17\x03\x03" + len(x).to_bytes(2, "big") + x for x in (b"a" * 40, b"b" * 3000, b"c" * 7)
    )
    for i in range(0, len(recs), 1448):
        c.s2c(30_000 + i, recs[i : i + 1448])
    c.c2s(40_000, b"\x17\x03\x03\x00\x04abcd")
    p = tmp_path / "midstream.pcap"
    write_pcap(p, c.frames, 1)
    cols = [
        "dir",
        "offset",
        "length",
        "content_type",
        "status",
        "first_frame",
        "last_frame",
        "psh_end",
    ]
    fast = pcapkit.open(p).records[cols]
    monkeypatch.setattr(st, "FAST_NO_HANDSHAKE", False)
    slow = pcapkit.open(p).records[cols]
    assert fast.astype(str).values.tolist() == slow.astype(str).values.tolist()
    assert fast.length.tolist() == [9, 45, 3005, 12] and set(fast.status) == {"no_handshake"}


@needs_corpus
def test_bulk_path_is_taken_without_keys():
    t = pcapkit.open(WS / "http2-data-reassembly.pcap")
    assert any(tf.bulk for tf in t._tls)
    r = t.records
    assert (r.status == "missing_key").sum() >= 20  # the DATA records, header-walked


def test_a_key_log_of_another_capture_is_reported() -> None:
    """Issue 14: a key log whose client randoms match no ClientHello of the capture is an
    anomaly (not only 'missing_key' on every record); a matching one is not."""
    from pathlib import Path

    import pcapkit

    fix = Path(__file__).resolve().parent.parent / "fixtures" / "tls_sse_nagle" / "client.pcapng"
    other = b"CLIENT_RANDOM " + b"ab" * 32 + b" " + b"cd" * 48 + b"\n"
    with pcapkit.open(fix, other, embedded_keys=False) as t:
        a = t.anomalies
        (detail,) = a[a.name == "tls_keylog_unmatched"].detail
        assert "none of the key log's 1 client random(s) matches one of the 1 ClientHello" in detail
        assert t.tls.decrypted.tolist() == [False]
    with pcapkit.open(fix) as t:  # its own keys (the pcapng's DSB)
        assert "tls_keylog_unmatched" not in set(t.anomalies.name)
        assert t.tls.decrypted.tolist() == [True]
