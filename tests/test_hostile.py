"""Hostile inputs (issue 15), each run by ``pcapkit analyze --format json`` in a child
process whose address space and CPU time are capped by ``setrlimit`` — bounded by
resource limits, never by timings: a case that needed more memory would die with a
MemoryError (or be killed), one that needed more CPU with SIGXCPU.

* a gzip bomb of zero-length records (full size: 1 MB inflating to 1 GB);
* HEADERS on new HTTP/2 streams (full: 200,000);
* SYNs on distinct 5-tuples (full: 10^6);
* a TLS handshake message claiming 2^24 − 1 bytes, then handshake records (full: 20 MB).

The suite runs them scaled down (seconds each) with the limit they exercise set just
below the input; ``make hostile`` (``PCAPKIT_HOSTILE_SCALE=1``) runs the full-size inputs
with the default limits.  Inputs: ``fuzz.hostile`` (SYNTHETIC).
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from fuzz import hostile

FULL = os.environ.get("PCAPKIT_HOSTILE_SCALE") == "1"
ADDRESS_SPACE = 2 << 30  # the bound: 2 GB of address space
CPU_SECONDS = 900 if FULL else 120

# name -> (generator, size at the suite's scale, limits set for it, expected anomalies)
CASES: dict[str, tuple[Callable[..., Path], float, list[str], set[str]]] = {
    "gzip_bomb": (
        hostile.gzip_bomb,
        hostile.FULL["gzip_bomb"] if FULL else 24 << 20,  # past the 16 MiB grace
        [],
        {"gzip_limit_exceeded"},
    ),
    "h2_stream_flood": (
        hostile.h2_stream_flood,
        hostile.FULL["h2_stream_flood"] if FULL else 3000,
        [] if FULL else ["h2_streams=500"],
        {"h2_stream_limit_exceeded"},
    ),
    "syn_flood": (
        hostile.syn_flood,
        hostile.FULL["syn_flood"] if FULL else 6000,
        [] if FULL else ["connections=1000"],
        {"connection_limit_exceeded"},
    ),
    "tls_handshake_bomb": (
        hostile.tls_handshake_bomb,
        hostile.FULL["tls_handshake_bomb"] if FULL else 1,
        [],
        {"tls_handshake_too_large", "tls_handshake_truncated"},
    ),
}


def _bounded() -> None:
    """In the child: the caps the test asserts by (the parent is not limited)."""
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))
    resource.setrlimit(resource.RLIMIT_CPU, (CPU_SECONDS, CPU_SECONDS))


@pytest.mark.parametrize("name", sorted(CASES))
def test_hostile_input_is_bounded_and_reported(tmp_path: Path, name: str) -> None:
    gen, size, limits, expected = CASES[name]
    ext = ".pcap.gz" if name == "gzip_bomb" else ".pcap"
    path = gen(tmp_path / f"{name}{ext}", size)
    cmd = [sys.executable, "-m", "pcapkit.cli", "analyze", str(path), "--format", "json"]
    for lim in limits:
        cmd += ["--limit", lim]
    env = dict(os.environ)
    # one thread: RLIMIT_AS counts the address space each thread's malloc arena reserves
    env["PCAPKIT_THREADS"] = "1"
    r = subprocess.run(
        cmd, capture_output=True, text=True, env=env, preexec_fn=_bounded, check=False
    )
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])
    assert "Traceback" not in r.stderr and "MemoryError" not in r.stderr
    doc = json.loads(r.stdout)
    names = {a["name"] for a in doc["anomalies"]}
    assert expected <= names, names
    assert "internal_error" not in names
    for a in doc["anomalies"]:
        if a["name"] in expected:
            assert a["detail"]  # says what was only counted / skipped
    if name == "syn_flood":
        assert doc["capture"]["flows"] == size
        assert len(doc["flows"]) == (20_000 if FULL else 1000)
    if name == "h2_stream_flood":
        assert len(doc["requests"]) == (10_000 if FULL else 500)
