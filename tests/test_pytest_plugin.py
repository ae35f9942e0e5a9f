"""The pytest plugin (pcapkit/pytest_plugin.py): the pcapkit_capture fixture, used as a user
would — here on the lab's write-write-read scenario (nagle_wwr and its TCP_NODELAY pair,
pcapkit/lab/scenarios/nagle.py) run over loopback by its own server and client code, and
on a TLS 1.3 exchange whose keys must reach the capture through SSLKEYLOGFILE.

Real traffic between real kernel sockets captured by dumpcap; the tests that capture skip
(with the reason, via the fixture itself) without root or dumpcap.
"""

from __future__ import annotations

import os
import shutil
import socket
import ssl
import threading
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import pytest

pytest_plugins = ["pytester"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_wwr(nodelay: bool, port: int) -> dict[str, Any]:
    """The nagle_wwr scenario's own server and client, on 127.0.0.1 (no forwarder)."""
    from pcapkit.lab.scenarios import nagle

    p = dict(nagle.PARAMS, server_ip="127.0.0.1", port=port, cc=None, client_nodelay=nodelay)
    p["exchanges"] = 6
    ready = threading.Event()
    out: dict[str, Any] = {}

    def serve() -> None:
        out["server"] = nagle.server(p, ready.set)

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    assert ready.wait(30)
    out["client"] = nagle.client(p)
    t.join(30)
    assert not t.is_alive()
    return out


def test_the_plugin_is_registered_as_a_pytest11_entry_point() -> None:
    eps = {ep.name: ep.value for ep in entry_points(group="pytest11")}
    assert eps.get("pcapkit") == "pcapkit.pytest_plugin"


def test_nagle_wwr_seen_through_the_fixture(pcapkit_capture) -> None:  # type: ignore[no-untyped-def]
    port = free_port()
    with pcapkit_capture("lo", bpf=f"tcp port {port}") as cap:
        run_wwr(False, port)
    t = cap.trace
    assert cap.result is not None and cap.result.dropped == 0
    assert len(t.flows) == 1
    kinds = set(t.findings.kind)
    # on loopback the round trip is µs, the server's delayed ACK still ~40 ms: each body
    # after the first waits for it
    assert "nagle_delayed_ack" in kinds, t.findings[["kind", "cost_ms"]]
    held = t.findings[t.findings.kind == "nagle_delayed_ack"]
    assert len(held) >= 3 and (held.cost_ms > 20).all()


def test_nodelay_pair_is_clean_through_the_fixture(pcapkit_capture) -> None:  # type: ignore[no-untyped-def]
    port = free_port()
    with pcapkit_capture(bpf=f"tcp port {port}") as cap:
        run_wwr(True, port)
    t = cap.trace
    assert len(t.flows) == 1 and t.flows.c2s_bytes.iloc[0] == 6 * 200
    assert not t.findings.kind.str.startswith("nagle").any(), t.findings[["kind", "cost_ms"]]


def test_tls_keys_reach_the_capture(pcapkit_capture, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from pcapkit.lab.certs import make_self_signed

    monkeypatch.delenv("SSLKEYLOGFILE", raising=False)
    cert, key = make_self_signed(tmp_path / "pki", ip="127.0.0.1")
    port = free_port()
    body = b"data: token\n\n" * 5
    with pcapkit_capture(bpf=f"tcp port {port}") as cap:
        assert cap.keylog is not None
        srv_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        srv_ctx.load_cert_chain(cert, key)
        ls = socket.create_server(("127.0.0.1", port))

        def serve() -> None:
            conn, _ = ls.accept()
            with srv_ctx.wrap_socket(conn, server_side=True) as s:
                s.recv(1000)
                s.sendall(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                    b"content-length: %d\r\n\r\n%s" % (len(body), body)
                )

        th = threading.Thread(target=serve, daemon=True)
        th.start()
        # the client's context honours SSLKEYLOGFILE, which the fixture set
        ctx = ssl.create_default_context(cafile=str(cert))
        with socket.create_connection(("127.0.0.1", port)) as raw:
            with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as c:
                c.sendall(b"GET /v1/stream HTTP/1.1\r\nHost: pcapkit.test\r\n\r\n")
                got = b""
                while not got.endswith(body):
                    chunk = c.recv(4096)
                    if not chunk:
                        break
                    got += chunk
        th.join(30)
        ls.close()
    assert cap.result is not None and cap.result.keylog_lines >= 5
    t = cap.trace
    assert bool(t.tls.decrypted.all())
    (req,) = t.requests.itertuples()
    assert req.path == "/v1/stream" and req.status == 200 and req.events == 5


def test_without_dumpcap_the_test_is_skipped_with_the_reason(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(
        """
        def test_inner(pcapkit_capture):
            with pcapkit_capture("lo") as cap:
                pass
            assert False, "must not get here"
        """
    )
    monkeypatch.setenv("PATH", "/nonexistent")
    r = pytester.runpytest_inprocess("-rs", "-p", "no:cacheprovider")
    r.assert_outcomes(skipped=1)
    r.stdout.fnmatch_lines(["*pcapkit_capture needs dumpcap*"])


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("dumpcap") is None,
    reason="capturing needs root and dumpcap",
)
def test_a_failing_test_names_its_capture(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import socket

        def test_inner(pcapkit_capture):
            with pcapkit_capture("lo", bpf="udp port 9") as cap:
                socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("127.0.0.1", 9))
            assert cap.trace.flows.empty  # fails: the datagram is one flow
        """
    )
    r = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    r.assert_outcomes(failed=1)
    r.stdout.fnmatch_lines(["*pcapkit capture*", "*capture-1.pcapng  (pcapkit analyze *"])
