"""The file-level mutation fuzzer: mutated captures through everything a user can run.

A mutant is a seed capture (:func:`fuzz.seeds.file_seeds`) changed in one of these ways:

* ``bytes`` — the serialised file's bytes (reader: headers, blocks, lengths);
* ``frame`` — one frame's bytes (link, IP, TCP/UDP headers and payload);
* ``payload`` — one frame's TCP/UDP payload, the headers kept consistent (IP and UDP
  lengths follow), so mutations reach reassembly and the application parsers;
* ``initial`` — the *plaintext* of one QUIC Initial, protected again with its Initial
  keys (mutations reach QUIC frames, CRYPTO reassembly and the TLS handshake);
* ``frames`` — frames dropped, duplicated, swapped or re-timed; the file cut short.

Each mutant goes through :func:`check`: ``pcapkit.open`` and every table, the JSON report
(streamed), the text report, both narrowed to one flow, ``records`` and ``requests`` text,
the qlog and CSV table exports, the numeric gates with JUnit XML, ``diff`` of the capture
with itself and a one-flow ``slice``.  A
failure is any exception other than a whole-file :class:`pcapkit.errors.PcapkitError`,
and any ``internal_error`` anomaly (an exception the analysis isolated: still a bug).
"""

from __future__ import annotations

import io
import os
import random
import struct
import tempfile
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .build import pcap_bytes
from .mutate import mutate
from .seeds import FileSeed, file_seeds, initial_datagram, initial_port

TABLES = (
    "packets", "flows", "segments", "records", "tls", "tls_handshake", "quic", "quic_packets",
    "quic_frames", "quic_tls", "quic_handshake", "messages", "requests", "h2_windows",
    "qpack_blocked", "findings", "gaps", "anomalies",
)  # fmt: skip
STRATEGIES = ("bytes", "frame", "payload", "payload", "initial", "frames")


def serialise(seed: FileSeed, frames: list[tuple[int, bytes]] | None = None) -> bytes:
    """The seed as a capture file: pcapng with its key-log secrets when it has any (as the
    fixtures are), else classic pcap."""
    frames = seed.frames if frames is None else frames
    if not seed.secrets:
        return pcap_bytes(frames, seed.linktype)
    from pcapkit.io.writer import PcapngWriter

    f = io.BytesIO()
    w = PcapngWriter(f)
    w.add_interface(seed.linktype)
    for s in seed.secrets:
        w.write_secrets(s)
    for ts, data in frames:
        w.write(0, ts, data)
    return f.getvalue()


def _l4(frame: bytes, linktype: int) -> tuple[int, int] | None:
    """(IP header offset, L4 payload offset) of an IPv4/IPv6 TCP/UDP frame, or None."""
    ip = {228: 0, 101: 0, 1: 14, 229: 0}.get(linktype)
    if ip is None or len(frame) < ip + 20:
        return None
    v = frame[ip] >> 4
    if v == 4:
        ihl = (frame[ip] & 15) * 4
        proto, l4 = frame[ip + 9], ip + ihl
    elif v == 6:
        proto, l4 = frame[ip + 6], ip + 40
    else:
        return None
    if proto == 6 and len(frame) >= l4 + 20:
        return ip, l4 + (frame[l4 + 12] >> 4) * 4
    if proto == 17 and len(frame) >= l4 + 8:
        return ip, l4 + 8
    return None


def _with_payload(frame: bytes, ip: int, at: int, payload: bytes) -> bytes:
    """``frame`` with the L4 payload from ``at`` replaced, IP (and UDP) lengths fixed."""
    b = bytearray(frame[:at] + payload)
    if b[ip] >> 4 == 4:
        struct.pack_into("!H", b, ip + 2, min(len(b) - ip, 0xFFFF))
        l4 = ip + (b[ip] & 15) * 4
        if b[ip + 9] == 17:
            struct.pack_into("!H", b, l4 + 4, min(len(b) - l4, 0xFFFF))
    elif b[ip] >> 4 == 6:
        struct.pack_into("!H", b, ip + 4, min(len(b) - ip - 40, 0xFFFF))
        if b[ip + 6] == 17:
            struct.pack_into("!H", b, ip + 44, min(len(b) - ip - 40, 0xFFFF))
    return bytes(b)


def make_mutant(seed: FileSeed, rng: random.Random, others: list[bytes]) -> tuple[str, bytes]:
    """(strategy, file bytes) of one mutant of ``seed``."""
    strategy = rng.choice(STRATEGIES)
    if strategy == "initial" and not seed.initials:
        strategy = "payload"
    frames = list(seed.frames)
    if strategy == "bytes" or not frames:
        return "bytes", mutate(serialise(seed), rng)
    i = rng.randrange(len(frames))
    if strategy == "initial":
        i = rng.choice(list(seed.initials))
        t = seed.initials[i]
        pt = mutate(t.plaintext, rng, others=[x.plaintext for x in seed.initials.values()])
        frames[i] = (frames[i][0], initial_datagram(t, pt, port=initial_port(t)))
    elif strategy == "frame":
        frames[i] = (frames[i][0], mutate(frames[i][1], rng))
    elif strategy == "payload":
        for _ in range(rng.choice((1, 1, 2, 4))):
            i = rng.randrange(len(frames))
            ts, fr = frames[i]
            loc = _l4(fr, seed.linktype)
            if loc is None:
                frames[i] = (ts, mutate(fr, rng))
                continue
            ip, at = loc
            frames[i] = (ts, _with_payload(fr, ip, at, mutate(fr[at:], rng, others=others)))
    else:  # frames
        for _ in range(rng.choice((1, 2, 4))):
            op = rng.randrange(4)
            j = rng.randrange(len(frames))
            if op == 0 and len(frames) > 1:
                del frames[j]
            elif op == 1:
                frames.insert(j, frames[rng.randrange(len(frames))])
            elif op == 2:
                k = rng.randrange(len(frames))
                frames[j], frames[k] = frames[k], frames[j]
            else:
                ts, fr = frames[j]
                frames[j] = (ts + rng.choice((-1, 1)) * rng.choice((1, 10**6, 10**9, 1 << 40)), fr)
        data = serialise(seed, frames)
        if rng.random() < 0.2:
            data = data[: rng.randrange(len(data) + 1)]
        return strategy, data
    return strategy, serialise(seed, frames)


def scratch_dir() -> str | None:
    """Where the fuzzer writes its temporary files (the mutant, the exports, the slice):
    ``PCAPKIT_FUZZ_TMP``, else ``/dev/shm`` when it is a writable directory (RAM), else
    the system's default.  Creating and removing the ~25 files a mutant writes cost
    ~18 ms of CPU on this machine's ext4 ``/tmp`` and ~1 ms in ``/dev/shm``; the code
    under test is the same."""
    env = os.environ.get("PCAPKIT_FUZZ_TMP")
    if env:
        return env
    if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK | os.X_OK):
        return "/dev/shm"
    return None


@dataclass
class Failure:
    where: str  # the table or report that failed, or "internal_error"
    text: str  # traceback or the anomaly detail


def check(path: str, keylog: str | None = None) -> list[Failure]:
    """Everything a user can run on ``path``; the failures (empty: no traceback)."""
    import pcapkit
    from pcapkit.errors import PcapkitError

    out: list[Failure] = []
    try:
        t = pcapkit.open(path, keylog)
    except PcapkitError:
        return out  # a whole-file problem: one line and exit 1 in the CLI
    except Exception:  # noqa: BLE001
        return [Failure("open", traceback.format_exc())]
    with t:
        for name in TABLES:
            try:
                getattr(t, name)
            except Exception:  # noqa: BLE001
                out.append(Failure(name, traceback.format_exc()))
        for where, fn in _reports(t):
            try:
                fn()
            except Exception:  # noqa: BLE001
                out.append(Failure(where, traceback.format_exc()))
        try:
            an = t.anomalies
            for d in an[an["name"] == "internal_error"]["detail"].tolist():
                out.append(Failure("internal_error", str(d)))
        except Exception:  # noqa: BLE001
            pass  # reported above
    return out


def _reports(t: Any) -> list[tuple[str, Callable[[], object]]]:
    from pcapkit.export.qlog import export_qlog
    from pcapkit.export.tables import export_tables
    from pcapkit.report import analysis_text, records_text
    from pcapkit.report import gates as gates_mod
    from pcapkit.report.diff import diff, diff_json, diff_text
    from pcapkit.report.json import write_analysis_json
    from pcapkit.report.text import requests_text

    def qlog() -> None:
        with tempfile.TemporaryDirectory(dir=scratch_dir()) as d:
            export_qlog(t, d)

    def tables() -> None:  # pcapkit export --tables DIR --format csv
        with tempfile.TemporaryDirectory(dir=scratch_dir()) as d:
            export_tables(t, d, "csv")

    def narrowed() -> None:  # pcapkit analyze --flow 0 (JSON and text)
        if len(t.flows):
            write_analysis_json(t, io.StringIO(), only_flows={0})
            analysis_text(t, max_flows=None, only_flows={0})

    def gates() -> None:  # pcapkit analyze --max-* 1 --junit FILE
        limits = {o: 1.0 for o in ("--max-ttfb-ms", "--max-ttft-ms", "--max-gap-p95-ms")}
        limits["--max-handshake-ms"] = 1.0
        subs = gates_mod.subjects(t.requests, t.tls, t.quic)
        violations = gates_mod.check(limits, subs)
        gates_mod.junit_xml(t.path, subs, t.findings, limits, violations)

    def compare() -> None:  # pcapkit diff CAPTURE CAPTURE
        d = diff(t, t)
        diff_json(d)
        diff_text(d)

    def sliced() -> None:  # pcapkit slice CAPTURE --flow 0
        if len(t.flows):
            with tempfile.TemporaryDirectory(dir=scratch_dir()) as d:
                t.slice([0], os.path.join(d, "s.pcapng"))

    return [
        ("json", lambda: write_analysis_json(t, io.StringIO())),
        ("text", lambda: analysis_text(t, max_flows=None)),
        ("records_text", lambda: records_text(t)),
        ("requests_text", lambda: requests_text(t)),
        ("qlog", qlog),
        ("export_tables", tables),
        ("narrowed", narrowed),
        ("gates", gates),
        ("diff", compare),
        ("slice", sliced),
    ]


def others_of(seeds: tuple[FileSeed, ...]) -> list[bytes]:
    """Payload splice material: a few payloads of every seed."""
    out = []
    for s in seeds:
        for _, fr in s.frames[:: max(1, len(s.frames) // 8)]:
            loc = _l4(fr, s.linktype)
            if loc is not None and len(fr) > loc[1]:
                out.append(fr[loc[1] :])
    return out


def write_mutant(data: bytes, workdir: str) -> str:
    fd, path = tempfile.mkstemp(prefix="mutant-", suffix=".pcap", dir=workdir)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return path


__all__ = ["Failure", "check", "file_seeds", "make_mutant", "others_of", "serialise"]
