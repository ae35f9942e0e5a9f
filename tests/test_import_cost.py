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
    `pcapkit lab …` does."""
    code = (
        "import sys, click; from pcapkit.cli import cli; "
        "a = 'pcapkit.lab' in sys.modules; "
        "cmd = cli.get_command(click.Context(cli), 'lab'); "
        "print(a, cmd is not None and 'pcapkit.lab.cli' in sys.modules, cmd.name)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True", "lab"]


def _analyze_modules(capture: str, fmt: str, prefixes: tuple[str, ...]) -> list[str]:
    """The modules (starting with one of ``prefixes``) loaded by `pcapkit analyze --format
    fmt capture`, run in a fresh process from the repository root."""
    code = (
        "import sys, io, contextlib; from pcapkit.cli import cli\n"
        f"sys.argv = ['pcapkit', 'analyze', '--format', {fmt!r}, {capture!r}]\n"
        "try:\n"
        "    with contextlib.redirect_stdout(io.StringIO()):\n"
        "        cli.main(standalone_mode=False)\n"
        "except SystemExit:\n"
        "    pass\n"
        f"print(sorted(m for m in sys.modules if m.startswith({prefixes!r})))"
    )
    root = __file__.rsplit("/tests/", 1)[0]
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=root
    )
    return list(eval(out.stdout.strip().splitlines()[-1]))  # noqa: S307 - our own list


QUIC_MODULES = ("pcapkit.sessions.quic", "dissectors.quic", "dissectors.http3")


def test_a_tcp_only_analyze_loads_no_quic_dissector() -> None:
    """A capture without UDP has no QUIC connection: `analyze` (every format) does not
    import the QUIC session layer or dissectors (~60 ms), and still reports TLS/HTTP."""
    for fmt in ("json", "text", "html"):
        loaded = _analyze_modules("fixtures/tls_sse_nagle/client.pcapng", fmt, QUIC_MODULES)
        assert loaded == [], fmt
    seen = _analyze_modules(
        "fixtures/tls_sse_nagle/client.pcapng", "json", ("dissectors.tls", "dissectors.http1")
    )
    assert "dissectors.tls.record" in seen and "dissectors.http1" in seen


def test_a_quic_analyze_loads_the_quic_dissector() -> None:
    loaded = _analyze_modules("fixtures/h3_stream_complete/client.pcapng", "json", QUIC_MODULES)
    assert "pcapkit.sessions.quic" in loaded and "dissectors.quic.connection" in loaded


def test_help_lists_the_lab_without_importing_it_or_pandas() -> None:
    """`pcapkit --help` lists every command, ``lab`` from ``_Cli.LAZY_HELP``: the same
    text as once the lab is loaded, and neither the lab nor pandas is imported for it."""
    code = (
        "import sys, io, contextlib; from pcapkit.cli import cli\n"
        "def show():\n"
        "    out = io.StringIO()\n"
        "    with contextlib.redirect_stdout(out):\n"
        "        try:\n"
        "            cli.main(['--help'], standalone_mode=False)\n"
        "        except SystemExit:\n"
        "            pass\n"
        "    return out.getvalue()\n"
        "before = show()\n"
        "heavy = sorted(m for m in ('pcapkit.lab', 'pcapkit.lab.cli', 'pandas', 'numpy') "
        "if m in sys.modules)\n"
        "import click; cli.get_command(click.Context(cli), 'lab')\n"
        "print(repr((before, heavy, 'pcapkit.lab.cli' in sys.modules, show())))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    before, heavy, loaded, after = eval(out.stdout.strip().splitlines()[-1])  # noqa: S307
    assert heavy == [] and loaded
    assert "  lab " in before and "analyze" in before
    assert before == after


def test_the_lazy_help_is_the_commands_first_paragraph() -> None:
    from pcapkit.cli import _Cli
    from pcapkit.lab.cli import lab

    assert _Cli.LAZY_HELP["lab"] == " ".join((lab.help or "").split("\n\n")[0].split())


def test_tls_without_keys_loads_no_cryptography() -> None:
    """The record protection (and with it the ``cryptography`` package, ~10 ms) is built
    only for a session with keys: the same fixture analysed without its embedded keys
    never imports it, with them it does."""
    root = __file__.rsplit("/tests/", 1)[0]
    code = (
        "import sys, pcapkit; from pathlib import Path\n"
        "t = pcapkit.open(Path('fixtures/tls_sse_nagle/client.pcapng'), embedded_keys={keys})\n"
        "t.findings; t.requests; t.tls; t.gaps\n"
        "print(len(t.requests), 'cryptography' in sys.modules)"
    )
    for keys, want in (("False", "0 False"), ("True", "True")):
        out = subprocess.run(
            [sys.executable, "-c", code.format(keys=keys)],
            capture_output=True,
            text=True,
            check=True,
            cwd=root,
        )
        got = out.stdout.split()
        assert " ".join(got[-len(want.split()) :]) == want, (keys, got)
    assert int(got[0]) > 0  # with its keys the fixture's HTTP is read


def test_the_cipher_names_are_the_factories() -> None:
    from dissectors.tls import crypto

    assert crypto._AEAD_CIPHERS == set(crypto._aead_factories())
    assert crypto._BLOCK_CIPHERS == set(crypto._block_ciphers())


def test_loading_the_trace_module_runs_no_collection_and_keeps_the_gc_setting() -> None:
    """`pcapkit.Trace` (first use, and the first `pcapkit.open` call) imports pcapkit.trace
    with pandas, numpy and pyarrow with the cyclic collector off: no collection during the import (there were ~150, one of
    them full), and the collector is left as the caller had it (on or off)."""
    code = (
        "import gc, sys\n"
        "off = sys.argv[1] == 'off'\n"
        "import pcapkit\n"
        "if off:\n"
        "    gc.disable()\n"
        "seen = []\n"
        "gc.callbacks.append(lambda phase, info: seen.append(info['generation']))\n"
        "pcapkit.Trace\n"
        "assert 'pandas' in sys.modules\n"
        "print(len(seen), gc.isenabled())\n"
    )
    for mode, enabled in (("on", "True"), ("off", "False")):
        out = subprocess.run(
            [sys.executable, "-c", code, mode], capture_output=True, text=True, check=True
        )
        assert out.stdout.split() == ["0", enabled]
