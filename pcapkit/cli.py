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
from typing import Any

import click

from . import __version__
from .errors import PcapkitError
from .trace import Trace

# Below this size a capture is analysed faster than a progress bar can be read.
PROGRESS_MIN_BYTES = 20 * 1024 * 1024


class Exit(enum.IntEnum):
    OK = 0
    ERROR = 1
    USAGE = 2
    FINDINGS = 3


EXIT_HELP = (
    "Exit codes: 0 ok; 1 the input could not be analysed, or an internal error (one line on "
    "stderr); "
    "2 usage error; 3 a finding matched --fail-on."
)


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

    @click.argument("path", type=click.Path(dir_okay=False, exists=True))
    @click.option(
        "--keylog",
        type=click.Path(dir_okay=False, exists=True),
        default=None,
        help="NSS key log (SSLKEYLOGFILE format) for TLS/QUIC; keys embedded in "
        "pcapng Decryption Secrets Blocks are used too.",
    )
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


def open_trace(
    path: str,
    keylog: str | None,
    *,
    redact: bool = True,
    settings: dict[str, Any] | None = None,
) -> tuple[Trace, _Progress | None]:
    prog = None
    if sys.stderr.isatty() and os.path.getsize(path) >= PROGRESS_MIN_BYTES:
        prog = _Progress()
    cctx = click.get_current_context(silent=True)
    limits = cctx.meta.get(LIMITS_KEY) if cctx is not None else None
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


def fail(message: str) -> None:
    click.echo(f"pcapkit: error: {message}", err=True)
    sys.exit(Exit.ERROR)


@click.group(
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
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="text for people, json for programs (stable keys: capture, flows, tls, findings, anomalies).",
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
@threshold_option
def analyze(
    path: str,
    keylog: str | None,
    fmt: str,
    show_all: bool,
    fail_on: str | None,
    min_cost_ms: float,
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
    """
    from .report import analysis_text, write_analysis_json

    gate = parse_fail_on(fail_on)
    trace, prog = open_trace(path, keylog, settings=settings)
    try:
        with trace:
            findings = trace.findings
            if min_cost_ms > 0:
                keep = findings.cost_ms.isna() | (findings.cost_ms >= min_cost_ms)
                findings = findings[keep.to_numpy(bool)]
            if fmt == "json":
                if prog:
                    prog.done()
                # streamed row by row: never the whole document as one string
                write_analysis_json(trace, sys.stdout, findings=findings)
            else:
                text = analysis_text(trace, max_flows=None if show_all else 50, findings=findings)
                if prog:
                    prog.done()
                click.echo(text, nl=False)
            _internal_errors_note(trace)
    except PcapkitError as exc:
        fail(str(exc))
    if gate is not None and gate(findings):
        sys.exit(Exit.FINDINGS)


def _internal_errors_note(trace: Trace) -> None:
    """One line on stderr when pcapkit failed on part of the capture (isolated
    ``internal_error`` anomalies: the report is complete otherwise, the exit code is
    unchanged)."""
    n = len(trace.internal_errors)  # what this command computed, nothing more
    if n:
        click.echo(
            f"pcapkit: {n} internal error(s): pcapkit failed on part of this capture (a bug, "
            "please report it); the anomalies list them as internal_error, the rest of the "
            "report is complete",
            err=True,
        )


def parse_fail_on(spec: str | None) -> Callable[[Any], bool] | None:
    """``--fail-on``: a severity name (that or worse) or a comma-separated list of kinds."""
    from .detect import KINDS, SEVERITIES

    if not spec:
        return None
    spec = spec.strip()
    if spec in SEVERITIES:
        rank = SEVERITIES.index(spec)
        return lambda df: (
            bool(df.severity.map(SEVERITIES.index).ge(rank).any()) if len(df) else False
        )
    kinds = {k.strip() for k in spec.split(",") if k.strip()}
    unknown = kinds - set(KINDS)
    if unknown:
        raise click.BadParameter(
            f"unknown kind(s) {', '.join(sorted(unknown))}; kinds: {', '.join(KINDS)}; "
            f"or a severity: {', '.join(SEVERITIES)}",
            param_hint="--fail-on",
        )
    return lambda df: bool(df.kind.isin(kinds).any())


@cli.command(epilog=EXIT_HELP)
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
        r = getattr(trace, table)
        if flow is not None:
            r = r[r.flow == flow]
        if prog:
            prog.done()
        if fmt == "json":
            write_records_json(r, sys.stdout)
        elif fmt == "csv":
            click.echo(r.to_csv(index=False), nl=False)
        else:
            click.echo(text(trace, flow), nl=False)
        _internal_errors_note(trace)


@cli.command(epilog=EXIT_HELP)
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


@cli.command(epilog="Exit codes: 0 ok; 2 usage error.")
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


@cli.command(epilog=EXIT_HELP)
@trace_options
@click.option(
    "--qlog",
    "qlog_dir",
    required=True,
    type=click.Path(file_okay=False),
    help="Directory for one <capture>-flow<N>.sqlog (qlog 0.3, JSON-SEQ) per QUIC connection.",
)
def export(path: str, keylog: str | None, qlog_dir: str) -> None:
    """Export the QUIC connections of a capture as qlog files for qvis.

    One JSON-SEQ qlog per connection (network vantage, named from the client's side:
    its packets are packet_sent, the server's packet_received), with every packet's
    header and decrypted frames; packets without keys keep their header and say why.

    \b
    Examples:
      pcapkit export fixtures/h3_streams_drop/client.pcapng --qlog out/qlog
      pcapkit export trace.pcapng --keylog keys.log --qlog /tmp/q
    """
    from .export.qlog import export_qlog

    trace, prog = open_trace(path, keylog)
    with trace:
        written = export_qlog(trace, qlog_dir)
        _internal_errors_note(trace)
        if prog:
            prog.done()
    if not written:
        click.echo(f"{path}: no QUIC connections", err=True)
    for w in written:
        click.echo(str(w))


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


def _register_optional_groups() -> None:
    try:
        from .lab.cli import lab
    except ImportError:
        return
    cli.add_command(lab)


_register_optional_groups()


def main() -> None:
    try:
        cli.main(standalone_mode=True)
    except KeyboardInterrupt:
        click.echo("pcapkit: interrupted", err=True)
        sys.exit(130)
    except Exception as exc:  # the last resort: one line, never a traceback (issue 15)
        from .anomalies import STRICT_ENV

        if os.environ.get(STRICT_ENV):
            raise
        click.echo(
            f"pcapkit: internal error: {type(exc).__name__}: {str(exc)[:200]} (a bug, please "
            f"report it; {STRICT_ENV}=1 shows the traceback)",
            err=True,
        )
        sys.exit(Exit.ERROR)


if __name__ == "__main__":
    main()
