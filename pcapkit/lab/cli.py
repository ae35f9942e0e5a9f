"""``pcapkit lab``: list and run lab scenarios (click group ``lab``; the main CLI registers it).

Thin by design (DESIGN.md §5): every command parses options and calls
:func:`pcapkit.lab.list_scenarios`, :func:`pcapkit.lab.run` or
:func:`pcapkit.lab.cleanup_stale`.  Without root the commands say so and exit 1.
"""

from __future__ import annotations

import json
from enum import IntEnum
from typing import Any

import click

from .errors import LabError, RootRequiredError
from .netns import cleanup_stale, require_root
from .runner import list_scenarios, run


class ExitCode(IntEnum):
    """Mirrors the main CLI's codes (DESIGN.md §5): 0 ok, 1 error, 2 usage."""

    OK = 0
    ERROR = 1
    USAGE = 2


def _fail(msg: str) -> None:
    click.echo(f"pcapkit lab: {msg}", err=True)
    raise SystemExit(ExitCode.ERROR)


def _parse_set(values: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in values:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint="--set")
        try:
            out[key] = json.loads(raw)
        except json.JSONDecodeError:
            out[key] = raw  # bare strings: --set cc=reno
    return out


@click.group(name="lab")
def lab() -> None:
    """Real traffic under controlled delay and loss, captured at both ends (needs root).

    \b
    Example:
      pcapkit lab list
      sudo pcapkit lab run nagle_wwr -o out/nagle_wwr
    """


@lab.command(name="list")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def list_cmd(as_json: bool) -> None:
    """List the scenarios: name, variant, expected pathology, summary.

    \b
    Example:
      pcapkit lab list --json | jq '.[].name'
    """
    items = list_scenarios()
    if as_json:
        click.echo(json.dumps(items, indent=2))
        return
    width = max(len(s["name"]) for s in items)
    cols = [",".join(s["expected"]) or "-" for s in items]
    ew = max(len(c) for c in cols)
    for s, expected in zip(items, cols, strict=True):
        click.echo(f"{s['name']:<{width}}  {s['variant']:<8}  {expected:<{ew}}  {s['summary']}")


@lab.command(name="run")
@click.argument("name")
@click.option(
    "-o",
    "--outdir",
    required=True,
    type=click.Path(file_okay=False),
    help="Directory for client.pcapng, server.pcapng (middle.pcapng) and scenario.json.",
)
@click.option("--delay-ms", type=float, help="One-way delay, both directions (RTT = 2x).")
@click.option("--rate-mbit", type=float, help="Rate limit, both directions.")
@click.option(
    "--drop-c2s",
    type=int,
    multiple=True,
    help="Drop the N-th client->server payload packet (repeatable, 1-based).",
)
@click.option(
    "--drop-s2c",
    type=int,
    multiple=True,
    help="Drop the N-th server->client payload packet (repeatable, 1-based).",
)
@click.option("--reorder-c2s", type=int, multiple=True, help="Hold back the N-th c2s packet.")
@click.option("--reorder-s2c", type=int, multiple=True, help="Hold back the N-th s2c packet.")
@click.option("--cc", help="TCP congestion control on both sockets (default cubic).")
@click.option(
    "--set",
    "sets",
    multiple=True,
    metavar="KEY=VALUE",
    help="Any scenario parameter, value as JSON (see `lab list --json`).",
)
@click.option(
    "--middle",
    is_flag=True,
    help="Also capture halfway along the path (middle.pcapng; each delay split in halves).",
)
@click.option(
    "--forwarder-log",
    type=click.Path(dir_okay=False),
    default=None,
    help="Also write the forwarder's own log here (JSON: each packet's read and release "
    "time, the stalls of the machine it logged).",
)
@click.option("--json", "as_json", is_flag=True, help="Print scenario.json instead of a summary.")
def run_cmd(
    name: str,
    outdir: str,
    delay_ms: float | None,
    rate_mbit: float | None,
    drop_c2s: tuple[int, ...],
    drop_s2c: tuple[int, ...],
    reorder_c2s: tuple[int, ...],
    reorder_s2c: tuple[int, ...],
    cc: str | None,
    sets: tuple[str, ...],
    middle: bool,
    forwarder_log: str | None,
    as_json: bool,
) -> None:
    """Run scenario NAME; write both captures (keys embedded) and scenario.json to -o DIR.

    \b
    Examples:
      sudo pcapkit lab run nagle_wwr -o out/nagle_wwr
      sudo pcapkit lab run tls_sse_nagle -o out/sse --delay-ms 20 --drop-s2c 5
      sudo pcapkit lab run nagle_wwr_nodelay -o out/x --set exchanges=10
      sudo pcapkit lab run nagle_wwr -o out/nagle_wwr --middle
    """
    overrides = _parse_set(sets)
    for key, val in (("delay_ms", delay_ms), ("rate_mbit", rate_mbit), ("cc", cc)):
        if val is not None:
            overrides[key] = val
    for key, vals in (
        ("drop_c2s", drop_c2s),
        ("drop_s2c", drop_s2c),
        ("reorder_c2s", reorder_c2s),
        ("reorder_s2c", reorder_s2c),
    ):
        if vals:
            overrides[key] = list(vals)
    try:
        require_root()
        middle = middle or bool(overrides.pop("middle", False))  # --set middle=true too
        doc = run(name, outdir, middle=middle, forwarder_log=forwarder_log, **overrides)
    except KeyError as e:
        click.echo(f"pcapkit lab: {e.args[0]}", err=True)
        raise SystemExit(ExitCode.USAGE) from None
    except (RootRequiredError, LabError) as e:
        _fail(str(e))
        return
    if as_json:
        click.echo(json.dumps(doc, indent=2))
        return
    hs = doc["ground_truth"].get("handshake") or [{}]
    hs_txt = f" (handshake {hs[0]['rtt_ms']:.2f} ms)" if "rtt_ms" in hs[0] else ""
    drops = [
        f"{e['dir']}#{e['payload_index']} seq={e['rel_seq']} len={e['len']}"
        for e in doc["forwarder"]["events"]
        if e["event"] == "drop"
    ]
    click.echo(
        f"{name}: {doc['variant']}, expected {doc['expected'] or 'nothing'}; "
        f"RTT {doc['path']['rtt_ms']:g} ms{hs_txt}; "
        f"{doc['duration_s']:.1f} s"
    )
    for role, c in doc["captures"].items():
        click.echo(f"  {role}: {outdir}/{c['file']}  {c['packets']} packets, {c['bytes']} bytes")
    if drops:
        click.echo(f"  dropped: {', '.join(drops)}")
    click.echo(f"  {outdir}/scenario.json")


@lab.command(name="fixtures")
@click.option(
    "-o",
    "--outdir",
    default="fixtures",
    show_default=True,
    type=click.Path(file_okay=False),
    help="Fixtures folder: one sub-folder per scenario, plus README.md.",
)
@click.option(
    "--only",
    "only",
    multiple=True,
    metavar="NAME",
    help="Run only these scenarios (repeatable); the README still covers every fixture.",
)
@click.option(
    "--attempts",
    type=click.IntRange(1, 10),
    default=3,
    show_default=True,
    help="Runs per scenario before giving up (a run must pass its scenario's own check).",
)
@click.option(
    "--middle/--no-middle",
    default=True,
    show_default=True,
    help="Also write middle.pcapng (forwarder scenarios whose fixture_middle is set).",
)
@click.option("--readme-only", is_flag=True, help="Only regenerate README.md (no root needed).")
def fixtures_cmd(
    outdir: str, only: tuple[str, ...], attempts: int, middle: bool, readme_only: bool
) -> None:
    """Run every scenario (or --only NAME...) into OUTDIR/<name>/ and rewrite OUTDIR/README.md.

    Forwarder scenarios also get middle.pcapng (the vantage halfway along the path) unless
    the scenario opts out for the size budget or --no-middle is given.

    \b
    Examples:
      sudo pcapkit lab fixtures -o fixtures
      sudo pcapkit lab fixtures -o fixtures --only tcp_cork --only tcp_cork_cleared
      pcapkit lab fixtures -o fixtures --readme-only
    """
    from .fixtures import generate, write_readme

    if readme_only:
        click.echo(str(write_readme(outdir)))
        return
    try:
        require_root()
        res = generate(outdir, only or None, attempts=attempts, log=click.echo, middle=middle)
    except KeyError as e:
        click.echo(f"pcapkit lab: {e.args[0]}", err=True)
        raise SystemExit(ExitCode.USAGE) from None
    except (RootRequiredError, LabError) as e:
        _fail(str(e))
        return
    click.echo(f"{len(res['ok'])} fixture(s) written; {res['readme']}")
    if res["failed"]:
        for name, problems in res["failed"].items():
            click.echo(f"  FAILED {name}: {'; '.join(problems)}", err=True)
        raise SystemExit(ExitCode.ERROR)


@lab.command(name="cleanup")
@click.option("--force", is_flag=True, help="Also remove namespaces of runs still alive.")
def cleanup_cmd(force: bool) -> None:
    """Remove namespaces left by crashed lab runs.

    \b
    Example:
      sudo pcapkit lab cleanup
    """
    try:
        removed = cleanup_stale(force=force)
    except (RootRequiredError, LabError) as e:
        _fail(str(e))
        return
    click.echo(
        f"removed {len(removed)} namespace(s)" + (": " + ", ".join(removed) if removed else "")
    )


def main() -> None:  # pragma: no cover - `python -m pcapkit.lab.cli` until the main CLI has it
    lab()


if __name__ == "__main__":  # pragma: no cover
    main()
