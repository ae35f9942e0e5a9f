"""Live capture (pcapkit.io.capture, ``pcapkit capture``): real dumpcap on loopback.

What is checked, each against the capture file itself (read back with ``pcapkit.open``):
a real TLS 1.3 exchange between Python ``ssl`` peers, run under ``run_and_capture``, lands in
one pcapng that decrypts from its own Decryption Secrets Block; the private key log is 0600
while the command runs and gone afterwards; packet, time and size limits stop the capture;
SIGINT — sent by a process, or typed as ^C on a terminal — reaches the command exactly once
and leaves a finalised file with the keys; a stop loses none of the packets seen before it
(dumpcap's unretired ring block, see the module docstring); and every error is one clear
exception.  The tests skip, with the reason, without root or without dumpcap.
"""

from __future__ import annotations

import json
import os
import pty
import select
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

import pcapkit
from pcapkit.cli import cli
from pcapkit.io import capture as live
from pcapkit.io import read_capture
from pcapkit.io.capture import (
    EngineNotFound,
    InterfaceNotFound,
    LiveCaptureError,
    StopReason,
    capture,
    run_and_capture,
)
from pcapkit.io.writer import PcapngWriter

DUMPCAP = shutil.which("dumpcap")
SKIP_REASON = (
    "live capture needs root (or a dumpcap with CAP_NET_RAW)"
    if os.geteuid() != 0
    else "live capture needs dumpcap (Debian: apt-get install tshark)"
    if DUMPCAP is None
    else ""
)
needs_capture = pytest.mark.skipif(bool(SKIP_REASON), reason=SKIP_REASON or "ok")

LINKTYPE_RAW = 101  # raw IPv4/IPv6 (what a TUN capture records)
WAIT_S = 120.0  # upper bound for a child to reach a step: a hang guard, never a threshold
REQUEST = b"GET /v1/stream HTTP/1.1\r\nHost: pcapkit.test\r\n\r\n"
RESPONSE = b"".join(b"data: token %d\n\n" % i for i in range(40))

# The command under capture: a TLS 1.3 server thread and a client in one process, over
# 127.0.0.1.  Only the client logs keys, and only because ssl.create_default_context()
# honours SSLKEYLOGFILE (CPython >= 3.8); the script checks that it did.  With "wait" it then
# waits for SIGINT, counts how many arrive, and exits 7.
TLS_SCRIPT = r"""
import json, os, signal, socket, ssl, sys, threading, time
port, cert, key, marker, mode = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
REQUEST = %(request)r
RESPONSE = %(response)r
got = []
signal.signal(signal.SIGINT, lambda s, f: got.append(s))

def note(name, doc):
    tmp = marker + "." + name + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f)
    os.replace(tmp, marker + "." + name)

srv = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
srv.load_cert_chain(cert, key)
ls = socket.create_server(("127.0.0.1", int(port)))

def serve():
    conn, _ = ls.accept()
    with srv.wrap_socket(conn, server_side=True) as s:
        buf = b""
        while len(buf) < len(REQUEST):
            buf += s.recv(4096)
        s.sendall(RESPONSE)

t = threading.Thread(target=serve)
t.start()
ctx = ssl.create_default_context()
assert ctx.keylog_filename == os.environ["SSLKEYLOGFILE"], "SSLKEYLOGFILE not honoured"
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
with socket.create_connection(("127.0.0.1", int(port))) as raw, ctx.wrap_socket(raw) as s:
    s.sendall(REQUEST)
    buf = b""
    while len(buf) < len(RESPONSE):
        d = s.recv(4096)
        if not d:
            break
        buf += d
t.join()
ls.close()
assert buf == RESPONSE
path = os.environ["SSLKEYLOGFILE"]
note("exchanged", {"keylog": path, "mode": os.stat(path).st_mode & 0o777,
                   "keylog_nonempty": os.path.getsize(path) > 0})
if mode == "wait":
    deadline = time.monotonic() + 120
    while not got and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.5)  # a duplicate SIGINT would arrive within microseconds
    note("signals", {"sigint": len(got)})
    sys.exit(7)
"""


# --------------------------------------------------------------------------- helpers


def free_port(kind: int = socket.SOCK_STREAM) -> int:
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    from pcapkit.lab.certs import make_self_signed

    return make_self_signed(tmp_path_factory.mktemp("pki"), ip="127.0.0.1")


@pytest.fixture
def tls_script(tmp_path: Path) -> Path:
    path = tmp_path / "tls_pair.py"
    path.write_text(TLS_SCRIPT % {"request": REQUEST, "response": RESPONSE}, encoding="utf-8")
    return path


@pytest.fixture(autouse=True)
def no_ambient_keylog(monkeypatch: pytest.MonkeyPatch) -> None:
    """Trace also reads $SSLKEYLOGFILE: keys must come from the file's own DSB here."""
    monkeypatch.delenv("SSLKEYLOGFILE", raising=False)


def _sigint_default() -> None:
    """A test run as a background job (non-interactive shells start those with SIGINT
    ignored, and exec keeps it ignored) must still deliver SIGINT to the capture."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def wait_for(path: Path, proc: subprocess.Popen[bytes] | None = None) -> dict[str, object]:
    deadline = time.monotonic() + WAIT_S
    while not path.exists():
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"process exited ({proc.returncode}) before {path.name}")
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.01)
    doc: dict[str, object] = json.loads(path.read_text())
    return doc


def assert_decrypts(out: Path, port: int) -> None:
    """The capture holds the TLS flow and decrypts it from its embedded DSB alone."""
    with pcapkit.open(out) as t:
        tcp = t.flows[(t.flows.proto == "tcp") & (t.flows.server_port == port)]
        assert len(tcp) == 1
        flow = int(tcp.flow.iloc[0])
        tls = t.tls[t.tls.flow == flow]
        assert len(tls) == 1 and bool(tls.decrypted.iloc[0]), t.tls.to_dict("records")
        assert any("decryption secrets block" in s for s in t.key_sources), t.key_sources
        assert not any("SSLKEYLOGFILE" in s for s in t.key_sources)
        assert t.plaintext(flow, "c2s") == REQUEST
        assert t.plaintext(flow, "s2c") == RESPONSE


class UdpSender:
    """Sends numbered UDP datagrams to 127.0.0.1:port from a thread until stopped."""

    def __init__(self, port: int, size: int = 32, interval_s: float = 0.005) -> None:
        self.port, self.size, self.interval_s = port, size, interval_s
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            while not self._stop.is_set():
                s.sendto(b"%08d" % self.sent + b"x" * self.size, ("127.0.0.1", self.port))
                self.sent += 1
                self._stop.wait(self.interval_s)

    def __enter__(self) -> UdpSender:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(WAIT_S)


def frames(path: Path) -> int:
    with pcapkit.open(path) as t:
        return int(t.frames)


def leftovers(directory: Path, out: Path) -> list[str]:
    return [p.name for p in directory.iterdir() if p.name.startswith(f".{out.name}.")]


def cli_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "pcapkit.cli", "capture", *args]


# --------------------------------------------------------------------------- run_and_capture


@needs_capture
def test_run_and_capture_embeds_the_key_log_and_decrypts(
    tmp_path: Path, pki: tuple[Path, Path], tls_script: Path
) -> None:
    port = free_port()
    out = tmp_path / "tls.pcapng"
    marker = tmp_path / "marker"
    res = run_and_capture(
        "lo",
        out,
        [sys.executable, str(tls_script), str(port), str(pki[0]), str(pki[1]), str(marker), "-"],
        bpf=f"tcp port {port}",
    )
    assert res.returncode == 0
    assert res.stopped_by is StopReason.COMMAND and not res.interrupted
    assert res.keylog_lines is not None and res.keylog_lines >= 5  # TLS 1.3: 5 secrets
    assert res.dropped == 0 and res.dropped_by_kernel == 0
    assert res.packets == frames(out) and res.packets >= 10  # handshake, data, FINs
    assert res.file_bytes == out.stat().st_size
    assert_decrypts(out, port)
    seen = wait_for(Path(f"{marker}.exchanged"))
    assert seen["keylog_nonempty"] is True
    assert seen["mode"] == 0o600  # private while the command ran
    keylog = Path(str(seen["keylog"]))
    assert not keylog.exists() and not keylog.parent.exists()  # deleted, directory too
    assert stat.S_IMODE(out.stat().st_mode) == 0o600  # the file holds keys
    assert leftovers(tmp_path, out) == []
    assert "CLIENT_TRAFFIC_SECRET_0" not in repr(res) and "CLIENT_" not in json.dumps(res.as_dict())


@needs_capture
def test_command_without_tls_gives_plain_capture_and_its_exit_status(tmp_path: Path) -> None:
    out = tmp_path / "plain.pcapng"
    port = free_port(socket.SOCK_DGRAM)
    code = (
        "import socket, sys\n"
        "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
        f"for i in range(3): s.sendto(b'ping', ('127.0.0.1', {port}))\n"
        "sys.exit(3)\n"
    )
    res = run_and_capture("lo", out, [sys.executable, "-c", code], bpf=f"udp port {port}")
    assert res.returncode == 3
    assert res.keylog_lines == 0
    assert res.packets == 3 == frames(out)  # none lost to the ring block at the stop
    raw = read_capture(out)
    try:
        assert raw.secrets == []  # nothing to embed: dumpcap's file as written
    finally:
        raw.close()
    assert leftovers(tmp_path, out) == []


# --------------------------------------------------------------------------- limits


@needs_capture
def test_count_limit_stops_after_exactly_n_packets(tmp_path: Path) -> None:
    out = tmp_path / "count.pcapng"
    port = free_port(socket.SOCK_DGRAM)
    with UdpSender(port) as sender:
        res = capture("lo", out, bpf=f"udp port {port}", count=5)
    assert res.stopped_by is StopReason.COUNT
    assert res.packets == 5 == frames(out)
    assert sender.sent > 5  # traffic went on after the capture stopped


@needs_capture
def test_duration_limit_stops_the_capture(tmp_path: Path) -> None:
    out = tmp_path / "duration.pcapng"
    port = free_port(socket.SOCK_DGRAM)
    with UdpSender(port, interval_s=0.01):
        res = capture("lo", out, bpf=f"udp port {port}", duration_s=0.3)
    assert res.stopped_by is StopReason.DURATION
    assert res.capture_s >= 0.3
    assert res.packets == frames(out) and res.packets > 0


@needs_capture
def test_size_limit_stops_when_the_file_reaches_it(tmp_path: Path) -> None:
    out = tmp_path / "size.pcapng"
    port = free_port(socket.SOCK_DGRAM)
    limit = 20_000
    with UdpSender(port, size=1000, interval_s=0.001):
        res = capture("lo", out, bpf=f"udp port {port}", max_bytes=limit)
    assert res.stopped_by is StopReason.SIZE
    assert out.stat().st_size >= limit
    # ~1.1 kB per packet: the stop came within a packet or two of the limit, not later
    assert res.packets == frames(out) and 0 < res.packets <= limit // 1000 + 2


@needs_capture
def test_a_limit_stops_the_capture_not_the_command(
    tmp_path: Path,
) -> None:
    out = tmp_path / "cmdcount.pcapng"
    port = free_port(socket.SOCK_DGRAM)
    code = (
        "import socket, time\n"
        "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
        f"for i in range(150): s.sendto(b'x', ('127.0.0.1', {port})); time.sleep(0.01)\n"
        "print('done')\n"
    )
    # the command sends for 1.5 s; dumpcap has its 4 packets one ring block (≤ 0.25 s) in
    res = run_and_capture("lo", out, [sys.executable, "-c", code], bpf=f"udp port {port}", count=4)
    assert res.stopped_by is StopReason.COUNT
    assert res.packets == 4 == frames(out)
    assert res.returncode == 0  # the command ran to its end


# --------------------------------------------------------------------------- signals


@needs_capture
def test_sigint_to_pcapkit_reaches_the_command_once_and_file_keeps_keys(
    tmp_path: Path, pki: tuple[Path, Path], tls_script: Path
) -> None:
    port = free_port()
    out = tmp_path / "sigint.pcapng"
    marker = tmp_path / "marker"
    script = [str(tls_script), str(port), str(pki[0]), str(pki[1]), str(marker), "wait"]
    argv = cli_argv("-i", "lo", "-w", str(out), "-f", f"tcp port {port}", "--json", "--")
    proc = subprocess.Popen(
        [*argv, sys.executable, *script],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=_sigint_default,
    )
    try:
        seen = wait_for(Path(f"{marker}.exchanged"), proc)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=WAIT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, stderr.decode()
    assert wait_for(Path(f"{marker}.signals"))["sigint"] == 1
    doc = json.loads(stdout)
    assert doc["returncode"] == 7 and doc["interrupted"] is True
    assert doc["signals_forwarded"] == 1
    assert b"command exited 7" in stderr
    assert_decrypts(out, port)
    assert not Path(str(seen["keylog"])).exists()
    assert leftovers(tmp_path, out) == []


@needs_capture
def test_terminal_ctrl_c_reaches_the_command_once(
    tmp_path: Path, pki: tuple[Path, Path], tls_script: Path
) -> None:
    """^C on a terminal signals the whole foreground group: pcapkit must not add a second."""
    port = free_port()
    out = tmp_path / "tty.pcapng"
    marker = tmp_path / "marker"
    script = [str(tls_script), str(port), str(pki[0]), str(pki[1]), str(marker), "wait"]
    argv = cli_argv("-i", "lo", "-w", str(out), "-f", f"tcp port {port}", "--")
    argv += [sys.executable, *script]
    pid, fd = pty.fork()
    if pid == 0:  # child: session leader on the pty, the foreground job, like a shell's
        try:
            os.execv(argv[0], argv)
        finally:
            os._exit(127)
    output, eof, status = b"", False, None
    try:
        deadline = time.monotonic() + WAIT_S
        while not Path(f"{marker}.exchanged").exists():
            assert not eof and time.monotonic() < deadline, output.decode(errors="replace")
            chunk, eof = _read_pty(fd, 0.05)
            output += chunk
        os.write(fd, b"\x03")  # the terminal's interrupt character
        while not eof:  # everything pcapkit writes, until the terminal closes (EIO)
            assert time.monotonic() < deadline, output.decode(errors="replace")
            chunk, eof = _read_pty(fd, 0.05)
            output += chunk
        status = os.waitpid(pid, 0)[1]
    finally:
        if status is None:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 0, output.decode(errors="replace")
    assert wait_for(Path(f"{marker}.signals"))["sigint"] == 1
    assert b"command exited 7" in output
    assert_decrypts(out, port)


def _read_pty(fd: int, timeout_s: float) -> tuple[bytes, bool]:
    """What the pty has within ``timeout_s``, and whether its other side is closed."""
    out = b""
    while select.select([fd], [], [], timeout_s)[0]:
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # EIO: every process on the terminal side has closed it
            return out, True
        if not chunk:
            return out, True
        out += chunk
        timeout_s = 0.0
    return out, False


@needs_capture
def test_sigint_stops_a_plain_capture_without_losing_packets(tmp_path: Path) -> None:
    """Every packet sent before the SIGINT is in the file: the stop waits out the ring block."""
    out = tmp_path / "plain_sigint.pcapng"
    port = free_port(socket.SOCK_DGRAM)
    n = 200
    proc = subprocess.Popen(
        cli_argv("-i", "lo", "-w", str(out), "-f", f"udp port {port}", "--json"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=_sigint_default,
    )
    try:
        deadline = time.monotonic() + WAIT_S
        while not (out.exists() and out.stat().st_size > 0):  # dumpcap opened its file
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.01)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            for i in range(n):
                s.sendto(b"%06d" % i, ("127.0.0.1", port))
        proc.send_signal(signal.SIGINT)  # at once: these packets sit in an unretired block
        stdout, stderr = proc.communicate(timeout=WAIT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, stderr.decode()
    doc = json.loads(stdout)
    assert doc["stopped_by"] == "interrupt"
    assert doc["packets"] == n == frames(out)


# --------------------------------------------------------------------------- no root needed

KEYLOG = (
    b"# TLS secrets log file, generated by OpenSSL / Python\n"
    b"CLIENT_HANDSHAKE_TRAFFIC_SECRET " + b"ab" * 32 + b" " + b"cd" * 32 + b"\n"
    b"\n"
    b"CLIENT_TRAFFIC_SECRET_0 " + b"ab" * 32 + b" " + b"ef" * 32 + b"\n"
)


def _raw_capture(path: Path) -> None:
    with open(path, "wb") as f:
        w = PcapngWriter(f)
        w.add_interface(LINKTYPE_RAW)
        w.write(0, 1_700_000_000_000_000_001, bytes(40))


def test_finish_output_embeds_the_key_log_in_a_private_file(tmp_path: Path) -> None:
    raw, out, keys = tmp_path / "raw.pcapng", tmp_path / "out.pcapng", tmp_path / "keys.log"
    _raw_capture(raw)
    keys.write_bytes(KEYLOG)
    assert live._finish_output(raw, out, keys) == 2  # comment and blank lines do not count
    cap = read_capture(out)
    try:
        assert [s.data for s in cap.secrets] == [KEYLOG]
        assert cap.frames == 1 and cap.ts_ns.tolist() == [1_700_000_000_000_000_001]
    finally:
        cap.close()
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    assert not raw.exists() and leftovers(tmp_path, out) == []


def test_finish_output_without_keys_keeps_the_capture_as_written(tmp_path: Path) -> None:
    raw, out, keys = tmp_path / "raw.pcapng", tmp_path / "out.pcapng", tmp_path / "keys.log"
    _raw_capture(raw)
    original = raw.read_bytes()
    keys.write_bytes(b"# only a comment\n")
    assert live._finish_output(raw, out, keys) == 0
    assert out.read_bytes() == original


def test_oversized_key_log_is_not_embedded_but_the_packets_are_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    raw, out, keys = tmp_path / "raw.pcapng", tmp_path / "out.pcapng", tmp_path / "keys.log"
    _raw_capture(raw)
    keys.write_bytes(KEYLOG)
    monkeypatch.setattr(live, "MAX_KEYLOG_BYTES", 64)
    with pytest.raises(LiveCaptureError, match=r"key log \(> 64\): not embedded") as exc:
        live._finish_output(raw, out, keys)
    assert b"TRAFFIC_SECRET" not in str(exc.value).encode()  # never key material
    cap = read_capture(out)
    try:
        assert cap.frames == 1 and cap.secrets == []
    finally:
        cap.close()


class _FakeProc:
    pid = 999_999_999  # no such process: a send would raise, so we record instead

    def poll(self) -> None:
        return None


def _command(same_group: bool, sent: list[int]) -> live._Command:
    cmd = live._Command.__new__(live._Command)
    cmd.proc = _FakeProc()  # type: ignore[assignment]
    cmd.same_group = same_group
    cmd.forwarded = cmd.interrupts = 0
    cmd._send = sent.append  # type: ignore[method-assign]
    return cmd


def test_signal_policy_forwards_each_signal_exactly_once() -> None:
    sent: list[int] = []
    fg = _command(True, sent)  # pcapkit is the terminal's foreground job
    fg.on_signal(signal.SIGINT, live.SI_KERNEL, 0)  # ^C: the command got it from the tty
    assert sent == []
    fg.on_signal(signal.SIGTERM, 0, 4242)  # kill(pcapkit) from another process
    assert sent == [signal.SIGTERM] and fg.forwarded == 1
    fg.on_signal(signal.SIGINT, 0, fg.proc.pid)  # the command signalled us: no bounce
    assert sent == [signal.SIGTERM, signal.SIGKILL]  # ...but that was the 3rd: SIGKILL
    sent.clear()
    bg = _command(False, sent)  # script/CI: the command has its own group
    bg.on_signal(signal.SIGINT, live.SI_KERNEL, 0)  # a group-wide signal never reached it
    bg.on_signal(signal.SIGHUP, 0, 4242)
    assert sent == [signal.SIGINT, signal.SIGHUP] and bg.forwarded == 2


# --------------------------------------------------------------------------- errors


def test_missing_engine_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(EngineNotFound, match="dumpcap is not installed"):
        capture("lo", tmp_path / "x.pcapng", count=1)
    result = CliRunner().invoke(cli, ["capture", "-i", "lo", "-w", str(tmp_path / "x.pcapng")])
    assert result.exit_code == 1
    assert "pcapkit: error: dumpcap is not installed" in result.output


def test_missing_command_is_a_clear_error_before_capturing(tmp_path: Path) -> None:
    with pytest.raises(LiveCaptureError, match="command not found: no-such-cmd-pcapkit"):
        run_and_capture("lo", tmp_path / "x.pcapng", ["no-such-cmd-pcapkit"])
    assert list(tmp_path.iterdir()) == []


def test_bad_limits_are_rejected(tmp_path: Path) -> None:
    for kw in ({"count": 0}, {"duration_s": 0.0}, {"max_bytes": 0}, {"snaplen": -1}):
        with pytest.raises(ValueError):
            capture("lo", tmp_path / "x.pcapng", **kw)  # type: ignore[arg-type]
    result = CliRunner().invoke(cli, ["capture", "-i", "lo", "-w", "x.pcapng", "-c", "0"])
    assert result.exit_code == 2


def test_help_has_an_example_and_the_exit_codes() -> None:
    result = CliRunner().invoke(cli, ["capture", "--help"])
    assert result.exit_code == 0
    assert "pcapkit capture -i" in result.output and "Exit codes" in result.output


@needs_capture
def test_missing_interface_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(InterfaceNotFound, match="no capture interface named 'pcapkit-nope0'"):
        capture("pcapkit-nope0", tmp_path / "x.pcapng", count=1)


@needs_capture
def test_bad_filter_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(LiveCaptureError, match="invalid capture filter"):
        capture("lo", tmp_path / "x.pcapng", bpf="tcp port", count=1)


@pytest.fixture
def world_writable_dir() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="pcapkit-capture-test-"))
    d.chmod(0o777)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


@needs_capture
def test_no_permission_is_a_clear_error(world_writable_dir: Path) -> None:
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("needs setpriv (util-linux) to drop root")
    code = (
        "import sys\n"
        "from pcapkit.io.capture import capture, CapturePermissionError\n"
        "try:\n"
        f"    capture('lo', {str(world_writable_dir / 'x.pcapng')!r}, count=1)\n"
        "except CapturePermissionError as e:\n"
        "    print('PERMISSION', e); sys.exit(0)\n"
        "sys.exit(1)\n"
    )
    root = Path(live.__file__).resolve().parents[2]
    p = subprocess.run(
        [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all"]
        + [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=WAIT_S,
        cwd=world_writable_dir,
        env={**os.environ, "PYTHONPATH": str(root), "HOME": str(world_writable_dir)},
    )
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.startswith("PERMISSION no permission to capture on 'lo'")
    assert "run as root, or give dumpcap CAP_NET_RAW" in p.stdout
