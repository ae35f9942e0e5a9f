"""The record walk started in a forked child before the imports (pcapkit.io.prefetch):
the reader takes its offsets only for the very file the child walked, and the capture
it reads is the serial walk's, whatever the bytes."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pcapkit.io.reader as R
from pcapkit.io import prefetch
from pcapkit.io.writer import PcapWriter
from tests.io.test_reader import _same
from tests.io.test_reader import _walked as _read

from synth import udp_frame

T0 = 1_700_000_000_123_456_789
ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the forked walk runs on Linux only"
)


def _pcap_bytes(k: int = 300) -> bytes:
    buf = io.BytesIO()
    w = PcapWriter(buf, 1)
    for i in range(k):
        w.write(T0 + i * 1000, udp_frame(b"p" * ((i * 37) % 1400)))
    return buf.getvalue()


@pytest.fixture
def spy(monkeypatch):
    """Prefetch every file (no size floor), never split at read time, count the walks
    the reader took."""
    monkeypatch.setenv("PCAPKIT_THREADS", "2")
    monkeypatch.setattr(prefetch, "PREFETCH_MIN_BYTES", 0)
    monkeypatch.setattr(R, "SPLIT_MIN_BYTES", 1 << 62)
    taken: list[bool] = []
    real = prefetch.take

    def take(key):
        got = real(key)
        taken.append(got is not None)
        return got

    monkeypatch.setattr(prefetch, "take", take)
    yield taken
    prefetch.abandon_all()


def test_prefetched_walk_equals_the_serial_walk(tmp_path, spy):
    p = tmp_path / "a.pcap"
    p.write_bytes(_pcap_bytes() + b"\x01\x02\x03")  # trailing junk: an anomaly
    serial = _read(p)
    assert spy == [False]
    prefetch.start(p)
    assert len(prefetch._pending) == 1
    _same(_read(p), serial)
    assert spy == [False, True]
    assert not prefetch._pending
    assert serial[4][0]["name"] == "truncated_record"


def test_a_walk_of_another_or_a_changed_file_is_not_taken(tmp_path, spy):
    a, b = tmp_path / "a.pcap", tmp_path / "b.pcap"
    a.write_bytes(_pcap_bytes(200))
    b.write_bytes(_pcap_bytes(250))
    want_b = _read(b)
    prefetch.start(a)
    _same(_read(b), want_b)  # another file: walked here, a's child ended
    assert spy == [False, False]
    assert not prefetch._pending
    prefetch.start(a)
    a.write_bytes(_pcap_bytes(220))  # changed after the child started
    want_a = _read(a)
    assert spy == [False, False, False]  # the rewritten file: its own walk
    assert want_a[0].shape[0] == 220


def test_not_started_for_pcapng_gzip_small_files_or_one_thread(tmp_path, monkeypatch, spy):
    import gzip

    from pcapkit.io.writer import PcapngWriter

    p = tmp_path / "a.pcap"
    p.write_bytes(_pcap_bytes(50))
    g = tmp_path / "a.pcap.gz"
    g.write_bytes(gzip.compress(p.read_bytes()))
    buf = io.BytesIO()
    w = PcapngWriter(buf)
    w.add_interface(1)
    w.write(0, T0, udp_frame(b"x"))
    ng = tmp_path / "a.pcapng"
    ng.write_bytes(buf.getvalue())
    for path in (g, ng, tmp_path / "missing.pcap"):
        prefetch.start(path)
        assert not prefetch._pending
    monkeypatch.setattr(prefetch, "PREFETCH_MIN_BYTES", p.stat().st_size + 1)
    prefetch.start(p)
    assert not prefetch._pending
    monkeypatch.setattr(prefetch, "PREFETCH_MIN_BYTES", 0)
    monkeypatch.setenv("PCAPKIT_THREADS", "1")
    prefetch.start(p)
    assert not prefetch._pending


PCAP = _pcap_bytes(60)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    flips=st.lists(st.tuples(st.integers(24, len(PCAP) - 1), st.integers(0, 255)), max_size=6),
    cut=st.integers(24, len(PCAP)),
)
def test_prefetched_walk_equals_serial_on_corrupt_pcaps(tmp_path_factory, flips, cut):
    """Whatever the bytes, the reader's result with the child's walk is the serial one."""
    b = bytearray(PCAP[:cut])
    for pos, val in flips:
        if pos < len(b):
            b[pos] = val
    p = tmp_path_factory.mktemp("pf") / "c.pcap"
    p.write_bytes(bytes(b))
    old = (os.environ.get("PCAPKIT_THREADS"), prefetch.PREFETCH_MIN_BYTES, R.SPLIT_MIN_BYTES)
    try:
        prefetch.PREFETCH_MIN_BYTES, R.SPLIT_MIN_BYTES = 0, 1 << 62
        os.environ["PCAPKIT_THREADS"] = "2"
        try:
            serial = _read(p)
        except Exception as exc:  # a file too broken to read: the same error with the child
            prefetch.start(p)
            with pytest.raises(type(exc)):
                _read(p)
            return
        prefetch.start(p)
        _same(_read(p), serial)
        assert not prefetch._pending
    finally:
        prefetch.abandon_all()
        prefetch.PREFETCH_MIN_BYTES, R.SPLIT_MIN_BYTES = old[1], old[2]
        if old[0] is None:
            os.environ.pop("PCAPKIT_THREADS", None)
        else:
            os.environ["PCAPKIT_THREADS"] = old[0]


def test_pcapkit_open_prefetches_before_the_imports(tmp_path):
    """In a fresh process, the first `pcapkit.open` of a classic pcap forks the walk before
    numpy is imported, the reader takes it, and every table equals a one-thread read's."""
    p = tmp_path / "a.pcap"
    p.write_bytes(_pcap_bytes(400))
    code = (
        "import sys, pickle\n"
        "import pcapkit\n"
        "from pcapkit.io import prefetch\n"
        "prefetch.PREFETCH_MIN_BYTES = 0\n"
        "seen = []\n"
        "start = prefetch.start\n"
        "def spy(path):\n"
        "    seen.append('numpy' in sys.modules)\n"
        "    start(path)\n"
        "    seen.append(len(prefetch._pending))\n"
        "prefetch.start = spy\n"
        "t = pcapkit.open(sys.argv[1])\n"
        "seen.append(len(prefetch._pending))\n"
        "tables = [t.packets, t.segments, t.flows]\n"
        "sys.stdout.buffer.write(pickle.dumps((seen, tables)))\n"
    )
    import pickle

    def run(threads: str):
        env = dict(os.environ, PCAPKIT_THREADS=threads)
        out = subprocess.run(
            [sys.executable, "-c", code, str(p)], capture_output=True, check=True, env=env, cwd=ROOT
        )
        return pickle.loads(out.stdout)

    seen, tables = run("2")
    assert seen == [False, 1, 0]  # before numpy; one child; taken by the reader
    seen1, tables1 = run("1")
    assert seen1 == [False, 0, 0]  # one thread: no fork
    for a, b in zip(tables, tables1, strict=True):
        assert a.equals(b)


def test_prefetch_and_the_io_package_import_no_numpy():
    code = "import sys, pcapkit.io.prefetch; print('numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_record_headers_match_the_reader():
    assert prefetch.RECORD_HEADERS == {m: (o, h) for m, (o, _, h) in R.PCAP_MAGICS.items()}


def test_the_cli_prefetches_as_soon_as_the_path_is_parsed(tmp_path):
    """`pcapkit analyze CAPTURE` in a fresh process starts the walk before pandas is
    imported, the reader takes it, and the JSON report is the one-thread run's."""
    p = tmp_path / "a.pcap"
    p.write_bytes(_pcap_bytes(400))
    code = (
        "import sys\n"
        "from pcapkit.io import prefetch\n"
        "prefetch.PREFETCH_MIN_BYTES = 0\n"
        "seen = []\n"
        "start, take = prefetch.start, prefetch.take\n"
        "def spy_start(path):\n"
        "    seen.append('pandas' in sys.modules)\n"
        "    start(path)\n"
        "def spy_take(key):\n"
        "    got = take(key)\n"
        "    seen.append(got is not None)\n"
        "    return got\n"
        "prefetch.start, prefetch.take = spy_start, spy_take\n"
        "sys.argv = ['pcapkit', 'analyze', '--format', 'json', sys.argv[1]]\n"
        "from pcapkit.cli import main\n"
        "try:\n"
        "    main()\n"
        "finally:\n"
        "    print(seen, file=sys.stderr)\n"
    )

    def run(threads: str) -> tuple[str, str]:
        env = dict(os.environ, PCAPKIT_THREADS=threads)
        out = subprocess.run(
            [sys.executable, "-c", code, str(p)], capture_output=True, text=True, env=env, cwd=ROOT
        )
        assert out.returncode == 0, out.stderr
        return out.stdout, out.stderr.strip().splitlines()[-1]

    report, seen = run("2")
    assert seen == "[False, True]"  # before pandas; taken by the reader
    report1, seen1 = run("1")
    assert seen1 == "[False, False]"  # one thread: nothing forked, nothing taken
    assert report == report1 and '"frames": 400' in report


def test_two_children_and_a_second_start_off_the_chain(tmp_path, spy):
    """The second child starts from a resynchronised header near the middle: taken when
    the first child lands on it; a fake chain of headers inside a frame's payload there
    (the first child never lands on it) is abandoned and the parent walks on."""
    p = tmp_path / "a.pcap"
    p.write_bytes(_pcap_bytes(400))
    prefetch.start(p)
    ((_, walks),) = prefetch._pending.items()
    assert [w[2] for w in walks][0] == 24 and len(walks) == 2
    serial = _read(p)
    assert spy == [True]
    assert walks[1][2] + 16 in set(serial[0].tolist())  # a real record start (data at +16)

    unit = (
        np.array([T0 // 10**9, 0, 100, 100], "<u4").tobytes() + b"\x00" * 100
    )  # fake pcap records
    buf = io.BytesIO()
    w = PcapWriter(buf, 1)
    small = [udp_frame(b"s" * 60) for _ in range(20)]
    for i, fr in enumerate([*small, udp_frame(unit * 430), *small]):
        w.write(T0 + i * 1000, fr)
    q = tmp_path / "fake.pcap"
    q.write_bytes(buf.getvalue())
    want = _read(q)
    prefetch.start(q)
    ((_, walks),) = prefetch._pending.items()
    assert len(walks) == 2 and walks[1][2] + 16 not in set(want[0].tolist())  # off the chain
    _same(_read(q), want)
    assert want[0].shape[0] == 41
