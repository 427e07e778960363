"""Empty flag values a script's unset variable gives (`--output "$FORMAT"`): the alloc and
status flags refuse them (2), but the output format and the catalog flags still read an empty
value as the flag left out: a table where the script parses JSON, the cache however old
(--max-age), every cached region, no filter, now, the default kube context. Each is refused
now, naming the flag."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (("status", "--output", ""), "--output"),
        (("status", "--output", " "), "--output"),
        (("regions", "-p", "local", "--output", ""), "--output"),
        (("pricing", "-p", "local", "--max-age", ""), "--max-age"),
        (("pricing", "-p", "local", "--sort", ""), "--sort"),
        (("pricing", "-p", "local", "--region", ""), "--region"),
        (("pricing", "-p", "local", "--select", " "), "--select"),
        (("types", "-p", "local", "--sort", ""), "--sort"),
        (("resources", "-p", "local", "--start", ""), "--start"),
        (("resources", "-p", "local", "--end", ""), "--end"),
        (("resources", "-p", "kubernetes", "--context", ""), "--context"),
    ],
)
def test_an_empty_value_is_refused_naming_its_flag(
    cli: Callable[..., Any], args: tuple[str, ...], flag: str
) -> None:
    run = cli(*args)
    assert run.exit_code == 2, run
    assert run.stdout == ""
    assert run.stderr.startswith(f"shoal: error: {flag}: empty value; "), run.stderr


def test_the_flags_given_still_work(cli: Callable[..., Any]) -> None:
    assert cli("status", "--output", "json").exit_code == 0
    assert cli("pricing", "-p", "local", "--sort", "price").exit_code == 0
