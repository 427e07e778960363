"""A real registry on loopback: Debian's `docker-registry` (CNCF distribution 2.8) as a child
process, for the tests and the benchmark.

`Registry.start(mode)` writes a config into a fresh /tmp directory (filesystem storage there,
`http.addr` 127.0.0.1 port 0: the registry picks a free port and says which in its log, so no
probed port can be taken in between), starts `docker-registry serve` with its output in
`registry.log`, and waits until /v2/ answers. Modes:

- `plain`: no auth, plain HTTP;
- `basic`: htpasswd basic auth (bcrypt entries made by `htpasswd -B` from apache2-utils);
- `tls`: HTTPS with a certificate for 127.0.0.1/::1/localhost from a throw-away CA
  (`ca_file`, `cert_dir` for skopeo/podman, `env` = SSL_CERT_FILE for httpx and shoal);
- `token`: `auth: token:` in front of a `TokenServer` of the tests' own (`token`).

Auth modes have a user who may push (`username`/`password`, `creds` = "user:password") and,
in token mode, a `reader` who may only pull (`users` has both). `stop()` kills the process and
deletes the directory (also at exit: a benchmark that forgets, a session that errors).

`Unavailable` says why no registry can be had (a binary missing); the fixture skips with it.
A registry that is installed but fails to start is an error, not a skip.

Imported by benchmarks/ from an install without pytest: nothing here imports pytest.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from .pki import Authority
from .tokens import TokenServer

HOST = "127.0.0.1"
MODES = ("plain", "basic", "tls", "token")
REGISTRY_BIN = "docker-registry"
START_TIMEOUT = 30.0
STOP_TIMEOUT = 5.0
USER = "shoal"
READER = "reader"
REALM = "shoal-test-registry"
_LISTENING = re.compile(r"listening on (?:\[[^\]]*\]|[0-9.]+):(\d+)")
_INSTALL = {
    "docker-registry": "apt-get install docker-registry",
    "skopeo": "apt-get install skopeo",
    "htpasswd": "apt-get install apache2-utils",
}


class Unavailable(Exception):
    """No registry can be had here; the message says why (a test skips with it)."""


class StartFailed(RuntimeError):
    """The registry is installed but did not come up; the message quotes its log."""


def find_tool(name: str) -> str:
    """The path of `name` on PATH (or /usr/sbin, /usr/bin); Unavailable says how to get it."""
    found = shutil.which(name)
    if found is None:
        for folder in ("/usr/bin", "/usr/sbin"):
            if os.access(f"{folder}/{name}", os.X_OK):
                return f"{folder}/{name}"
        raise Unavailable(f"{name} is not installed: {_INSTALL.get(name, 'install ' + name)}")
    return found


def htpasswd_line(user: str, password: str) -> str:
    """A bcrypt htpasswd entry (distribution accepts bcrypt only); the password goes on stdin,
    never on a command line another process could read."""
    done = subprocess.run(
        [find_tool("htpasswd"), "-niB", user],
        input=password + "\n",
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    line = done.stdout.strip()
    if done.returncode != 0 or not line.startswith(f"{user}:$2"):
        raise StartFailed(f"htpasswd -B failed ({done.returncode}): {done.stderr.strip()}")
    return line


class Registry:
    """A running registry. `host` is "127.0.0.1:PORT", `url` its base URL; `ref(name, tag)`
    an image reference on it."""

    def __init__(self, mode: str, dir_: Path) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
        self.mode = mode
        self.dir = dir_
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.users: dict[str, str] = {}
        self.username: str | None = None
        self.password: str | None = None
        self.ca_file: Path | None = None
        self.cert_dir: Path | None = None
        self.token: TokenServer | None = None
        self._stopped = False

    # -- making one ---------------------------------------------------------------------------

    @classmethod
    def start(cls, mode: str = "plain", **token_options: Any) -> Registry:
        """A started registry in `mode`; `token_options` go to `TokenServer` (token mode:
        expires_in, lifetime, anonymous_pull). Unavailable when a binary is missing."""
        binary = find_tool(REGISTRY_BIN)
        if mode == "basic":
            find_tool("htpasswd")
        registry = cls(mode, Path(tempfile.mkdtemp(prefix="shoal-registry.", dir="/tmp")))
        try:
            registry._start(binary, token_options)
        except BaseException:
            registry.stop()
            raise
        atexit.register(registry.stop)
        return registry

    def _start(self, binary: str, token_options: dict[str, Any]) -> None:
        config: dict[str, Any] = {
            "version": "0.1",
            "log": {"level": "info", "formatter": "text", "accesslog": {"disabled": False}},
            "storage": {
                "filesystem": {"rootdirectory": str(self.dir / "data")},
                "delete": {"enabled": True},
                # A background sweep per registry every few minutes is noise for a test run.
                "maintenance": {"uploadpurging": {"enabled": False}},
            },
            "http": {"addr": f"{HOST}:0", "secret": secrets.token_hex(16)},
        }
        if self.mode in ("basic", "token"):
            self.username, self.password = USER, secrets.token_urlsafe(16)
            self.users[USER] = self.password
        if self.mode == "basic":
            htpasswd = self.dir / "htpasswd"
            htpasswd.write_text(htpasswd_line(USER, self.users[USER]) + "\n")
            config["auth"] = {"htpasswd": {"realm": REALM, "path": str(htpasswd)}}
        elif self.mode == "tls":
            authority = Authority()
            leaf = authority.issue_server()
            self.ca_file = self.dir / "ca.pem"
            self.ca_file.write_bytes(authority.cert_pem)
            # containers/image reads *.crt in a cert dir as CAs (skopeo --dest-cert-dir).
            self.cert_dir = self.dir / "certs.d"
            self.cert_dir.mkdir()
            (self.cert_dir / "ca.crt").write_bytes(authority.cert_pem)
            (self.dir / "server.pem").write_bytes(leaf.cert_pem)
            (self.dir / "server.key").write_bytes(leaf.key_pem)
            (self.dir / "server.key").chmod(0o600)
            config["http"]["tls"] = {
                "certificate": str(self.dir / "server.pem"),
                "key": str(self.dir / "server.key"),
            }
        elif self.mode == "token":
            self.users[READER] = secrets.token_urlsafe(16)
            self.token = TokenServer(self.users, readers=[READER], **token_options).start()
            bundle = self.dir / "token-bundle.pem"
            bundle.write_bytes(self.token.key.cert_pem)
            config["auth"] = {
                "token": {
                    "realm": self.token.realm,
                    "service": self.token.service,
                    "issuer": self.token.issuer,
                    "rootcertbundle": str(bundle),
                }
            }
        path = self.dir / "config.yml"
        path.write_text(json.dumps(config, indent=2) + "\n")  # JSON is YAML, and quotes safely
        with (self.dir / "registry.log").open("wb") as log:
            self.process = subprocess.Popen(
                [binary, "serve", str(path)],
                cwd=self.dir,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a ^C to the tests is not the registry's to see
            )
        self._wait_ready()

    def _wait_ready(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise StartFailed(
                    f"docker-registry exited with {self.process.returncode}: {self.log_tail()}"
                )
            if not self.port:
                found = _LISTENING.search(self.log())
                if found:
                    self.port = int(found.group(1))
            if self.port and self._answers():
                return
            time.sleep(0.02)
        raise StartFailed(f"docker-registry did not answer in {START_TIMEOUT:.0f} s: "
                          f"{self.log_tail()}")  # fmt: skip

    def _answers(self) -> bool:
        """/v2/ answers over HTTP (200, or 401 with auth); TLS handshakes with the CA."""
        try:
            with socket.create_connection((HOST, self.port), timeout=2) as raw:
                sock: socket.socket = raw
                if self.mode == "tls":
                    context = ssl.create_default_context(cafile=str(self.ca_file))
                    sock = context.wrap_socket(raw, server_hostname=HOST)
                sock.sendall(
                    f"GET /v2/ HTTP/1.1\r\nHost: {self.host}\r\nConnection: close\r\n\r\n".encode()
                )
                head = sock.recv(64)
        except OSError:
            return False
        return head.startswith((b"HTTP/1.1 200", b"HTTP/1.1 401"))

    # -- using it -----------------------------------------------------------------------------

    @property
    def scheme(self) -> str:
        return "https" if self.mode == "tls" else "http"

    @property
    def host(self) -> str:
        """ "127.0.0.1:PORT", the registry part of a reference."""
        return f"{HOST}:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.host}"

    def ref(self, name: str, tag: str | None = "latest", digest: str | None = None) -> str:
        """ "127.0.0.1:PORT/NAME:TAG" (or "@DIGEST")."""
        if digest:
            return f"{self.host}/{name}@{digest}"
        return f"{self.host}/{name}" + (f":{tag}" if tag else "")

    @property
    def creds(self) -> str | None:
        """ "user:password" of the user who may push (None without auth)."""
        if self.username is None or self.password is None:
            return None
        return f"{self.username}:{self.password}"

    @property
    def env(self) -> dict[str, str]:
        """What a client process needs to trust the registry (TLS: SSL_CERT_FILE, read by
        httpx's default context and so by shoal); empty otherwise."""
        return {"SSL_CERT_FILE": str(self.ca_file)} if self.ca_file is not None else {}

    def log(self) -> str:
        try:
            return (self.dir / "registry.log").read_text(errors="replace")
        except OSError:
            return ""

    def log_tail(self, chars: int = 800) -> str:
        return " ".join(self.log().split())[-chars:]

    def stop(self) -> None:
        """Kill the registry (and the token server) and delete the directory. Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        try:
            if self.process is not None and self.process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGTERM)
                try:
                    self.process.wait(timeout=STOP_TIMEOUT)
                except subprocess.TimeoutExpired:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(self.process.pid, signal.SIGKILL)
                    self.process.wait(timeout=STOP_TIMEOUT)
            if self.token is not None:
                self.token.stop()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)
            atexit.unregister(self.stop)

    def __repr__(self) -> str:  # no password in a failing assertion's output
        return f"Registry(mode={self.mode!r}, url={self.url!r})"
