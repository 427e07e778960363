"""TLS as the kubeconfig says: the context a connection's requests use, and a TLS failure
said as the kubeconfig's to fix.

Only the cluster's CA is trusted when one is given (`certificate-authority(-data)`, the
system roots without one), or nothing is checked (`insecure-skip-tls-verify`); client
certificates are loaded from their files, or from `*-data` (and an exec plugin's answer)
through 0600 temporary files that are removed once loaded.
"""

from __future__ import annotations

import os
import shutil
import ssl
import tempfile
from collections.abc import Callable
from pathlib import Path

from providers.core.errors import (
    ConfigError,
    CredentialsError,
    ProviderUnreachableError,
    ShoalError,
)
from providers.kubernetes.connection import Connection


def tls_failure(
    exc: Exception,
    conn: Connection,
    where: str,
    has_exec_cert: bool,
    scrub: Callable[[str], str],
) -> ShoalError | None:
    """A TLS failure reaching `where`, which retrying cannot fix, as a clear error; None for
    other faults. `scrub` takes secrets out of what the TLS library says."""
    cause: BaseException | None = exc
    while cause is not None and not isinstance(cause, ssl.SSLError):
        cause = cause.__cause__ or cause.__context__
    if isinstance(cause, ssl.SSLCertVerificationError):
        detail = cause.verify_message or "certificate verify failed"
        if "hostname" in detail.lower() or "ip address" in detail.lower():
            fix = "set tls-server-name (or the server URL) to a name the certificate has"
        else:
            fix = "check certificate-authority(-data), the CA to trust,"
        return ProviderUnreachableError(
            f"kubernetes: TLS verification of {where} failed ({detail}); {fix} "
            f"of cluster {conn.cluster!r} in {conn.source}"
        )
    if cause is None:
        return None
    text = str(cause).upper()
    if "CERTIFICATE_REQUIRED" in text or "BAD_CERTIFICATE" in text or "UNKNOWN_CA" in text:
        has_cert = conn.client_cert_data or conn.client_cert_file or has_exec_cert
        what = "refused the TLS client certificate" if has_cert else "requires a client cert"
        return CredentialsError(
            f"kubernetes: {where} {what}; set a valid client-certificate and "
            f"client-key for user {conn.user!r} in {conn.source}"
        )
    return ProviderUnreachableError(
        f"kubernetes: TLS handshake with {where} failed "
        f"({scrub(cause.reason or str(cause))[:120]}); check the server URL and CA"
    )


def ssl_context(
    connection: Connection, exec_cert: tuple[bytes, bytes] | None = None
) -> ssl.SSLContext:
    """The TLS context kubectl would use: the cluster's CA only (system roots without one)
    and the user's client certificate."""
    conn = connection
    where = f"cluster {conn.cluster!r} in {conn.source}"
    if conn.insecure_skip_tls_verify:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    else:
        try:
            if conn.ca_data is not None:
                ctx = ssl.create_default_context(cadata=conn.ca_data.decode("ascii", "replace"))
            elif conn.ca_file is not None:
                ctx = ssl.create_default_context(cafile=str(conn.ca_file))
            else:
                ctx = ssl.create_default_context()
        except (ssl.SSLError, OSError, ValueError):
            field = "certificate-authority-data" if conn.ca_data else "certificate-authority"
            raise ConfigError(
                f"kubernetes: {field} of {where} is not a readable PEM certificate"
            ) from None
    user = f"user {conn.user!r} in {conn.source}"
    if exec_cert is not None:
        _load_cert_data(ctx, exec_cert[0], exec_cert[1], f"the exec plugin's certificate of {user}")
    elif conn.client_cert_data is not None or conn.client_key_data is not None:
        cert = conn.client_cert_data or _read(conn.client_cert_file)
        key = conn.client_key_data or _read(conn.client_key_file)
        _load_cert_data(ctx, cert, key, f"client-certificate/client-key of {user}")
    elif conn.client_cert_file is not None and conn.client_key_file is not None:
        try:
            ctx.load_cert_chain(str(conn.client_cert_file), str(conn.client_key_file))
        except (ssl.SSLError, OSError):
            raise ConfigError(
                f"kubernetes: client-certificate/client-key of {user} are not a matching PEM "
                "certificate and key"
            ) from None
    return ctx


def _read(path: Path | None) -> bytes:
    if path is None:
        return b""
    try:
        return path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"kubernetes: cannot read {path} ({exc.strerror})") from None


def _load_cert_data(ctx: ssl.SSLContext, cert: bytes, key: bytes, what: str) -> None:
    """load_cert_chain only reads files: write both to a private directory (0700, files
    0600), load, and remove them at once."""
    directory = tempfile.mkdtemp(prefix="shoal-k8s-")
    try:
        paths = []
        for name, data in (("cert.pem", cert), ("key.pem", key)):
            path = os.path.join(directory, name)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            paths.append(path)
        try:
            ctx.load_cert_chain(paths[0], paths[1])
        except ssl.SSLError:
            raise ConfigError(
                f"kubernetes: {what} are not a matching PEM certificate and key"
            ) from None
    finally:
        shutil.rmtree(directory, ignore_errors=True)
