"""Issue 23's behaviours of `alloc`, from the command line on a real ledger:

- a request no capacity of its driver could ever hold (over the host's, the engine's or the
  configured total) exits 2 naming the total, for `alloc`, `alloc --wait` (which must not
  wait forever) and `alloc --at`, so a retry-on-75 loop ends; busy now stays 75;
- `alloc --at` of a process (or container) driver books capacity only: the command to run
  (and the image) come with the claim, which is checked in full.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Run
from tests.drivers.container.test_engine_errors import INFO, PING, Route, fake_engine

Cli = Callable[..., Run]
PROCESS = ("alloc", "--driver", "process", "-o", "entry=sleep 30")
TEST = ("alloc", "--driver", "test")
LIMIT_2 = '[drivers."test/default"]\ncpu_limit = 2\nram_limit = 10\n'
# alloc now, alloc --wait with no timeout (it must refuse at once, not wait), alloc --at
MODES = {
    "alloc": (),
    "wait": ("--wait",),
    "at": ("--at", "+1h", "--lifetime", "1h"),
}


def host_supply(cli: Cli) -> tuple[int, int]:
    """This host's CPUs and GiB as the process driver counts them (its total)."""
    run = cli("resources", "--json")
    assert run.exit_code == 0, run.stderr
    supply = run.json()[0]["overview"][0]["stat"]["onDemand"]["supply"]
    return int(float(supply["cpu"]["vcpu"])), int(float(supply["memory"]["GiB"]))


def held(shoal_proc: Callable[..., Any]) -> list[dict[str, Any]]:
    run = shoal_proc("status", "--all", "--json")
    assert run.returncode == 0, run.stderr
    return list(json.loads(run.stdout))


def one_error(stderr: str) -> str:
    (line,) = stderr.splitlines()
    assert line.startswith("shoal: error: ")
    return line


# -- an impossible request is a usage error -----------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_more_cpus_than_the_host_has_exits_2_naming_the_total(
    cli: Cli, shoal_proc: Callable[..., Any], mode: str
) -> None:
    cpus, _ = host_supply(cli)
    # A real process with a bound: a wait that did not refuse would hang here, not pass.
    run = shoal_proc(*PROCESS, "--cpu", str(cpus + 1), "--ram", "1", *MODES[mode], timeout=60)
    assert run.returncode == 2, run.stderr
    line = one_error(run.stderr)
    assert f"cpu={cpus + 1} ram=1GiB can never fit: the driver's total is {cpus} (cpu)" in line
    assert f"ask for --cpu {cpus} or less" in line and "no capacity" not in line
    assert run.stdout == ""
    assert held(shoal_proc) == []  # nothing booked, queued or allocated


@pytest.mark.parametrize("mode", MODES)
def test_more_ram_than_the_host_has_exits_2_naming_the_total(
    cli: Cli, shoal_proc: Callable[..., Any], mode: str
) -> None:
    _, gib = host_supply(cli)
    run = shoal_proc(*PROCESS, "--cpu", "1", "--ram", str(gib + 1), *MODES[mode], timeout=60)
    assert run.returncode == 2, run.stderr
    assert f"can never fit: the driver's total is {gib} GiB (ram)" in one_error(run.stderr)
    assert held(shoal_proc) == []


@pytest.mark.parametrize("mode", MODES)
def test_more_than_a_configured_total_exits_2_and_busy_now_stays_75(
    cli: Cli, write_config: Callable[[str], Path], mode: str
) -> None:
    write_config(LIMIT_2)
    run = cli(*TEST, "--cpu", "3", "--ram", "1", *MODES[mode])
    assert run.exit_code == 2, run.stderr
    line = one_error(run.stderr)
    assert "test/default: cpu=3 ram=1GiB can never fit: the driver's total is 2 (cpu)" in line
    assert 'raise cpu_limit in [drivers."test/default"]' in line
    # What fits the total but not what is free now is "busy now": 75, as before.
    assert cli(*TEST, "--cpu", "2", "--ram", "1").exit_code == 0
    busy = cli(*TEST, "--cpu", "1", "--ram", "1")
    assert busy.exit_code == 75 and "no capacity" in busy.stderr


def test_a_retry_on_75_loop_ends_on_an_impossible_request(
    cli: Cli, write_config: Callable[[str], Path]
) -> None:
    """`until shoal alloc ...; [ $? -ne 75 ]; do sleep 1; done` is what CI writes."""
    write_config(LIMIT_2)
    codes = []
    for _ in range(3):
        codes.append(cli(*TEST, "--cpu", "3", "--ram", "1").exit_code)
        if codes[-1] != 75:
            break
    assert codes == [2]


# -- the container driver: the engine's total, and a configured one --------------------------


@pytest.fixture
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A fake engine with 4 CPUs and 8 GiB (tests/drivers/container/test_engine_errors.py)."""
    import shutil
    import tempfile

    short = Path(tempfile.mkdtemp(prefix="shoal-fake-"))  # a unix socket path is short
    routes: dict[tuple[str, str], Route] = {("GET", "/info"): (200, INFO), PING: (200, "OK")}
    try:
        with fake_engine(short / "engine.sock", routes):
            yield f"unix://{short / 'engine.sock'}"
    finally:
        shutil.rmtree(short, ignore_errors=True)


CONTAINER = ("alloc", "--driver", "podman", "-o", "image=busybox:1", "-o", "entry=sleep 30")


@pytest.mark.parametrize("mode", MODES)
def test_more_than_the_engine_or_its_limit_exits_2(
    cli: Cli, write_config: Callable[[str], Path], engine: str, mode: str
) -> None:
    env = {"DOCKER_HOST": engine}
    over = cli(*CONTAINER, "--cpu", "5", "--ram", "1", *MODES[mode], env=env)
    assert over.exit_code == 2, over.stderr
    line = one_error(over.stderr)
    assert "container/default: cpu=5 ram=1GiB can never fit: the driver's total is 4 (cpu)" in line
    assert "the engine's (it has cpu=4 ram=8GiB)" in line
    write_config('[drivers."container/default"]\ncpu_limit = 2\n')
    limited = cli(*CONTAINER, "--cpu", "3", "--ram", "1", *MODES[mode], env=env)
    assert limited.exit_code == 2, limited.stderr  # was 75: "no capacity", forever
    line = one_error(limited.stderr)
    assert "can never fit: the driver's total is 2 (cpu)" in line
    assert 'raise cpu_limit in [drivers."container/default"]' in line


# -- a booking needs no entry until its claim ---------------------------------------------------


def test_a_process_booking_takes_no_entry_and_its_claim_gives_it(
    cli: Cli, shoal_proc: Callable[..., Any]
) -> None:
    booked = cli("alloc", "--driver", "process", "--cpu", "1", "--ram", "1", "--at", "now",
                 "--lifetime", "1h")  # fmt: skip
    assert booked.exit_code == 0, booked.stderr
    ident = booked.stdout.strip()
    assert "reserved" in booked.stderr
    # The claim runs something: what to run is demanded there, and the booking stays.
    bare = cli("alloc", "--reservation", ident)
    assert bare.exit_code == 2 and "options.entry: required" in one_error(bare.stderr)
    assert {r["id"]: r["status"] for r in held(shoal_proc)} == {ident: "RESERVED"}
    claimed = cli("alloc", "--reservation", ident, "-o", "entry=sleep 30", "--json")
    assert claimed.exit_code == 0, claimed.stderr
    shown = claimed.json()
    assert shown["id"] == ident and shown["status"] == "ALLOCATED"
    assert shown["resource"]["metadata"]["argv"] == ["sleep", "30"]
    assert cli("free", ident).exit_code == 0


@pytest.mark.parametrize(
    ("option", "said"),
    [
        ("entry=", "options.entry: must not be empty"),
        ("entyr=sleep 1", "options.entyr: unknown option; did you mean 'entry'?"),
    ],
)
def test_what_a_booking_gives_is_still_checked(
    cli: Cli, shoal_proc: Callable[..., Any], option: str, said: str
) -> None:
    run = cli("alloc", "--driver", "process", "--cpu", "1", "--ram", "1", "--at", "+1h",
              "--lifetime", "1h", "-o", option)  # fmt: skip
    assert run.exit_code == 2 and said in one_error(run.stderr)
    assert held(shoal_proc) == []


def test_a_booking_dry_run_takes_no_entry_either(cli: Cli) -> None:
    run = cli("alloc", "--driver", "process", "--cpu", "1", "--ram", "1", "--at", "+1h",
              "--lifetime", "1h", "--dry-run")  # fmt: skip
    assert run.exit_code == 0, run.stderr
    assert int(run.stdout) >= 1


def test_a_container_booking_takes_no_image_or_entry(cli: Cli, engine: str) -> None:
    env = {"DOCKER_HOST": engine}
    booked = cli("alloc", "--driver", "podman", "--cpu", "1", "--ram", "1", "--at", "+1h",
                 "--lifetime", "1h", env=env)  # fmt: skip
    assert booked.exit_code == 0, booked.stderr
    shown = cli("status", booked.stdout.strip(), "--json", env=env).json()
    assert shown["status"] == "RESERVED" and shown["driver"] == "container/default"
