"""A stand-in for the Azure CLI (`az`), written by a test into a directory it puts on PATH:
`az account get-access-token` answers as the CLI does (JSON with accessToken, expiresOn in
local time without a zone, expires_on since az 2.54, subscription, tenant, tokenType), or
fails as it does when nobody is logged in; every call is logged with its arguments. And the
CLI's profile, `azureProfile.json`, as `az login` writes it (with a byte order mark).

https://learn.microsoft.com/cli/azure/account#az-account-get-access-token
"""

from __future__ import annotations

import json
import os
import stat
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from tests.providers.azure.entraserver import TENANT, TOKEN
from tests.providers.azure.payloads import SUBSCRIPTION

NOT_LOGGED_IN = "Please run 'az login' to setup account."


def write_az(
    root: Path,
    *,
    token: str = TOKEN,
    lifetime: int = 3600,
    epoch: bool = True,
    fail: str = "",
) -> Path:
    """`root/bin/az`; returns the bin directory (for PATH). `epoch`: the answer has
    expires_on (az 2.54+), else expiresOn only; `fail`: what it says on stderr, exit 1."""
    bin_dir = root / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    expires = int(time.time()) + lifetime
    answer: dict[str, Any] = {
        "accessToken": token,
        "expiresOn": datetime.fromtimestamp(expires).strftime("%Y-%m-%d %H:%M:%S.%f"),
        "subscription": SUBSCRIPTION,
        "tenant": TENANT,
        "tokenType": "Bearer",
    }
    if epoch:
        answer["expires_on"] = expires
    script = f"""#!{sys.executable}
import json, os, sys
with open({str(root / "az.log")!r}, "a") as log:
    log.write(json.dumps({{"argv": sys.argv[1:], "dir": os.environ.get("AZURE_CONFIG_DIR"),
                          "cwd": os.getcwd()}}) + "\\n")
if {fail!r}:
    sys.stderr.write("ERROR: " + {fail!r} + "\\n")
    sys.exit(1)
if sys.argv[1:3] != ["account", "get-access-token"]:
    sys.exit(2)
print(json.dumps({answer!r}, indent=2))
"""
    az = bin_dir / "az"
    az.write_text(script)
    az.chmod(az.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return bin_dir


def calls(root: Path) -> list[dict[str, Any]]:
    log = root / "az.log"
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines()]


def account(
    subscription: str = SUBSCRIPTION,
    *,
    default: bool = False,
    name: str = "Pay-As-You-Go",
    user: str = "someone@example.com",
) -> dict[str, Any]:
    return {
        "environmentName": "AzureCloud",
        "homeTenantId": TENANT,
        "id": subscription,
        "isDefault": default,
        "managedByTenants": [],
        "name": name,
        "state": "Enabled",
        "tenantId": TENANT,
        "user": {"name": user, "type": "user"},
    }


def write_profile(directory: Path, *accounts: dict[str, Any]) -> Path:
    """azureProfile.json after `az login` (utf-8 with a byte order mark, as the CLI writes)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "azureProfile.json"
    doc = {
        "installationId": "5b9d3c2e-0000-4000-8000-000000000000",
        "subscriptions": list(accounts),
    }
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(doc).encode())
    return path


def path_with(bin_dir: Path) -> str:
    """PATH with the stand-in first (and the system's, for what it may need)."""
    return f"{bin_dir}{os.pathsep}{os.defpath}"
