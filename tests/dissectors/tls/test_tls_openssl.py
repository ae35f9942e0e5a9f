"""Interop with a real TLS stack: ``openssl s_client`` ↔ recording proxy ↔ ``openssl s_server``
on localhost, key log from ``-keylogfile``.  The session must decrypt every protected
record the two OpenSSL processes exchanged — every TLS 1.3 suite, the TLS 1.2 AEAD and CBC
modes (with and without encrypt_then_mac), TLS 1.0/1.1, PSK, KeyUpdate, resumption and
0-RTT — and say why when the key log is withheld.  Skipped without the ``openssl`` binary.
"""

from __future__ import annotations

import re
import selectors
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from dissectors.tls.crypto import CIPHER_SUITES
from dissectors.tls.keylog import KeyLog
from dissectors.tls.session import DecryptStatus, RecordResult, TlsSession

D = DecryptStatus
OPENSSL = shutil.which("openssl")
pytestmark = pytest.mark.skipif(OPENSSL is None, reason="openssl binary not installed")
TIMEOUT = 15.0


class _Output:
    """Collects a process's stdout in a thread so tests can wait for a marker."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.data = b""
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._run, args=(proc,), daemon=True)
        self._thread.start()

    def _run(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        while chunk := proc.stdout.read1(65536):
            with self._cond:
                self.data += chunk
                self._cond.notify_all()

    def wait_for(self, marker: bytes, start: int = 0) -> int:
        deadline = time.monotonic() + TIMEOUT
        with self._cond:
            while (i := self.data.find(marker, start)) < 0:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"{marker!r} not seen in {self.data[-2000:]!r}")
                self._cond.wait(left)
            return i + len(marker)


class _Proxy:
    """Accepts one client, connects it to the server and records both directions in order."""

    def __init__(self, server_port: int) -> None:
        self.events: list[tuple[str, bytes]] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._server_port = server_port
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        client, _ = self._listener.accept()
        server = socket.create_connection(("127.0.0.1", self._server_port))
        sel = selectors.DefaultSelector()
        sel.register(client, selectors.EVENT_READ, ("c2s", server))
        sel.register(server, selectors.EVENT_READ, ("s2c", client))
        open_sides = 2
        while open_sides:
            for key, _ in sel.select(TIMEOUT):
                direction, peer = key.data
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                try:
                    data = sock.recv(65536)
                except OSError:
                    data = b""
                if data:
                    self.events.append((direction, data))
                    peer.sendall(data)
                else:
                    sel.unregister(sock)
                    open_sides -= 1
                    try:
                        peer.shutdown(socket.SHUT_WR)
                    except OSError:
                        pass
        client.close()
        server.close()
        self._listener.close()

    def join(self) -> None:
        self._thread.join(TIMEOUT)


@dataclass
class Exchange:
    events: list[tuple[str, bytes]]
    keylog: str


class Server:
    def __init__(self, certs: dict[str, Path], args: list[str], connections: int = 1) -> None:
        cmd = [OPENSSL or "openssl", "s_server", "-accept", "0", "-naccept", str(connections)]
        if "-nocert" not in args:
            cmd += ["-cert", str(certs["rsa_cert"]), "-key", str(certs["rsa_key"])]
            cmd += ["-dcert", str(certs["ec_cert"]), "-dkey", str(certs["ec_key"])]
        cmd += args
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        self.out = _Output(self.proc)
        end = self.out.wait_for(b"ACCEPT")
        self.out.wait_for(b"\n", end)
        match = re.search(rb"ACCEPT .*:(\d+)", self.out.data)
        assert match is not None
        self.port = int(match.group(1))
        self.mark = 0

    def say(self, line: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line)
        self.proc.stdin.flush()

    def close(self) -> None:
        try:
            self.proc.wait(TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def exchange(
    server: Server,
    tmp: Path,
    client_args: list[str],
    *,
    key_update: bytes | None = None,
    early_data: bytes | None = None,
) -> Exchange:
    """One connection: handshake, "ping" from the client, "pong" from the server, close."""
    proxy = _Proxy(server.port)
    keylog = tmp / f"keylog-{time.monotonic_ns()}.txt"
    cmd = [
        OPENSSL or "openssl",
        "s_client",
        "-connect",
        f"127.0.0.1:{proxy.port}",
        "-keylogfile",
        str(keylog),
        *client_args,
    ]
    if early_data is not None:
        early = tmp / "early.txt"
        early.write_bytes(early_data)
        cmd += ["-early_data", str(early)]
    client = subprocess.Popen(
        cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    out = _Output(client)
    try:
        assert client.stdin is not None
        out.wait_for(b"Verify return code")
        client.stdin.write(b"ping\n")
        client.stdin.flush()
        server.mark = server.out.wait_for(b"ping\n", server.mark)
        server.say(b"pong\n")
        mark = out.wait_for(b"pong\n")
        if key_update is not None:
            client.stdin.write(key_update + b"\n")
            client.stdin.flush()
            out.wait_for(b"KEYUPDATE", mark)
            client.stdin.write(b"after update\n")
            client.stdin.flush()
            server.mark = server.out.wait_for(b"after update\n", server.mark)
            server.say(b"server after update\n")
            out.wait_for(b"server after update\n", mark)
        client.stdin.close()
        client.wait(TIMEOUT)
    finally:
        if client.poll() is None:
            client.kill()
            client.wait()
    proxy.join()
    return Exchange(proxy.events, keylog.read_text() if keylog.exists() else "")


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("certs")
    paths = {k: d / f"{k}.pem" for k in ("rsa_key", "rsa_cert", "ec_key", "ec_cert")}
    base = [OPENSSL or "openssl", "req", "-x509", "-nodes", "-days", "1", "-subj", "/CN=localhost"]
    subprocess.run(
        [
            *base,
            "-newkey",
            "rsa:2048",
            "-keyout",
            str(paths["rsa_key"]),
            "-out",
            str(paths["rsa_cert"]),
        ],
        check=True,
        capture_output=True,
    )
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"]
    subprocess.run(
        [*base, *ec, "-keyout", str(paths["ec_key"]), "-out", str(paths["ec_cert"])],
        check=True,
        capture_output=True,
    )
    return paths


@pytest.fixture
def serve(certs: dict[str, Path]) -> Iterator[object]:
    servers: list[Server] = []

    def start(args: list[str], connections: int = 1) -> Server:
        s = Server(certs, args, connections)
        servers.append(s)
        return s

    yield start
    for s in servers:
        s.close()


def decrypt(ex: Exchange, keylog: KeyLog | None = None) -> tuple[TlsSession, list[RecordResult]]:
    session = TlsSession(KeyLog.from_text(ex.keylog) if keylog is None else keylog)
    results: list[RecordResult] = []
    for direction, data in ex.events:
        results += session.feed_data(direction, data)
    results += session.close()
    return session, results


def app_data(results: list[RecordResult], direction: str) -> bytes:
    return b"".join(
        r.plaintext or b""
        for r in results
        if r.direction == direction and r.inner_content_type == 23
    )


def assert_all_decrypted(session: TlsSession, results: list[RecordResult]) -> None:
    bad = [
        (r.direction, r.offset, r.status.value)
        for r in results
        if r.status not in (D.DECRYPTED, D.NOT_ENCRYPTED)
    ]
    assert bad == []
    assert session.summary().decrypted and session.anomalies == []
    assert b"ping\n" in app_data(results, "c2s") and b"pong\n" in app_data(results, "s2c")


# ---------------------------------------------------------------------------------------
# TLS 1.3
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "suite",
    ["TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256",
     "TLS_AES_128_CCM_SHA256", "TLS_AES_128_CCM_8_SHA256"],
)  # fmt: skip
def test_tls13_every_suite(serve, tmp_path: Path, suite: str) -> None:  # type: ignore[no-untyped-def]
    server = serve(["-tls1_3", "-ciphersuites", suite])
    ex = exchange(server, tmp_path, ["-tls1_3", "-ciphersuites", suite])
    session, results = decrypt(ex)
    assert_all_decrypted(session, results)
    s = session.summary()
    assert s.version == 0x0304 and s.cipher_suite_name == suite and s.handshake_complete
    withheld, results = decrypt(ex, KeyLog())
    assert {r.status for r in results if r.content_type == 23} == {D.MISSING_KEY}
    assert all(r.plaintext is None for r in results if r.content_type == 23)


def test_tls13_key_update_both_directions(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    server = serve(["-tls1_3"])
    ex = exchange(
        server, tmp_path, ["-tls1_3"], key_update=b"K"
    )  # K: update and request the peer's
    session, results = decrypt(ex)
    assert_all_decrypted(session, results)
    assert session.summary().key_updates == 2
    after = {r.direction: r for r in results if r.plaintext and b"after update" in r.plaintext}
    assert after["c2s"].key_generation == 1 and after["s2c"].key_generation == 1
    assert (
        after["c2s"].plaintext == b"after update\n"
        and after["s2c"].plaintext == b"server after update\n"
    )


def test_tls13_resumption_and_early_data(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    sess = tmp_path / "session.pem"
    server = serve(["-tls1_3", "-early_data"], connections=2)
    first = exchange(server, tmp_path, ["-tls1_3", "-sess_out", str(sess)])
    second = exchange(
        server, tmp_path, ["-tls1_3", "-sess_in", str(sess)], early_data=b"EARLY REQUEST\n"
    )
    s1, r1 = decrypt(first)
    assert_all_decrypted(s1, r1)
    assert not s1.summary().resumption_accepted
    s2, r2 = decrypt(second)
    assert_all_decrypted(s2, r2)
    early = [r for r in r2 if r.early_data and r.inner_content_type == 23]
    assert [r.plaintext for r in early] == [b"EARLY REQUEST\n"]
    summary = s2.summary()
    assert summary.resumption_accepted and summary.resumption_kind == "psk"
    assert summary.early_data_offered and summary.early_data_accepted is True
    # Without the early traffic secret the 0-RTT record is skipped; the rest still decrypts.
    kl = KeyLog.from_text(
        "\n".join(line for line in second.keylog.splitlines() if "EARLY" not in line)
    )
    s3, r3 = decrypt(second, kl)
    # Two early-epoch records: the 0-RTT request and the EndOfEarlyData message.
    assert [r.status for r in r3 if r.early_data] == [D.MISSING_KEY, D.MISSING_KEY]
    assert b"pong\n" in app_data(r3, "s2c") and s3.summary().why_not == "missing_key"


def test_tls13_early_data_rejected_by_the_server(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    sess = tmp_path / "session.pem"
    first_server = serve(["-tls1_3", "-early_data"])
    exchange(first_server, tmp_path, ["-tls1_3", "-sess_out", str(sess)])
    # A second server process cannot open the first one's ticket: full handshake, no PSK,
    # so the client's 0-RTT is rejected (RFC 8446 §4.2.10).
    other_server = serve(["-tls1_3", "-early_data"])
    second = exchange(
        other_server, tmp_path, ["-tls1_3", "-sess_in", str(sess)], early_data=b"EARLY REQUEST\n"
    )
    session, results = decrypt(second)
    summary = session.summary()
    assert (
        summary.early_data_offered
        and summary.early_data_accepted is False
        and not summary.resumption_accepted
    )
    # The 0-RTT record was sent and authenticates under its own secret (reported as
    # early data); everything after it is found in the handshake epoch by trial decryption.
    early = [r for r in results if r.early_data]
    assert [r.plaintext for r in early] == [b"EARLY REQUEST\n"] and early[0].status is D.DECRYPTED
    assert_all_decrypted(session, results)
    kl = KeyLog.from_text(
        "\n".join(line for line in second.keylog.splitlines() if "EARLY" not in line)
    )
    session, results = decrypt(second, kl)
    assert [r.status for r in results if r.early_data] == [D.MISSING_KEY]
    assert b"ping\n" in app_data(results, "c2s") and b"pong\n" in app_data(results, "s2c")


def test_tls13_external_psk(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # OpenSSL's external PSK is bound to SHA-256; OpenSSL 3.0 always prefers psk_dhe_ke.
    psk = [
        "-psk",
        "0102030405060708090a0b0c0d0e0f10",
        "-psk_identity",
        "client",
        "-ciphersuites",
        "TLS_AES_128_GCM_SHA256",
    ]
    server = serve(["-tls1_3", "-nocert", *psk])
    ex = exchange(server, tmp_path, ["-tls1_3", *psk])
    session, results = decrypt(ex)
    assert_all_decrypted(session, results)
    s = session.summary()
    assert (
        s.key_exchange == "PSK_DHE" and s.resumption_accepted and s.server_certificate_lengths == ()
    )
    withheld, results = decrypt(ex, KeyLog())
    assert {r.status for r in results if r.content_type == 23} == {D.MISSING_KEY}


# ---------------------------------------------------------------------------------------
# TLS 1.2 and older
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("cipher", "client_extra", "suite_id", "without_keylog"),
    [
        ("ECDHE-RSA-AES128-GCM-SHA256", [], 0xC02F, D.MISSING_KEY),
        ("ECDHE-RSA-AES256-GCM-SHA384", [], 0xC030, D.MISSING_KEY),
        ("ECDHE-RSA-CHACHA20-POLY1305", [], 0xCCA8, D.MISSING_KEY),
        ("ECDHE-ECDSA-AES128-CCM8", [], 0xC0AE, D.MISSING_KEY),
        ("ECDHE-ECDSA-AES256-CCM", [], 0xC0AD, D.MISSING_KEY),
        ("AES128-CCM", [], 0xC09C, D.RSA_KEY_EXCHANGE_NO_KEYLOG),
        ("ECDHE-RSA-AES128-SHA", [], 0xC013, D.MISSING_KEY),  # CBC, encrypt_then_mac negotiated
        ("ECDHE-RSA-AES128-SHA", ["-no_etm"], 0xC013, D.MISSING_KEY),  # CBC, MAC-then-encrypt
        ("ECDHE-RSA-AES256-SHA384", ["-no_etm"], 0xC028, D.MISSING_KEY),
        ("AES256-SHA256", [], 0x003D, D.RSA_KEY_EXCHANGE_NO_KEYLOG),
        ("DHE-RSA-AES256-GCM-SHA384", [], 0x009F, D.MISSING_KEY),
    ],
)
def test_tls12_suites(
    serve,
    tmp_path: Path,
    cipher: str,
    client_extra: list[str],
    suite_id: int,
    without_keylog: DecryptStatus,
) -> None:  # type: ignore[no-untyped-def]
    server = serve(["-tls1_2", "-cipher", cipher])
    ex = exchange(server, tmp_path, ["-tls1_2", "-cipher", cipher, *client_extra])
    session, results = decrypt(ex)
    assert_all_decrypted(session, results)
    s = session.summary()
    assert s.version == 0x0303 and s.cipher_suite == suite_id
    # OpenSSL negotiates encrypt_then_mac (RFC 7366) for CBC suites unless told not to.
    assert session.server_hello is not None
    cbc = CIPHER_SUITES[suite_id].mode == "cbc"
    assert session.server_hello.encrypt_then_mac == (cbc and "-no_etm" not in client_extra)
    withheld, results = decrypt(ex, KeyLog())
    assert {r.status for r in results if r.status is not D.NOT_ENCRYPTED} == {without_keylog}


@pytest.mark.parametrize(("flag", "version"), [("-tls1", 0x0301), ("-tls1_1", 0x0302)])
def test_tls10_and_tls11_cbc(serve, tmp_path: Path, flag: str, version: int) -> None:  # type: ignore[no-untyped-def]
    args = [flag, "-cipher", "ECDHE-RSA-AES128-SHA:@SECLEVEL=0"]
    server = serve(args)
    ex = exchange(server, tmp_path, [*args, "-no_etm"])
    session, results = decrypt(ex)
    assert_all_decrypted(session, results)
    assert session.summary().version == version


def test_tls12_psk(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    args = ["-tls1_2", "-psk", "0a0b0c0d", "-cipher", "PSK-AES128-CCM8"]
    server = serve([*args, "-nocert"])
    ex = exchange(server, tmp_path, args)
    session, results = decrypt(ex)
    assert_all_decrypted(session, results)
    withheld, results = decrypt(ex, KeyLog())
    assert {r.status for r in results if r.status is not D.NOT_ENCRYPTED} == {D.PSK_ONLY}


@pytest.mark.parametrize("tickets", [True, False], ids=["ticket", "session-id"])
def test_tls12_resumption(serve, tmp_path: Path, tickets: bool) -> None:  # type: ignore[no-untyped-def]
    sess = tmp_path / "session.pem"
    server = serve(["-tls1_2", *([] if tickets else ["-no_ticket"])], connections=2)
    first = exchange(server, tmp_path, ["-tls1_2", "-sess_out", str(sess)])
    second = exchange(server, tmp_path, ["-tls1_2", "-sess_in", str(sess)])
    s1, r1 = decrypt(first)
    assert_all_decrypted(s1, r1)
    s2, r2 = decrypt(second)
    assert_all_decrypted(
        s2, r2
    )  # the key log line of the resumed connection carries the master secret
    summary = s2.summary()
    assert summary.resumption_offered and summary.resumption_accepted
    assert summary.resumption_kind == ("ticket" if tickets else "session_id")
    assert summary.server_certificate_lengths == ()  # abbreviated handshake: no Certificate
