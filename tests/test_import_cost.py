"""``import pcapkit`` stays light: the TLS/QUIC/HTTP machinery (dissectors, the
cryptography package) loads only when a capture needs it."""

from __future__ import annotations

import subprocess
import sys


def test_import_pcapkit_loads_no_dissector() -> None:
    code = (
        "import sys, pcapkit; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('dissectors', 'cryptography')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_opening_a_capture_for_its_packets_loads_no_dissector() -> None:
    code = (
        "import sys, pcapkit; from pathlib import Path; "
        "t = pcapkit.open(Path('fixtures/tls_sse_nagle/client.pcapng')); len(t.segments); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('dissectors', 'cryptography')"
        " or m.startswith('pcapkit.detect')))"
    )
    root = __file__.rsplit("/tests/", 1)[0]
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=root
    )
    assert out.stdout.strip() == "[]"


def test_the_cli_loads_the_lab_only_when_a_lab_command_is_named() -> None:
    """`pcapkit analyze` does not import the lab (netns, forwarder, certificates: ~0.1 s);
    `pcapkit lab …` and `pcapkit --help` (which lists it) do."""
    code = (
        "import sys, click; from pcapkit.cli import cli; "
        "a = 'pcapkit.lab' in sys.modules; "
        "cmd = cli.get_command(click.Context(cli), 'lab'); "
        "print(a, cmd is not None and 'pcapkit.lab.cli' in sys.modules, cmd.name)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True", "lab"]
