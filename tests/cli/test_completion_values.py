"""Machine-local completion values: allocation ids, configured driver instances and image
names, from `cli.complete_values` as the shells run it at TAB time."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from cli import complete_values
from tests.cli.shells import bash_complete, fake_shoal, fish_complete, shell_env, zsh_complete
from tests.conftest import REPO, Run

CONFIG = """
[drivers."test/dev"]
cpu_limit = 8

[drivers.kubernetes.prod]
token = "s3cr3t-not-for-menus"
"""
KINDS = [
    "aws", "azure", "container", "docker", "ec2", "gce", "gcp", "kubernetes", "podman", "process",
    "test",
]
INSTANCES = ["test/dev", "kubernetes/prod"]


def _values(kind: str, *options: str, env: dict[str, str] | None = None) -> list[str]:
    """The helper as the shells run it: its own process, `-P`, stdout only."""
    done = subprocess.run(
        [sys.executable, "-P", "-m", "cli.complete_values", *options, kind],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 0
    assert done.stderr == ""
    return done.stdout.splitlines()


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHOAL_")}
    env.update({"PYTHONPATH": str(REPO), "SHOAL_HOME": str(home), **extra})
    return env


def _image(images: Path, dirname: str) -> None:
    """An image as `shoal image pull` leaves one: OUT/NAME-VERSION/ and its .json record."""
    (images / dirname / "rootfs").mkdir(parents=True)
    (images / f".{dirname}.json").write_text(json.dumps({"tag": "", "checksum": "sha256:00"}))


@pytest.fixture
def machine(home: Path, write_config: Callable[[str], Path], cli: Callable[..., Run]) -> list[str]:
    """A SHOAL_HOME with two live allocations made through the CLI, one freed, a config
    with [drivers."test/dev"], and one image in the images dir; the live ids."""
    write_config(CONFIG)
    ids = []
    for _ in range(3):
        run = cli("alloc", "--driver", "test", "--cpu", "1", "--ram", "1")
        assert run.exit_code == 0, run.stderr
        ids.append(run.stdout.strip())
    assert cli("free", ids[2]).exit_code == 0
    images = home / "data" / "images"
    _image(images, "ubuntu-base-22.04")
    (images / ".ubuntu-base-22.04.lock").touch()  # a pull's lock file is not an image
    listed = cli("image", "list", "--json").json()
    assert [f"{i['name']}-{i['version']}" for i in listed] == ["ubuntu-base-22.04"]
    return sorted(ids[:2])


@pytest.fixture
def env(home: Path, tmp_path: Path) -> dict[str, str]:
    fake_shoal(tmp_path / "bin")
    return shell_env(home, tmp_path / "bin")


# -- the helper --------------------------------------------------------------------------------


def test_helper_lists_live_ids_instances_and_images(home: Path, machine: list[str]) -> None:
    env = _env(home)
    assert _values("ids", env=env) == machine  # the freed one is not offered
    assert _values("drivers", env=env) == ["test/dev", "kubernetes/prod"]
    assert _values("images", env=env) == ["ubuntu-base-22.04"]


def test_helper_never_prints_config_values(home: Path, machine: list[str]) -> None:
    env = _env(home)
    said = [value for kind in complete_values.VALUES for value in _values(kind, env=env)]
    assert not [value for value in said if "s3cr3t" in value or value == "8"]


def test_home_option_wins_over_shoal_home(home: Path, machine: list[str], tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert _values("ids", env=_env(elsewhere)) == []
    assert _values("ids", "--home", str(home), env=_env(elsewhere)) == machine


def test_config_option_and_shoal_config(home: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.toml"
    other.write_text('[drivers.process.batch]\n[drivers."kubernetes/prod"]\n')
    assert _values("drivers", env=_env(home)) == []
    assert _values("drivers", env=_env(home, SHOAL_CONFIG=str(other))) == [
        "process/batch",
        "kubernetes/prod",
    ]
    assert _values("drivers", "--config", str(other), env=_env(home)) == [
        "process/batch",
        "kubernetes/prod",
    ]


def test_images_dir_from_config_and_out(home: Path, tmp_path: Path) -> None:
    configured, out = tmp_path / "configured", tmp_path / "out"
    _image(configured, "alpine-3.20")
    _image(out, "base-1")
    (home / "config.toml").write_text(f'[image]\ndir = "{configured}"\n')
    assert _values("images", env=_env(home)) == ["alpine-3.20"]
    assert _values("images", "--out", str(out), env=_env(home)) == ["base-1"]


@pytest.mark.parametrize("kind", sorted(complete_values.VALUES))
def test_nothing_to_offer_is_silence(home: Path, tmp_path: Path, kind: str) -> None:
    """No ledger, config or images dir; a home that does not exist; a config that does not
    parse; a ledger that is not SQLite: no output, no error, exit 0 (checked by _values)."""
    assert _values(kind, env=_env(home)) == []
    assert _values(kind, "--home", str(tmp_path / "missing"), env=_env(home)) == []
    assert _values(kind, env=_env(home, SHOAL_CONFIG=str(tmp_path / "missing.toml"))) == []
    (home / "config.toml").write_text("[drivers\n")
    (home / "state").mkdir()
    (home / "state" / "ledger.sqlite").write_bytes(b"not a database" * 100)
    assert _values(kind, env=_env(home)) == []


def test_bad_arguments_are_silence(home: Path) -> None:
    assert _values("nonsense", env=_env(home)) == []
    assert _values("ids", "--home", env=_env(home)) == []


def _ledger_files(state: Path) -> dict[str, bytes]:
    # The -shm is shared memory, where every reader marks what it reads: not data.
    return {p.name: p.read_bytes() for p in state.iterdir() if p.is_file()}


def test_reading_the_ledger_changes_nothing(home: Path, machine: list[str]) -> None:
    """No file made (no -wal or -shm left behind), none written, whether or not another
    connection has the ledger open."""
    state = home / "state"
    before = _ledger_files(state)
    assert _values("ids", env=_env(home)) == machine
    after = _ledger_files(state)
    assert sorted(after) == sorted(before)
    assert {k: v for k, v in after.items() if not k.endswith("-shm")} == {
        k: v for k, v in before.items() if not k.endswith("-shm")
    }


def test_changes_still_in_the_wal_are_seen(home: Path, machine: list[str]) -> None:
    """While another shoal has the ledger open, its last commits may be in the -wal only."""
    conn = sqlite3.connect(home / "state" / "ledger.sqlite", isolation_level=None)
    try:
        conn.execute("PRAGMA wal_autocheckpoint=0")
        conn.execute("UPDATE allocations SET status = 'FREED' WHERE id = ?", (machine[0],))
        assert (home / "state" / "ledger.sqlite-wal").stat().st_size > 0
        assert _values("ids", env=_env(home)) == machine[1:]
    finally:
        conn.close()


def test_only_shell_safe_values_are_offered(home: Path, machine: list[str]) -> None:
    """A value a shell would expand or split is left out, whoever wrote it into the ledger."""
    with sqlite3.connect(home / "state" / "ledger.sqlite") as conn:
        row = conn.execute("SELECT * FROM allocations WHERE id = ?", (machine[0],)).fetchone()
        for hostile in ("x$(touch pwned)", "a b", "q'uote"):
            conn.execute(
                f"INSERT INTO allocations VALUES ({', '.join('?' * len(row))})",
                (hostile, *row[1:]),
            )
    assert _values("ids", env=_env(home)) == machine


def test_not_ended_is_the_ledgers() -> None:
    from drivers.ledger.book import NOT_ENDED

    assert complete_values.NOT_ENDED == NOT_ENDED


def test_helper_imports_none_of_the_cli(home: Path, machine: list[str]) -> None:
    probe = (
        "import runpy, sys\n"
        "sys.argv = ['complete_values', 'ids']\n"
        "try:\n"
        "    runpy.run_module('cli.complete_values', run_name='__main__')\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(' '.join(sorted(sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-P", "-c", probe],
        capture_output=True,
        text=True,
        env=_env(home),
        timeout=60,
        check=True,
    )
    loaded = set(done.stdout.split())
    tops = {m.split(".")[0] for m in loaded}
    assert not tops & {"typer", "click", "rich", "httpx", "pydantic", "yaml", "platformdirs"}
    # drivers.paths names the ledger file (a constant or two); nothing else of drivers.
    light = {"drivers", "drivers.paths"}
    heavy = [m for m in loaded if m.startswith(("drivers", "cli.app", "cli.commands"))]
    assert not set(heavy) - light


def test_shoal_help_loads_no_completion_code(home: Path) -> None:
    from tests.cli.test_imports import _modules

    loaded = _modules(home, "--help")
    assert not [m for m in loaded if m.startswith(("cli.complete", "sqlite3", "tomllib"))]
    # Help is click's plain text (Examples keep their lines): Rich is for tables only.
    assert not [m for m in loaded if m.split(".")[0] == "rich"]


# -- in the shells -----------------------------------------------------------------------------


def test_bash_offers_ids_instances_and_images(env: dict[str, str], machine: list[str]) -> None:
    assert bash_complete("shoal free ", env) == machine
    assert bash_complete("shoal status te", env) == machine
    assert bash_complete("shoal task ", env) == machine
    assert bash_complete(f"shoal free {machine[0]} ", env) == machine  # free takes many
    assert bash_complete(f"shoal status {machine[0]} ", env)[0].startswith("--")  # one ID
    assert bash_complete(f"shoal task {machine[0]} ", env)[0].startswith("--")  # then NAME
    assert bash_complete("shoal free --remote kubernetes ", env) == machine
    assert bash_complete("shoal alloc --driver ", env) == [*KINDS, "test/dev", "kubernetes/prod"]
    assert bash_complete("shoal status -d te", env) == ["test", "test/dev"]
    assert bash_complete("shoal image rm ", env) == ["ubuntu-base-22.04"]
    assert "--provider" not in bash_complete("shoal free --", env)


def test_image_rm_completes_registry_images_by_digest(env: dict[str, str], home: Path) -> None:
    images = home / "data" / "images"
    _image(images, "base-1")
    (images / "blobs" / "sha256").mkdir(parents=True)  # the blob store is no image
    digest_dir = images / "oci" / ("sha256-" + "a" * 64)
    (digest_dir / "rootfs").mkdir(parents=True)
    (images / "oci" / ".sha256-bbbb.tmp-x" / "rootfs").mkdir(parents=True)  # a pull's temp
    assert _values("images", env=_env(home)) == ["base-1", digest_dir.name]
    assert bash_complete("shoal image rm ", env) == ["base-1", digest_dir.name]


def test_bash_passes_home_config_and_out_on(
    env: dict[str, str], home: Path, machine: list[str], tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env["SHOAL_HOME"] = str(elsewhere)
    assert bash_complete("shoal free ", env)[0] == "--expired"  # no ids there: the options
    assert bash_complete(f"shoal --home {home} free ", env) == machine
    other = tmp_path / "other.toml"
    other.write_text('[drivers."process/batch"]\n')
    assert "process/batch" in bash_complete(f"shoal --config {other} alloc -d ", env)
    out = tmp_path / "out"
    _image(out, "base-1")
    assert bash_complete(f"shoal image rm --out {out} ", env) == ["base-1"]


def _only_shells(tmp_path: Path) -> str:
    """A PATH with the test's bin dir and the shells, and no version manager."""
    dirs = [str(tmp_path / "bin")]
    dirs += [str(Path(found).parent) for found in map(shutil.which, ("bash", "sh")) if found]
    return os.pathsep.join(dirs)


def test_bash_finds_the_interpreter_behind_pips_long_path_launcher(
    env: dict[str, str], machine: list[str], tmp_path: Path
) -> None:
    """pip writes `#!/bin/sh` and an exec line when the interpreter's path has a space or
    is too long for #!; the scripts read the interpreter from that line."""
    spaced = tmp_path / "python with space"
    spaced.mkdir()
    # Not a symlink to the interpreter: a venv's python linked from outside the venv finds
    # no pyvenv.cfg beside it and runs as the base interpreter, without shoal's packages.
    (spaced / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    (spaced / "python").chmod(0o755)
    launcher = tmp_path / "bin" / "shoal"
    launcher.write_text(
        "#!/bin/sh\n"
        f'\'\'\'exec\' "{spaced / "python"}" "$0" "$@"\n'
        "' '''\n"
        "from cli.main import main\nmain()\n"
    )
    env["PATH"] = _only_shells(tmp_path)  # no pyenv to fall back on: the exec line it is
    assert bash_complete("shoal free ", env) == machine
    ran = subprocess.run([str(launcher), "--version"], env=env, capture_output=True, timeout=60)
    assert ran.returncode == 0  # a launcher like pip's, really


def test_through_a_version_managers_shim(
    env: dict[str, str], machine: list[str], tmp_path: Path
) -> None:
    """pyenv (asdf, mise) puts a shell-script shim on PATH; the script it runs is the one
    `pyenv which shoal` names, and that script's #! line is the interpreter."""
    real = fake_shoal(tmp_path / "versions" / "bin")
    shim, pyenv = tmp_path / "bin" / "shoal", tmp_path / "bin" / "pyenv"
    shim.write_text('#!/usr/bin/env bash\nexec pyenv exec shoal "$@"\n')
    pyenv.write_text(f'#!/bin/sh\n[ "$1 $2" = "which shoal" ] && echo "{real}"\n')
    pyenv.chmod(0o755)
    assert bash_complete("shoal free ", env) == machine
    if shutil.which("fish") is not None:
        assert sorted(fish_complete("shoal free ", env)) == machine
    if shutil.which("zsh") is not None:
        assert sorted(zsh_complete("shoal free ", env, tmp_path)) == machine


def test_bash_offers_nothing_machine_local_without_shoal(
    env: dict[str, str], machine: list[str], tmp_path: Path
) -> None:
    """No `shoal` on PATH (or one that is not a script): the static parts still work."""
    env["PATH"] = _only_shells(tmp_path)
    (tmp_path / "bin" / "shoal").unlink()
    assert bash_complete("shoal free ", env)[0] == "--expired"
    assert bash_complete("shoal alloc --driver ", env) == KINDS
    (tmp_path / "bin" / "shoal").write_bytes(b"\x7fELF\x02\x01\x01binary")
    (tmp_path / "bin" / "shoal").chmod(0o755)
    assert bash_complete("shoal alloc --driver ", env) == KINDS


def test_zsh_offers_ids_instances_and_images(
    env: dict[str, str], home: Path, machine: list[str], tmp_path: Path
) -> None:
    if shutil.which("zsh") is None:
        pytest.skip("zsh is not installed (.ci/run installs it)")
    assert sorted(zsh_complete("shoal free ", env, tmp_path)) == machine
    assert sorted(zsh_complete("shoal status te", env, tmp_path)) == machine
    assert set(zsh_complete("shoal alloc --driver ", env, tmp_path)) == {*KINDS, *INSTANCES}
    assert list(zsh_complete("shoal image rm ", env, tmp_path)) == ["ubuntu-base-22.04"]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env["SHOAL_HOME"] = str(elsewhere)
    assert zsh_complete("shoal free ", env, tmp_path) == {}
    assert sorted(zsh_complete(f"shoal --home {home} free ", env, tmp_path)) == machine


def test_fish_offers_ids_instances_and_images(env: dict[str, str], machine: list[str]) -> None:
    if shutil.which("fish") is None:
        pytest.skip("fish is not installed (.ci/run installs it)")
    assert sorted(fish_complete("shoal free ", env)) == machine
    assert sorted(fish_complete("shoal status te", env)) == machine
    assert set(fish_complete("shoal alloc --driver ", env)) == {*KINDS, *INSTANCES}
    assert list(fish_complete("shoal image rm ", env)) == ["ubuntu-base-22.04"]
    assert "--provider" not in fish_complete("shoal free --", env)
