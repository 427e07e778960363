"""Values a script gets wrong without noticing: an empty one (an unset variable) where a
duration, time or driver goes, a key given twice in a definition, a number past what a
setting can mean. Each is a usage (2) or config (78) error naming what was given wrong,
never read as the flag left out, as the last of two, or as an unexpected crash."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

NO_DEBUG = {"SHOAL_DEBUG": ""}
ALLOC = ("alloc", "--driver", "test", "--cpu", "1", "--ram", "1")


def refused(run: Any, code: int, *named: str) -> str:
    assert run.exit_code == code, (run.exit_code, run.stdout, run.stderr)
    assert "unexpected" not in run.stderr and "Traceback" not in run.stderr, run.stderr
    assert len(run.stderr.strip().splitlines()) == 1, run.stderr
    for text in named:
        assert text in run.stderr, run.stderr
    return str(run.stderr)


def held(cli: Callable[..., Any]) -> list[str]:
    run = cli("status", "--all", "--json")
    assert run.exit_code == 0, run.stderr
    return [row["id"] for row in run.json()]


# -- empty values ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        ((*ALLOC, "--lifetime", ""), "--lifetime"),  # was: no lifetime at all
        ((*ALLOC, "--lifetime", "  "), "--lifetime"),
        ((*ALLOC, "--wait", "--timeout", ""), "--timeout"),  # was: wait forever
        ((*ALLOC, "--lifetime", "1h", "--at", ""), "--at"),
        (("alloc", "--driver", "", "--cpu", "1", "--ram", "1"), "--driver"),
        (("alloc", "--reservation", ""), "--reservation"),
        (("status", "--driver", ""), "--driver"),  # was: every driver
        (("status", "--status", ""), "--status"),
        (("status", "--remote", ""), "--remote"),
        (("free", "--remote", "", "test-00000000"), "--remote"),  # was: the local ledger
    ],
)
def test_an_empty_value_is_refused_naming_the_flag(
    cli: Callable[..., Any], args: tuple[str, ...], flag: str
) -> None:
    refused(cli(*args, env=NO_DEBUG), 2, f"{flag}: empty value; ")
    assert held(cli) == []


def test_an_empty_lifetime_in_a_definition_is_refused(
    cli: Callable[..., Any], tmp_path: Path
) -> None:
    path = tmp_path / "job.yaml"
    path.write_text('driver: test\nresources: {cpu: 1, ram: 1, lifetime: ""}\n')
    refused(cli("alloc", str(path), env=NO_DEBUG), 2, f"{path}: resources.lifetime: empty")
    assert held(cli) == []


def test_a_lifetime_and_timeout_given_are_taken(cli: Callable[..., Any]) -> None:
    run = cli(*ALLOC, "--lifetime", "1h", "--wait", "--timeout", "10s")
    assert run.exit_code == 0, run.stderr
    assert held(cli) == [run.stdout.strip()]


# -- a key given twice -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "text", "where", "key", "first"),
    [
        ("job.yaml", "driver: test\nresources:\n  cpu: 1\n  ram: 1\n  cpu: 8\n",
         "5:3", "'cpu'", 3),
        ("job.yaml", "driver: test\nresources: {cpu: 1, ram: 1}\ndriver: process\n",
         "3:1", "'driver'", 1),
        ("job.yaml", "driver: test\nresources: {cpu: 1, ram: 1}\noptions:\n"
         "  list: [{a: 1}, {a: 2, b: 1, a: 3}]\n", "4:31", "'a'", 4),
        ("job.yaml", 'driver: test\nresources: {cpu: 1, ram: 1}\noptions: {x: 1, "x": 2}\n',
         "3:17", "'x'", 3),
        ("job.json", '{"driver": "test",\n "resources": {"cpu": 1, "ram": 1},\n'
         ' "driver": "process"}', "3:2", "'driver'", 1),
        ("job.json", '{"driver": "test", "resources": {"cpu": 1, "ram": 1,\n  "ram": 2}}',
         "2:3", "'ram'", 1),
        ("job.json", '{"driver": "test", "resources": {"cpu": 1, "ram": 1}, "options":\n'
         ' {"l": [{"k": 1}, {"k": 2,\n "k": 3}]}}', "3:2", "'k'", 2),
        ("job.json", '{"driver": "test", "resources": {"cpu": 1, "ram": 1},\n'
         ' "options": {"\\u0061": 1, "a": 2}}', "2:27", "'a'", 2),
    ],
)  # fmt: skip
def test_a_key_given_twice_in_a_definition_is_refused_naming_it_and_its_line(
    cli: Callable[..., Any],
    tmp_path: Path,
    name: str,
    text: str,
    where: str,
    key: str,
    first: int,
) -> None:
    path = tmp_path / name
    path.write_text(text)
    said = refused(cli("alloc", str(path), env=NO_DEBUG), 2, f"{path}:{where}: duplicate key ")
    assert f"duplicate key {key} (first at line {first}); give each key once" in said
    assert held(cli) == []


def test_the_same_key_in_different_objects_and_a_yaml_merge_are_not_duplicates(
    cli: Callable[..., Any], tmp_path: Path
) -> None:
    path = tmp_path / "job.yaml"
    # `<<` is YAML's own override: the keys after it win by definition, not by accident.
    path.write_text("driver: test\nresources:\n  <<: {cpu: 2, ram: 1}\n  cpu: 1\n"
                    "options: {delay_allocate: 0}\n")  # fmt: skip
    run = cli("alloc", str(path), "--dry-run")
    assert run.exit_code == 0, run.stderr
    data = {"driver": "test", "resources": {"cpu": 1, "ram": 1}, "options": {"cpu": 1}}
    json_path = tmp_path / "job.json"
    json_path.write_text(json.dumps(data))
    run = cli("alloc", str(json_path), "--dry-run", env=NO_DEBUG)
    assert "duplicate" not in run.stderr


def test_a_key_given_twice_in_an_options_json_value_is_refused(cli: Callable[..., Any]) -> None:
    run = cli(*ALLOC, "-o", 'x={"a": 1, "a": 2}', env=NO_DEBUG)
    refused(run, 2, "--option x: its JSON value gives the key 'a' twice")


def test_an_option_given_twice_on_the_command_line_is_the_last(cli: Callable[..., Any]) -> None:
    # As with most command lines (a wrapper adds its -o, the caller overrides it): kept.
    run = cli(*ALLOC, "-o", "fail_allocate=255", "-o", "fail_allocate=0")
    assert run.exit_code == 0, run.stderr


# -- values no Python object holds -----------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ("  slots: " + "9" * 5000, "Exceeds the limit (4300 digits)"),
        ("  when: 2020-13-45", "month must be in 1..12"),
    ],
    ids=["5000 digits", "month 13"],
)
def test_a_yaml_value_python_cannot_hold_is_a_usage_error(
    cli: Callable[..., Any], tmp_path: Path, line: str, said: str
) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(f"driver: test\nresources:\n  cpu: 1\n  ram: 1\n{line}\n")
    text = refused(cli("alloc", str(path), env=NO_DEBUG), 2, f"{path}: invalid YAML: ", said)
    assert "sys.set_int_max_str_digits" not in text  # Python's advice, not the user's


@pytest.mark.parametrize("value", ["1e-300", "0.001", "0"])
def test_a_reservation_grace_below_its_floor_is_a_config_error(
    cli: Callable[..., Any], write_config: Callable[[str], Path], value: str
) -> None:
    # 1e-300 minutes is no time at all in a timedelta: every booking lapsed at its start.
    path = write_config(f"[alloc]\nreservation_grace_minutes = {value}\n")
    run = cli(*ALLOC, "--lifetime", "1h", "--at", "+1h", env=NO_DEBUG)
    refused(run, 78, str(path), "[alloc] reservation_grace_minutes: must be >= 0.01")
    assert held(cli) == []
