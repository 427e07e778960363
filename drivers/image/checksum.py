"""Checksums: the `<algo>:<hex>` form, streaming hashers, and the ones servers announce."""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass

from providers.core.errors import UsageError

ALGORITHMS = {"md5": 32, "sha1": 40, "sha256": 64, "sha512": 128}
WEAK = {"md5", "sha1"}
DEFAULT = "sha256"
# Artifactory and Nexus announce hex digests in these headers.
_HEX_HEADERS = {
    "x-checksum-sha256": "sha256",
    "x-checksum-sha512": "sha512",
    "x-checksum-sha1": "sha1",
    "x-checksum-md5": "md5",
}
# RFC 3230 Digest and RFC 9530 Repr-Digest name algorithms like this.
_DIGEST_NAMES = {"sha-256": "sha256", "sha-512": "sha512", "sha": "sha1", "md5": "md5"}


@dataclass(frozen=True)
class Sum:
    algo: str
    hex: str

    def __str__(self) -> str:
        return f"{self.algo}:{self.hex}"


def parse(text: str) -> Sum:
    algo, sep, digest = text.strip().partition(":")
    algo = algo.lower()
    digest = digest.lower()
    if not sep or algo not in ALGORITHMS:
        raise UsageError(f"--sum {text!r}: use ALGO:HEX with ALGO one of {', '.join(ALGORITHMS)}")
    if len(digest) != ALGORITHMS[algo] or not re.fullmatch(r"[0-9a-f]+", digest):
        raise UsageError(f"--sum {text!r}: a {algo} digest is {ALGORITHMS[algo]} hex characters")
    return Sum(algo, digest)


def announced(headers: Mapping[str, str]) -> list[Sum]:
    """Every checksum the response headers announce for the whole file."""
    found: list[Sum] = []
    lower = {k.lower(): v for k, v in headers.items()}
    for header, algo in _HEX_HEADERS.items():
        value = lower.get(header, "").strip().lower()
        if value and re.fullmatch(r"[0-9a-f]+", value) and len(value) == ALGORITHMS[algo]:
            found.append(Sum(algo, value))
    for header in ("repr-digest", "digest"):
        for item in lower.get(header, "").split(","):
            name, sep, value = item.strip().partition("=")
            digest_algo = _DIGEST_NAMES.get(name.strip().lower())
            if not sep or digest_algo is None:
                continue
            try:
                raw = base64.b64decode(value.strip().strip(":"), validate=True)
            except (binascii.Error, ValueError):
                continue
            if len(raw) * 2 == ALGORITHMS[digest_algo]:
                found.append(Sum(digest_algo, raw.hex()))
    return found


def new_hasher(algo: str) -> hashlib._Hash:
    return hashlib.new(algo)
