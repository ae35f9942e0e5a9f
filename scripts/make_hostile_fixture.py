"""Make tests/data/hostile_strings (for tests/test_html_report.py): real traffic (the
kernel's TCP over loopback, Python ``ssl``/OpenSSL on both ends, tcpdump) whose every captured string is an attack on an
HTML page: the TLS SNI, the request path, the Host header, a request header, the
response's reason phrase and header, and the SSE events carry ``<script>``,
``"><img src=x onerror=…>`` and ``javascript:``.  The key log is embedded in the pcapng
(Decryption Secrets Block), so the report decrypts all of it.

The server leaves Nagle on and writes one event every 50 ms after a head written in two
pieces, as ``tls_sse_nagle`` does, so the report has findings and charts too.

Run as root (tcpdump) from the repository root:  python scripts/make_hostile_fixture.py
"""

from __future__ import annotations

import json
import os
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pcapkit.io.writer import inject_secrets  # noqa: E402
from pcapkit.lab.certs import make_self_signed  # noqa: E402

OUT = ROOT / "tests" / "data" / "hostile_strings"
PORT = 44300  # loopback only
SCRIPT = "<script>document.title='PWNED'</script>"
IMG = '"><img src=x onerror="document.title=\'PWNED\'">'
JSURL = "javascript:document.title='PWNED'"
SNI = "<script>alert(1)</script>.x"
PATH = f"/v1/stream?q={SCRIPT}&r={IMG}&u={JSURL}".replace(" ", "%20")
HOST = f"{IMG}{SCRIPT}"
EVENTS = [SCRIPT, IMG, JSURL, "</script><script>document.title='PWNED'</script>", "token 5"]


def server(ctx: ssl.SSLContext, ls: socket.socket) -> None:
    raw, _ = ls.accept()
    conn = ctx.wrap_socket(raw, server_side=True)
    req = b""
    while b"\r\n\r\n" not in req:
        req += conn.recv(4096)
    conn.sendall(
        f"HTTP/1.1 200 OK{SCRIPT}\r\nContent-Type: text/event-stream\r\n"
        f"X-Request-Id: {IMG}\r\nTransfer-Encoding: chunked\r\n\r\n".encode()
    )
    for ev in EVENTS:
        data = f"event: {IMG}\ndata: {ev}\n\n".encode()
        conn.sendall(b"%x\r\n" % len(data) + data + b"\r\n")
        time.sleep(0.05)
    conn.sendall(b"0\r\n\r\n")
    time.sleep(0.1)
    conn.close()


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        cert, key = make_self_signed(d / "certs")
        keylog = d / "keys.log"
        sctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        sctx.load_cert_chain(cert, key)
        sctx.keylog_filename = str(keylog)
        cctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        cctx.check_hostname = False
        cctx.verify_mode = ssl.CERT_NONE  # the SNI is the attack, not a name to verify
        cctx.keylog_filename = str(keylog)
        raw = Path(os.environ.get("HOSTILE_RAW", d / "raw.pcap"))
        dump = subprocess.Popen(
            [
                "tcpdump",
                "-i",
                "lo",
                "--immediate-mode",
                "-U",
                "-s",
                "0",
                "-w",
                str(raw),
                f"tcp port {PORT}",
            ],
            stderr=subprocess.PIPE,
        )
        time.sleep(1.0)
        ls = socket.create_server(("127.0.0.1", PORT))
        th = threading.Thread(target=server, args=(sctx, ls))
        th.start()
        s = socket.create_connection(("127.0.0.1", PORT))
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        c = cctx.wrap_socket(s, server_hostname=SNI)
        c.sendall(
            f"GET {PATH} HTTP/1.1\r\nHost: {HOST}\r\nUser-Agent: {SCRIPT}\r\n"
            f"X-Request-Id: {JSURL}\r\nAccept: text/event-stream\r\n\r\n".encode()
        )
        body = b""
        while not body.endswith(b"0\r\n\r\n"):
            chunk = c.recv(4096)
            if not chunk:
                break
            body += chunk
        c.close()
        th.join()
        ls.close()
        time.sleep(0.5)
        dump.terminate()
        dump.wait()
        inject_secrets(raw, OUT / "client.pcapng", keylog.read_bytes())
    (OUT / "about.json").write_text(
        json.dumps(
            {
                "name": "hostile_strings",
                "what": "real loopback TLS 1.3 + HTTP/1.1 SSE whose strings attack an HTML page",
                "made_by": "scripts/make_hostile_fixture.py",
                "sni": SNI,
                "path": PATH,
                "host": HOST,
                "events": EVENTS,
            },
            indent=2,
        )
        + "\n"
    )
    print(OUT / "client.pcapng", os.path.getsize(OUT / "client.pcapng"), "bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
