"""Habits from kubectl and docker (issue 23): `-o FORMAT` everywhere but alloc, `-q` and
`--no-headers` on lists, `status -l` by metadata, `shoal wait`, `status -w` piped, and
`shoal config check`. Real ledgers and real processes (the process driver's workloads, a
`status -w` read through a pipe)."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cli.shells import bash_complete, fake_shoal, shell_env
from tests.cli.test_cloud_commands import clouds  # noqa: F401  (the scripted cloud catalogs)
from tests.conftest import default_sigint, shoal_argv, shoal_env, spawn

Cli = Callable[..., Any]
TEST = ("alloc", "--driver", "test", "--cpu", "1", "--ram", "1")
PROCESS_CONFIG = '[drivers."process/default"]\ncpu_limit = 4\nram_limit = 8\ngrace_seconds = 1\n'


def ok(run: Any) -> Any:
    assert run.exit_code == 0, (run.stdout, run.stderr)
    return run


def new_id(cli: Cli, *meta: str) -> str:
    args = [arg for pair in meta for arg in ("-m", pair)]
    return str(ok(cli(*TEST, *args)).stdout.strip())


def run_process(cli: Cli, entry: str) -> str:
    run = cli("alloc", "-d", "process", "--cpu", "1", "--ram", "1", "-o", f"entry={entry}")
    return str(ok(run).stdout.strip())


def ledger_status(cli: Cli, alloc_id: str) -> str:
    rows = ok(cli("status", "--all", "--json")).json()
    return str({row["id"]: row["status"] for row in rows}[alloc_id])


@pytest.fixture
def process_driver(write_config: Callable[[str], Path], reap_workloads: None) -> None:
    write_config(PROCESS_CONFIG)


def listed(run: Any) -> list[str]:
    return [row["id"] for row in json.loads(run.stdout)]


# -- -o FORMAT in every command without driver options -----------------------------------


@pytest.mark.parametrize(
    "command",
    [
        ("status",),
        ("resources",),
        ("types",),
        ("regions",),
        ("drivers",),
        ("image", "list"),
        ("catalog", "status"),
        ("config",),
        ("config", "show"),
        ("pricing",),
    ],
    ids=" ".join,
)
def test_dash_o_json_is_the_output_format(cli: Cli, command: tuple[str, ...]) -> None:
    as_o = ok(cli(*command, "-o", "json"))
    as_flag = ok(cli(*command, "--json"))
    assert json.loads(as_o.stdout) == json.loads(as_flag.stdout)
    assert ok(cli(*command, "-o", "yaml")).stdout.strip()


def test_wait_and_free_take_dash_o_json(cli: Cli) -> None:
    one = new_id(cli)
    ok(cli("free", one))
    waited = ok(cli("wait", one, "-o", "json")).stdout
    freed = ok(cli("free", one, "-o", "json")).stdout
    assert json.loads(waited)[0]["id"] == json.loads(freed)[0]["id"] == one


def test_alloc_dash_o_json_points_to_json_and_output(cli: Cli) -> None:
    run = cli(*TEST, "-o", "json")
    assert run.exit_code == 2 and run.stdout == ""
    assert "--output json" in run.stderr and "--json" in run.stderr
    assert "driver option" in run.stderr
    # A driver option is still -o KEY=VALUE, and alloc's format is --output.
    one = json.loads(ok(cli(*TEST, "-o", "fail_snapshot=0", "--output", "json")).stdout)
    assert one["status"] == "ALLOCATED"


def test_catalog_export_takes_its_file_by_name(cli: Cli, clouds: Any, tmp_path: Path) -> None:  # noqa: F811
    ok(cli("pricing", "-p", "cloud-a"))
    target = tmp_path / "a.json"
    said = ok(cli("catalog", "export", "-p", "cloud-a", "--file", str(target), "--json")).json()
    assert said["path"] == str(target.resolve())
    assert json.loads(target.read_text())["format"] == "shoal-catalog"
    refused = cli("catalog", "export", "-p", "cloud-a", "-o", str(target))
    assert refused.exit_code == 2
    help_text = ok(cli("catalog", "export", "--help")).stdout
    assert "--file" in help_text and "--output" not in help_text


# -- -q and --no-headers on lists --------------------------------------------------------


def test_status_quiet_prints_ids_for_xargs(cli: Cli) -> None:
    ids = [new_id(cli), new_id(cli)]
    assert ok(cli("status", "-q")).stdout.splitlines() == ids
    assert ok(cli("status", "--quiet")).stdout.splitlines() == ids
    assert ok(cli("status", "-o", "name")).stdout.splitlines() == ids
    assert ok(cli("status", ids[0], "-q")).stdout == f"{ids[0]}\n"
    rows = ok(cli("status", "--no-headers")).stdout.splitlines()
    assert [row.split()[0] for row in rows] == ids  # no title, no header, no rule
    assert ok(cli("free", *ids, "-o", "name")).stdout.splitlines() == ids
    assert cli("status", "-q", "--json").exit_code == 2


def test_lists_print_the_names_a_script_passes_on(
    cli: Cli,
    clouds: Any,  # noqa: F811
    tmp_path: Path,
) -> None:
    assert ok(cli("regions", "-q")).stdout == "local\n"
    assert ok(cli("types", "-q")).stdout == "host\n"
    assert ok(cli("pricing", "-q")).stdout == "host\n"
    assert ok(cli("pricing", "-p", "cloud-a", "--region", "all", "-q")).stdout.splitlines() == [
        "a.gpu",
        "a.small",
    ]  # each type once, though two regions list it
    assert ok(cli("types", "-p", "cloud-a", "--region", "all", "-q")).stdout.count("a.gpu") == 1
    assert ok(cli("regions", "-p", "cloud-a", "-q")).stdout.splitlines() == ["r1", "r2"]
    drivers = ok(cli("drivers", "-q")).stdout.splitlines()
    assert "process/default" in drivers and "test/default" in drivers
    assert ok(cli("catalog", "status", "-q")).stdout.splitlines() == ["cloud-a/r1", "cloud-a/r2"]
    images = tmp_path / "images"
    (images / "base-1.2").mkdir(parents=True)
    assert ok(cli("image", "list", "--out", str(images), "-q")).stdout == "base-1.2\n"
    for command in (("regions",), ("drivers",), ("catalog", "status"), ("resources",)):
        table = ok(cli(*command)).stdout.splitlines()
        bare = ok(cli(*command, "--no-headers")).stdout.splitlines()
        assert len(bare) < len(table) and all(line in table for line in bare), command
    named = cli("resources", "-o", "name")  # figures, no ids: said so
    assert named.exit_code == 2 and "-o json" in named.stderr


# -- status -l by metadata ---------------------------------------------------------------


def test_status_selector_filters_by_metadata_table_and_json(cli: Cli) -> None:
    ml = new_id(cli, "team=ml", "tier=gpu")
    web = new_id(cli, "team=web")
    bare = new_id(cli)

    def ids(*selectors: str, json_out: bool = True) -> list[str]:
        args = [arg for one in selectors for arg in ("-l", one)]
        if json_out:
            return listed(ok(cli("status", *args, "--json")))
        return str(ok(cli("status", *args, "-q")).stdout).splitlines()

    for json_out in (True, False):
        assert ids("team=ml", json_out=json_out) == [ml]
        assert ids("team==web", json_out=json_out) == [web]
        assert ids("team!=ml", json_out=json_out) == [web, bare]  # as kubectl: absent too
        assert ids("team", json_out=json_out) == [ml, web]
        assert ids("!team", json_out=json_out) == [bare]
        assert ids("team in (ml,web)", "tier", json_out=json_out) == [ml]
        assert ids("team=ml,tier=cpu", json_out=json_out) == []
        assert ids("team notin (ml)", json_out=json_out) == [web, bare]
    both = ok(cli("status", "--selector", "team", "--sort", "-created", "--json"))
    assert listed(both) == [web, ml]
    ok(cli("free", ml))
    assert ids("team=ml") == []
    assert listed(ok(cli("status", "--all", "-l", "team=ml", "--json"))) == [ml]
    table = ok(cli("status", "-l", "team=web")).stdout
    assert web in table and bare not in table


def test_status_selector_mistakes_are_usage_errors(cli: Cli) -> None:
    one = new_id(cli, "team=ml")
    for bad in ("team in (ml", "a b c", "", "=x", "!"):
        run = cli("status", "-l", bad)
        assert run.exit_code == 2, bad
        assert "-l" in run.stderr, bad
    run = cli("status", one, "-l", "team=ml")
    assert run.exit_code == 2 and "give no ID" in run.stderr
    run = cli("status", "--remote", "test", "-l", "team=ml")
    assert run.exit_code == 2 and "--remote" in run.stderr


# -- shoal wait ----------------------------------------------------------------------------


def test_wait_prints_each_exit_code_in_the_order_given(cli: Cli, process_driver: None) -> None:
    slow = run_process(cli, "sh -c 'sleep 1; exit 3'")
    quick = run_process(cli, "sh -c 'exit 0'")
    run = ok(cli("wait", slow, quick, "--timeout", "60s"))
    assert run.stdout == "3\n0\n"
    shown = ok(cli("wait", slow, "--json")).json()
    assert [item["id"] for item in shown] == [slow]
    assert shown[0]["status"] == "EXITED"
    assert "exited with code 3" in shown[0]["note"]
    ok(cli("free", slow))
    # Freed after it exited: the recorded exit code is still what it ended with.
    assert ok(cli("wait", slow)).stdout == "3\n"


def test_wait_prints_the_status_when_no_exit_code_was_recorded(cli: Cli) -> None:
    one = new_id(cli)
    ok(cli("free", one))
    assert ok(cli("wait", one)).stdout == "FREED\n"


def test_wait_timeout_unknown_id_and_allocated(cli: Cli) -> None:
    one = new_id(cli)
    run = cli("wait", one, "--timeout", "1s")
    assert run.exit_code == 75 and run.stdout == ""
    assert f"{one} is still ALLOCATED" in run.stderr
    run = cli("wait", one, "no-such-1")
    assert run.exit_code == 2 and "no-such-1" in run.stderr
    assert ok(cli("wait", one, "--for", "allocated")).stdout == f"{one}\n"
    ok(cli("free", one))
    run = cli("wait", one, "--for", "allocated")
    assert run.exit_code == 1 and "FREED" in run.stderr
    assert cli("wait", one, "--for", "gone").exit_code == 2
    assert cli("wait", one, "--timeout", "soon").exit_code == 2


def test_wait_for_allocated_sees_a_booking_claimed(cli: Cli) -> None:
    booked = ok(cli(*TEST, "--at", "now", "--lifetime", "1h")).stdout.strip()
    assert cli("wait", booked, "--for", "allocated", "--timeout", "1s").exit_code == 75
    ok(cli("alloc", "--reservation", booked))
    assert ok(cli("wait", booked, "--for", "allocated")).stdout == f"{booked}\n"


def test_wait_sees_an_end_nobody_recorded(
    cli: Cli, process_driver: None, home: Path, procs: list[subprocess.Popen[str]]
) -> None:
    """Its supervisor killed, a workload that ends records nothing: each look of `wait` is
    reconciled with the driver, so the end is seen all the same."""
    one = run_process(cli, "sh -c 'sleep 2; exit 4'")
    marks = list(home.glob(f"state/workspaces/process/*/{one}/.shoal-supervisor"))
    assert len(marks) == 1
    os.kill(int(marks[0].read_text().split()[0]), signal.SIGKILL)
    waiter = spawn(home, procs, "wait", one, "--timeout", "60s")
    out, err = waiter.communicate(timeout=90)
    assert waiter.returncode == 0, err
    assert out.strip()  # its exit code, or its status if nobody could tell the code
    assert ledger_status(cli, one) != "ALLOCATED"


def test_ctrl_c_ends_wait_with_130(
    cli: Cli, home: Path, procs: list[subprocess.Popen[str]]
) -> None:
    one = new_id(cli)
    waiter = spawn(home, procs, "wait", one)
    time.sleep(1.5)  # well into its wait; a Ctrl-C earlier is answered the same
    waiter.send_signal(signal.SIGINT)
    out, err = waiter.communicate(timeout=60)
    assert waiter.returncode == 130 and out == ""
    assert "interrupted" in err


def test_bash_completes_wait(home: Path, tmp_path: Path) -> None:
    fake_shoal(tmp_path / "bin")
    env = shell_env(home, tmp_path / "bin")
    assert bash_complete("shoal wai", env) == ["wait"]
    assert bash_complete("shoal wait --for ", env) == ["ended", "allocated"]


# -- status -w piped -----------------------------------------------------------------------


class Lines:
    """A real `shoal status -w` whose stdout is a pipe, read a line at a time with a bound."""

    def __init__(self, home: Path, *args: str) -> None:
        self.proc = subprocess.Popen(
            shoal_argv("status", "-w", *args),
            env=shoal_env(home),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            preexec_fn=default_sigint,
        )
        assert self.proc.stdout is not None
        self._fd = self.proc.stdout.fileno()
        self._buffer = b""

    def line(self, timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            assert left > 0, f"no line within {timeout}s; have {self._buffer!r}"
            ready, _, _ = select.select([self._fd], [], [], left)
            if ready:
                chunk = os.read(self._fd, 65536)
                assert chunk, f"stdout closed; have {self._buffer!r}"
                self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode()

    def until(self, wanted: Callable[[str], bool], timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        while True:
            line = self.line(max(deadline - time.monotonic(), 0.01))
            if wanted(line):
                return line

    def close_reader(self) -> tuple[int, str]:
        """The reader goes (as `head` does): the watch ends by itself, exit and stderr."""
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self.proc.stdout.close()
        code = self.proc.wait(timeout=60)
        return code, self.proc.stderr.read().decode()


@pytest.fixture
def watches() -> Iterator[list[Lines]]:
    started: list[Lines] = []
    yield started
    for one in started:
        if one.proc.poll() is None:
            one.proc.kill()
        one.proc.wait(timeout=30)


def test_status_watch_piped_streams_changes_then_ends_with_its_reader(
    cli: Cli, home: Path, watches: list[Lines]
) -> None:
    held = new_id(cli)
    watch = Lines(home)
    watches.append(watch)
    assert watch.line().startswith("allocations")  # the table once, with its header
    watch.until(lambda line: held in line and "ALLOCATED" in line)
    later = new_id(cli)
    added = watch.until(lambda line: later in line)
    assert "ALLOCATED" in added and "ID" not in added  # a row, not a new table
    ok(cli("free", held))
    watch.until(lambda line: held in line and "FREED" in line)  # it left the list: said so
    code, err = watch.close_reader()
    assert (code, err) == (0, "")


def test_status_watch_json_lines(cli: Cli, home: Path, watches: list[Lines]) -> None:
    held = new_id(cli, "team=ml")
    other = new_id(cli)
    watch = Lines(home, "-o", "json", "-l", "team=ml")
    watches.append(watch)
    first = json.loads(watch.line())
    assert first["id"] == held and first["status"] == "ALLOCATED"
    ok(cli("free", other))  # not selected: nothing said
    ok(cli("free", held))
    changed = json.loads(watch.line())
    assert (changed["id"], changed["status"]) == (held, "FREED")
    assert set(changed) == set(first)
    code, err = watch.close_reader()
    assert (code, err) == (0, "")


def test_status_watch_refusals_name_what_was_given(cli: Cli) -> None:
    one = new_id(cli)
    run = cli("status", one, "-w")
    assert run.exit_code == 2 and "shoal wait" in run.stderr
    assert "--json" not in run.stderr  # today's message named a flag nobody gave
    run = cli("status", "-w", "--remote", "test")
    assert run.exit_code == 2 and "--remote" in run.stderr
    run = cli("status", "-w", "-o", "yaml")
    assert run.exit_code == 2 and "-o json" in run.stderr


# -- config check ------------------------------------------------------------------------


def test_config_check_passes_a_good_file(cli: Cli, write_config: Callable[[str], Path]) -> None:
    path = write_config(
        PROCESS_CONFIG
        + '[drivers."test/dev"]\ncpu_limit = 2\n[aws]\nttl_hours = 12\n[alloc]\n'
        + "reservation_grace_minutes = 5\n[image]\nattempts = 3\n[local]\nreserve_cpu = 1\n"
    )
    run = ok(cli("config", "check"))
    assert run.stdout == "" and run.stderr == f"config ok: {path}\n"


def test_config_check_without_a_file_says_the_defaults_apply(cli: Cli, home: Path) -> None:
    run = ok(cli("config", "check"))
    assert run.stderr.startswith("config ok: ") and "defaults apply" in run.stderr


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ('[drivers."process/x"]\ncpu_limt = 2\n', "cpu_limt"),
        ("[drivers.process.x]\ngrace_seconds = 1e300\n", "grace_seconds"),
        ("[aws]\nttl_hour = 2\n", "ttl_hour"),
        ('[gcp]\nttl_hours = "soon"\n', "ttl_hours"),
        ("[alloc]\nreservation_grace_minutes = 0\n", "reservation_grace_minutes"),
        ("[image]\nattempts = -1\n", "attempts"),
        ('[drivers."nosuch/x"]\n', "nosuch"),
        ("[loacl]\n", "[local]"),
    ],
)
def test_config_check_names_the_key_and_exits_78(
    cli: Cli, write_config: Callable[[str], Path], text: str, named: str
) -> None:
    path = write_config(text)
    run = cli("config", "check", env={"SHOAL_DEBUG": ""})
    assert run.exit_code == 78, run.stderr
    assert run.stdout == ""
    (line,) = run.stderr.splitlines()
    assert line.startswith("shoal: error: ") and named in line and str(path) in line


def test_config_check_catches_what_only_alloc_noticed(
    cli: Cli, write_config: Callable[[str], Path]
) -> None:
    """Before `config check`, a typo in a driver's table passed every command but alloc."""
    write_config('[drivers."process/x"]\ncpu_limt = 2\n')
    assert ok(cli("status")).stderr == "no allocations\n"
    assert cli("config", "check").exit_code == 78


def test_config_alone_is_config_show(cli: Cli) -> None:
    table = ok(cli("config")).stdout
    assert table == ok(cli("config", "show")).stdout and "Setting" in table
    as_json = ok(cli("config", "--json")).json()
    assert as_json == ok(cli("config", "show", "--json")).json()
    assert {"name", "value", "source"} <= set(as_json[0])
    run = cli("config", "--json", "check")
    assert run.exit_code == 2 and "config show" in run.stderr
