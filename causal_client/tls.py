"""TLS with a deployment's own certificates: where they are, the contexts made from them, and
what a failed handshake means, as a type.

A deployment has its own certificate authority (``services/certs.py`` makes it): every node
(a region's services and stores, a serializer) has a certificate for the names and addresses it
is reached by, signed by that CA, and clients have one too. Both ends verify: a client checks
the server's certificate against the CA and the name it meant to reach; a server asks the client
for a certificate of the same CA (mutual TLS).

Where the files are comes from the environment, as the deployment's secret does
(``$SATURN_SECRET``): ``$SATURN_TLS_DIR`` holds ``ca.pem`` and, for each identity, ``NAME.pem``
and ``NAME.key``; ``$SATURN_TLS_IDENTITY`` names this process's (a node's name; clients use
``client``, the default). Without ``$SATURN_TLS_DIR`` there is no TLS (the loopback demo).

This module is the standard library only: the client library imports it, and so does every
service (``causal_client`` never imports ``services``).
"""

from __future__ import annotations

import functools
import os
import socket
import ssl
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TLS_DIR_ENV = "SATURN_TLS_DIR"
IDENTITY_ENV = "SATURN_TLS_IDENTITY"
CLIENT_IDENTITY = "client"
CA_FILE = "ca.pem"
HANDSHAKE_TIMEOUT_S = 5.0  # a peer that does not finish a handshake in this long is not one


class TlsError(ConnectionError):
    """A TLS connection could not be made; the subclass names why, the message where."""


class TlsMisconfigured(TlsError):
    """This side's certificates are missing or unreadable (a path, a key that does not match)."""


class UnknownAuthority(TlsError):
    """A certificate was not signed by the deployment's CA (the peer's, or ours as the peer saw it)."""


class CertificateExpired(TlsError):
    """A certificate's validity ended (the peer's, or ours as the peer saw it)."""


class CertificateNotYetValid(TlsError):
    """A certificate's validity has not begun (a clock behind, or a certificate dated ahead)."""


class WrongServerName(TlsError):
    """The server's certificate is valid but for another name: not the node meant."""


class PlaintextPeer(TlsError):
    """The other end does not speak TLS (a plaintext server at a TLS client, or the reverse)."""


class CertificateRefused(UnknownAuthority):
    """The server ended the connection after the handshake: it did not accept our certificate,
    whose dates are fine (so most likely not of its CA)."""


class CertificateRequired(TlsError):
    """The server asked for a client certificate and got none it accepts."""


@dataclass(frozen=True)
class TlsFiles:
    """One identity's certificate and key, and the deployment's CA (PEM files)."""

    ca: Path
    cert: Path
    key: Path
    identity: str

    @classmethod
    def of(cls, directory: str | Path, identity: str = CLIENT_IDENTITY) -> TlsFiles:
        """The files of ``identity`` in ``directory``; raises TlsMisconfigured if one is missing."""
        folder = Path(directory)
        files = cls(folder / CA_FILE, folder / f"{identity}.pem", folder / f"{identity}.key", identity)
        missing = [str(p) for p in (files.ca, files.cert, files.key) if not p.is_file()]
        if missing:
            raise TlsMisconfigured(f"TLS identity {identity!r}: missing {', '.join(missing)}")
        return files

    def pem(self) -> tuple[bytes, bytes, bytes]:
        """(CA, certificate, key) as bytes, for gRPC's credentials."""
        return self.ca.read_bytes(), self.cert.read_bytes(), self.key.read_bytes()


def from_env(environ: os._Environ[str] | dict[str, str] | None = None) -> TlsFiles | None:
    """This process's TLS files, or None when the deployment runs without TLS."""
    env = os.environ if environ is None else environ
    directory = env.get(TLS_DIR_ENV)
    if not directory:
        return None
    return TlsFiles.of(directory, env.get(IDENTITY_ENV) or CLIENT_IDENTITY)


def _context(purpose: ssl.Purpose, files: TlsFiles) -> ssl.SSLContext:
    protocol = ssl.PROTOCOL_TLS_SERVER if purpose is ssl.Purpose.CLIENT_AUTH else ssl.PROTOCOL_TLS_CLIENT
    context = ssl.SSLContext(protocol)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_verify_locations(cafile=str(files.ca))
        context.load_cert_chain(str(files.cert), str(files.key))
    except (OSError, ssl.SSLError) as exc:
        raise TlsMisconfigured(f"TLS identity {files.identity!r} ({files.cert}): {exc}") from None
    context.verify_mode = ssl.CERT_REQUIRED
    return context


def server_context(files: TlsFiles, on_failure: Callable[[TlsError], None] | None = None) -> ssl.SSLContext:
    """A server's: presents ``files``' certificate, requires a client certificate of the CA.
    ``on_failure`` hears of every handshake that fails, with its cause (asyncio's servers drop
    those without a word)."""
    context = _context(ssl.Purpose.CLIENT_AUTH, files)
    if on_failure is not None:
        context.sslobject_class = _reporting(on_failure)
    return context


def _reporting(on_failure: Callable[[TlsError], None]) -> type[ssl.SSLObject]:
    """An SSLObject (what asyncio's and uvloop's TLS run on) that reports a failed handshake."""

    class Reporting(ssl.SSLObject):
        def do_handshake(self) -> None:
            try:
                super().do_handshake()
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
                raise
            except ssl.SSLError as exc:
                on_failure(explain(exc, "a client"))
                raise

    return Reporting


def client_context(files: TlsFiles) -> ssl.SSLContext:
    """A client's: verifies the server against the CA and the name asked for (``server_hostname``
    where it connects), and presents ``files``' certificate when asked."""
    context = _context(ssl.Purpose.SERVER_AUTH, files)
    context.check_hostname = True
    return context


@functools.lru_cache(maxsize=16)
def _cached(server: bool, directory: str, identity: str) -> ssl.SSLContext:
    files = TlsFiles.of(directory, identity)
    return server_context(files) if server else client_context(files)


def process_context(server: bool) -> ssl.SSLContext | None:
    """This process's server or client context, from the environment (made once: certificates
    rotated on disk are taken up by a restart); None without TLS."""
    directory = os.environ.get(TLS_DIR_ENV)
    if not directory:
        return None
    return _cached(server, directory, os.environ.get(IDENTITY_ENV) or CLIENT_IDENTITY)


# OpenSSL's verification codes (x509_vfy.h) and the alert texts a peer's refusal arrives as.
_VERIFY_CODES: dict[int, type[TlsError]] = {
    9: CertificateNotYetValid,  # X509_V_ERR_CERT_NOT_YET_VALID
    10: CertificateExpired,  # X509_V_ERR_CERT_HAS_EXPIRED
    18: UnknownAuthority,  # X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT
    19: UnknownAuthority,  # X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN
    20: UnknownAuthority,  # X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY
    21: UnknownAuthority,  # X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE
    62: WrongServerName,  # X509_V_ERR_HOSTNAME_MISMATCH
    64: WrongServerName,  # X509_V_ERR_IP_ADDRESS_MISMATCH
}
# What a failure says of itself, in OpenSSL's words: verification messages (our check of the
# peer, as a library that wraps the error passes them on) and alerts (the peer's check of us).
_TEXTS: tuple[tuple[str, type[TlsError], str], ...] = (
    ("UNABLE TO GET LOCAL ISSUER", UnknownAuthority, "the peer's certificate is not of our CA"),
    ("SELF-SIGNED CERTIFICATE", UnknownAuthority, "the peer's certificate is not of our CA"),
    ("CERTIFICATE HAS EXPIRED", CertificateExpired, "the peer's certificate has expired"),
    ("CERTIFICATE IS NOT YET VALID", CertificateNotYetValid, "the peer's certificate is not yet valid"),
    ("HOSTNAME MISMATCH", WrongServerName, "the peer's certificate is for another name"),
    ("IP ADDRESS MISMATCH", WrongServerName, "the peer's certificate is for another address"),
    ("UNKNOWN_CA", UnknownAuthority, "the peer does not know the CA of our certificate"),
    ("UNKNOWN CA", UnknownAuthority, "the peer does not know the CA of our certificate"),
    ("BAD_CERTIFICATE", UnknownAuthority, "the peer refused our certificate"),
    ("CERTIFICATE_EXPIRED", CertificateExpired, "the peer found our certificate expired"),
    ("CERTIFICATE EXPIRED", CertificateExpired, "the peer found our certificate expired"),
    ("CERTIFICATE_REQUIRED", CertificateRequired, "the server requires a client certificate"),
    ("CERTIFICATE REQUIRED", CertificateRequired, "the server requires a client certificate"),
    ("PEER_DID_NOT_RETURN_A_CERTIFICATE", CertificateRequired, "the client sent no certificate"),
    ("WRONG_VERSION_NUMBER", PlaintextPeer, "the peer does not speak TLS"),
    ("WRONG VERSION NUMBER", PlaintextPeer, "the peer does not speak TLS"),
    ("HTTP_REQUEST", PlaintextPeer, "a plaintext HTTP client at a TLS port"),
    ("RECORD_LAYER_FAILURE", PlaintextPeer, "the peer does not speak TLS"),
    ("RECORD LAYER FAILURE", PlaintextPeer, "the peer does not speak TLS"),
    ("PACKET_LENGTH_TOO_LONG", PlaintextPeer, "the peer does not speak TLS"),
)


def recognise(text: str, where: str) -> TlsError | None:
    """The typed error a failure's text names (a library's wrapping of an SSL error), if any."""
    upper = text.upper()
    for marker, kind, meaning in _TEXTS:
        if marker in upper:
            return kind(f"TLS with {where}: {meaning} ({kind.__name__}: {text})")
    return None


def explain(exc: BaseException, where: str) -> TlsError:
    """The typed error for a failed handshake with ``where`` (an address, a node's name)."""
    if isinstance(exc, TlsError):
        return exc
    if isinstance(exc, ssl.SSLCertVerificationError):
        kind = _VERIFY_CODES.get(exc.verify_code, UnknownAuthority)
        return kind(f"TLS with {where}: {exc.verify_message} ({kind.__name__})")
    found = recognise(f"{getattr(exc, 'reason', None) or ''} {exc}", where)
    if found is not None:
        return found
    if isinstance(exc, ssl.SSLError):
        return TlsError(f"TLS with {where}: {exc}")
    # The connection ended in the handshake without an alert: a plaintext server closes on the
    # client's hello, and a server that refused our certificate may close before its alert is read.
    ended = exc or type(exc).__name__
    return PlaintextPeer(
        f"TLS with {where}: the connection ended during the handshake ({ended}): a server without TLS, "
        "or one that refused our certificate"
    )


def redis_options(for_url: bool = False) -> dict[str, str | bool]:
    """redis-py's options for this process's TLS ({} without): a client built from a host and a
    port needs ``ssl``; one built from a URL has it from the scheme (``rediss://``, which the
    topology's URLs take under TLS) and takes the rest."""
    files = from_env()
    if files is None:
        return {}
    options: dict[str, str | bool] = {
        "ssl_ca_certs": str(files.ca), "ssl_certfile": str(files.cert), "ssl_keyfile": str(files.key),
        "ssl_cert_reqs": "required", "ssl_check_hostname": True,
    }  # fmt: skip
    return options if for_url else {"ssl": True, **options}


def grpc_channel(endpoint: str, options: Sequence[tuple[str, Any]] = ()) -> Any:
    """A gRPC channel to ``endpoint``: under this process's TLS a secure one (the server checked
    against the CA and the endpoint's host, our certificate presented), else a plaintext one."""
    import grpc  # here, not above: a health check of a store or a link imports this module fast

    files = from_env()
    if files is None:
        return grpc.insecure_channel(endpoint, options=list(options))
    ca, cert, key = files.pem()
    credentials = grpc.ssl_channel_credentials(root_certificates=ca, private_key=key, certificate_chain=cert)
    return grpc.secure_channel(endpoint, credentials, options=list(options))


def grpc_server_credentials() -> Any:
    """gRPC's server credentials for this process's TLS (the client's certificate required), None
    without TLS."""
    import grpc

    files = from_env()
    if files is None:
        return None
    ca, cert, key = files.pem()
    return grpc.ssl_server_credentials([(key, cert)], root_certificates=ca, require_client_auth=True)


def redis_url_options(url: str) -> dict[str, str | bool]:
    """What redis-py's ``from_url(url, ...)`` needs besides the URL: the certificates for a
    ``rediss://`` one."""
    return redis_options(for_url=True) if url.startswith("rediss:") else {}


def http_scheme() -> str:
    """A web page's or a metrics page's URL scheme in this process: https under TLS."""
    return "https" if os.environ.get(TLS_DIR_ENV) else "http"


def redis_scheme() -> str:
    """A store's URL scheme in this process: rediss under TLS."""
    return "rediss" if os.environ.get(TLS_DIR_ENV) else "redis"


def own_certificate_problem(files: TlsFiles, now: float | None = None) -> TlsError | None:
    """What is wrong with our own certificate's dates, if anything (a peer refuses it silently:
    a server ends the connection after the handshake without an alert the client can read)."""
    try:
        decoded = ssl._ssl._test_decode_cert(str(files.cert))  # type: ignore[attr-defined]
        start, end = (ssl.cert_time_to_seconds(decoded[k]) for k in ("notBefore", "notAfter"))
    except (AttributeError, KeyError, OSError, ValueError):
        return None
    moment = time.time() if now is None else now
    if moment > end:
        return CertificateExpired(f"our certificate ({files.cert}) expired on {decoded['notAfter']}")
    if moment < start:
        return CertificateNotYetValid(
            f"our certificate ({files.cert}) is not valid before {decoded['notBefore']}"
        )
    return None


def refused_by_peer(where: str) -> TlsError:
    """The typed error for a server that ended the connection right after the TLS handshake,
    before its first word: it refused our certificate; its dates say why, else its CA."""
    files = from_env()
    problem = own_certificate_problem(files) if files else None
    if problem is not None:
        return type(problem)(f"TLS with {where}: the server refused us: {problem}")
    return CertificateRefused(
        f"TLS with {where}: the server ended the connection after the handshake: it does not accept our "
        "certificate (signed by a CA it does not trust?)"
    )


def why_refused(host: str, port: int, timeout_s: float = 1.0) -> TlsError | None:
    """Why a TLS server at ``host:port`` would not have this process, asked again: a handshake
    with our own certificate, then a wait for the server's first word. Under TLS 1.3 a server
    judges a client's certificate after the handshake, and its alert may come after the client's
    first write already failed on the closed connection ("EOF occurred in violation of
    protocol"): the alert read here names the cause. None: it accepts us (the failure was
    something else)."""
    context = process_context(server=False)
    if context is None:
        return None
    where = f"{host}:{port}"
    try:
        with (
            socket.create_connection((host, port), timeout=timeout_s) as raw,
            context.wrap_socket(raw, server_hostname=host) as tls_socket,
        ):
            ended = tls_socket.recv(1) == b""
    except TimeoutError:
        return None  # it waits for our command: it took our certificate
    except ssl.SSLError as exc:
        return explain(exc, where)
    except OSError:
        return None
    return refused_by_peer(where) if ended else None


def speaks_tls(host: str, port: int, timeout_s: float = 1.0) -> bool:
    """Whether a TLS server answers at ``host:port`` (its certificate unchecked: only to tell a
    client without TLS why a server says nothing to it)."""
    probe = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    probe.check_hostname = False
    probe.verify_mode = ssl.CERT_NONE
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as raw, probe.wrap_socket(raw):
            return True
    except ssl.SSLError as exc:
        return "ALERT" in str(exc).upper()  # it answered in TLS: a refusal (our missing certificate)
    except OSError:
        return False
