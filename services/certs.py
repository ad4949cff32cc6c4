"""A deployment's certificate authority and certificates: made once, kept beside the deployment's
secret, rotated by a command (``python -m services.certs``).

Layout of a TLS directory (``causal_client/tls.py`` reads it): ``ca.pem`` and ``ca.key`` (the
deployment's CA; the key only ever signs here), and for each identity ``NAME.pem`` and
``NAME.key``: every node of the topology (regions and serializers, for all of their services and
stores) and ``client`` (what clients and tools present). A node's certificate names the node
itself (the name a peer verifies, whatever address or relay it dials), its host, and loopback
(probes and the processes on its host). Keys are written 0600, the directory 0700; nothing here
is ever committed (.gitignore).

Made with ``cryptography`` (ECDSA P-256 keys: small, and a handshake an order cheaper than RSA's).
"""

from __future__ import annotations

import argparse
import datetime
import ipaddress
import os
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from causal_client.tls import CA_FILE, CLIENT_IDENTITY

if TYPE_CHECKING:
    from services.topology import Topology

CA_KEY_FILE = "ca.key"
CA_DAYS = 3650
LEAF_DAYS = 397  # what browsers accept for a server certificate
RENEW_WITHIN_DAYS = 30  # ``ensure`` re-issues a certificate that expires sooner than this
LOOPBACK = ("localhost", "127.0.0.1")


@dataclass(frozen=True)
class Identity:
    """A certificate to make: its name (the file's, and the first name it is valid for) and every
    other DNS name or IP address it is reached by."""

    name: str
    names: tuple[str, ...] = ()

    @property
    def all_names(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys((self.name, *self.names)))


def identities_of(topology: Topology, extra_names: Sequence[str] = ()) -> list[Identity]:
    """Every node of ``topology`` with its host and loopback, plus ``extra_names`` on each (a
    container's service names, a published address), and the client identity."""
    found = [Identity(n, (topology.node_host(n), *LOOPBACK, *extra_names)) for n in topology.node_names]
    return [*found, Identity(CLIENT_IDENTITY, (*LOOPBACK,))]


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _write_private(path: Path, data: bytes) -> None:
    """A key: the owner's only, or the owner's group's too where the directory is (a container's
    user is given the group: services/compose)."""
    path.unlink(missing_ok=True)
    mode = 0o640 if path.parent.stat().st_mode & 0o050 else 0o600
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    path.chmod(mode)


def _key_bytes(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())  # fmt: skip


def _alt_name(name: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


@dataclass(frozen=True)
class Authority:
    """The deployment's CA: signs every certificate of the directory."""

    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey

    @classmethod
    def make(
        cls, deployment: str, not_before: datetime.datetime | None = None, days: int = CA_DAYS
    ) -> Authority:
        key = ec.generate_private_key(ec.SECP256R1())
        start = not_before or _now() - datetime.timedelta(minutes=5)
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{deployment} deployment CA")])
        cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(start + datetime.timedelta(days=days))
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
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256())
        )
        return cls(cert, key)

    @classmethod
    def load(cls, directory: Path) -> Authority:
        cert = x509.load_pem_x509_certificate((directory / CA_FILE).read_bytes())
        key = serialization.load_pem_private_key((directory / CA_KEY_FILE).read_bytes(), password=None)
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise ValueError(f"{directory / CA_KEY_FILE}: not an EC key")
        return cls(cert, key)

    @property
    def pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def save(self, directory: Path) -> None:
        (directory / CA_FILE).write_bytes(self.pem)
        _write_private(directory / CA_KEY_FILE, _key_bytes(self.key))

    def issue(
        self, identity: Identity, not_before: datetime.datetime | None = None, days: int = LEAF_DAYS
    ) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
        """A certificate for ``identity``, good as a server's and as a client's (mutual TLS)."""
        key = ec.generate_private_key(ec.SECP256R1())
        start = not_before or _now() - datetime.timedelta(minutes=5)
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, identity.name)]))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(start + datetime.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.SubjectAlternativeName([_alt_name(n) for n in identity.all_names]), critical=False
            )
            .add_extension(
                x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                critical=False,
            )
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()), critical=False
            )
            .sign(self.key, hashes.SHA256())
        )
        return cert, key


def write_identity(directory: Path, authority: Authority, identity: Identity, **validity: object) -> None:
    cert, key = authority.issue(identity, **validity)  # type: ignore[arg-type]
    _write_private(directory / f"{identity.name}.key", _key_bytes(key))
    (directory / f"{identity.name}.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def _needs_issue(directory: Path, authority: Authority, identity: Identity) -> str:
    """Why ``identity``'s certificate must be (re)issued ("" if it is fine as it is)."""
    cert_path, key_path = directory / f"{identity.name}.pem", directory / f"{identity.name}.key"
    if not cert_path.is_file() or not key_path.is_file():
        return "new"
    cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
    if cert.issuer != authority.cert.subject:
        return "of another CA"
    if cert.not_valid_after_utc - _now() < datetime.timedelta(days=RENEW_WITHIN_DAYS):
        return "expiring"
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    have = {str(n.value) for n in names}
    if not set(identity.all_names) <= have:
        return "new names"
    return ""


def ensure(
    directory: Path,
    deployment: str,
    identities: Iterable[Identity],
    authority: Authority | None = None,
    group_readable: bool = False,
) -> list[tuple[str, str]]:
    """The directory holds a CA and a valid certificate for every identity: makes what is
    missing, re-issues what expires soon or lacks a name. Returns (identity, why) for each made.
    ``authority``: one kept elsewhere (a deployment over several hosts: each host's directory
    gets its own certificates and the CA's, never its key). ``group_readable``: keys readable by
    the owner's group too (0640 in a 0750 directory), for containers given that group."""
    if authority is None and (directory / CA_FILE).is_file() and not (directory / CA_KEY_FILE).is_file():
        raise ValueError(
            f"{directory} holds a CA certificate without its key: name the directory that has the key "
            "(--ca), or a new CA would make every certificate of the deployment untrusted"
        )
    directory.mkdir(parents=True, exist_ok=True)
    directory.chmod(0o750 if group_readable else 0o700)
    made: list[tuple[str, str]] = []
    if authority is not None:
        if not (directory / CA_FILE).is_file() or (directory / CA_FILE).read_bytes() != authority.pem:
            (directory / CA_FILE).write_bytes(authority.pem)
    elif (directory / CA_FILE).is_file() and (directory / CA_KEY_FILE).is_file():
        authority = Authority.load(directory)
    else:
        authority = Authority.make(deployment)
        authority.save(directory)
        made.append(("ca", "new"))
    for identity in identities:
        if why := _needs_issue(directory, authority, identity):
            write_identity(directory, authority, identity)
            made.append((identity.name, why))
    return made


def rotate(
    directory: Path, deployment: str, identities: Iterable[Identity], new_ca: bool = False
) -> list[str]:
    """Re-issues every certificate (and, with ``new_ca``, the CA first: every process must then be
    restarted with the new files at once, as old and new no longer trust each other)."""
    if new_ca:
        for stale in (CA_FILE, CA_KEY_FILE):
            (directory / stale).unlink(missing_ok=True)
    authority = Authority.load(directory) if (directory / CA_FILE).is_file() else None
    if authority is None:
        directory.mkdir(parents=True, exist_ok=True)
        authority = Authority.make(deployment)
        authority.save(directory)
    names = []
    for identity in identities:
        write_identity(directory, authority, identity)
        names.append(identity.name)
    return names


def describe(directory: Path) -> list[tuple[str, str, str, str]]:
    """(file, subject, valid until, names) of every certificate in the directory."""
    rows = []
    for path in sorted(directory.glob("*.pem")):
        cert = x509.load_pem_x509_certificate(path.read_bytes())
        try:
            names = ", ".join(
                str(n.value)
                for n in cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
            )
        except x509.ExtensionNotFound:
            names = "-"
        subject = cert.subject.rfc4514_string()
        rows.append((path.name, subject, cert.not_valid_after_utc.strftime("%Y-%m-%d"), names))
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    from services.topology import TopologyError, load_topology  # the command's only

    parser = argparse.ArgumentParser(prog="python -m services.certs", description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=("ensure", "rotate", "show"),
                        help="ensure: make what is missing or expiring; rotate: re-issue every certificate; "
                             "show: list them")  # fmt: skip
    parser.add_argument("directory", type=Path, help="the TLS directory (beside the deployment's .env)")
    parser.add_argument("--topology", help="the topology file (ensure, rotate)")
    parser.add_argument("--name", action="append", default=[], help="one more name every node is reached by")
    parser.add_argument("--new-ca", action="store_true", help="rotate: a new CA too")
    parser.add_argument(
        "--ca", type=Path, help="where the CA's key is, if not in DIRECTORY (a compose project's ca/)"
    )
    parser.add_argument(
        "--group-readable",
        action="store_true",
        help="keys 0640 (a compose project's tls/: see compose/README.md)",
    )
    args = parser.parse_args(argv)
    if args.action == "show":
        for row in describe(args.directory):
            print("  ".join(row))
        return 0
    if not args.topology:
        parser.error(f"{args.action} needs --topology")
    try:
        topology = load_topology(args.topology)  # a .toml, or a deployment's topology.json
    except TopologyError as exc:
        parser.error(str(exc))
    identities = identities_of(topology, args.name)
    if args.action == "ensure":
        authority = Authority.load(args.ca) if args.ca else None
        try:
            made = ensure(args.directory, topology.name, identities, authority, args.group_readable)
        except ValueError as exc:
            parser.error(str(exc))
        print("\n".join(f"made {name} ({why})" for name, why in made) or "every certificate is valid")
    else:
        print(f"re-issued {', '.join(rotate(args.directory, topology.name, identities, args.new_ca))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
