"""Self-signed certificates made in the test, for the embedded relay's TLS.

A certificate for ``127.0.0.1`` (and ``localhost``, and any extra DNS names) with its key, written
as PEM files (the key 0600), and a client context that trusts exactly that certificate.
"""

from __future__ import annotations

import datetime
import ipaddress
import ssl
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

__all__ = ["Certificate", "make_certificate"]


@dataclass(frozen=True)
class Certificate:
    cert: Path
    key: Path

    def client_context(self) -> ssl.SSLContext:
        """A client context that trusts this certificate and nothing else."""
        context = ssl.create_default_context(cafile=str(self.cert))
        return context


def make_certificate(
    directory: Path,
    *,
    names: tuple[str, ...] = (),
    name: str = "relay",
    passphrase: bytes | None = None,
) -> Certificate:
    """A self-signed EC certificate for 127.0.0.1, localhost and ``names``, valid for a day."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "codedeck test relay")])
    now = datetime.datetime.now(datetime.UTC)
    alternatives: list[x509.GeneralName] = [
        x509.DNSName("localhost"),
        *(x509.DNSName(n) for n in names),
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
    ]
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName(alternatives), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    directory.mkdir(parents=True, exist_ok=True)
    cert_path = directory / f"{name}.crt"
    key_path = directory / f"{name}.key"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(passphrase)
        if passphrase
        else serialization.NoEncryption()
    )
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)
    )
    key_path.chmod(0o600)
    return Certificate(cert_path, key_path)
