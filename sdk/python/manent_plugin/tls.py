"""AutoMTLS as go-plugin does it: a fresh P-521 certificate with go-plugin's template, the host's
certificate (PLUGIN_CLIENT_CERT) as the only trusted root, TLS 1.2 at least, ALPN h2."""

import base64
import datetime
import os
import secrets
import ssl
import tempfile
from typing import Tuple

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


class Identity:
    """The plugin's certificate and key (the key never leaves the process)."""

    def __init__(self, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey):
        self.cert = cert
        self.key = key

    @property
    def der(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.DER)

    @property
    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    @property
    def key_pem(self) -> bytes:
        return self.key.private_bytes(serialization.Encoding.PEM,
                                      serialization.PrivateFormat.TraditionalOpenSSL,
                                      serialization.NoEncryption())

    def handshake_field(self) -> str:
        """The handshake line's sixth field: DER, standard base64 without padding."""
        return base64.b64encode(self.der).decode("ascii").rstrip("=")


def generate() -> Identity:
    """go-plugin's `generateCert`: ECDSA P-521, self-signed with SHA-512, O=HashiCorp
    CN=localhost, SAN DNS:localhost, critical KeyUsage (digitalSignature, keyEncipherment,
    keyAgreement, keyCertSign), ExtKeyUsage clientAuth+serverAuth, critical CA:TRUE, valid from
    30 s ago for 262980 hours, a random serial below 2^128."""
    key = ec.generate_private_key(ec.SECP521R1())
    name = x509.Name([
        x509.NameAttribute(NameOID.ORGANIZATION_NAME, "HashiCorp"),
        x509.NameAttribute(NameOID.COMMON_NAME, "localhost"),
    ])
    now = datetime.datetime.now(datetime.timezone.utc)
    serial = 0
    while serial == 0:
        serial = secrets.randbits(128)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(serial)
        .not_valid_before(now - datetime.timedelta(seconds=30))
        .not_valid_after(now + datetime.timedelta(hours=262980))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .add_extension(x509.KeyUsage(
            digital_signature=True, content_commitment=False, key_encipherment=True,
            data_encipherment=False, key_agreement=True, key_cert_sign=True, crl_sign=False,
            encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH,
                                              ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                       critical=False)
        .sign(key, hashes.SHA512())
    )
    return Identity(cert, key)


def _load(ctx: ssl.SSLContext, identity: Identity, host_pem: str) -> ssl.SSLContext:
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.verify_mode = ssl.CERT_REQUIRED
    # ssl loads a certificate chain only from files: a private directory, removed at once.
    with tempfile.TemporaryDirectory(prefix="manent-plugin-tls-") as tmp:
        os.chmod(tmp, 0o700)
        cert = os.path.join(tmp, "cert.pem")
        key = os.path.join(tmp, "key.pem")
        fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(identity.key_pem)
        with open(cert, "wb") as f:
            f.write(identity.cert_pem)
        ctx.load_cert_chain(cert, key)
    # Exactly the host's certificate is trusted (go-plugin's pool of one).
    ctx.load_verify_locations(cadata=host_pem)
    ctx.set_alpn_protocols(["h2"])
    return ctx


def contexts(identity: Identity, host_pem: str) -> Tuple[ssl.SSLContext, ssl.SSLContext]:
    """(server, client): the server context for the plugin's socket, the client context for
    dialing the host's brokered services (server name `localhost`)."""
    server = _load(ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER), identity, host_pem)
    client = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client.check_hostname = True
    _load(client, identity, host_pem)
    return server, client
