"""SHOAL_HOME: missing, not a directory, or not writable are config errors (exit 78)."""

from __future__ import annotations

from pathlib import Path

import pytest

# /proc/self exists and is a directory, yet nothing can be created in it, even by root,
# which is who runs CI (root ignores permission bits, so chmod cannot make this case).
UNWRITABLE = "/proc/self"


@pytest.mark.parametrize(
    "args", [("status",), ("alloc", "--driver", "test", "--cpu", "1", "--ram", "1")]
)
def test_unwritable_home_is_a_config_error_for_commands_that_write(cli, args) -> None:
    run = cli(*args, env={"SHOAL_HOME": UNWRITABLE})
    assert run.exit_code == 78
    assert "SHOAL_HOME" in run.stderr and "not writable" in run.stderr
    assert run.stdout == ""
    assert len(run.stderr.strip().splitlines()) == 1


def test_unwritable_home_still_answers_read_only_questions(cli) -> None:
    run = cli("resources", "--json", env={"SHOAL_HOME": UNWRITABLE})
    assert run.exit_code == 0, run.stderr
    assert run.json()[0]["provider"] == "local"


def test_missing_home_is_not_created(cli, tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    run = cli("status", env={"SHOAL_HOME": str(missing)})
    assert run.exit_code == 78
    assert "does not exist" in run.stderr
    assert not missing.exists()


def test_home_flag_overrides_the_environment(cli, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    assert (
        cli("--home", str(other), "alloc", "--driver", "test", "--cpu", "1", "--ram", "1").exit_code
        == 0
    )
    assert (other / "state" / "ledger.sqlite").exists()
    assert cli("--home", str(other), "status", "--json").json()[0]["driver"] == "test/default"
    assert cli("status", "--json").json() == []
