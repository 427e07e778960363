"""Throwaway TLS material made with the `openssl` command: a CA, a server certificate for
127.0.0.1 (SAN IP:127.0.0.1, DNS:localhost), a client certificate, and a second CA that
signed none of them (the "wrong CA"). EC P-256 keys: fast to generate."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

OPENSSL_MISSING = "the openssl command-line tool is not installed; TLS tests need it"


@dataclass(frozen=True)
class Certs:
    ca: Path
    ca_key: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    wrong_ca: Path
    client_cn: str = "shoal-tester"


def have_openssl() -> bool:
    return shutil.which("openssl") is not None


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def _ca(directory: Path, name: str) -> tuple[Path, Path]:
    cert, key = directory / f"{name}.crt", directory / f"{name}.key"
    _openssl(
        "req", "-x509", "-new", "-nodes", "-newkey", "ec", "-pkeyopt",
        "ec_paramgen_curve:prime256v1", "-keyout", key.name, "-out", cert.name,
        "-days", "2", "-subj", f"/CN={name}",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        "-addext", "subjectKeyIdentifier=hash",
        cwd=directory,
    )  # fmt: skip
    return cert, key


def _leaf(
    directory: Path, name: str, subject: str, extensions: str, ca: tuple[Path, Path]
) -> tuple[Path, Path]:
    cert, key, csr = (directory / f"{name}.{ext}" for ext in ("crt", "key", "csr"))
    ext = directory / f"{name}.ext"
    ext.write_text(
        "basicConstraints=CA:FALSE\n"
        "keyUsage=critical,digitalSignature,keyEncipherment\n"
        "subjectKeyIdentifier=hash\n"
        "authorityKeyIdentifier=keyid,issuer\n" + extensions
    )
    _openssl(
        "req", "-new", "-nodes", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
        "-keyout", key.name, "-out", csr.name, "-subj", subject,
        cwd=directory,
    )  # fmt: skip
    _openssl(
        "x509", "-req", "-in", csr.name, "-CA", str(ca[0]), "-CAkey", str(ca[1]),
        "-CAcreateserial", "-out", cert.name, "-days", "2", "-extfile", ext.name,
        cwd=directory,
    )  # fmt: skip
    return cert, key


def make_certs(directory: Path) -> Certs:
    directory.mkdir(parents=True, exist_ok=True)
    ca = _ca(directory, "ca")
    wrong_ca, _ = _ca(directory, "wrong-ca")
    server = _leaf(
        directory,
        "server",
        "/CN=127.0.0.1",
        "extendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n",
        ca,
    )
    client = _leaf(
        directory,
        "client",
        "/O=system:masters/CN=shoal-tester",
        "extendedKeyUsage=clientAuth\n",
        ca,
    )
    return Certs(ca[0], ca[1], server[0], server[1], client[0], client[1], wrong_ca)
