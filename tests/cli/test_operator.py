"""What a new operator and a CI author meet first: error style, --version, `config`,
tables at 80 columns (a real terminal) and piped, --output, free of several, status
filters."""

from __future__ import annotations

import json
import os
import pty
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import shoal_argv, shoal_env

NO_DEBUG = {"SHOAL_DEBUG": ""}
ALLOC = ("alloc", "--driver", "test", "--cpu", "1", "--ram", "1")

pytestmark = pytest.mark.usefixtures("ledger_backend")


def on_terminal(home: Path, *args: str, columns: int = 80) -> str:
    """Run shoal on a pseudo-terminal of `columns` columns; what the terminal shows."""
    leader, follower = pty.openpty()
    import fcntl
    import struct
    import termios

    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    env = shoal_env(home, {"TERM": "dumb", "NO_COLOR": "1"})
    env.pop("COLUMNS", None)
    proc = subprocess.Popen(
        shoal_argv(*args), env=env, stdin=follower, stdout=follower, stderr=follower
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=60)
    os.close(leader)
    return b"".join(chunks).decode(errors="replace").replace("\r\n", "\n")


# -- one error style -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["stauts"], "no such command 'stauts'. Did you mean 'status'"),
        (["status", "--bogus"], "no such option '--bogus'"),
        (["alloc", "--cpu", "abc"], "invalid value for '--cpu': 'abc' is not a valid integer"),
        (["status", "--al"], "Did you mean"),
        (["image", "pul"], "Did you mean 'pull'"),
    ],
)
def test_framework_usage_errors_are_one_line_and_a_hint(cli, args: list[str], message: str):
    run = cli(*args, env=NO_DEBUG)
    assert run.exit_code == 2
    lines = run.stderr.splitlines()
    assert len(lines) == 2, run.stderr
    assert lines[0].startswith("shoal: error: ") and message in lines[0]
    assert lines[1].startswith("shoal: hint: see 'shoal")
    assert run.stderr.count("Did you mean") <= 1
    assert not any(box in run.stderr for box in "╭│╰─")
    assert run.stdout == ""


def test_on_a_terminal_too_a_usage_error_is_no_box(home: Path) -> None:
    shown = on_terminal(home, "stauts")
    assert "shoal: error: no such command 'stauts'" in shown
    assert not any(box in shown for box in "╭│╰")


def test_non_utf8_input_is_one_line(cli, tmp_path: Path, home: Path) -> None:
    path = tmp_path / "def.yaml"
    path.write_bytes(b"driver: test\n\xff\xfe\n")
    run = cli("alloc", str(path), env=NO_DEBUG)
    assert run.exit_code == 2 and run.stderr.count("\n") == 1 and "not UTF-8" in run.stderr
    piped = subprocess.run(
        shoal_argv("status", os.fsdecode(b"\xff\xfe")),
        env={**shoal_env(home), **NO_DEBUG},
        capture_output=True,
    )
    assert piped.returncode == 2 and piped.stderr.count(b"\n") == 1
    assert b"not UTF-8" in piped.stderr and b"unexpected" not in piped.stderr


def test_a_named_config_file_that_does_not_exist_is_a_config_error(cli, tmp_path: Path):
    run = cli("--config", str(tmp_path / "nope.toml"), "status", env=NO_DEBUG)
    assert run.exit_code == 78 and "nope.toml" in run.stderr and "does not exist" in run.stderr


# -- --version and config --------------------------------------------------------------------


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version(cli, flag: str) -> None:
    run = cli(flag)
    assert run.exit_code == 0 and run.stdout.startswith("shoal ")


def test_config_shows_paths_and_which_variables_are_set_but_never_secrets(
    cli, home: Path, write_config: Callable[[str], Path]
) -> None:
    write_config("[image]\ndir = '/srv/images'\n")
    secret = "hunter2-do-not-print"
    run = cli("config", "--json", env={"SHOAL_IMAGE_PASSWORD": secret, "SHOAL_PROVIDER": "aws"})
    assert run.exit_code == 0, run.stderr
    assert secret not in run.stdout and secret not in run.stderr
    items = {i["name"]: i for i in run.json()}
    from tests.conftest import LEDGER_ENV

    ledger = LEDGER_ENV.get("SHOAL_LEDGER_URL") or str(home / "state" / "ledger.sqlite")
    assert items["ledger"]["value"] == ledger
    assert items["ledger"]["source"] == ("SHOAL_LEDGER_URL" if LEDGER_ENV else "SHOAL_HOME")
    assert items["images dir"] == {
        "name": "images dir", "value": "/srv/images", "source": "config [image] dir", "note": None
    }  # fmt: skip
    # Values are data: a hidden secret has none, and the note says why.
    assert items["$SHOAL_IMAGE_PASSWORD"]["value"] is None
    assert items["$SHOAL_IMAGE_PASSWORD"]["note"] == "set (hidden)"
    assert items["$SHOAL_PROVIDER"]["value"] == "aws"
    assert {"config file", "catalog cache", "container engine", "kubernetes context"} <= set(items)
    table = cli("config")
    assert table.exit_code == 0 and "ledger" in table.stdout and secret not in table.stdout


# -- tables ----------------------------------------------------------------------------------


def test_status_at_80_columns_keeps_ids_and_statuses_whole(home: Path, shoal_proc) -> None:
    made = shoal_proc(*ALLOC, "--lifetime", "3h")
    assert made.returncode == 0
    failed = shoal_proc(*ALLOC, "-o", "fail_allocate=255", "-m", "X=" + "y" * 10)
    assert failed.returncode != 0
    shown = on_terminal(home, "status", "--all")
    lines = shown.splitlines()
    assert all(len(line) <= 80 for line in lines), shown
    ident = made.stdout.strip()
    assert any(ident in line and "ALLOCATED" in line for line in lines), shown
    assert any("FAILED" in line for line in lines), shown
    header = next(line for line in lines if line.lstrip().startswith("ID"))
    assert "Age" in header and "Expires" in header
    assert any(" 2h " in f" {line} " or "179m" in line for line in lines), shown  # 3h left


def test_piped_tables_keep_one_row_per_line(cli) -> None:
    assert cli(*ALLOC).exit_code == 0
    long_note = cli(*ALLOC, "-o", "fail_allocate=255")
    assert long_note.exit_code != 0
    run = cli("status", "--all", env={"COLUMNS": "80"})
    rows = [line for line in run.stdout.splitlines() if line.startswith(" test-")]
    assert len(rows) == 2 and any("allocate failed" in r and "injected" in r for r in rows)


def test_an_empty_list_says_so(cli) -> None:
    run = cli("status")
    assert run.exit_code == 0 and run.stdout == "" and run.stderr == "no allocations\n"


def test_wide_adds_absolute_times(cli) -> None:
    assert cli(*ALLOC, "--lifetime", "1h").exit_code == 0
    wide = cli("status", "--output", "wide")
    assert "Created (UTC)" in wide.stdout and "Expires (UTC)" in wide.stdout
    assert "T" in wide.stdout and "Z" in wide.stdout
    assert "Created (UTC)" not in cli("status").stdout


# -- --output ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args", [("status",), ("resources",), ("types",), ("regions",), ("drivers",), ("config",)]
)
def test_output_json_and_yaml_match_json(cli, args: tuple[str, ...]) -> None:
    assert cli(*ALLOC).exit_code == 0
    as_json = cli(*args, "--json")
    assert as_json.exit_code == 0, as_json.stderr
    as_output = cli(*args, "--output", "json")
    as_yaml = cli(*args, "--output", "yaml")
    assert json.loads(as_output.stdout) == json.loads(as_json.stdout)
    assert yaml.safe_load(as_yaml.stdout) == json.loads(as_json.stdout)


def test_output_errors(cli) -> None:
    run = cli("status", "--output", "xml", env=NO_DEBUG)
    assert run.exit_code == 2 and "table, wide, json, yaml" in run.stderr
    run = cli("status", "--json", "--output", "yaml", env=NO_DEBUG)
    assert run.exit_code == 2 and "disagree" in run.stderr


# -- free several, status filters ------------------------------------------------------------


def ids_of(run: Any) -> list[str]:
    return [r["id"] for r in run.json()]


def test_free_several_at_once(cli) -> None:
    made = [cli(*ALLOC).stdout.strip() for _ in range(3)]
    run = cli("free", *made, "--json")
    assert run.exit_code == 0, run.stderr
    assert [(r["id"], r["status"]) for r in run.json()] == [(i, "FREED") for i in made]
    missing = cli("free", made[0], "test-00000000", env=NO_DEBUG)
    assert missing.exit_code == 1
    assert "already freed" in missing.stderr and "no allocation 'test-00000000'" in missing.stderr


def test_status_filters_and_sorts(cli, write_config: Callable[[str], Path]) -> None:
    write_config('[drivers."test/dev"]\n[drivers."test/default"]\n')
    small = cli(*ALLOC).stdout.strip()
    big = cli("alloc", "--driver", "test/dev", "--cpu", "3", "--ram", "1").stdout.strip()
    gone = cli(*ALLOC).stdout.strip()
    assert cli("free", gone).exit_code == 0
    assert ids_of(cli("status", "--driver", "test/dev", "--json")) == [big]
    assert set(ids_of(cli("status", "--driver", "test", "--json"))) == {small, big}
    assert ids_of(cli("status", "--status", "freed", "--json")) == [gone]
    assert set(ids_of(cli("status", "--status", "FREED,ALLOCATED", "--json"))) == {
        small, big, gone
    }  # fmt: skip
    assert ids_of(cli("status", "--sort", "-cpu", "--json"))[0] == big
    bad = cli("status", "--status", "RUNNING", env=NO_DEBUG)
    assert bad.exit_code == 2 and "ALLOCATED" in bad.stderr
    bad = cli("status", "--sort", "colour", env=NO_DEBUG)
    assert bad.exit_code == 2 and "created" in bad.stderr


def test_drivers_never_prints_a_secret_from_the_config(cli, write_config) -> None:
    write_config('[drivers."kubernetes/prod"]\ntoken = "s3cr3t-value"\nnamespace = "ci"\n')
    for args in (("drivers",), ("drivers", "--json")):
        run = cli(*args)
        assert "s3cr3t-value" not in run.stdout + run.stderr


def test_status_watch_redraws_on_a_terminal(cli, home: Path) -> None:
    """Piped, the watch streams changes instead (tests/cli/test_habits.py)."""
    assert cli(*ALLOC).exit_code == 0
    import signal
    import time

    leader, follower = pty.openpty()
    env = shoal_env(home, {"TERM": "dumb", "NO_COLOR": "1"})
    proc = subprocess.Popen(
        shoal_argv("status", "--watch"), env=env, stdin=follower, stdout=follower,
        stderr=follower, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    os.close(follower)
    seen = b""
    deadline = time.monotonic() + 30
    while seen.count(b"test-") < 2 and time.monotonic() < deadline:  # two redraws
        seen += os.read(leader, 65536)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=30) == 0
    os.close(leader)
    assert seen.count(b"\x1b[2J") >= 2 and b"ALLOCATED" in seen
