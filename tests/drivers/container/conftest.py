"""A real Podman serving the Docker-compatible API on a socket of its own, for the whole session.

The helpers (no pytest in them) are shared with benchmarks/container.py. Podman keeps its
default storage, so everything a session makes is named with its own random token and only
that is removed at the end: images by name, containers by the shoal label minus the ones that
were there before the session began.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import subprocess
import tarfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from importlib.util import find_spec
from pathlib import Path

# Without these Podman 4.3 fails on these machines: crun is missing and the default ulimits
# exceed what the kernel lets a container raise to.
CONTAINERS_CONF = """\
[containers]
default_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]
[engine]
runtime = "runc"
"""
BUSYBOX_APPLETS = ("sh", "sleep", "true", "echo", "cat", "ls")
MANAGED = "dev.shoal.managed-by=shoal"
START_TIMEOUT = 30.0


class EngineUnavailable(Exception):
    """Podman is missing or its service did not come up; the message says why."""


def find_busybox() -> Path | None:
    for candidate in (shutil.which("busybox"), "/bin/busybox", "/usr/bin/busybox"):
        if candidate and Path(candidate).is_file():
            return Path(candidate).resolve()
    return None


def busybox_rootfs_tar(target: Path) -> Path:
    """A root filesystem tar with a static busybox as bin/busybox and its applets as links."""
    busybox = find_busybox()
    if busybox is None:
        raise EngineUnavailable("busybox is not installed (apt-get install busybox-static)")
    with tarfile.open(target, "w") as tar:
        for directory in ("bin", "tmp"):
            info = tarfile.TarInfo(directory)
            info.type, info.mode = tarfile.DIRTYPE, 0o1777 if directory == "tmp" else 0o755
            tar.addfile(info)
        tar.add(busybox, arcname="bin/busybox", recursive=False)
        for applet in BUSYBOX_APPLETS:
            info = tarfile.TarInfo(f"bin/{applet}")
            info.type, info.linkname, info.mode = tarfile.SYMTYPE, "busybox", 0o777
            tar.addfile(info)
    return target


def _ping(sock: Path) -> bool:
    import http.client
    import socket

    class UnixConnection(http.client.HTTPConnection):
        def connect(self) -> None:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.settimeout(2)
            self.sock.connect(str(sock))

    try:
        conn = UnixConnection("engine", timeout=2)
        conn.request("GET", "/v1.41/_ping")
        ok = conn.getresponse().status == 200
        conn.close()
        return ok
    except OSError:
        return False


@dataclass
class Podman:
    """One `podman system service` on `sock`, with the env that points podman and shoal at it."""

    binary: str
    workdir: Path
    token: str = field(default_factory=lambda: secrets.token_hex(4))
    proc: subprocess.Popen[bytes] | None = None

    @property
    def sock(self) -> Path:
        return self.workdir / "podman.sock"

    @property
    def conf(self) -> Path:
        return self.workdir / "containers.conf"

    @property
    def image(self) -> str:
        return f"shoal-test-busybox:{self.token}"

    @property
    def env(self) -> dict[str, str]:
        """For shoal (DOCKER_HOST) and for the podman CLI (CONTAINERS_CONF)."""
        return {"DOCKER_HOST": f"unix://{self.sock}", "CONTAINERS_CONF": str(self.conf)}

    def run(self, *args: str, check: bool = True, timeout: float = 120) -> str:
        done = subprocess.run(
            [self.binary, *args],
            env={**os.environ, **self.env},
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check and done.returncode != 0:
            raise RuntimeError(f"podman {' '.join(args)}: {done.stderr.strip()}")
        return done.stdout

    def start(self) -> None:
        """Serve the API on `sock`; bounded wait for /_ping, else EngineUnavailable."""
        self.conf.write_text(CONTAINERS_CONF)
        self.sock.unlink(missing_ok=True)
        log = (self.workdir / "service.log").open("ab")
        self.proc = subprocess.Popen(
            [self.binary, "system", "service", "--time=0", f"unix://{self.sock}"],
            env={**os.environ, **self.env},
            stdout=log,
            stderr=log,
            start_new_session=True,  # a Ctrl-C at the terminal must not kill it mid-teardown
        )
        log.close()
        deadline = time.monotonic() + START_TIMEOUT
        while not _ping(self.sock):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                tail = (self.workdir / "service.log").read_text(errors="replace")[-2000:]
                raise EngineUnavailable(f"podman system service did not start: {tail.strip()}")
            time.sleep(0.1)

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(15)
        self.proc = None

    def import_busybox(self) -> str:
        tar = busybox_rootfs_tar(self.workdir / "rootfs.tar")
        self.run("import", str(tar), self.image)
        return self.image

    def shoal_containers(self) -> set[str]:
        out = self.run("ps", "-a", "--no-trunc", "--filter", f"label={MANAGED}", "-q")
        return set(out.split())

    def cleanup(self, keep_containers: set[str]) -> None:
        """Remove the shoal containers made since `keep_containers` was taken, and every image
        whose name carries this session's token."""
        with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
            ours = self.shoal_containers() - keep_containers
            if ours:
                self.run("rm", "-f", "-v", "-t", "0", *sorted(ours), check=False)
        with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired, ValueError):
            listed = json.loads(self.run("images", "--format", "json") or "[]")
            names = {n for image in listed for n in image.get("Names") or [] if self.token in n}
            if names:
                self.run("rmi", "-f", *sorted(names), check=False)


def start_podman(workdir: Path) -> Podman:
    """A started service with the busybox image imported; EngineUnavailable says why not."""
    binary = shutil.which("podman")
    if binary is None:
        raise EngineUnavailable("podman is not installed (apt-get install podman runc)")
    podman = Podman(binary, workdir)
    podman.start()
    try:
        podman.import_busybox()
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        podman.stop()
        raise EngineUnavailable(f"could not import the busybox image: {exc}") from None
    return podman


# benchmarks/container.py imports the helpers above from an install that has no pytest.
if find_spec("pytest") is not None:
    import pytest

    from tests.conftest import Run

    @pytest.fixture(scope="session")
    def podman_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Podman]:
        """The session's Podman; every test using it is skipped with the reason when none starts."""
        # A short path: unix socket paths are limited to 107 bytes.
        workdir = Path(tmp_path_factory.mktemp("podman"))
        if len(str(workdir)) > 80:
            import tempfile

            workdir = Path(tempfile.mkdtemp(prefix="shoal-podman-"))
        try:
            podman = start_podman(workdir)
        except EngineUnavailable as exc:
            pytest.skip(f"no container engine for the engine tests: {exc}")
        before = podman.shoal_containers()
        try:
            yield podman
        finally:
            # The restart test may have left the service stopped: cleanup needs the CLI only,
            # which reads the same storage.
            podman.cleanup(before)
            podman.stop()

    @pytest.fixture
    def shoal(
        cli: Callable[..., Run],
        podman_engine: Podman,
        write_config: Callable[[str], Path],
        request: pytest.FixtureRequest,
    ) -> Callable[..., Run]:
        """`shoal ARGS` pointed at the session's Podman, with the test module's CONFIG."""
        write_config(request.module.CONFIG)

        def run(*args: str, env: dict[str, str] | None = None) -> Run:
            return cli(*args, env={**podman_engine.env, **(env or {})})

        return run
