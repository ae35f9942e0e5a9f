"""Helpers for differential tests against tshark (skipped where it is absent)."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

TSHARK = shutil.which("tshark")
CORPUS = (Path(__file__).resolve().parents[1] / ".." / "shared" / "corpus").resolve()

needs_tshark = pytest.mark.skipif(TSHARK is None, reason="tshark is not installed (CI installs it)")
needs_corpus = pytest.mark.skipif(
    not CORPUS.is_dir(), reason=f"external corpus not found at {CORPUS} (../shared/corpus)"
)

MISSING = re.compile(rb"^\[(\d+) bytes missing in capture file\]\x00?$")


def run(args: list[str]) -> str:
    assert TSHARK is not None
    out = subprocess.run(
        [TSHARK, *args],
        check=True,
        capture_output=True,
        text=True,
        env={"LC_ALL": "C", "HOME": "/tmp"},
    )
    return out.stdout


def fields(
    path: Path | str, *names: str, display_filter: str | None = None, extra: list[str] | None = None
) -> list[list[str]]:
    args = ["-r", str(path), "-T", "fields", "-E", "separator=\t"]
    for n in names:
        args += ["-e", n]
    if display_filter:
        args += ["-Y", display_filter]
    args += extra or []
    return [line.split("\t") for line in run(args).splitlines()]


@dataclass
class Follow:
    node0: str = ""
    node1: str = ""
    data: list[bytes] = field(default_factory=lambda: [b"", b""])
    missing: list[int] = field(default_factory=lambda: [0, 0])


def follow_tcp_many(
    path: Path | str, streams: list[int], extra: list[str] | None = None
) -> dict[int, Follow]:
    """Parse ``tshark -q -z follow,tcp,raw,N`` for several streams in one tshark run."""
    args = ["-r", str(path), "-q"]
    for s in streams:
        args += ["-z", f"follow,tcp,raw,{s}"]
    text = run(args + (extra or []))
    out: dict[int, Follow] = {}
    cur: Follow | None = None
    body = False
    for line in text.splitlines():
        if line.startswith("Filter: tcp.stream eq "):
            cur = Follow()
            out[int(line.rsplit(" ", 1)[1])] = cur
            body = False
        elif cur is None:
            continue
        elif line.startswith("Node 0:"):
            cur.node0 = line.split(":", 1)[1].strip()
        elif line.startswith("Node 1:"):
            cur.node1 = line.split(":", 1)[1].strip()
            body = True
        elif line.startswith("====="):
            body = False
        elif body and line:
            node = 1 if line.startswith("\t") else 0
            chunk = bytes.fromhex(line.strip())
            m = MISSING.match(chunk)
            if m:
                cur.missing[node] += int(m.group(1))
            else:
                cur.data[node] += chunk
    return out


def follow_tcp(path: Path | str, stream: int, extra: list[str] | None = None) -> Follow:
    return follow_tcp_many(path, [stream], extra)[stream]


def tcp_stream_count(path: Path | str, extra: list[str] | None = None) -> int:
    rows = fields(path, "tcp.stream", display_filter="tcp", extra=extra)
    vals = {int(r[0]) for r in rows if r and r[0]}
    return max(vals) + 1 if vals else 0


def follow_tls(path: Path | str, stream: int, extra: list[str] | None = None) -> list[bytes]:
    """Decrypted application data of ``tshark -z follow,tls,raw,N``: [node 0, node 1]."""
    text = run(["-r", str(path), "-q", "-z", f"follow,tls,raw,{stream}", *(extra or [])])
    out = [b"", b""]
    body = False
    for line in text.splitlines():
        if line.startswith("Node 1:"):
            body = True
        elif body and line.startswith("====="):
            break
        elif body and line:
            out[1 if line.startswith("\t") else 0] += bytes.fromhex(line.strip())
    return out
