"""Command line: ``pcapkit analyze trace.pcap`` (thin over the library).

Exit codes (also in ``pcapkit --help`` and the README): 0 ok, 1 error (the input
could not be analysed: not a capture, unsupported link type, unreadable; or pcapkit
itself failed as a whole — one line on stderr, never a traceback), 2 usage error (also a
bad ``--set`` threshold), 3 findings matched ``--fail-on``.  pcapkit failing on one
connection or in one detector does not change the exit code: it is an ``internal_error``
anomaly and a line on stderr.
"""

from __future__ import annotations

import enum
import functools
import json
import os
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from . import __version__
from ._pages import no_numpy_hugepages
from .errors import PcapkitError
from .report.names import JSON_KEYS
from .report.names import METRICS as DIFF_METRIC_TABLE

if TYPE_CHECKING:
    from .trace import Trace

# Below this size a capture is analysed faster than a progress bar can be read.
PROGRESS_MIN_BYTES = 20 * 1024 * 1024


class Exit(enum.IntEnum):
    OK = 0
    ERROR = 1
    USAGE = 2
    FINDINGS = 3


# The exit codes, one sentence each: every command's epilog is built from the ones it
# can return (tests/test_cli.py checks them against Exit and the README).
EXIT_MEANING = {
    Exit.OK: "0 ok",
    Exit.ERROR: "1 the input could not be analysed, or pcapkit failed as a whole (one line on stderr)",
    Exit.USAGE: "2 usage error",
    Exit.FINDINGS: "3 a finding matched --fail-on, or a --max-* gate failed",
}


def exit_help(*codes: Exit) -> str:
    return "Exit codes: " + "; ".join(EXIT_MEANING[c] for c in codes) + "."


EXIT_HELP = exit_help(Exit.OK, Exit.ERROR, Exit.USAGE, Exit.FINDINGS)  # the group, analyze
READ_HELP = exit_help(Exit.OK, Exit.ERROR, Exit.USAGE)  # commands without --fail-on


class _Progress:
    """A one-line progress bar on stderr, only when stderr is a terminal."""

    WIDTH = 30

    def __init__(self) -> None:
        self.last = 0.0
        self.shown = False

    def __call__(self, stage: str, frac: float) -> None:
        now = time.monotonic()
        if frac < 1.0 and now - self.last < 0.1:
            return
        self.last = now
        fill = int(self.WIDTH * max(0.0, min(frac, 1.0)))
        sys.stderr.write(
            f"\r{stage:<11} [{'#' * fill}{'.' * (self.WIDTH - fill)}] {frac * 100:5.1f}%"
        )
        sys.stderr.flush()
        self.shown = True

    def done(self) -> None:
        if self.shown:
            sys.stderr.write("\r" + " " * (self.WIDTH + 22) + "\r")
            sys.stderr.flush()


def trace_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """Options shared by every command that opens a capture."""

    # no click existence checks: a missing, unreadable or wrong file is an input error
    # (exit 1, one line; open_trace), not a usage error
    @click.argument("path", type=click.Path(allow_dash=True), metavar="CAPTURE", callback=_prefetch)
    @click.option(
        "--keylog",
        type=click.Path(),
        default=None,
        help="NSS key log (SSLKEYLOGFILE format) for TLS/QUIC; keys embedded in "
        "pcapng Decryption Secrets Blocks are used too.",
    )
    @limit_option
    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return f(*args, **kwargs)

    return wrapper


def _prefetch(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """The capture's record walk starts in a forked child as soon as its path is parsed
    (:mod:`pcapkit.io.prefetch`), while this process goes on importing pandas, pyarrow
    and the detectors; the reader takes the child's offsets.  Not in a process that
    loaded the tables already (nothing left to overlap)."""
    if value != "-" and "pcapkit.trace" not in sys.modules:
        from .io import prefetch

        prefetch.start(value)
    return value


def limit_option(f: Callable[..., Any]) -> Callable[..., Any]:
    """``--limit NAME=VALUE`` (repeatable) for every command that opens a capture."""

    @click.option(
        "--limit",
        "limits",
        multiple=True,
        metavar="NAME=VALUE",
        callback=_limits,
        help="Set a resource limit, e.g. --limit connections=50000 (repeatable; "
        "`pcapkit limits` lists names, defaults and reasons).",
    )
    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        # open_trace reads the limits from the context: the commands need not pass them
        click.get_current_context().meta[LIMITS_KEY] = kwargs.pop("limits")
        return f(*args, **kwargs)

    return wrapper


LIMITS_KEY = "pcapkit.limits"


def _context_limits() -> dict[str, Any] | None:
    """The ``--limit`` settings of the running command (:func:`limit_option`), or None."""
    cctx = click.get_current_context(silent=True)
    return cctx.meta.get(LIMITS_KEY) if cctx is not None else None


def _limits(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> dict[str, Any]:
    """``--limit NAME=VALUE`` checked against :mod:`pcapkit.limits`: a bad one is a usage
    error."""
    from .limits import LimitError, parse_settings, resolve

    try:
        settings = parse_settings(value)
        resolve(settings)
    except LimitError as exc:
        click.echo(f"pcapkit: error: --limit: {exc}", err=True)
        sys.exit(Exit.USAGE)
    return settings


def _settings(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> dict[str, Any]:
    """``--set NAME=VALUE`` checked against the registry: a bad one is a usage error."""
    from .detect.registry import ThresholdError, parse_settings, resolve_thresholds

    try:
        settings = parse_settings(value)
        resolve_thresholds(settings)
    except ThresholdError as exc:
        click.echo(f"pcapkit: error: --set: {exc}", err=True)
        sys.exit(Exit.USAGE)
    return settings


def threshold_option(f: Callable[..., Any]) -> Callable[..., Any]:
    """``--set NAME=VALUE`` (repeatable) for the commands that run the detectors."""
    return click.option(
        "--set",
        "settings",
        multiple=True,
        metavar="NAME=VALUE",
        callback=_settings,
        help="Set a detector threshold, e.g. --set nagle.late_slack_ms=3 (repeatable; "
        "`pcapkit thresholds` lists names, defaults, units and sources).",
    )(f)


# set by main(): the command-line process, not a caller of cli (tests, CliRunner)
_FREEZE_GC = False


def _freeze_imports() -> None:
    """In the ``pcapkit`` process, move every object alive now — the modules the command
    imported (pandas, numpy, pyarrow, the detectors: a few hundred thousand objects) —
    out of the cyclic GC's reach (``gc.freeze``), and leave the collector off for the
    rest of the command.  Not in a caller's process: a test session's garbage must
    still be collected.

    The collector was off since :func:`main` for the commands that come here
    (:data:`_Cli.GC_OFF_UNTIL_OPEN`): the imports create no garbage worth collecting.
    Neither does the analysis, which is columnar (numpy arrays, no reference cycles per
    packet or record): with the collector off, a :func:`gc.collect` at the exit of
    ``analyze`` finds 161-292 objects on each of the 118 captures of ../shared
    (realworld and corpus; with a malloc_trim after it, 0-1 MiB given back) and 222 on the
    benchmark shapes at 1M packets; peak RSS unchanged.  Its collections cost,
    ``analyze --format json`` at 1M packets, 4 alternating rounds, median: sse 7.59 →
    7.36 s, h2 4.61 → 4.48 s (thresholds raised to 200k / 10 / 10 instead: 7.74 →
    7.66 s, 4.66 → 4.62 s).  Freezing the imports (kept, for an explicit collection)
    was the first step: CPU best of 3 at 100k packets, bulk / h2 / sse / quic, 1.38 →
    1.19, 1.67 → 1.51, 2.99 → 2.58, 1.18 → 0.97 s."""
    if _FREEZE_GC:
        import gc

        gc.freeze()


def open_trace(
    path: str,
    keylog: str | None,
    *,
    redact: bool = True,
    settings: dict[str, Any] | None = None,
) -> tuple[Trace, _Progress | None]:
    prog = None
    if keylog is not None:
        try:
            with open(keylog, "rb"):
                pass
        except OSError as exc:
            fail(f"--keylog {keylog}: {exc.strerror or exc}")
    try:
        big = path != "-" and os.path.getsize(path) >= PROGRESS_MIN_BYTES
    except OSError:
        big = False  # the open below says what is wrong with it
    if sys.stderr.isatty() and big:
        prog = _Progress()
    limits = _context_limits()
    from .trace import Trace

    _freeze_imports()
    try:
        trace = Trace(
            path, keylog, progress=prog, redact=redact, thresholds=settings, limits=limits
        )
        return trace, prog
    except PcapkitError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"{path}: {exc.strerror or exc}")
    raise AssertionError("unreachable")


def open_for_analysis(
    path: str, keylog: str | None, settings: dict[str, Any] | None
) -> tuple[Any, _Progress | None]:
    """:func:`open_trace`, or — when the capture's analysis would not fit the memory this
    process may use — a :class:`pcapkit.sharded.ShardedTrace` over flow-hash shards in a
    temporary directory, merged (issue 20): the same report either way."""
    from .sharded import (
        CROSS_CONNECTION_KINDS,
        PEAK_PER_BYTE,
        capture_bytes,
        memory_budget,
        shards_needed,
    )

    limits = _context_limits()
    size = capture_bytes(path, limits)
    budget = memory_budget() if size else None
    n = shards_needed(size, budget)
    if not n:
        return open_trace(path, keylog, settings=settings)
    _freeze_imports()
    from .sharded import ShardedTrace

    emit(
        f"pcapkit: {path}: {size / 1e6:.0f} MB is more than this process's memory allows "
        f"({(budget or 0) / 1e6:.0f} MB): analysed as {n} flow-hash shards, merged",
        err=True,
    )
    window = max(1 << 20, min(8 << 20, (budget or 0) // 8))
    try:
        st = ShardedTrace(
            path,
            keylog,
            shards=n,
            thresholds=settings,
            limits=limits,
            window_bytes=window,
            budget=budget,
        )
        if st.by == "connection":
            pair = st.largest_pair * PEAK_PER_BYTE
            why = (
                f"one pair of hosts alone is too big (~{pair / 1e6:.0f} MB to analyse)"
                if pair > (budget or 0)
                else f"no count of {n}–{2 * n} shards keeps every pair of hosts within it"
            )
            emit(
                f"pcapkit: {path}: {why}: sharded by connection; "
                f"findings that relate two connections ({', '.join(CROSS_CONNECTION_KINDS)}) "
                "are only found within a shard",
                err=True,
            )
        elif st.shards != n:
            emit(
                f"pcapkit: {path}: {st.shards} shards by pair of hosts (at {n}, two pairs "
                "shared a shard too big for the budget)",
                err=True,
            )
        return st, None
    except PcapkitError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"{path}: {exc.strerror or exc}")
    raise AssertionError("unreachable")


def emit(text: str, *, err: bool = False, nl: bool = True, styled: bool = False) -> None:
    """Print ``text`` with every terminal control character escaped (captured strings are
    attacker-controlled: an X-Request-Id could retitle or clear the terminal).  With
    ``styled``, severities and the verdict are coloured — only on a terminal (click
    strips styles in pipes) and never with ``NO_COLOR`` set (https://no-color.org)."""
    from .report.escape import printable

    text = printable(text)
    color = None
    if styled and not os.environ.get("NO_COLOR"):
        from .report.text import colorize

        text = colorize(text)
    elif styled:
        color = False
    click.echo(text, err=err, nl=nl, color=color)


def emit_json(doc: Any) -> None:
    """JSON on stdout: json escapes C0 and non-ASCII; DEL is escaped too."""
    click.echo(json.dumps(doc, indent=2).replace("\x7f", "\\u007f"))


class JsonOut:
    """stdout for the streamed JSON writers (``report.json.write_analysis_json``,
    ``write_records_json``), escaped as :func:`emit_json` escapes: json escapes C0 and
    non-ASCII, DEL is escaped here (inside a JSON document it can only be in a string)."""

    def write(self, text: str) -> int:
        # sys.stdout at call time (click's test runner swaps it); no flush per row
        return sys.stdout.write(text.replace("\x7f", "\\u007f"))


def fail(message: str) -> None:
    emit(f"pcapkit: error: {message}", err=True)
    sys.exit(Exit.ERROR)


class _Cli(click.Group):
    """The command group; ``lab`` (netns, forwarder, fixtures: ~0.1 s of imports) is
    imported only when it is named, so neither `pcapkit analyze` nor `pcapkit --help`
    (which lists it with :data:`LAZY_HELP`) pays for it."""

    LAZY = ("lab",)
    # what `pcapkit --help` lists for a lazy command not loaded yet: its docstring's
    # first paragraph (tests/test_import_cost.py checks the listing against the
    # command's own)
    LAZY_HELP = {
        "lab": "Real traffic under controlled delay and loss, captured at both ends (needs root)."
    }
    _listing = False
    # the commands that reach open_trace (or open_for_analysis): main() turns the cyclic
    # GC off for the imports and it stays off (_freeze_imports); every other command has
    # it on again as soon as it is named
    GC_OFF_UNTIL_OPEN = frozenset(
        ("analyze", "diff", "records", "requests", "export", "report", "slice")
    )

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.LAZY})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if _FREEZE_GC and cmd_name not in self.GC_OFF_UNTIL_OPEN:  # a caller's GC: theirs
            import gc

            gc.enable()
        if cmd_name in self.LAZY and cmd_name not in self.commands:
            if self._listing:  # its line in the command list, without importing it
                return click.Command(cmd_name, help=self.LAZY_HELP[cmd_name])
            try:
                from .lab.cli import lab
            except ImportError:
                return None
            self.add_command(lab)
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        self._listing = True
        try:
            super().format_commands(ctx, formatter)
        finally:
            self._listing = False


@click.group(
    cls=_Cli,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    epilog=EXIT_HELP,
)
@click.version_option(__version__, prog_name="pcapkit")
def cli() -> None:
    """pcapkit: read a capture of a slow streaming API and name the cause.

    \b
    Example:
      pcapkit analyze trace.pcapng
      pcapkit analyze trace.pcap --keylog keys.log --format json
    """


@cli.command(epilog=EXIT_HELP)
@trace_options
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "html"]),
    default="text",
    show_default=True,
    help="text for people, json for programs (top-level keys: "
    + ", ".join(JSON_KEYS)
    + "; see the README), html: the report of `pcapkit report` on stdout.",
)
@click.option(
    "--all", "show_all", is_flag=True, help="List every flow in text output (default: first 50)."
)
@click.option(
    "--fail-on",
    "fail_on",
    default=None,
    metavar="KIND[,KIND…]|SEVERITY",
    help="Exit 3 when a finding of one of these kinds (e.g. nagle_delayed_ack,zero_window), "
    "or of at least this severity (info, low, medium, high), is found. The CI gate.",
)
@click.option(
    "--min-cost-ms",
    type=float,
    default=0.0,
    show_default=True,
    help="Hide findings that cost less than this (they do not count for --fail-on either).",
)
@click.option(
    "--flow",
    "flows",
    type=int,
    multiple=True,
    metavar="N",
    help="Only this flow (repeatable): its connection and findings.",
)
@click.option(
    "--kind",
    "kinds",
    multiple=True,
    metavar="KIND[,KIND…]",
    help="Only findings of these kinds (repeatable).",
)
@click.option(
    "--min-severity",
    type=click.Choice(["info", "low", "medium", "high"]),
    default=None,
    help="Only findings of at least this severity.",
)
@click.option(
    "--since",
    type=float,
    default=None,
    metavar="SECONDS",
    help="Only findings that end after this many seconds into the capture.",
)
@click.option(
    "--until",
    type=float,
    default=None,
    metavar="SECONDS",
    help="Only findings that start before this many seconds into the capture.",
)
@click.option(
    "--top",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="Only the N worst findings.",
)
@click.option(
    "--max-ttfb-ms",
    type=click.FloatRange(min=0),
    default=None,
    metavar="MS",
    help="Exit 3 when an HTTP exchange's time to first byte is over MS (or none was "
    "measured), naming it.",
)
@click.option(
    "--max-ttft-ms",
    type=click.FloatRange(min=0),
    default=None,
    metavar="MS",
    help="Exit 3 when an exchange's time to first token (SSE event, gRPC message, else "
    "body byte) is over MS (or none was measured).",
)
@click.option(
    "--max-gap-p95-ms",
    type=click.FloatRange(min=0),
    default=None,
    metavar="MS",
    help="Exit 3 when an exchange's p95 gap between events is over MS (or none was measured).",
)
@click.option(
    "--max-handshake-ms",
    type=click.FloatRange(min=0),
    default=None,
    metavar="MS",
    help="Exit 3 when a TLS or QUIC handshake took longer than MS (or none was measured).",
)
@click.option(
    "--junit",
    "junit",
    type=click.Path(dir_okay=False, writable=True, allow_dash=False),
    default=None,
    metavar="FILE",
    help="Also write JUnit XML for CI: a test case per exchange, handshake, finding and "
    "gate, failing where the exit code says 3.",
)
@threshold_option
def analyze(
    path: str,
    keylog: str | None,
    fmt: str,
    show_all: bool,
    fail_on: str | None,
    min_cost_ms: float,
    flows: tuple[int, ...],
    kinds: tuple[str, ...],
    min_severity: str | None,
    since: float | None,
    until: float | None,
    top: int | None,
    max_ttfb_ms: float | None,
    max_ttft_ms: float | None,
    max_gap_p95_ms: float | None,
    max_handshake_ms: float | None,
    junit: str | None,
    settings: dict[str, Any],
) -> None:
    """Summarise every connection of a capture: bytes, handshake, RTT legs, vantage,
    retransmissions, TLS and QUIC sessions, HTTP requests with their timelines and
    why they waited, findings (worst first, with frames, cost and remedy) and anomalies.

    \b
    Examples:
      pcapkit analyze fixtures/nagle_wwr/client.pcapng
      pcapkit analyze trace.pcap.gz --format json | jq '.findings[0]'
      pcapkit analyze trace.pcapng --fail-on nagle_delayed_ack,zero_window --min-cost-ms 5
      pcapkit analyze trace.pcapng --set nagle.late_slack_ms=3 --set hol.min_episode_ms=10
      pcapkit analyze trace.pcapng --flow 3 --min-severity medium --top 5
      pcapkit analyze trace.pcapng --max-ttft-ms 300 --max-gap-p95-ms 80 --junit out.xml
    """
    from .detect import KINDS
    from .report import analysis_text, write_analysis_json
    from .report.narrow import capture_time_ns, narrow, parse_kinds

    gate = parse_fail_on(fail_on)
    limits = {
        o: v
        for o, v in (
            ("--max-ttfb-ms", max_ttfb_ms),
            ("--max-ttft-ms", max_ttft_ms),
            ("--max-gap-p95-ms", max_gap_p95_ms),
            ("--max-handshake-ms", max_handshake_ms),
        )
        if v is not None
    }
    try:
        kind_set = parse_kinds(kinds, KINDS) if kinds else None
    except ValueError as exc:
        emit(f"pcapkit: error: --kind: {exc}; kinds: {', '.join(KINDS)}", err=True)
        sys.exit(Exit.USAGE)
    trace, prog = open_for_analysis(path, keylog, settings)
    failing = None
    violations: list[Any] = []
    try:
        with trace:
            n_flows = len(trace.flows)
            bad = [f for f in flows if not 0 <= f < n_flows]
            if bad:
                emit(
                    f"pcapkit: error: --flow {bad[0]}: no such flow (the capture has "
                    f"{n_flows}: 0–{n_flows - 1})",
                    err=True,
                )
                sys.exit(Exit.USAGE)
            t0 = trace.capture_summary()["first_ts_ns"]
            findings = narrow(
                trace.findings,
                flows=set(flows) if flows else None,
                kinds=kind_set,
                min_severity=min_severity,
                min_cost_ms=min_cost_ms,
                since_ns=None if since is None else capture_time_ns(since, t0),
                until_ns=None if until is None else capture_time_ns(until, t0),
                top=top,
            )
            only = set(flows) if flows else None
            if fmt == "html":
                from .report.html import analysis_html

                page = analysis_html(trace, findings=findings, only_flows=only)
                if prog:
                    prog.done()
                click.echo(page, nl=False)
            elif fmt == "json":
                if prog:
                    prog.done()
                # streamed row by row: never the whole document as one string
                write_analysis_json(trace, JsonOut(), findings=findings, only_flows=only)
            else:
                text = analysis_text(
                    trace,
                    max_flows=None if show_all or flows else 50,
                    findings=findings,
                    only_flows=only,
                )
                if prog:
                    prog.done()
                emit(text, nl=False, styled=True)
            failing = gate(findings) if gate is not None else None
            if limits or junit:
                from .report import gates

                subs = gates.subjects(trace.requests, trace.tls, trace.quic, only)
                violations = gates.check(limits, subs)
                for v in violations:
                    emit(f"pcapkit: {v.line()}", err=True)
                if junit:
                    xml = gates.junit_xml(path, subs, findings, limits, violations, failing)
                    try:
                        with open(junit, "wb") as fh:
                            fh.write(xml)
                    except OSError as exc:
                        fail(f"--junit {junit}: {exc.strerror or exc}")
            _internal_errors_note(trace)
    except PcapkitError as exc:
        fail(str(exc))
    if violations or (failing is not None and bool(failing.any())):
        sys.exit(Exit.FINDINGS)


def _internal_errors_note(trace: Trace) -> None:
    """One line on stderr when pcapkit failed on part of the capture (isolated
    ``internal_error`` anomalies: the report is complete otherwise, the exit code is
    unchanged)."""
    n = len(trace.internal_errors)  # what this command computed, nothing more
    if n:
        emit(
            f"pcapkit: {n} internal error(s): pcapkit failed on part of this capture (a bug, "
            "please report it); the anomalies list them as internal_error, the rest of the "
            "report is complete",
            err=True,
        )


DIFF_METRICS = tuple(DIFF_METRIC_TABLE)  # what --metric accepts


@cli.command(
    "diff",
    epilog=READ_HELP[:-1] + "; 3 a metric got worse by more than --fail-on-regression.",
)
@click.argument("before", type=click.Path(allow_dash=False), metavar="BEFORE")
@click.argument("after", type=click.Path(allow_dash=False), metavar="AFTER")
@click.option(
    "--keylog",
    type=click.Path(),
    default=None,
    help="NSS key log for both captures (embedded pcapng keys are used too).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="text for people; json: verdict, metrics, requests (<metric>_before/_after), "
    "unmatched, findings (appeared, gone), noise, notes.",
)
@click.option(
    "--noise-pct",
    type=click.FloatRange(min=0),
    default=10.0,
    show_default=True,
    help="A metric changed only when it moved by more than this share of its before value…",
)
@click.option(
    "--noise-ms",
    type=click.FloatRange(min=0),
    default=1.0,
    show_default=True,
    help="…and, for times, by more than this many ms.",
)
@click.option(
    "--fail-on-regression",
    "fail_pct",
    type=click.FloatRange(min=0),
    default=None,
    metavar="PCT",
    help="Exit 3 when a --metric (default: every judged metric) got worse by more than "
    "PCT percent.",
)
@click.option(
    "--metric",
    "metrics",
    type=click.Choice(DIFF_METRICS),
    multiple=True,
    help="The metric(s) --fail-on-regression watches (repeatable).",
)
@limit_option
def diff(
    before: str,
    after: str,
    keylog: str | None,
    fmt: str,
    noise_pct: float,
    noise_ms: float,
    fail_pct: float | None,
    metrics: tuple[str, ...],
) -> None:
    """Compare two captures of the same workload — before and after a change: requests
    matched by x-request-id, traceparent, else method, authority and path in order;
    TTFB, TTFT, whole response, gaps, events/s and bytes/s per request; turn times of
    connections without HTTP; handshakes, connections, resumptions; findings that
    appeared or are gone; a verdict (improved, regressed, unchanged) outside a noise band.

    \b
    Examples:
      pcapkit diff before.pcapng after.pcapng
      pcapkit diff before.pcapng after.pcapng --format json | jq .verdict
      pcapkit diff a.pcapng b.pcapng --fail-on-regression 10 --metric ttft_ms
    """
    from .report.diff import diff as compare
    from .report.diff import diff_json, diff_text

    traces = []
    for p in (before, after):
        t, prog = open_trace(p, keylog)
        traces.append(t)
    try:
        d = compare(traces[0], traces[1], noise_pct=noise_pct, noise_ms=noise_ms)
    except PcapkitError as exc:
        fail(str(exc))
    finally:
        for t in traces:
            t.close()
    for t in traces:
        _internal_errors_note(t)
    if fmt == "json":
        emit_json(diff_json(d))
    else:
        emit(diff_text(d), nl=False, styled=True)
    if fail_pct is not None:
        worse = d.regressions(fail_pct, list(metrics) or None)
        for r in worse.itertuples(index=False):
            by = "from 0" if r.before == 0 else f"{r.change_pct:+.1f}%"
            emit(
                f"pcapkit: regression: {r.metric} {r.before:.6g} → {r.after:.6g} "
                f"({by}, more than {fail_pct:g}%)",
                err=True,
            )
        if len(worse):
            sys.exit(Exit.FINDINGS)


def parse_fail_on(spec: str | None) -> Callable[[Any], Any] | None:
    """``--fail-on``: a severity name (that or worse) or a comma-separated list of kinds;
    the rule as a function of the findings table giving the mask of those it selects."""
    import pandas as pd

    from .detect import KINDS, SEVERITIES

    if not spec:
        return None
    spec = spec.strip()
    if spec in SEVERITIES:
        rank = SEVERITIES.index(spec)
        return lambda df: (
            df.severity.map(SEVERITIES.index).ge(rank) if len(df) else pd.Series([], dtype=bool)
        )
    kinds = {k.strip() for k in spec.split(",") if k.strip()}
    unknown = kinds - set(KINDS)
    if unknown:
        raise click.BadParameter(
            f"unknown kind(s) {', '.join(sorted(unknown))}; kinds: {', '.join(KINDS)}; "
            f"or a severity: {', '.join(SEVERITIES)}",
            param_hint="--fail-on",
        )
    return lambda df: df.kind.isin(kinds)


@cli.command(epilog=READ_HELP)
@trace_options
@click.option("--flow", type=int, default=None, help="Only this flow id.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "csv", "json"]),
    default="text",
    show_default=True,
    help="text table, or every column of Trace.records as CSV / JSON.",
)
def records(path: str, keylog: str | None, flow: int | None, fmt: str) -> None:
    """TLS records aligned with the TCP frames and PSH flags that carried them.

    One line per record: frames (first carried its first byte – became readable),
    stream offset, wire length, type (inner type when decrypted), plaintext length,
    segments spanned, whether it ends a PSH segment, its push unit and how many
    records share that unit, decryption status.

    \b
    Examples:
      pcapkit records fixtures/tls_sse_nagle/server.pcapng
      pcapkit records trace.pcap --keylog keys.log --flow 0 --format csv
    """
    from .report import records_text

    print_table(path, keylog, flow, fmt, "records", records_text)


def print_table(
    path: str,
    keylog: str | None,
    flow: int | None,
    fmt: str,
    table: str,
    text: Callable[[Trace, int | None], str],
    *,
    redact: bool = True,
    settings: dict[str, Any] | None = None,
) -> None:
    """One Trace table as text (``text(trace, flow)``), JSON records or CSV."""
    from .report.json import write_records_json

    trace, prog = open_trace(path, keylog, redact=redact, settings=settings)
    with trace:
        if flow is not None and not 0 <= flow < len(trace.flows):
            if prog:
                prog.done()
            click.echo(
                f"pcapkit: error: --flow {flow}: no such flow "
                f"(the capture has {len(trace.flows)}: 0–{len(trace.flows) - 1})",
                err=True,
            )
            sys.exit(Exit.USAGE)
        r = getattr(trace, table)
        if flow is not None:
            r = r[r.flow == flow]
        if prog:
            prog.done()
        if fmt == "json":
            write_records_json(r, JsonOut())
        elif fmt == "csv":
            emit(r.to_csv(index=False), nl=False)
        else:
            emit(text(trace, flow), nl=False)
        _internal_errors_note(trace)


@cli.command(epilog=READ_HELP)
@trace_options
@click.option("--flow", type=int, default=None, help="Only this flow id.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "csv"]),
    default="text",
    show_default=True,
    help="text for people; json/csv carry every column of Trace.requests.",
)
@click.option(
    "--show-secrets",
    is_flag=True,
    help="Do not redact authorization / cookie header values (json/csv header columns).",
)
@threshold_option
def requests(
    path: str,
    keylog: str | None,
    flow: int | None,
    fmt: str,
    show_secrets: bool,
    settings: dict[str, Any],
) -> None:
    """HTTP exchanges with their timelines: TTFB, TTFT, events and gaps.

    One block per request (HTTP/1.1 and HTTP/2 over cleartext TCP or decrypted TLS,
    HTTP/3 over decrypted QUIC): method, authority, path, status, content type; time to
    the response headers (TTFB) and to the first SSE event / gRPC message / body byte
    (TTFT), counted from the frame that completed the request's header block; event
    count and inter-event gaps, and why the long waits happened (path, a network
    finding, or the server); the frames where Wireshark shows the request and the
    response.

    \b
    Examples:
      pcapkit requests fixtures/tls_sse_nagle/client.pcapng
      pcapkit requests trace.pcapng --keylog keys.log --format csv > requests.csv
    """
    from .report.text import requests_text

    print_table(
        path,
        keylog,
        flow,
        fmt,
        "requests",
        requests_text,
        redact=not show_secrets,
        settings=settings,
    )


@cli.command(epilog="Exit codes: 0 ok; 2 usage error.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="text for people; json: one object per threshold.",
)
@click.argument("detector", required=False)
def thresholds(fmt: str, detector: str | None) -> None:
    """Every detector threshold you can set with --set NAME=VALUE (or
    pcapkit.open(path, thresholds={NAME: VALUE})): its default, unit, the range
    allowed and where the default comes from.

    \b
    Examples:
      pcapkit thresholds
      pcapkit thresholds nagle
      pcapkit analyze trace.pcapng --set nagle.late_slack_ms=3
    """
    from dataclasses import asdict

    from .detect.registry import DETECTORS, SHARED
    from .detect.registry import thresholds as all_thresholds

    rows = all_thresholds()
    if detector is not None:
        names = sorted([d.name for d in DETECTORS] + list(SHARED))
        if detector not in names:
            click.echo(
                f"pcapkit: error: no detector {detector!r}; detectors: {', '.join(names)}",
                err=True,
            )
            sys.exit(Exit.USAGE)
        rows = [r for r in rows if r.detector == detector]
    if fmt == "json":
        click.echo(json.dumps([asdict(r) for r in rows], indent=2))
        return
    from .report.text import thresholds_text

    click.echo(thresholds_text(rows), nl=False)


@cli.command(epilog=exit_help(Exit.OK, Exit.USAGE))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="text for people; json: one object per limit.",
)
def limits(fmt: str) -> None:
    """Every resource limit you can set with --limit NAME=VALUE (or pcapkit.open(path,
    limits={NAME: VALUE})): its default, unit and why that value.  Past a limit the
    analysis goes on and an anomaly (*_limit_exceeded) says what was only counted.

    \b
    Examples:
      pcapkit limits
      pcapkit analyze big.pcap --limit connections=100000 --limit messages=1000000
    """
    from .limits import describe

    d = describe()
    if fmt == "json":
        click.echo(json.dumps(d.to_dict("records"), indent=2))
        return
    for r in d.itertuples(index=False):
        click.echo(f"{r.name} = {r.default} {r.unit}\n    {r.reason}")


@cli.command(epilog=READ_HELP)
@trace_options
@click.option(
    "--tables",
    "tables_dir",
    default=None,
    type=click.Path(file_okay=False),
    help="Directory for every table as DIR/<table>.<format> (packets, flows, segments, "
    "records, tls, quic…, requests, gaps, findings, anomalies).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["parquet", "csv", "jsonl"]),
    default="parquet",
    show_default=True,
    help="Table format: parquet (needs pyarrow: the [export] extra), csv or jsonl.",
)
@click.option(
    "--qlog",
    "qlog_dir",
    default=None,
    type=click.Path(file_okay=False),
    help="Directory for one <capture>-flow<N>.sqlog (qlog 0.3, JSON-SEQ) per QUIC connection.",
)
def export(
    path: str, keylog: str | None, tables_dir: str | None, fmt: str, qlog_dir: str | None
) -> None:
    """Export a capture's tables for pandas, DuckDB or Polars, and its QUIC connections
    as qlog files for qvis.

    --tables writes every table; each *_ts_ns column gets a UTC *_ts timestamp beside
    it; nested columns (frames, evidence, headers, details) are lists, structs and maps
    in Parquet, JSON text in CSV, JSON in JSON Lines.  --qlog writes one JSON-SEQ qlog
    per connection (network vantage, named from the client's side: its packets are
    packet_sent, the server's packet_received), with every packet's header and decrypted
    frames; packets without keys keep their header and say why.

    \b
    Examples:
      pcapkit export trace.pcapng --tables out/ --format parquet
      pcapkit export fixtures/h3_streams_drop/client.pcapng --qlog out/qlog
      pcapkit export trace.pcapng --keylog keys.log --qlog /tmp/q --tables /tmp/t --format csv
    """
    from .export.qlog import export_qlog
    from .export.tables import export_tables

    if tables_dir is None and qlog_dir is None:
        emit("pcapkit: error: export needs --tables DIR or --qlog DIR (or both)", err=True)
        sys.exit(Exit.USAGE)
    trace, prog = open_trace(path, keylog)
    written = []
    with trace:
        if tables_dir is not None:
            try:
                written += export_tables(trace, tables_dir, fmt)
            except RuntimeError as exc:  # no pyarrow for Parquet
                fail(str(exc))
        if qlog_dir is not None:
            quic = export_qlog(trace, qlog_dir)
            if not quic:
                emit(f"{path}: no QUIC connections", err=True)
            written += quic
        _internal_errors_note(trace)
        if prog:
            prog.done()
    for w in written:
        emit(str(w))


@cli.command("report", epilog=READ_HELP)
@trace_options
@click.option(
    "-o",
    "--output",
    required=True,
    type=click.Path(dir_okay=False, allow_dash=True),
    help="The HTML file to write ('-': stdout).",
)
@click.option(
    "--max-connections",
    type=click.IntRange(min=0),
    default=50,
    show_default=True,
    metavar="N",
    help="Connection cards (with charts) for the N with the costliest findings, then the "
    "busiest; the rest are counted.",
)
@click.option(
    "--max-marks",
    type=click.IntRange(min=10),
    default=1000,
    show_default=True,
    metavar="N",
    help="Marks per chart; a bigger chart keeps evenly spaced rows of each layer, in "
    "proportion (the chart says so).",
)
@click.option(
    "--max-findings",
    type=click.IntRange(min=0),
    default=200,
    show_default=True,
    metavar="N",
    help="Findings shown in full (worst first); the rest one line each, with their filter.",
)
@threshold_option
def report_cmd(
    path: str,
    keylog: str | None,
    output: str,
    max_connections: int,
    max_marks: int,
    max_findings: int,
    settings: dict[str, Any],
) -> None:
    """Write one self-contained HTML report (works offline, no CDN): summary and verdict,
    every finding with its evidence frames, explanation, remedy and a copy-able display
    filter, and a card per connection with its requests and interactive charts (token
    timeline, time-sequence graph, TLS record/segment strip, HTTP/2-HTTP/3 stream
    waterfall, handshake ladder; zoom, pan, hover for frame numbers).

    \b
    Examples:
      pcapkit report trace.pcapng -o report.html
      pcapkit report trace.pcap --keylog keys.log -o report.html --max-connections 10
    """
    from .report.html import analysis_html

    trace, prog = open_trace(path, keylog, settings=settings)
    try:
        with trace:
            page = analysis_html(
                trace,
                max_connections=max_connections,
                max_marks=max_marks,
                max_findings=max_findings,
            )
    except PcapkitError as exc:
        fail(str(exc))
    if prog:
        prog.done()
    if output == "-":
        click.echo(page, nl=False)
        return
    try:
        with open(output, "w", encoding="utf-8") as f:
            f.write(page)
    except OSError as exc:
        fail(f"{output}: {exc.strerror or exc}")
    emit(f"{output}: {len(page.encode()):,} bytes")


@cli.command("slice", epilog=READ_HELP)
@trace_options
@click.option(
    "--flow",
    "flows",
    type=int,
    multiple=True,
    required=True,
    metavar="N",
    help="A flow to keep (repeatable).",
)
@click.option(
    "-o",
    "--output",
    required=True,
    type=click.Path(dir_okay=False),
    help="The pcapng to write.",
)
def slice_cmd(path: str, keylog: str | None, flows: tuple[int, ...], output: str) -> None:
    """Write some connections of a capture to a new pcapng, with the key-log lines of
    their TLS/QUIC sessions (and only theirs) embedded as a Decryption Secrets Block:
    what to share instead of a whole capture (editcap / tshark -w, keys included).

    \b
    Examples:
      pcapkit slice trace.pcapng --flow 3 -o flow3.pcapng
      pcapkit slice trace.pcap --keylog keys.log --flow 3 --flow 7 -o two.pcapng
    """
    trace, prog = open_trace(path, keylog)
    with trace:
        n_flows = len(trace.flows)
        bad = [f for f in flows if not 0 <= f < n_flows]
        if bad:
            emit(
                f"pcapkit: error: --flow {bad[0]}: no such flow (the capture has {n_flows}: "
                f"0–{n_flows - 1})",
                err=True,
            )
            sys.exit(Exit.USAGE)
        try:
            n = trace.slice(list(flows), output)
        except OSError as exc:
            fail(f"{output}: {exc.strerror or exc}")
        if prog:
            prog.done()
    emit(f"{output}: {n} frames of {len(flows)} flow(s)")


@cli.command("shard", epilog=exit_help(Exit.OK, Exit.ERROR, Exit.USAGE))
@click.argument("path", type=click.Path(allow_dash=True), metavar="CAPTURE")
@click.option(
    "-n",
    "--shards",
    "n",
    type=click.IntRange(1, 4096),
    required=True,
    metavar="N",
    help="How many shards to write.",
)
@click.option(
    "-o",
    "--output",
    "outdir",
    required=True,
    type=click.Path(file_okay=False),
    help="The directory to write DIR/shard-K.pcapng (K = 0…N−1) into.",
)
@click.option(
    "--by",
    type=click.Choice(["connection", "hosts"]),
    default="connection",
    show_default=True,
    help="Keep together each connection (5-tuple), or every connection between two hosts "
    "(the findings that relate connections, e.g. connection_not_reused, need it).",
)
@limit_option
def shard(path: str, n: int, outdir: str, by: str) -> None:
    """Split a capture into N pcapng captures by a symmetric hash of each connection's
    addresses and ports (as Zeek clusters and NIC RSS balance flows): both directions
    and every frame of a connection land in one shard, with every interface and
    Decryption Secrets Block of the input, in one streaming pass in bounded memory.
    Fragments hash on their addresses; frames that are not IP go to shard 0.
    DIR/shard-K.frames maps each shard frame to its frame number in the input.

    \b
    Examples:
      pcapkit shard trace.pcap -n 8 -o shards/
      pcapkit batch shards/ --out dataset/
    """
    from .net.shard import shard_capture

    limits = _context_limits()
    try:
        res = shard_capture(path, n, outdir, by=by, limits=limits)
    except PcapkitError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"{exc.filename or path}: {exc.strerror or exc}")
    for a in res.anomalies:
        emit(f"pcapkit: {path}: {a['name']}: {a['detail']}", err=True)
    total = sum(res.frames)
    for p, k in zip(res.paths, res.frames, strict=True):
        emit(f"{p}: {k} frames")
    emit(f"{total} frames in {n} shard(s), {res.secrets} secrets block(s) copied into each")


@cli.command("batch", epilog=exit_help(Exit.OK, Exit.ERROR, Exit.USAGE))
@click.argument("inputs", nargs=-1, required=True, metavar="INPUTS…")
@click.option(
    "--out",
    "out",
    required=True,
    type=click.Path(file_okay=False),
    metavar="DATASET",
    help="The directory of Parquet datasets: DATASET/<table>/ for every table.",
)
@click.option(
    "--scheduler",
    default=None,
    metavar="ADDRESS",
    help="A running Dask scheduler (tcp://host:8786); default: a local cluster.",
)
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="Worker processes of the local cluster (default: the usable cores).",
)
@click.option(
    "--tables",
    "tables",
    default=None,
    metavar="NAME[,NAME…]",
    help="Only these tables (default: every table but packets).",
)
@click.option(
    "--keylog",
    type=click.Path(dir_okay=False),
    default=None,
    help="An NSS key log for every input (keys in the captures are used as well).",
)
@threshold_option
def batch(
    inputs: tuple[str, ...],
    out: str,
    scheduler: str | None,
    workers: int | None,
    tables: str | None,
    keylog: str | None,
    settings: dict[str, Any],
) -> None:
    """Analyse many captures on Dask, one task per input (a file, a glob, a directory, the
    shards of `pcapkit shard`), into one Parquet dataset per table at DATASET/<table>/,
    every row with its `capture` (and `shard`).  A failed input is reported (and listed in
    DATASET/_errors.jsonl) and the rest goes on (exit 1 at the end); a re-run skips the
    inputs already done.

    \b
    Examples:
      pcapkit batch 'captures/*.pcapng' --out dataset/ --workers 2
      pcapkit batch shards/ --out dataset/ --scheduler tcp://10.0.0.5:8786
      duckdb -c "select capture, sum(cost_ms) from 'dataset/findings/*.parquet' group by 1"
    """
    from .batch import run_batch

    names = [t.strip() for t in tables.split(",") if t.strip()] if tables else None

    def report(k: int, n: int, s: dict[str, Any]) -> None:
        what = (
            f"ok, {s['frames']} frames, {s['rows'].get('findings', 0)} findings, {s['seconds']} s"
            if s["ok"]
            else f"FAILED: {s['error']}"
        )
        emit(f"[{k}/{n}] {s['capture']}: {what}", err=True)

    try:
        res = run_batch(
            inputs,
            out,
            scheduler=scheduler,
            workers=workers,
            tables=names,
            keylog=keylog,
            settings=settings or None,
            report=report,
        )
    except ValueError as exc:
        emit(f"pcapkit: error: {exc}", err=True)
        sys.exit(Exit.USAGE)
    except (RuntimeError, OSError) as exc:
        fail(str(exc))
    emit(
        f"{len(res.done)} done, {len(res.skipped)} already done, {len(res.failed)} failed "
        f"in {res.seconds:.1f} s → {out}",
        err=True,
    )
    if res.failed:
        sys.exit(Exit.ERROR)


@cli.command(epilog=READ_HELP)
@click.argument("client", type=click.Path(allow_dash=False), metavar="CLIENT")
@click.argument("server", type=click.Path(allow_dash=False), metavar="SERVER")
@click.option(
    "-o",
    "--output",
    required=True,
    type=click.Path(dir_okay=False),
    help="The merged pcapng to write (each capture's interfaces, named client and server).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="text for people; json: one object with offset_ms, drift_ppm, uncertainty_ms "
    "(stable) and the fit's details.",
)
@limit_option
def merge(client: str, server: str, output: str, fmt: str) -> None:
    """Put a client capture and a server capture of the same traffic on one timeline.

    Matches the packets seen at both ends (TCP sequence/ack numbers, length, flags, IP ID
    and timestamps; QUIC datagrams by their bytes), bounds the server clock's offset by
    the smallest one-way delay in each direction (as NTP does) and fits its drift, then
    writes one pcapng: the client's frames, and the server's with their times moved onto
    the client's clock, each capture on its own interfaces, both key logs embedded.
    offset_ms is what to add to the server capture's clock to get the client's (at the
    server's first matched packet); uncertainty_ms is half the smallest round trip
    between the two capture points: the offset is exact if the path is symmetric, and
    off by at most that much if not.  drift_ppm is 0 unless the capture is long enough
    to show one (the JSON's drift_uncertainty_ppm says how well it is known).  CLIENT
    must be the client's capture: the other way round no clock fits, and merge says so.
    In Python: pcapkit.open([CLIENT, SERVER]).

    \b
    Examples:
      pcapkit merge fixtures/tls_sse_drop/client.pcapng fixtures/tls_sse_drop/server.pcapng -o both.pcapng
      pcapkit merge client.pcap server.pcap -o both.pcapng --format json | jq .offset_ms
    """
    from .vantage import merge as merge_captures

    limits = _context_limits()
    try:
        clock, n = merge_captures(client, server, output, limits)
    except PcapkitError as exc:
        fail(str(exc))
        return
    except OSError as exc:
        fail(f"{exc.filename or output}: {exc.strerror or exc}")
        return
    if fmt == "json":
        doc = {
            "offset_ms": round(clock.offset_ms, 6),
            "drift_ppm": round(clock.drift_ppm, 3),
            "uncertainty_ms": round(clock.uncertainty_ms, 6),
        }
        doc.update({k: v for k, v in clock.as_dict().items() if k not in doc})
        doc["output"] = output
        doc["frames"] = n
        emit_json(doc)
        return
    c = clock
    emit(
        f"offset_ms      {c.offset_ms:.3f}  (add to the server capture's clock to get the "
        f"client's)\n"
        f"uncertainty_ms {c.uncertainty_ms:.3f}  (offset between {c.offset_low_ms:.3f} and "
        f"{c.offset_high_ms:.3f}: half the least round trip between the capture points)\n"
        f"drift_ppm      {c.drift_ppm:.1f}  (± {c.drift_uncertainty_ppm:.1f} over "
        f"{c.span_ms / 1000:.3f} s)\n"
        f"matched        {c.matched} packets: {c.matched_c2s} client→server, "
        f"{c.matched_s2c} server→client\n"
        f"{output}: {n} frames on the client's clock"
    )


@cli.command(
    epilog="Exit codes: 0 the capture was written (the command's own exit status is in the "
    "summary on stderr and in --json); 1 the capture failed (one line on stderr); 2 usage error.",
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
)
@click.option("-i", "--interface", required=True, help="Interface to capture (e.g. eth0, lo).")
@click.option(
    "-w", "--write", "output", required=True, type=click.Path(dir_okay=False), help="pcapng out."
)
@click.option("-f", "--filter", "bpf", default=None, help="Capture filter (libpcap/BPF syntax).")
@click.option("-c", "--count", type=click.IntRange(min=1), help="Stop after N packets.")
@click.option("--duration", type=click.FloatRange(min=0, min_open=True), help="Stop after S s.")
@click.option("--max-bytes", type=click.IntRange(min=1), help="Stop when the file reaches N bytes.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON on stdout.")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def capture(
    interface: str,
    output: str,
    bpf: str | None,
    count: int | None,
    duration: float | None,
    max_bytes: int | None,
    as_json: bool,
    command: tuple[str, ...],
) -> None:
    """Capture an interface to pcapng; with -- COMMAND, run it and embed its TLS keys.

    COMMAND runs with SSLKEYLOGFILE pointing at a fresh private key log; the capture stops
    shortly after it exits, and the key log goes into the file as a Decryption Secrets
    Block, so `pcapkit analyze out.pcapng` decrypts it.  Without COMMAND, Ctrl-C or a limit
    stops the capture.  Needs root (or a dumpcap with CAP_NET_RAW); uses Wireshark's dumpcap.

    \b
    Examples:
      sudo pcapkit capture -i eth0 -w api.pcapng -f 'tcp port 443' -- curl -s https://example.com
      sudo pcapkit capture -i lo -w lo.pcapng -c 1000 --duration 30
    """
    from .io.capture import capture as live_capture
    from .io.capture import run_and_capture

    if command and command[0] == "--":
        command = command[1:]
    kw: dict[str, Any] = {"bpf": bpf, "count": count, "duration_s": duration}
    kw["max_bytes"] = max_bytes
    if not command:
        click.echo(f"pcapkit: capturing on {interface} -> {output} (Ctrl-C stops)", err=True)
    try:
        if command:
            res = run_and_capture(interface, output, list(command), **kw)
        else:
            res = live_capture(interface, output, **kw)
    except PcapkitError as exc:  # LiveCaptureError and its kinds, or an unreadable result
        fail(str(exc))
        return
    except OSError as exc:
        fail(f"{output}: {exc.strerror or exc}")
        return
    msg = f"pcapkit: {res.output}: {res.packets} packets, {res.dropped} dropped"
    msg += f", stopped by {res.stopped_by.value}"
    if res.keylog_lines is not None:
        msg += f"; {res.keylog_lines} key-log lines embedded"
    if res.command is not None:
        rc = res.returncode
        if rc is None:
            msg += "; command not started"
        elif rc < 0:
            msg += f"; command killed by signal {-rc}"
        else:
            msg += f"; command exited {rc}"
    click.echo(msg, err=True)
    if as_json:
        click.echo(json.dumps(res.as_dict(), indent=2))


@cli.command(epilog=READ_HELP)
@click.argument("capture", required=False, type=click.Path(dir_okay=False))
@click.option(
    "--flow",
    type=int,
    multiple=True,
    help="Socket-level: the TCP or QUIC flow to re-enact (its id, as pcapkit analyze --flow "
    "takes it); repeat it to replay several connections together, each at its start "
    "(remedies keep-alive, session-tickets, zero-rtt).",
)
@click.option(
    "-o",
    "--output",
    "outdir",
    type=click.Path(file_okay=False),
    help="Socket-level: write DIR/faithful/, DIR/remedy-NAME/ and DIR/summary.json here.",
)
@click.option(
    "--remedy",
    "remedies",
    multiple=True,
    metavar="NAME[=VALUE]",
    help="Socket-level: also replay with this remedy (repeatable): nodelay, uncork, "
    "coalesce-writes, record-size=N, notsent-lowat=N, h2-window=N, quic-window=N, "
    "smaller-certificate, http3, keep-alive, session-tickets, zero-rtt, or auto (the "
    "remedies the findings propose).",
)
@click.option("--keylog", type=click.Path(exists=True, dir_okay=False), help="NSS key log.")
@click.option(
    "--packets",
    type=click.Path(exists=True, dir_okay=False),
    help="Packet-level: send this capture's frames onto --into.",
)
@click.option(
    "--into",
    metavar="NETNS:IFACE",
    help="Packet-level: the interface (in a network namespace) to send onto.",
)
@click.option(
    "--host-iface",
    is_flag=True,
    help="Packet-level: --into names an interface of the host itself (never implied).",
)
@click.option(
    "--speed",
    type=click.FloatRange(min=0, min_open=True),
    default=1.0,
    show_default=True,
    help="Packet-level: pacing multiplier (2 = twice as fast).",
)
@click.option("--max", "top_speed", is_flag=True, help="Packet-level: as fast as possible.")
@click.option(
    "--loop",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Packet-level: send the capture this many times.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
def replay(
    capture: str | None,
    flow: tuple[int, ...],
    outdir: str | None,
    remedies: tuple[str, ...],
    keylog: str | None,
    packets: str | None,
    into: str | None,
    host_iface: bool,
    speed: float,
    top_speed: bool,
    loop: int,
    as_json: bool,
) -> None:
    """Re-enact a captured exchange over real stacks in the lab (needs root).

    Socket level: the flow's path (RTT, drops) and each end's writes (sizes, timing,
    socket options the findings imply; for QUIC every stream's bytes, over aioquic) are
    replayed between a real client and server through the lab's forwarder, once faithfully and once per --remedy; both ends are
    captured with keys and analysed; DIR/summary.json holds each run's findings and
    TTFB/TTFT/gap p95.  Packet level: the frames of --packets are sent onto an interface
    in a network namespace at their original pacing (--speed, --max, --loop).

    \b
    Examples:
      sudo pcapkit replay trace.pcapng --flow 0 -o out --remedy nodelay
      sudo pcapkit replay trace.pcapng --flow 0 -o out --remedy auto
      sudo pcapkit replay --packets trace.pcapng --into pklab-x-cli:veth0 --max
    """
    from .lab.errors import LabError
    from .replay import ReplayError, replay_packets, summary_text
    from .replay import replay as run_replay

    try:
        if packets is not None:
            if capture is not None or flow or outdir is not None or remedies:
                raise click.UsageError(
                    "--packets replays frames: no CAPTURE, --flow, -o or --remedy"
                )
            if into is None:
                raise click.UsageError("--packets needs --into NETNS:IFACE")
            res = replay_packets(
                packets,
                into=into,
                speed=None if top_speed else speed,
                loop=loop,
                host_iface=host_iface,
            )
            click.echo(json.dumps(res, indent=2) if as_json else _packets_text(res))
            return
        if capture is None or not flow or outdir is None:
            raise click.UsageError("socket-level replay needs CAPTURE, --flow N and -o DIR")
        summary = run_replay(
            capture,
            flow=flow[0] if len(flow) == 1 else list(flow),
            outdir=outdir,
            remedies=remedies,
            keylog=keylog,
        )
    except ValueError as e:
        raise click.UsageError(str(e)) from None
    except (ReplayError, LabError) as e:
        fail(str(e))
        return
    except PcapkitError as e:
        fail(str(e))
        return
    click.echo(json.dumps(summary, indent=2) if as_json else summary_text(summary), nl=False)


def _packets_text(res: dict[str, Any]) -> str:
    err = res["timing_error_us"]
    line = f"sent {res['packets']} packets ({res['bytes']} B) in {res['seconds']} s: {res['packets_per_s']} packets/s"
    if err:
        line += f"; timing error p50 {err['p50']} µs, p99 {err['p99']} µs"
    if res.get("send_retries"):
        line += f"; {res['send_retries']} sends retried (the interface's queue was full)"
    if res.get("dropped_at_iface"):
        line += f"\nwarning: the interface dropped {res['dropped_at_iface']} frames (tx_dropped)"
    return line


def _arrow_system_allocator() -> None:
    """Arrow's default allocator (mimalloc) reserves address space it does not touch:
    ~1 GB more than the resident memory on 10^6 connections, which counts against a
    ``ulimit -v`` (the 10^6-SYN hostile input ran out of a 2 GB address space with it and
    fits without it).  The command line lets Arrow (pandas' strings) use malloc as numpy
    does, unless ``ARROW_DEFAULT_MEMORY_POOL`` chooses; the library leaves that to its
    caller."""
    if "ARROW_DEFAULT_MEMORY_POOL" in os.environ:
        return
    pa = sys.modules.get("pyarrow")
    if pa is not None:  # already loaded (an embedding program): set its pool
        pa.set_memory_pool(pa.system_memory_pool())
        return
    # else through the environment Arrow reads when it first allocates, not by importing
    # pyarrow here (a quarter of a second of start-up for commands that never use it)
    os.environ["ARROW_DEFAULT_MEMORY_POOL"] = "system"


# glibc's mallopt parameter for the number of malloc arenas (malloc.h)
_M_ARENA_MAX = -8


def _one_malloc_arena() -> None:
    """glibc gives each thread that allocates its own malloc arena; what the decode
    threads (:mod:`pcapkit._parallel`) free there stays resident and is not reused by
    the main thread: 80 MB more peak RSS on a 200k-packet analyze with two threads than
    with one.  The command line keeps every thread on the main arena (as
    ``MALLOC_ARENA_MAX=1`` would; the environment still decides when it sets that);
    nothing where the C library has no ``mallopt``.  The library leaves that to its
    caller."""
    if "MALLOC_ARENA_MAX" in os.environ or not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL(None).mallopt(_M_ARENA_MAX, 1)
    except (OSError, AttributeError, TypeError):  # not glibc (musl has no mallopt)
        pass


def main() -> None:
    # imported before the analysis: the last resort below must not need memory or imports
    # (out of memory, compiling the escape pattern raised a second MemoryError)
    from .errors import STRICT_ENV
    from .report.escape import printable

    global _FREEZE_GC
    _FREEZE_GC = True
    import gc

    gc.disable()  # until the command's imports are done (_freeze_imports, _Cli.get_command)
    _arrow_system_allocator()
    _one_malloc_arena()
    no_numpy_hugepages()  # (pcapkit._pages: measured there)
    try:
        cli.main(standalone_mode=True)
    except KeyboardInterrupt:
        click.echo("pcapkit: interrupted", err=True)
        sys.exit(130)
    except Exception as exc:  # the last resort: one line, never a traceback (issue 15)
        if os.environ.get(STRICT_ENV):
            raise
        if isinstance(exc, MemoryError):
            line = (
                "pcapkit: out of memory: this capture needs more memory than the process may "
                "use; lower a resource limit (pcapkit limits; --limit NAME=VALUE) or raise the "
                "memory limit"
            )
        else:  # the message may quote the capture: escaped
            line = printable(
                f"pcapkit: internal error: {type(exc).__name__}: {str(exc)[:200]} (a bug, "
                f"please report it; {STRICT_ENV}=1 shows the traceback)"
            )
        del exc  # its traceback holds the analysis' memory
        sys.stderr.write(line + "\n")
        sys.exit(Exit.ERROR)


if __name__ == "__main__":
    main()
