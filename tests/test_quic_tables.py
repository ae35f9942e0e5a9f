"""The declared QUIC tables (Trace.quic_packets, quic_frames, quic_tls, quic_handshake): their
columns and dtypes, the illustrated-quic corpus capture as its MANIFEST describes it, the
h3 fixtures against their scenario, and a differential against tshark (skipped without it)."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pandas as pd
import pytest

import pcapkit
from pcapkit import schema

from tshark_util import CORPUS, fields, needs_corpus, needs_tshark

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
H3 = sorted(FIXTURES.glob("h3_*/*.pcapng"))
IQ = CORPUS / "illustrated-quic"
TABLES = ("quic_packets", "quic_frames", "quic_tls", "quic_handshake")


def _ids(p: Path) -> str:
    return f"{p.parent.name}/{p.stem}"


def _declared(df: pd.DataFrame, name: str) -> None:
    assert list(df.columns) == schema.columns(name)
    empty = schema.frame(name, n=0)
    for col, dtype, _ in schema.SCHEMAS[name]:
        if dtype == "category":
            assert isinstance(df[col].dtype, pd.CategoricalDtype), col
        else:
            assert df[col].dtype == empty[col].dtype, (col, df[col].dtype, empty[col].dtype)


@pytest.mark.parametrize("path", H3, ids=_ids)
def test_tables_on_h3_fixtures(path: Path) -> None:
    with pcapkit.open(path) as t:
        q, pk, fr, tls, hs = t.quic, t.quic_packets, t.quic_frames, t.quic_tls, t.quic_handshake
        flows = t.flows
    for name in TABLES:
        _declared(
            {"quic_packets": pk, "quic_frames": fr, "quic_tls": tls, "quic_handshake": hs}[name],
            name,
        )
    # one quic_handshake row per connection; every packet counted in Trace.quic
    assert hs.flow.tolist() == q.flow.tolist()
    assert pk.groupby("flow").size().reindex(q.flow).tolist() == q.packets.tolist()
    assert set(pk.flow) == set(q.flow) and set(pk.flow) <= set(flows.flow)
    # directions: the client's first Initial opens each connection (keys in the DSBs)
    assert pk.decrypted.all() and pk.why_not.isna().all()
    first = pk.groupby("flow").head(1)
    assert (first.packet_type == "initial").all() and first.from_client.all()
    swapped = q.set_index("flow").roles_swapped
    assert ((pk.dir == "c2s") == (pk.from_client ^ pk.flow.map(swapped))).all()
    # datagrams: numbered in frame order per connection; coalesced packets tile them
    for _, g in pk.groupby("flow"):
        assert g.datagram.is_monotonic_increasing and g.frame.is_monotonic_increasing
        assert (g.groupby("frame").datagram.nunique() == 1).all()
        for _, d in g.groupby("frame"):
            assert d.coalesced_index.tolist() == list(range(len(d)))
            assert d.offset.tolist() == [0, *(d.offset + d.length).tolist()[:-1]]
            assert (d.offset + d.length).iloc[-1] <= d.datagram_bytes.iloc[0]
    assert pk.packet_number.notna().all()
    # frames point at their packet and share its flow, frame, time and space
    src = pk.loc[fr.packet]
    for c in ("flow", "frame", "ts_ns", "space", "packet_number", "from_client"):
        assert (src[c].to_numpy() == fr[c].to_numpy()).all(), c
    st = fr[fr.type == "STREAM"]
    assert st.new_bytes.notna().all()  # every STREAM frame was reassembled
    assert (st.new_bytes + st.duplicate_bytes == st.length).all()
    assert st.groupby("flow").new_bytes.sum().reindex(q.flow).tolist() == q.stream_bytes.tolist()
    dup = st.duplicate_bytes > 0
    assert (st.retransmission | ~dup).all()  # seen bytes make a retransmission
    assert (~st.retransmission | dup | (st.fin & (st.length == 0))).all()  # (or a FIN again)
    acks = fr[fr.type.isin(["ACK", "ACK_ECN"])]
    assert len(acks) and all(
        r[0][1] == la for r, la in zip(acks.ack_ranges, acks.largest_acknowledged, strict=True)
    )
    # the TLS handshake of each connection: ClientHello from the client, with transport
    # parameters; EncryptedExtensions from the server, naming the client's first DCID
    for f, g in tls.groupby("flow"):
        ch = g[g.name == "CLIENT_HELLO"].iloc[0]
        ee = g[g.name == "ENCRYPTED_EXTENSIONS"].iloc[0]
        assert ch.from_client and not ee.from_client and 57 in ch.extensions
        assert ch.initial_max_data > 0 and ee.initial_max_data > 0
        dcid = q.set_index("flow").client_dcid[f]
        assert ee.original_destination_connection_id == dcid
        h = next(hs[hs.flow == f].itertuples())  # (a row Series would make the ns floats)
        assert h.client_hello_frame == ch.frame
        assert h.client_initial_frame == first.set_index("flow").frame[f]
        assert h.client_initial_ts_ns <= h.server_initial_ts_ns <= h.client_finished_ts_ns
        ms = (h.client_finished_ts_ns - h.client_initial_ts_ns) / 1e6
        assert q.set_index("flow").handshake_ms[f] == pytest.approx(ms)


def test_resumed_connection_facts() -> None:
    """h3_resumed_0rtt: the second connection offers a PSK and early data in its
    ClientHello, the server accepts both, and the client's 0-RTT packets carry the GET."""
    sc = json.loads((FIXTURES / "h3_resumed_0rtt" / "scenario.json").read_text())
    with pcapkit.open(FIXTURES / "h3_resumed_0rtt" / "client.pcapng") as t:
        tls, pk = t.quic_tls, t.quic_packets
    first, second = (tls[tls.flow == f].set_index("name") for f in (0, 1))
    assert not first.pre_shared_key["CLIENT_HELLO"]
    assert second.pre_shared_key["CLIENT_HELLO"] and second.early_data["CLIENT_HELLO"]
    assert second.pre_shared_key["SERVER_HELLO"] and second.early_data["ENCRYPTED_EXTENSIONS"]
    early = pk[(pk.flow == 1) & (pk.packet_type == "0rtt")]
    assert len(early) == sc["ground_truth"]["resumption"]["client_0rtt_packets"]
    assert (early.space == "application").all() and early.from_client.all()


def test_no_quic_gives_empty_tables() -> None:
    with pcapkit.open(FIXTURES / "nagle_wwr" / "client.pcapng") as t:
        for name in TABLES:
            df = getattr(t, name)
            assert df.empty
            _declared(df, name)


# --------------------------------------------------------------------------- corpus

# MANIFEST.md, illustrated-quic: per datagram (frame), its packets as (type, packet number)
IQ_PACKETS = {
    1: [("initial", 0)],
    2: [("initial", 0), ("handshake", 0)],
    3: [("handshake", 1)],
    4: [("initial", 1), ("handshake", 0)],
    5: [("handshake", 1), ("1rtt", 0)],
    6: [("handshake", 2), ("1rtt", 0)],
    7: [("1rtt", 1)],
    8: [("1rtt", 1)],
}
IQ_CLIENT_FRAMES = {1, 4, 5, 7}


@needs_corpus
def test_illustrated_quic_packets_and_frames() -> None:
    with pcapkit.open(IQ / "capture.pcap", IQ / "keylog.txt") as t:
        pk, fr, tls, hs = t.quic_packets, t.quic_frames, t.quic_tls, t.quic_handshake
    got: dict[int, list] = defaultdict(list)
    for f, ty, pn in zip(pk.frame, pk.packet_type, pk.packet_number, strict=True):
        got[f].append((ty, pn))
    assert dict(got) == IQ_PACKETS
    assert set(pk[pk.from_client].frame) == IQ_CLIENT_FRAMES
    assert (pk.dir == pk.from_client.map({True: "c2s", False: "s2c"})).all()
    assert pk.datagram.tolist() == [f - 1 for f in pk.frame]
    assert pk.decrypted.all()
    assert pk[pk.frame == 1].dcid.iloc[0] == "0001020304050607"
    assert set(pk[pk.packet_type != "1rtt"].scid) == {b"c_cid".hex(), b"s_cid".hex()}
    # datagram 1 is padded to 1200 bytes after its only packet (RFC 9000 §14.1)
    d1 = pk[pk.frame == 1].iloc[0]
    assert d1.datagram_bytes == 1200 and d1.length < 1200 and d1.token_bytes == 0
    # the frames of each datagram (5: "ping", 6: ACK, HANDSHAKE_DONE, "pong")
    types = fr.groupby("frame").type.apply(list).to_dict()
    assert types[1] == ["CRYPTO"]
    assert types[5] == ["ACK", "CRYPTO", "STREAM"]
    assert types[6] == ["ACK", "ACK", "HANDSHAKE_DONE", "STREAM"]
    assert types[8] == ["CONNECTION_CLOSE"]
    st = fr[fr.type == "STREAM"]
    assert list(
        zip(st.frame, st.dir.astype(str), st.stream_id, st.offset, st.length, st.fin, strict=True)
    ) == [
        (5, "c2s", 0, 0, 4, True),
        (6, "s2c", 0, 0, 4, True),
    ]
    assert not st.retransmission.any() and st.contiguous_end.tolist() == [4, 4]
    # TLS: ClientHello (1), ServerHello (2), the server's flight (2-3), client Finished (5)
    assert list(zip(tls.frame, tls.name, strict=True)) == [
        (1, "CLIENT_HELLO"),
        (2, "SERVER_HELLO"),
        (2, "ENCRYPTED_EXTENSIONS"),
        (2, "CERTIFICATE"),
        (3, "CERTIFICATE_VERIFY"),
        (3, "FINISHED"),
        (5, "FINISHED"),
    ]
    h = next(hs.itertuples())
    assert (h.client_initial_frame, h.server_initial_frame, h.server_finished_frame) == (1, 2, 3)
    assert (h.client_finished_frame, h.handshake_done_frame) == (5, 6)
    assert (h.client_first_1rtt_frame, h.server_first_1rtt_frame) == (5, 6)
    assert h.confirmed_ms == pytest.approx((h.handshake_done_ts_ns - h.client_initial_ts_ns) / 1e6)


@needs_corpus
def test_illustrated_quic_without_keys() -> None:
    """Initial packets decrypt without keys (RFC 9001 §5.2); the rest say why not."""
    with pcapkit.open(IQ / "capture.pcap") as t:
        pk, fr, tls = t.quic_packets, t.quic_frames, t.quic_tls
    init = pk.packet_type == "initial"
    assert pk[init].decrypted.all() and not pk[~init].decrypted.any()
    assert pk[~init].why_not.str.startswith("no keys").all()
    assert pk[~init].packet_number.isna().all()
    assert set(fr.space) == {"initial"}
    assert tls.name.tolist() == ["CLIENT_HELLO", "SERVER_HELLO"]


# --------------------------------------------------------------------------- tshark

_LONG = {"0": "initial", "1": "0rtt", "2": "handshake", "3": "retry"}
TSHARK_CASES = [
    pytest.param(IQ / "capture.pcap", IQ / "keylog.txt", id="illustrated-quic"),
    *(pytest.param(p, None, id=_ids(p)) for p in H3),
]


def _tshark(path: Path, keylog: Path | None) -> tuple[dict, dict, dict]:
    """Per frame: [(type, pn, length)], [frame types], [largest acknowledged]."""
    extra = ["-o", f"tls.keylog_file:{keylog}"] if keylog else []
    rows = fields(
        path, "frame.number", "quic.header_form", "quic.long.packet_type", "quic.packet_number",
        "quic.packet_length", "quic.frame_type", "quic.ack.largest_acknowledged",
        display_filter="quic", extra=extra,
    )  # fmt: skip
    packets, ftypes, acks = {}, {}, {}
    for frame, forms, longs, pns, lens, fts, las in rows:
        split = lambda s: s.split(",") if s else []  # noqa: E731
        lt = iter(split(longs))
        kinds = [_LONG[next(lt)] if f == "1" else "1rtt" for f in split(forms)]
        packets[int(frame)] = list(
            zip(kinds, map(int, split(pns)), map(int, split(lens)), strict=True)
        )
        ftypes[int(frame)] = [int(x) for x in split(fts)]
        acks[int(frame)] = [int(x) for x in split(las)]
    return packets, ftypes, acks


@needs_tshark
@pytest.mark.parametrize(("path", "keylog"), TSHARK_CASES)
def test_tables_match_tshark(path: Path, keylog: Path | None) -> None:
    if not path.is_file():
        pytest.skip(f"{path} not present")
    theirs_p, theirs_f, theirs_a = _tshark(path, keylog)
    with pcapkit.open(path, keylog) as t:
        pk, fr = t.quic_packets, t.quic_frames
    ours_p: dict[int, list] = defaultdict(list)
    for f, ty, pn, ln in zip(pk.frame, pk.packet_type, pk.packet_number, pk.length, strict=True):
        ours_p[f].append((ty, pn, ln))
    ours_f = fr.groupby("frame").frame_type.apply(list).to_dict()
    acks = fr[fr.largest_acknowledged.notna()]
    ours_a = acks.groupby("frame").largest_acknowledged.apply(list).to_dict()
    assert theirs_p and dict(ours_p) == theirs_p
    assert ours_f == {f: v for f, v in theirs_f.items() if v}
    assert ours_a == {f: v for f, v in theirs_a.items() if v}
