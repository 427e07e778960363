"""Bad input from users: every case is a one-line error with the table's exit code (2 usage,
78 config), names the field, never prints a huge value whole, and writes nothing."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import wait_for

NO_DEBUG = {"SHOAL_DEBUG": ""}  # an unforeseen exception shows as "unexpected", not a traceback
PROCESS = ("alloc", "--driver", "process", "--cpu", "1", "--ram", "1")


def refused(run: Any, code: int, *named: str) -> None:
    assert run.exit_code == code, (run.exit_code, run.stderr)
    assert "unexpected" not in run.stderr and "Traceback" not in run.stderr, run.stderr
    assert len(run.stderr.strip().splitlines()) == 1, run.stderr
    for text in named:
        assert text in run.stderr, run.stderr
    assert len(run.stderr) < 600, run.stderr


def no_rows(cli: Callable[..., Any]) -> None:
    listed = cli("status", "--all", "--json")
    assert listed.exit_code == 0 and listed.json() == [], listed.stdout


# -- NaN and Infinity --------------------------------------------------------------------


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_non_finite_option_numbers_are_usage_errors(cli, value: str) -> None:
    run = cli(*PROCESS, "-o", "entry=sleep 1", "-o", f"grace_seconds={value}", env=NO_DEBUG)
    refused(run, 2, "grace_seconds")
    no_rows(cli)


def test_non_finite_numbers_in_a_definition_are_usage_errors(cli, tmp_path: Path) -> None:
    as_json = tmp_path / "def.json"
    as_json.write_text(
        '{"driver": "process", "resources": {"cpu": 1, "ram": 1},'
        ' "options": {"entry": "sleep 1", "grace_seconds": NaN}}'
    )
    refused(cli("alloc", str(as_json), env=NO_DEBUG), 2, "NaN")
    as_yaml = tmp_path / "def.yaml"
    as_yaml.write_text(
        "driver: process\nresources: {cpu: 1, ram: 1}\n"
        "options: {entry: sleep 1, grace_seconds: .inf}\n"
    )
    refused(cli("alloc", str(as_yaml), env=NO_DEBUG), 2, "options.grace_seconds", "finite")
    no_rows(cli)


@pytest.mark.parametrize(
    ("config", "named"),
    [
        ("[local]\nreserve_cpu = inf\n", "local.reserve_cpu"),
        ("[local]\nreserve_ram_gib = nan\n", "local.reserve_ram_gib"),
        ('[drivers."process/default"]\ngrace_seconds = -inf\n', "grace_seconds"),
        ("[aws]\nttl_hours = inf\n", "ttl_hours"),
    ],
)
def test_non_finite_config_numbers_are_config_errors(
    cli, write_config: Callable[[str], Path], config: str, named: str
) -> None:
    write_config(config)
    refused(cli("resources", env=NO_DEBUG), 78, named)


def test_json_output_is_never_nan(cli) -> None:
    run = cli("resources", "--json")
    json.loads(run.stdout, parse_constant=lambda c: pytest.fail(f"{c} in JSON output"))


# -- YAML bombs and deep nesting -----------------------------------------------------------

BOMB = (
    "driver: test\nresources: {cpu: 1, ram: 1}\noptions:\n"
    "  a: &a [x, x, x, x, x, x, x, x, x, x]\n"
    "  b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
    "  c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
    "  d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
    "  e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n"
    "  f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n"
    "  g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]\n"
    "  h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g, *g]\n"
    "  i: [*h, *h, *h, *h, *h, *h, *h, *h, *h, *h]\n"
)


def test_a_yaml_alias_bomb_is_refused_at_once(cli, tmp_path: Path) -> None:
    path = tmp_path / "bomb.yaml"
    path.write_text(BOMB)
    started = time.monotonic()
    run = cli("alloc", str(path), env=NO_DEBUG)
    refused(run, 2, "aliases", "bomb.yaml")
    assert time.monotonic() - started < 30  # a guard against hanging the suite, not a target
    no_rows(cli)


def test_a_kubeconfig_alias_bomb_is_a_config_error(cli, tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(BOMB.replace("driver: test", "current-context: x"))
    run = cli("regions", "-p", "kubernetes", env={**NO_DEBUG, "KUBECONFIG": str(kubeconfig)})
    refused(run, 78, "kubeconfig", "aliases")


@pytest.mark.parametrize("kind", ["json", "yaml"])
def test_deeply_nested_definitions_are_usage_errors(cli, tmp_path: Path, kind: str) -> None:
    deep = "[" * 50_000 + "]" * 50_000
    path = tmp_path / f"deep.{kind}"
    if kind == "json":
        path.write_text('{"driver": "test", "resources": {"cpu": 1, "ram": 1}, "options": '
                        f'{{"x": {deep}}}}}')  # fmt: skip
    else:
        path.write_text(f"driver: test\nresources: {{cpu: 1, ram: 1}}\noptions: {{x: {deep}}}\n")
    refused(cli("alloc", str(path), env=NO_DEBUG), 2, "deep")
    no_rows(cli)


def test_deeply_nested_option_values_are_usage_errors(cli) -> None:
    deep = "[" * 50_000 + "]" * 50_000
    run = cli(*PROCESS, "-o", f"entry={deep}", env=NO_DEBUG)
    refused(run, 2, "options.entry")
    assert deep not in run.stderr  # a huge value is never printed whole
    no_rows(cli)


def test_deeply_nested_task_options_are_usage_errors(cli) -> None:
    made = cli("alloc", "--driver", "test", "--cpu", "1", "--ram", "1")
    assert made.exit_code == 0
    deep = "[" * 50_000 + "]" * 50_000
    refused(cli("task", made.stdout.strip(), "snapshot", "--options", deep, env=NO_DEBUG), 2)


# -- times, TOML types, NUL bytes, settings ------------------------------------------------


@pytest.mark.parametrize(
    "when", ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59Z", "0001-01-01T00:00:00Z"]
)
def test_times_near_the_ends_of_the_calendar_are_usage_errors(cli, when: str) -> None:
    refused(cli("resources", "--start", when, env=NO_DEBUG), 2, "--start")
    refused(cli("pricing", "--start", when, env=NO_DEBUG), 2, "--start")


@pytest.mark.parametrize(
    ("config", "named"),
    [
        ("[local]\nreserve_cpu = 1979-05-27\n", "reserve_cpu"),
        ('[drivers."process/default"]\ncpu_limit = 1979-05-27\n', "cpu_limit"),
        ("[aws]\nttl_hours = 1979-05-27T07:32:00Z\n", "ttl_hours"),
    ],
)
def test_a_toml_date_where_a_number_belongs_is_a_config_error(
    cli, write_config: Callable[[str], Path], config: str, named: str
) -> None:
    write_config(config)
    command = ("resources",) if "local" in config else (*PROCESS, "-o", "entry=sleep 1")
    if "aws" in config:
        command = ("pricing", "-p", "aws", "--offline")
    refused(cli(*command, env=NO_DEBUG), 78, named)
    no_rows(cli)


@pytest.mark.parametrize(
    "option",
    ['entry=["sleep", "1\\u0000"]', "entry=sle\x01ep", 'env={"A": "x\\u0000y"}'],
)
def test_a_nul_byte_in_entry_or_env_is_a_usage_error_and_writes_no_row(cli, option: str) -> None:
    args = [*PROCESS, "-o", option]
    if not option.startswith("entry"):
        args += ["-o", "entry=sleep 1"]
    run = cli(*args, env=NO_DEBUG)
    if "\x01" in option:  # a control character other than NUL is a (strange) command name
        return
    refused(run, 2, "NUL")
    no_rows(cli)


def test_a_bad_workspace_setting_is_blamed_on_the_setting(
    cli, write_config: Callable[[str], Path], tmp_path: Path
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    write_config(f'[drivers."process/default"]\nworkspace = "{blocker}/ws"\n')
    run = cli(*PROCESS, "-o", "entry=sleep 1", env=NO_DEBUG)
    refused(run, 78, 'config [drivers."process/default"] workspace')
    assert "SHOAL_HOME" not in run.stderr


def test_an_unknown_driver_kind_in_the_config_is_flagged(
    cli, write_config: Callable[[str], Path]
) -> None:
    write_config('[drivers."bogus/dev"]\nx = 1\n')
    refused(cli("alloc", "--driver", "test", "--cpu", "1", "--ram", "1", env=NO_DEBUG), 78,
            "bogus")  # fmt: skip


# -- a workload's environment --------------------------------------------------------------

def workload_env(workspace: Path) -> dict[str, str]:
    dumped = workspace / "env.json"
    text = wait_for(lambda: dumped.exists() and dumped.read_text(), "the workload's env")
    return dict(json.loads(text))


DUMP_ENV = (
    "import json, os, time; json.dump(dict(os.environ), open('env.json', 'w')); time.sleep(60)"
)


@pytest.mark.usefixtures("reap_workloads")
def test_process_workloads_get_no_credentials_from_shoals_environment(
    shoal_proc, home: Path
) -> None:
    secrets = {
        "SHOAL_IMAGE_PASSWORD": "hunter2",
        "AWS_SECRET_ACCESS_KEY": "aws-secret",
        "SHOAL_AZURE_TOKEN": "azure-token",
        "GITHUB_TOKEN": "gh-token",
    }
    script = DUMP_ENV
    made = shoal_proc(
        *PROCESS, "--json", "-o", f'entry=["python3", "-c", "{script}"]',
        "-o", 'env={"ASKED": "yes"}', "--meta", "TEAM=ci",
        env={**secrets, "PATH": os.environ["PATH"], "LC_ALL": "C.UTF-8"},
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    workspace = Path(json.loads(made.stdout)["resource"]["metadata"]["workspace"])
    seen = workload_env(workspace)
    for name, value in secrets.items():
        assert name not in seen and value not in json.dumps(seen)
    assert not any(k.startswith("SHOAL_") for k in seen if k not in (
        "SHOAL_ALLOCATION_ID", "SHOAL_WORKSPACE"))  # fmt: skip
    assert seen["ASKED"] == "yes" and seen["TEAM"] == "ci"  # what the user asked for
    assert seen["PATH"] == os.environ["PATH"] and seen["LC_ALL"] == "C.UTF-8"
    assert shoal_proc("free", json.loads(made.stdout)["id"]).returncode == 0


@pytest.mark.usefixtures("reap_workloads")
def test_env_passthrough_names_more_variables(shoal_proc, home: Path) -> None:
    (home / "config.toml").write_text(
        '[drivers."process/default"]\nenv_passthrough = ["CI_JOB_ID"]\n'
    )
    script = DUMP_ENV
    made = shoal_proc(*PROCESS, "--json", "-o", f'entry=["python3", "-c", "{script}"]',
                      env={"CI_JOB_ID": "42", "SECRET": "x"})  # fmt: skip
    assert made.returncode == 0, made.stderr
    workspace = Path(json.loads(made.stdout)["resource"]["metadata"]["workspace"])
    seen = workload_env(workspace)
    assert seen["CI_JOB_ID"] == "42" and "SECRET" not in seen
    assert shoal_proc("free", json.loads(made.stdout)["id"]).returncode == 0
