"""Config files an attack writes (issue 21, break 12, the config part).

- Nested 500+ levels deep (arrays, inline tables, dotted tables): every command exited 1
  with "unexpected RecursionError"; it is a config error (78) naming the file.
- Numbers no setting means: 1e-300 (a duration that rounds to none), 1e300 (past anything
  shoal can use), NaN and infinities, in every table's numeric keys: 78 naming the file,
  the key and the allowed range.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

NO_DEBUG = {"SHOAL_DEBUG": ""}
DRY = ("--cpu", "1", "--ram", "1", "--dry-run")
# A command that reads each table (and reaches no network before it does).
READER = {
    "local": ("resources", "--json"),
    "aws": ("pricing", "-p", "aws", "--offline"),
    "azure": ("pricing", "-p", "azure", "--offline"),
    "gcp": ("pricing", "-p", "gcp", "--offline"),
    "image": ("image", "list", "--json"),
    "test": ("alloc", "--driver", "test/dev", *DRY),
    "process": ("alloc", "--driver", "process/dev", "-o", "entry=sleep 1", *DRY),
}


def refused(run: Any, *named: str) -> str:
    assert run.exit_code == 78, (run.exit_code, run.stderr)
    assert "unexpected" not in run.stderr and "Traceback" not in run.stderr, run.stderr
    assert len(run.stderr.strip().splitlines()) == 1, run.stderr
    for text in named:
        assert text in run.stderr, run.stderr
    return str(run.stderr)


# -- nesting ---------------------------------------------------------------------------------


NESTED = {
    "arrays": "[local]\nx = " + "[" * 600 + "]" * 600,
    "inline tables": "[local]\nx = " + "{a = " * 600 + "1" + "}" * 600,
    "dotted tables": "[local." + ".".join(f"k{i}" for i in range(600)) + "]\nx = 1",
    "thousands of tables": "[x." + ".".join(f"k{i}" for i in range(3000)) + "]\nx = 1",
    "readable but deep": "[local]\nx = " + "[" * 150 + "]" * 150,
}


@pytest.mark.parametrize("toml", NESTED.values(), ids=NESTED.keys())
@pytest.mark.parametrize("argv", [("status",), ("regions", "-p", "local"), ("resources",)])
def test_a_config_nested_hundreds_deep_is_a_config_error(
    cli: Callable[..., Any], write_config: Callable[[str], Path], toml: str, argv: tuple[str, ...]
) -> None:
    path = write_config(toml + "\n")
    said = refused(cli(*argv, env=NO_DEBUG), f"config file {path}")
    assert "nest" in said and "100 levels" in said


def test_a_config_nested_a_few_levels_still_reads(
    cli: Callable[..., Any], write_config: Callable[[str], Path]
) -> None:
    write_config('[kubernetes.spot_labels]\n"example.com/capacity" = ["spot", "preemptible"]\n')
    assert cli("status", env=NO_DEBUG).exit_code == 0


# -- numbers ---------------------------------------------------------------------------------


KEYS = [
    ("[aws]\nttl_hours = {}", "aws", "[aws] ttl_hours", "0.001 to a century"),
    ("[azure]\nquota_ttl_minutes = {}", "azure", "[azure] quota_ttl_minutes", "0.01 to a"),
    ("[gcp]\nttl_hours = {}", "gcp", "[gcp] ttl_hours", "0.001 to a century"),
    ("[local]\nreserve_cpu = {}", "local", "[local] reserve_cpu", "0 to 1,000,000,000"),
    ("[local]\nreserve_ram_gib = {}", "local", "[local] reserve_ram_gib", "0 to 1,000,000,000"),
    ("[local.pricing]\non_demand = {}", "local", "[local.pricing] on_demand", "0 to 1,000,000"),
    ("[image]\nread_timeout_seconds = {}", "image", "[image] read_timeout_seconds", ""),
    ("[image]\nbackoff_seconds = {}", "image", "[image] backoff_seconds", ""),
    ("[image]\nmax_unpacked_gib = {}", "image", "[image] max_unpacked_gib", ""),
    ('[drivers."process/dev"]\ngrace_seconds = {}', "process", "grace_seconds", ""),
]
HUGE = ["1e300", "1e10"]
TINY = ["1e-300", "1e-7"]
NOT_FINITE = ["nan", "inf", "-inf"]


def _cases() -> list[Any]:
    cases = []
    for toml, reader, key, words in KEYS:
        zero_is_fine = "0 to" in words or "grace_seconds" in key
        for value in HUGE + ([] if zero_is_fine else TINY):
            cases.append(pytest.param(toml.format(value), reader, key, words, id=f"{key}={value}"))
        for value in NOT_FINITE:  # refused as the file is read: "TABLE.KEY must be a finite"
            bare = key.rsplit(" ", 1)[-1]
            cases.append(
                pytest.param(toml.format(value), reader, bare, "finite", id=f"{key}={value}")
            )
    return cases


@pytest.mark.parametrize(("toml", "reader", "key", "words"), _cases())
def test_a_number_no_setting_means_is_a_config_error_naming_key_and_range(
    cli: Callable[..., Any],
    write_config: Callable[[str], Path],
    toml: str,
    reader: str,
    key: str,
    words: str,
) -> None:
    path = write_config(toml + "\n")
    said = refused(cli(*READER[reader], env=NO_DEBUG), f"config file {path}", key, words)
    assert "finite" in said or "must be >=" in said or "must be <=" in said, said


@pytest.mark.parametrize(
    ("toml", "reader", "key"),
    [
        ('[drivers."test/dev"]\ncpu_limit = 1000000000000000000000', "test", "cpu_limit"),
        ('[drivers."process/dev"]\nram_limit = 99999999999', "process", "ram_limit"),
        ("[image]\nmax_entries = 99999999999", "image", "max_entries"),
    ],
)
def test_a_count_past_anything_real_is_a_config_error(
    cli: Callable[..., Any], write_config: Callable[[str], Path], toml: str, reader: str, key: str
) -> None:
    write_config(toml + "\n")
    refused(cli(*READER[reader], env=NO_DEBUG), key, "must be <= 1000000000")


@pytest.mark.parametrize(
    ("toml", "reader"),
    [
        ("[aws]\nttl_hours = 0.001\nquota_ttl_minutes = 0.01", "aws"),
        ("[local]\nreserve_cpu = 0\nreserve_ram_gib = 0.5", "local"),
        ("[image]\nbackoff_seconds = 0.001\nread_timeout_seconds = 600", "image"),
    ],
)
def test_sane_values_at_the_edges_still_read(
    cli: Callable[..., Any], write_config: Callable[[str], Path], toml: str, reader: str
) -> None:
    write_config(toml + "\n")
    run = cli(*READER[reader], env=NO_DEBUG)
    assert run.exit_code != 78, run.stderr
