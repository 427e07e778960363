"""The Google Cloud CLI pointed at the Compute Engine stand-in, and kept off the network.

`Gcloud(endpoint, token)` writes a configuration of its own (CLOUDSDK_CONFIG in a
temporary directory): `api_endpoint_overrides/compute` = the stand-in, the access token in
a file (`auth/access_token_file`), prompts, usage reporting, update checks, surveys and the
GCE metadata probe off (its cache file says "not on GCE"). The environment sends any
other HTTP(S) to a dead loopback port (HTTP(S)_PROXY, NO_PROXY for 127.0.0.1) and the
metadata server (GCE_METADATA_ROOT, GCE_METADATA_HOST) to one too, so a request
gcloud would make elsewhere fails here instead of leaving the machine; `run(...,
log_http=True)` returns the URIs gcloud asked for, for a test to check they all went to
the stand-in. gcloud's --log-http redacts the token (log_http_redact_token, its default).
Used by tests/drivers/gcp/test_standin.py and the gcp driver benchmark.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

DEAD = "http://127.0.0.1:9"  # the discard port: nothing listens, a connection is refused
_URI = re.compile(r"^uri: (\S+)", re.MULTILINE)


def gcloud_path() -> str | None:
    return shutil.which("gcloud")


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str
    uris: list[str]


class Gcloud:
    def __init__(self, endpoint: str, token: str, project: str, *, root: Path | None = None):
        found = gcloud_path()
        if found is None:
            raise RuntimeError("gcloud is not on PATH")
        self.binary = found
        self.endpoint = endpoint
        self.root = Path(root or tempfile.mkdtemp(prefix="shoal-gcloud-"))
        self.config = self.root / "config"
        self.token_file = self.root / "token"
        self.token_file.write_text(token)
        self.token_file.chmod(0o600)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CLOUDSDK_", "GOOGLE_"))}
        env.update(
            {
                "CLOUDSDK_CONFIG": str(self.config),
                "CLOUDSDK_CORE_DISABLE_PROMPTS": "1",
                "CLOUDSDK_CORE_PROJECT": project,
                "HTTP_PROXY": DEAD,
                "HTTPS_PROXY": DEAD,
                "http_proxy": DEAD,
                "https_proxy": DEAD,
                "NO_PROXY": "127.0.0.1,localhost",
                "no_proxy": "127.0.0.1,localhost",
                "NO_GCE_CHECK": "true",
                "GCE_METADATA_HOST": "127.0.0.1:9",
                "GCE_METADATA_IP": "127.0.0.1:9",
                "GCE_METADATA_ROOT": "127.0.0.1:9",
            }
        )
        self.env = env
        # The configuration as `gcloud config set` writes it (one INI file per named
        # configuration), written directly: six `config set` runs cost seconds.
        properties = {
            "core": {
                "disable_usage_reporting": "true",
                "check_gce_metadata": "false",
                "project": project,
            },
            "component_manager": {"disable_update_check": "true"},
            "survey": {"disable_prompts": "true"},
            "api_endpoint_overrides": {"compute": endpoint},
            "auth": {"access_token_file": str(self.token_file)},
        }
        (self.config / "configurations").mkdir(parents=True, exist_ok=True)
        (self.config / "active_config").write_text("default")
        (self.config / "configurations" / "config_default").write_text(
            "".join(
                f"[{section}]\n" + "".join(f"{k} = {v}\n" for k, v in values.items()) + "\n"
                for section, values in properties.items()
            )
        )
        # gcloud asks the metadata server whether it runs on GCE (for its user agent) unless
        # this cache says it does not; GCE_METADATA_ROOT sends a probe to a dead port anyway.
        (self.config / "gce").write_text("False")

    def run(self, *args: str, log_http: bool = False, timeout: float = 120) -> Result:
        argv = [self.binary, *args, *(["--log-http"] if log_http else [])]
        done = subprocess.run(
            argv,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            check=False,
        )
        return Result(done.returncode, done.stdout, done.stderr, _URI.findall(done.stderr))

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
