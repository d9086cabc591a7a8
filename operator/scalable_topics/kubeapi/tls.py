"""The API server's TLS identity: a private certificate authority and a serving certificate it
signs, made once and kept in a directory so that a kubeconfig written earlier stays valid.

kubectl sends a bearer token only over TLS, so the API server is served over HTTPS even on
loopback; the kubeconfig carries the authority's certificate (``certificate-authority-data``).
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
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from ..private_files import replace_file

VALIDITY = datetime.timedelta(days=3650)
HOSTS = ("localhost", "127.0.0.1", "::1")


@dataclass(frozen=True, slots=True)
class ServingIdentity:
    certificate: Path  # the serving certificate
    key: Path
    authority_pem: bytes  # what clients trust

    def server_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(self.certificate, self.key)
        return context


def load_or_create(directory: Path, hosts: tuple[str, ...] = HOSTS) -> ServingIdentity:
    """The identity kept in ``directory`` (``kube-api-ca.crt``, ``kube-api.crt``,
    ``kube-api.key``), made there first when missing or not valid for ``hosts``."""
    authority = directory / "kube-api-ca.crt"
    certificate = directory / "kube-api.crt"
    key = directory / "kube-api.key"
    kept = authority.exists() and certificate.exists() and key.exists()
    if kept and _covers(x509.load_pem_x509_certificate(certificate.read_bytes()), hosts):
        return ServingIdentity(certificate, key, authority.read_bytes())
    directory.mkdir(parents=True, exist_ok=True)
    authority_pem, certificate_pem, key_pem = _issue(hosts)
    replace_file(authority, authority_pem, 0o644)
    replace_file(key, key_pem, 0o600)
    replace_file(certificate, certificate_pem, 0o644)
    return ServingIdentity(certificate, key, authority_pem)


def _covers(certificate: x509.Certificate, hosts: tuple[str, ...]) -> bool:
    try:
        names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return False
    present = {str(n) for n in names.get_values_for_type(x509.DNSName)} | {
        str(n) for n in names.get_values_for_type(x509.IPAddress)
    }
    now = datetime.datetime.now(datetime.UTC)
    fresh = certificate.not_valid_after_utc - now > datetime.timedelta(days=1)
    return fresh and all(str(_name(host).value) in present for host in hosts)


def _name(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def _issue(hosts: tuple[str, ...]) -> tuple[bytes, bytes, bytes]:
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "scalable-topics-kube-api-ca")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    serving = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.SubjectAlternativeName([_name(h) for h in hosts]), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    key_pem = key.private_bytes(
        pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return ca.public_bytes(pem), serving.public_bytes(pem), key_pem
