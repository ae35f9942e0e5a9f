"""The ``pcapkit`` process freezes the objects of its imports out of the cyclic GC's
reach before the analysis (``cli._freeze_imports``, issue 16); a program that calls the
CLI in its own process (tests, ``CliRunner``) is left alone — its garbage must still be
collected."""

from __future__ import annotations

import gc
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from pcapkit.cli import cli

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "fixtures" / "nagle_wwr" / "client.pcapng"


def test_the_pcapkit_process_freezes_its_imports() -> None:
    code = (
        "import atexit, gc, sys\n"
        "atexit.register(lambda: sys.stderr.write(f'frozen={gc.get_freeze_count()}\\n'))\n"
        "sys.argv = ['pcapkit', 'analyze', '--format', 'json', sys.argv[1]]\n"
        "from pcapkit.cli import main\n"
        "main()\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code, str(FIXTURE)], capture_output=True, text=True, cwd=ROOT
    )
    assert r.returncode in (0, 1), r.stderr
    frozen = int(r.stderr.rsplit("frozen=", 1)[1].split()[0])
    assert frozen > 20_000  # pandas and numpy at least (0 without the freeze)


def test_a_caller_process_is_not_frozen() -> None:
    before = gc.get_freeze_count()
    r = CliRunner().invoke(cli, ["analyze", "--format", "json", str(FIXTURE)])
    assert r.exit_code in (0, 1), r.output
    assert gc.get_freeze_count() == before
