"""A short run of the fuzzers in the suite (issue 15): the harnesses work, the seeds reach
the parsers, and a few hundred mutants per target raise nothing undocumented.  The long
runs are ``make fuzz SECONDS=…`` (counts in the issue's note)."""

from __future__ import annotations

import random

import pytest

import pcapkit
from fuzz.build import write_pcap
from fuzz.files import check, make_mutant, others_of, serialise
from fuzz.run import run_dissectors, run_files
from fuzz.seeds import dissector_seeds, file_seeds
from fuzz.targets import TARGETS, run_one


def test_seeds_reach_the_parsers(tmp_path) -> None:
    seeds = {s.name: s for s in file_seeds()}
    # cleartext re-encodings of the decrypted fixtures: HTTP/1.1 + SSE, HTTP/2, gRPC
    for name, protocol in (
        ("cleartext:tls_sse_nagle", "http/1.1"),
        ("cleartext:h2_sse_drop", "h2"),
        ("cleartext:grpc_stream", "h2"),
    ):
        p = tmp_path / "s.pcap"
        write_pcap(p, seeds[name].frames, seeds[name].linktype)
        with pcapkit.open(p) as t:
            assert set(t.requests["protocol"]) == {protocol}, name
            assert len(t.anomalies) == 0
    # re-encrypted QUIC Initials decrypt and carry the TLS hellos
    s = seeds["quic-initials:h3_sse_drop"]
    p = tmp_path / "q.pcap"
    p.write_bytes(serialise(s))
    with pcapkit.open(p) as t:
        assert t.quic["sni"].tolist() == ["pcapkit.lab"]
        assert {"ClientHello", "ServerHello"} <= set(
            t.quic_tls["name"].str.title().str.replace("_", "")
        )
    ds = dissector_seeds()
    assert set(ds) == set(TARGETS), set(TARGETS) - set(ds)
    for name, pool in ds.items():
        for data in pool:
            assert run_one(TARGETS[name], data) is None, name


def test_file_mutants(tmp_path) -> None:
    out = run_files(None, 40, seed=15, workdir=tmp_path)
    assert out["mutants"] == 40
    assert out["cpu_per_mutant_s"] > 0  # the summary carries the CPU a mutant cost
    assert out["unique_failures"] == {}, out["unique_failures"]


def test_every_strategy_makes_a_capture_pcapkit_reads(tmp_path) -> None:
    seeds = file_seeds()
    rng = random.Random(3)
    others = others_of(seeds)
    seen = set()
    for i in range(60):
        strategy, data = make_mutant(seeds[i % len(seeds)], rng, others)
        seen.add(strategy)
        p = tmp_path / f"m{i}.pcap"
        p.write_bytes(data)
        assert check(str(p)) == []
    assert seen == {"bytes", "frame", "payload", "initial", "frames"}


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_dissector_mutants(tmp_path, target: str) -> None:
    out = run_dissectors([target], None, 400, seed=15, workdir=tmp_path)[target]
    assert out["inputs"] >= 400
    assert out["unique_failures"] == {}, out["unique_failures"]


def test_the_quic_initial_harness_takes_payloads_longer_than_a_two_byte_length() -> None:
    """The harness itself failed (OverflowError) on 697k of 948k inputs of a 230 s run:
    it wrote the Initial's Length as a 2-byte varint, which holds < 16384.  SYNTHETIC."""
    for size in (16_000, 16_400, 70_000):
        assert run_one(TARGETS["quic_initial"], b"\x01" + bytes(range(256)) * (size // 256)) is None
