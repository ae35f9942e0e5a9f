"""Self-signed certificates for TLS scenarios, generated per run with ``cryptography``.

A fresh key per run means no private key is committed with the fixtures (the captures carry
the session key log instead, which is all a reader needs).  ECDSA P-256 keeps the
certificate — and so the server's handshake flight — small.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

DEFAULT_HOSTNAME = "pcapkit.lab"
CERT_VALIDITY = dt.timedelta(days=2)  # long enough for any run, short enough to be harmless
CLOCK_SKEW_MARGIN = dt.timedelta(hours=1)  # not_before in the past: tolerate skewed clocks


def make_self_signed(
    directory: Path,
    *,
    hostname: str = DEFAULT_HOSTNAME,
    ip: str | None = None,
    extra_sans: int = 0,
) -> tuple[Path, Path]:
    """Write ``server.crt`` and ``server.key`` (PEM) into ``directory``; return their paths.

    ``extra_sans`` adds that many DNS names (``san-00001.<hostname>`` …, ~25 bytes each)
    to make a large certificate, as CDN certificates with many names are — a server's
    first flight then outgrows QUIC's anti-amplification budget (RFC 9000 §8.1).
    """
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hostname)])
    now = dt.datetime.now(dt.timezone.utc)
    sans: list[x509.GeneralName] = [x509.DNSName(hostname)]
    if ip:
        sans.append(x509.IPAddress(ipaddress.ip_address(ip)))
    sans += [x509.DNSName(f"san-{i:05d}.{hostname}") for i in range(1, extra_sans + 1)]
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - CLOCK_SKEW_MARGIN)
        .not_valid_after(now + CERT_VALIDITY)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    directory.mkdir(parents=True, exist_ok=True)
    cert_path, key_path = directory / "server.crt", directory / "server.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.touch(mode=0o600)
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path
