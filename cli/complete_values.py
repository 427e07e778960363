"""Values the shell completions offer that only this machine knows: allocation ids, configured
driver instances, image names.

    python -P -m cli.complete_values [--home DIR] [--config FILE] [--out DIR] ids|drivers|images

The scripts in completions/ run this with shoal's own interpreter at every TAB, so it reads
the ledger with sqlite3 and the config with tomllib and imports nothing of the CLI (no typer,
rich, click, httpx, yaml): a TAB must not wait for what `shoal` itself loads. It never writes
(no ledger is created, no file is chmod-ed), prints names only (never a config value, which
may be a secret) and, whatever goes wrong, prints nothing and exits 0: a completion is a
suggestion, and an error or a traceback would land in the middle of the user's command line.
"""

from __future__ import annotations

import os
import re
import sqlite3
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from drivers.paths import ledger_file
from providers.core.env import ENV_CONFIG, ENV_HOME
from providers.core.settings import Paths

# The statuses `shoal status` lists without --all (drivers.ledger.book.NOT_ENDED; a test keeps
# the two equal). Importing the ledger module would pull the driver machinery into a TAB.
NOT_ENDED = (
    "ALLOCATING", "ALLOCATED", "FREEING", "ORPHANED", "GONE", "RESERVED", "EXPIRED", "EXITED"
)  # fmt: skip
# What a value may contain to be offered: shells expand or split on anything else (`$(...)`,
# quotes, spaces), and no id, instance or image name shoal makes needs more than this.
_OFFERABLE = re.compile(r"^[A-Za-z0-9_.+~@%,=/-]+$")
# A ledger another shoal holds locked is skipped rather than waited for.
_LEDGER_TIMEOUT_SECONDS = 0.2


@dataclass(frozen=True)
class Request:
    kind: str
    home: str | None = None
    config: str | None = None
    out: str | None = None

    def paths(self, environ: Mapping[str, str]) -> Paths:
        """Where shoal itself would look: --home and --config win over SHOAL_HOME and
        SHOAL_CONFIG, as they do for the command being completed."""
        env = dict(environ)
        if self.home:
            env[ENV_HOME] = os.path.expanduser(self.home)  # the shell left `~` as typed
        if self.config:
            env[ENV_CONFIG] = os.path.expanduser(self.config)
        return Paths.from_env(env)


def parse(argv: list[str]) -> Request:
    """`[--home DIR] [--config FILE] [--out DIR] KIND`; ValueError on anything else."""
    named: dict[str, str] = {}
    kind = None
    rest = list(argv)
    while rest:
        word = rest.pop(0)
        if word in ("--home", "--config", "--out") and rest:
            named[word[2:]] = rest.pop(0)
        elif kind is None and word in VALUES:
            kind = word
        else:
            raise ValueError(f"unexpected {word!r}")
    if kind is None:
        raise ValueError("no kind")
    return Request(kind, named.get("home"), named.get("config"), named.get("out"))


def _config(paths: Paths) -> dict[str, Any]:
    try:
        data = paths.config_file.read_bytes()
    except FileNotFoundError:
        return {}
    import tomllib

    return tomllib.loads(data.decode())


def allocation_ids(request: Request, paths: Paths) -> list[str]:
    """Allocations that have not ended: the ones `free`, `status` and `task` are for."""
    ledger = ledger_file(paths)
    if not ledger.is_file():
        return []
    uri = ledger.absolute().as_uri()
    marks = ", ".join("?" for _ in NOT_ENDED)
    query = f"SELECT id FROM allocations WHERE status IN ({marks}) ORDER BY id"
    # A TAB leaves no trace: with no -wal holding changes the main file lacks, the file
    # alone is read (`immutable`: no -wal or -shm is made, no lock taken); otherwise a shoal
    # is writing or died mid-write, its -shm is there, and a read-only connection sees it.
    wal = ledger.with_name(ledger.name + "-wal")
    modes = ["mode=ro", "immutable=1"]
    if not (wal.exists() and wal.stat().st_size > 0):
        modes.reverse()
    for mode in modes:
        try:
            conn = sqlite3.connect(f"{uri}?{mode}", uri=True, timeout=_LEDGER_TIMEOUT_SECONDS)
            try:
                return [str(row[0]) for row in conn.execute(query, NOT_ENDED)]
            finally:
                conn.close()
        except sqlite3.Error:
            continue
    return []


def driver_instances(request: Request, paths: Paths) -> list[str]:
    """`kind/instance` names of the config's [drivers] tables, in both spellings the config
    takes ([drivers."test/dev"] and [drivers.test.dev]); the built-in kinds are in the
    scripts themselves."""
    table = _config(paths).get("drivers")
    if not isinstance(table, dict):
        return []
    names: list[str] = []
    for key, value in table.items():
        if not isinstance(value, dict):
            continue
        if "/" in key:
            names.append(key)
            continue
        names += [f"{key}/{inst}" for inst, cfg in value.items() if isinstance(cfg, dict)]
    return names


def image_names(request: Request, paths: Paths) -> list[str]:
    """What `image rm` takes, as `shoal image list` finds it: NAME-VERSION directories and
    registry images by digest (`sha256-HEX`: a reference's ':' is no word a shell completes
    safely), in --out, else SHOAL_IMAGE_DIR, else the config's [image] dir, else
    DATA/images."""
    if request.out:
        directory = Path(os.path.expanduser(request.out))
    elif os.environ.get("SHOAL_IMAGE_DIR"):
        directory = Path(os.path.expanduser(os.environ["SHOAL_IMAGE_DIR"]))
    else:
        section = _config(paths).get("image")
        configured = section.get("dir") if isinstance(section, dict) else None
        directory = (
            Path(configured).expanduser()
            if isinstance(configured, str) and configured
            else paths.data_dir / "images"
        )
    if not directory.is_dir():
        return []
    names = {
        entry.name
        for entry in directory.iterdir()
        if not entry.name.startswith(".") and entry.is_dir() and entry.name not in ("oci", "blobs")
    }
    oci = directory / "oci"
    if oci.is_dir():
        names.update(
            entry.name
            for entry in oci.iterdir()
            if entry.name.startswith(("sha256-", "sha512-")) and (entry / "rootfs").is_dir()
        )
    return sorted(names)


VALUES: dict[str, Callable[[Request, Paths], list[str]]] = {
    "ids": allocation_ids,
    "drivers": driver_instances,
    "images": image_names,
}


def offerable(values: Iterable[str]) -> list[str]:
    return [v for v in dict.fromkeys(values) if _OFFERABLE.match(v)]


def main(argv: list[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    # Any failure (a broken config, a damaged ledger, a closed pipe) is silence: see the
    # module docstring.
    try:
        request = parse(sys.argv[1:] if argv is None else argv)
        paths = request.paths(os.environ if environ is None else environ)
        values = offerable(VALUES[request.kind](request, paths))
        sys.stdout.write("".join(f"{value}\n" for value in values))
        sys.stdout.flush()
    except Exception:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
