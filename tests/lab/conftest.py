"""Shared fixtures for lab tests: preconditions (root, ip, tcpdump, tshark) and tshark fields.

Scenario runs are session-scoped: each scenario runs once and several tests read its
captures.  The captures are read with ``tshark -T fields`` (the project's own reader is
tested elsewhere; here tshark is the independent judge).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

NEEDS = [t for t in ("ip", "tcpdump") if shutil.which(t) is None]
LAB_SKIP_REASON = (
    "lab tests need root"
    if os.geteuid() != 0
    else f"lab tests need {', '.join(NEEDS)}"
    if NEEDS
    else "lab tests need /dev/net/tun"
    if not os.path.exists("/dev/net/tun")
    else ""
)


@pytest.fixture
def lab_ready() -> None:
    """Skip (with the reason) unless this machine can run the lab."""
    if LAB_SKIP_REASON:
        pytest.skip(LAB_SKIP_REASON)


@pytest.fixture
def tshark() -> Callable[..., list[dict[str, Any]]]:
    """``tshark(path, display_filter="tcp")`` -> packet dicts; skips when tshark is missing."""
    if shutil.which("tshark") is None:
        pytest.skip("tshark is not installed")
    return tshark_rows


Doc = dict[str, Any]

# Fields read from every capture, in this order.
FIELDS = (
    "frame.number",
    "frame.time_epoch",
    "ip.src",
    "tcp.srcport",
    "tcp.dstport",
    "tcp.seq",
    "tcp.ack",
    "tcp.len",
    "tcp.flags.syn",
    "tcp.flags.ack",
    "tcp.flags.push",
)


def tshark_rows(path: Path, display_filter: str = "tcp") -> list[dict[str, Any]]:
    """One dict per packet; times as integer ns, relative seq/ack as Wireshark shows them."""
    argv = ["tshark", "-r", str(path), "-T", "fields", "-E", "separator=\t", "-Y", display_filter]
    for f in FIELDS:
        argv += ["-e", f]
    out = subprocess.run(
        argv, capture_output=True, text=True, check=True, env={**os.environ, "LC_ALL": "C"}
    ).stdout
    rows = []
    for line in out.splitlines():
        v = line.split("\t")
        sec, _, frac = v[1].partition(".")
        rows.append(
            {
                "frame": int(v[0]),
                "ts_ns": int(sec) * 1_000_000_000 + int(frac.ljust(9, "0")[:9]),
                "src": v[2],
                "sport": int(v[3]),
                "dport": int(v[4]),
                "seq": int(v[5]),
                "ack": int(v[6] or 0),
                "len": int(v[7]),
                "syn": v[8] in ("1", "True"),
                "ackf": v[9] in ("1", "True"),
                "psh": v[10] in ("1", "True"),
            }
        )
    return rows


def forwarder_log_path(out: Path) -> Path:
    """Where :func:`lab_run` keeps a run's forwarder log (``run(forwarder_log=...)``)."""
    return out.with_name(out.name + ".forwarder.json")


@pytest.fixture(scope="session")
def forwarder_log() -> Callable[[Path], dict[str, Any]]:
    """``forwarder_log(out) -> the forwarder's own log`` of a :func:`lab_run` output dir."""
    return lambda out: json.loads(forwarder_log_path(out).read_text(encoding="utf-8"))


@pytest.fixture(scope="session")
def lab_run(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., tuple[Path, Doc]]:
    """``lab_run(name, **overrides) -> (outdir, scenario.json)``, memoised per session."""
    if LAB_SKIP_REASON:
        pytest.skip(LAB_SKIP_REASON)
    from pcapkit.lab import run

    cache: dict[tuple[str, str], tuple[Path, Doc]] = {}

    def _run(name: str, **overrides: Any) -> tuple[Path, Doc]:
        key = (name, repr(sorted(overrides.items())))
        if key not in cache:
            out = tmp_path_factory.mktemp(name)
            # the forwarder's own log (per-packet read/release times) beside, not in, ``out``
            cache[key] = (out, run(name, out, forwarder_log=forwarder_log_path(out), **overrides))
        return cache[key]

    return _run
