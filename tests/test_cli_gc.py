"""The ``pcapkit`` process freezes the objects of its imports out of the cyclic GC's
reach before the analysis and leaves the collector off for the command
(``cli._freeze_imports``, issue 16): the analysis makes almost no cyclic garbage, which
a test here bounds on a synthetic capture of thousands of records.  A program that calls
the CLI in its own process (tests, ``CliRunner``) is left alone — its garbage must still
be collected."""

from __future__ import annotations

import gc
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from pcapkit.cli import cli

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "fixtures" / "nagle_wwr" / "client.pcapng"


def _analyze_reporting(capture: Path, report: str) -> subprocess.CompletedProcess[str]:
    """``pcapkit analyze --format json CAPTURE`` through main() in a fresh process, with
    the expression ``report`` (of gc and sys) evaluated at its exit."""
    code = (
        "import atexit, gc, sys\n"
        f"atexit.register(lambda: {report})\n"
        "sys.argv = ['pcapkit', 'analyze', '--format', 'json', sys.argv[1]]\n"
        "from pcapkit.cli import main\n"
        "main()\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code, str(capture)], capture_output=True, text=True, cwd=ROOT
    )
    assert r.returncode in (0, 1), r.stderr
    return r


def test_the_pcapkit_process_freezes_its_imports() -> None:
    r = _analyze_reporting(FIXTURE, "sys.stderr.write(f'frozen={gc.get_freeze_count()}\\n')")
    frozen = int(r.stderr.rsplit("frozen=", 1)[1].split()[0])
    assert frozen > 20_000  # pandas and numpy at least (0 without the freeze)


def test_a_caller_process_is_not_frozen() -> None:
    before = gc.get_freeze_count()
    r = CliRunner().invoke(cli, ["analyze", "--format", "json", str(FIXTURE)])
    assert r.exit_code in (0, 1), r.output
    assert gc.get_freeze_count() == before


def _gc_state(*args: str) -> dict[str, int]:
    """Run ``pcapkit ARGS`` through main() in a fresh process; the collector's state when
    main() was called and when the imports were frozen (collections so far, all
    generations; -1 when never frozen) and at exit (enabled, frozen objects)."""
    code = (
        "import atexit, gc, sys\n"
        "seen = {'collections_before_freeze': -1}\n"
        "real_freeze = gc.freeze\n"
        "def freeze():\n"
        "    seen['collections_before_freeze'] = sum(s['collections'] for s in gc.get_stats())\n"
        "    seen['enabled_at_freeze'] = int(gc.isenabled())\n"
        "    real_freeze()\n"
        "gc.freeze = freeze\n"
        "def report():\n"
        "    seen['enabled_at_exit'] = int(gc.isenabled())\n"
        "    seen['frozen'] = gc.get_freeze_count()\n"
        "    sys.stderr.write(f'STATE={seen!r}\\n')\n"
        "atexit.register(report)\n"
        "sys.argv = ['pcapkit', *sys.argv[1:]]\n"
        "from pcapkit.cli import main\n"
        "seen['collections_at_main'] = sum(s['collections'] for s in gc.get_stats())\n"
        "main()\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=ROOT
    )
    assert r.returncode in (0, 1), r.stderr
    state: dict[str, int] = eval(r.stderr.rsplit("STATE=", 1)[1].splitlines()[0])  # noqa: S307
    return state


def test_the_collector_is_off_during_the_imports_and_the_analysis() -> None:
    s = _gc_state("analyze", "--format", "json", str(FIXTURE))
    # pandas, numpy, the detectors imported after main(): no collection
    assert s["collections_before_freeze"] == s["collections_at_main"]
    assert s["enabled_at_freeze"] == 0
    assert s["enabled_at_exit"] == 0 and s["frozen"] > 20_000


def test_the_analysis_leaves_almost_no_cyclic_garbage(tmp_path) -> None:
    """With the collector off for the command, garbage in reference cycles would stay
    until the exit: on a synthetic SSE-like capture (benchmarks/gen_capture.py, not real
    traffic) of ~20k packets and tens of thousands of TLS records, what a collection at
    exit finds is a few hundred objects — none per packet, record or finding."""
    cap = tmp_path / "sse.pcap"
    gen = ROOT / "benchmarks" / "gen_capture.py"
    args = ["-n", "20000", "-o", str(cap), "--shape", "sse", "--seed", "1"]
    subprocess.run([sys.executable, str(gen), *args], check=True, capture_output=True)
    # (isenabled before the collection: the f-string is evaluated left to right)
    r = _analyze_reporting(
        cap, "sys.stderr.write(f'ON={int(gc.isenabled())} GARBAGE={gc.collect()}\\n')"
    )
    assert r.stdout.count('"kind"') > 0  # findings: the detectors ran
    on, garbage_text = r.stderr.rsplit("ON=", 1)[1].split()[:2]
    garbage = int(garbage_text.removeprefix("GARBAGE="))
    assert on == "0"
    import pcapkit

    with pcapkit.open(cap) as t:
        records = len(t.records)
    assert records > 20_000
    assert garbage < 1_000, garbage


def test_a_command_that_opens_no_capture_runs_with_the_collector_on() -> None:
    for args in (("thresholds",), ("limits",), ("lab", "--help")):
        s = _gc_state(*args)
        assert s["enabled_at_exit"] == 1, args
        assert s["collections_before_freeze"] == -1, args  # nothing frozen


def test_a_caller_process_keeps_its_collector_setting() -> None:
    """Through CliRunner (not main()) no command touches the caller's collector."""
    was = gc.isenabled()
    gc.disable()
    try:
        r = CliRunner().invoke(cli, ["thresholds"])
        assert r.exit_code == 0, r.output
        assert not gc.isenabled()
    finally:
        if was:
            gc.enable()
