"""pcapkit slice: some connections of a capture, with their keys and only theirs."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

import pcapkit
from pcapkit.cli import cli

FIX = Path(__file__).resolve().parent.parent / "fixtures"


def test_slice_keeps_the_flows_and_their_keys(tmp_path: Path) -> None:
    """tls_resumed: four TLS connections to one server; slicing flows 1 and 3 gives a
    capture of exactly their frames that decrypts on its own, with exactly their secrets."""
    src = FIX / "tls_resumed" / "client.pcapng"
    out = tmp_path / "two.pcapng"
    r = CliRunner().invoke(cli, ["slice", str(src), "--flow", "1", "--flow", "3", "-o", str(out)])
    assert r.exit_code == 0, r.output
    with pcapkit.open(src) as a, pcapkit.open(out) as b:
        pa = a.packets
        keep = pa[pa.flow.isin([1, 3])]
        assert b.frames == len(keep) and f"{b.frames} frames of 2 flow(s)" in r.output
        assert b.packets.ts_ns.tolist() == keep.ts_ns.tolist()
        assert b.frame_bytes(1) == a.frame_bytes(int(keep.frame.iloc[0]))
        assert len(b.flows) == 2 and b.tls.decrypted.all()
        # the same plaintext as in the whole capture
        for new, old in ((0, 1), (1, 3)):
            assert b.plaintext(new, "s2c") == a.plaintext(old, "s2c")
        # only those two sessions' secrets travelled
        (dsb,) = b.raw.secrets
        randoms = {ln.split()[1] for ln in dsb.data.decode().splitlines()}
        want = {tf.summary.client_random.hex() for tf in a._tls if tf.flow in (1, 3)}
        assert randoms == want


def test_slice_refuses_a_flow_that_is_not_there(tmp_path: Path) -> None:
    src = FIX / "tls_resumed" / "client.pcapng"
    r = CliRunner().invoke(cli, ["slice", str(src), "--flow", "9", "-o", str(tmp_path / "x")])
    assert r.exit_code == 2 and "--flow 9: no such flow" in r.output
