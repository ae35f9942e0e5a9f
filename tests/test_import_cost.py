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
