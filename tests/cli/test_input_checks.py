"""Input checked by its pydantic models, as users see it: one line, the right exit code (78
config, 2 usage, 1 import file), the file, the table or field path, what was expected,
and for an unknown key the close match and the known ones."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

NO_DEBUG = {"SHOAL_DEBUG": ""}  # user-facing errors, not tracebacks
DRY = ("--cpu", "1", "--ram", "1", "--dry-run")
# A command that reads each table (and reaches no network before it does).
READER = {
    "local": ("resources", "--json"),
    "aws": ("pricing", "-p", "aws", "--offline"),
    "azure": ("pricing", "-p", "azure", "--offline"),
    "gcp": ("pricing", "-p", "gcp", "--offline"),
    "kubernetes": ("regions", "-p", "kubernetes"),
    "image": ("image", "list", "--json"),
    "test": ("alloc", "--driver", "test/dev", *DRY),
    "process": ("alloc", "--driver", "process/dev", "-o", "entry=sleep 1", *DRY),
    "container": ("alloc", "--driver", "container/dev", "-o", "image=x", *DRY),
    "kubernetes/": ("alloc", "--driver", "kubernetes/dev", "-o", "image=x", *DRY),
}


def refused(run: Any, code: int, *named: str) -> str:
    assert run.exit_code == code, (run.exit_code, run.stderr)
    assert "unexpected" not in run.stderr and "Traceback" not in run.stderr, run.stderr
    assert len(run.stderr.strip().splitlines()) == 1, run.stderr
    for text in named:
        assert text in run.stderr, run.stderr
    return str(run.stderr)


# -- config: unknown keys and sections ---------------------------------------------------------


@pytest.mark.parametrize(
    ("toml", "reader", "where", "suggested"),
    [
        ("[local]\nreserve_cpus = 1", "local", "[local] reserve_cpus", "reserve_cpu"),
        ("[local.pricing]\nondemand = 1", "local", "[local.pricing] ondemand", "on_demand"),
        ("[aws]\nttl_hour = 1", "aws", "[aws] ttl_hour", "ttl_hours"),
        ("[azure]\nsubscripton_id = 'x'", "azure", "[azure] subscripton_id", "subscription_id"),
        ("[gcp]\nprojet = 'x'", "gcp", "[gcp] projet", "project"),
        ("[kubernetes]\npool_labels = 'x'", "kubernetes", "[kubernetes] pool_labels", "pool_label"),
        ("[image]\nmax_entrys = 9", "image", "[image] max_entrys", "max_entries"),
        ('[drivers."test/dev"]\ncpu_limt = 3', "test", '[drivers."test/dev"] cpu_limt',
         "cpu_limit"),
        ('[drivers."process/dev"]\ngrace = 3', "process", '[drivers."process/dev"] grace',
         "grace_seconds"),
        ('[drivers."container/dev"]\nsocked = "x"', "container", '[drivers."container/dev"]',
         "socket"),
        ('[drivers."kubernetes/dev"]\nnamespce = "x"', "kubernetes/", '[drivers."kubernetes/dev"]',
         "namespace"),
    ],
)  # fmt: skip
def test_an_unknown_key_in_any_table_names_file_table_key_and_the_close_match(
    cli, write_config: Callable[[str], Path], toml: str, reader: str, where: str, suggested: str
) -> None:
    path = write_config(toml + "\n")
    key = toml.split("\n")[1].split(" = ")[0]
    said = refused(cli(*READER[reader], env=NO_DEBUG), 78, f"config file {path}: ", where, key)
    assert f"unknown key; did you mean {suggested!r}? known: " in said


def test_every_known_key_is_listed(cli, write_config: Callable[[str], Path]) -> None:
    write_config("[aws]\nzzz = 1\n")  # nothing close: the known keys are the help
    said = refused(cli(*READER["aws"], env=NO_DEBUG), 78, "[aws] zzz: unknown key; known: ")
    known = "default_region, ec2_url, pricing_url, quota_ttl_minutes, quotas_url, ssm_url, "
    assert known + "ttl_hours" in said


@pytest.mark.parametrize("command", [("status", "--json"), ("regions",), ("drivers",)])
def test_an_unknown_section_is_a_config_error_for_every_command(
    cli, write_config: Callable[[str], Path], command: tuple[str, ...]
) -> None:
    path = write_config("[loacl]\nreserve_cpu = 1\n")
    said = refused(cli(*command, env=NO_DEBUG), 78, str(path), "[loacl]: unknown section")
    assert "did you mean [local]? known: [alloc], [aws], [azure], [drivers], [gcp]" in said


def test_a_setting_outside_any_section_is_refused(cli, write_config: Callable[[str], Path]) -> None:
    write_config("ttl_hours = 3\n[aws]\n")
    refused(cli("status", env=NO_DEBUG), 78, "ttl_hours", "outside any section", "[aws]")


def test_a_registered_providers_own_section_is_not_unknown(
    cli, write_config: Callable[[str], Path]
) -> None:
    from providers.local.catalog import LocalCatalog
    from providers.registry import register

    register("plugin-cloud-x", LocalCatalog.from_settings)
    write_config("[plugin-cloud-x]\nanything = 1\n")
    assert cli("status", "--json").exit_code == 0


# -- config: types, ranges, non-finite numbers -----------------------------------------------


@pytest.mark.parametrize(
    ("toml", "reader", "named"),
    [
        ("[local]\nreserve_cpu = true", "local",
         "[local] reserve_cpu: expected a number, got boolean true"),
        ("[local.pricing]\nspot = 1979-05-27", "local",
         "[local.pricing] spot: expected a number, got date 1979-05-27"),
        ("[aws]\nttl_hours = 1979-05-27T07:32:00Z", "aws",
         "[aws] ttl_hours: expected a number, got date-time 1979-05-27T07:32:00"),
        ('[drivers."test/dev"]\ncpu_limit = 2.5', "test",
         '[drivers."test/dev"] cpu_limit: expected an integer, got number 2.5'),
        ('[kubernetes]\nbreakdown_labels = "zone"', "kubernetes",
         "[kubernetes] breakdown_labels: expected a list, got string 'zone'"),
        ('[drivers."process/dev"]\nenv_passthrough = "CI_JOB_ID"', "process",
         '[drivers."process/dev"] env_passthrough: expected a list, got string'),
        ("[kubernetes]\nspot_labels = {\"example.com/capacity\" = [1]}", "kubernetes",
         '[kubernetes.spot_labels] "example.com/capacity"[0]: expected a string, got integer 1'),
        ("[local]\npricing = 3", "local", "[local.pricing]: expected a table, got integer 3"),
        ('[image]\ndir = 3', "image", "[image] dir: expected a string"),
        ('[drivers."process/dev"]\nenv_passthrough = [1979-05-27]', "process",
         '[drivers."process/dev"] env_passthrough[0]: expected a number, string, boolean, list '
         "or table, got a TOML date or time 1979-05-27"),
    ],
)  # fmt: skip
def test_a_value_of_the_wrong_type_says_what_was_expected(
    cli, write_config: Callable[[str], Path], toml: str, reader: str, named: str
) -> None:
    write_config(toml + "\n")
    refused(cli(*READER[reader], env=NO_DEBUG), 78, named)


@pytest.mark.parametrize(
    ("toml", "reader", "named"),
    [
        ("[local]\nreserve_ram_gib = -2", "local", "[local] reserve_ram_gib: must be >= 0, got "),
        ("[aws]\nttl_hours = 0", "aws", "[aws] ttl_hours: must be >= 0.001"),
        ("[gcp]\nttl_hours = 1e9", "gcp", "[gcp] ttl_hours: must be <= 876000"),
        ('[drivers."test/dev"]\nfail_status = 256', "test",
         "fail_status: must be <= 255, got integer 256 (0 never, 1-254 random, 255 always)"),
        ('[drivers."kubernetes/dev"]\nkind = "deployment"', "kubernetes/",
         "kind: must be 'pod' or 'job', got string 'deployment'"),
        ("[image]\nattempts = 0", "image", "[image] attempts: must be > 0"),
        ('[kubernetes]\npool_label = ""', "kubernetes",
         "[kubernetes] pool_label: must not be empty"),
        ('[drivers."process/dev"]\nenv_passthrough = ["A-B"]', "process",
         "env_passthrough[0]: 'A-B' is not an environment variable name"),
    ],
)  # fmt: skip
def test_a_value_out_of_range_names_the_bound(
    cli, write_config: Callable[[str], Path], toml: str, reader: str, named: str
) -> None:
    write_config(toml + "\n")
    refused(cli(*READER[reader], env=NO_DEBUG), 78, named)


def test_non_finite_numbers_given_in_code_are_refused_by_the_models(home: Path) -> None:
    from providers.core.errors import ConfigError
    from providers.core.settings import Paths, Settings
    from providers.local.catalog import LocalCatalog

    for bad in (float("nan"), float("inf")):
        paths = Paths.from_env({"SHOAL_HOME": str(home)})
        settings = Settings(paths=paths, config={"local": {"reserve_cpu": bad}})
        with pytest.raises(ConfigError, match=r"\[local\] reserve_cpu: must be a finite number"):
            LocalCatalog.from_settings(settings)


def test_a_huge_value_is_never_quoted_whole(cli, write_config: Callable[[str], Path]) -> None:
    write_config(f'[local]\nreserve_cpu = "{"9" * 5000}"\n')
    said = refused(cli(*READER["local"], env=NO_DEBUG), 78, "reserve_cpu", "(5002 characters)")
    assert len(said) < 300


# -- driver options (-o, a definition's options) ---------------------------------------------


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (("--driver", "test", "-o", "fail_alocate=9"),
         "options.fail_alocate: unknown option; did you mean 'fail_allocate'? known: "),
        (("--driver", "test", "-o", "delay_allocate=-1"), "options.delay_allocate: must be >= 0"),
        (("--driver", "test", "-o", "fail_allocate=true"),
         "options.fail_allocate: expected an integer, got boolean true"),
        (("--driver", "process", "-o", "entry=sleep 1", "-o", "grace_seconds=soon"),
         "options.grace_seconds: expected a number, got string 'soon'"),
        (("--driver", "process", "-o", "entry=sleep 1", "-o", 'env={"A": 1}'),
         "options.env.A: expected a string"),
        (("--driver", "process"), "options.entry: required (the command to run"),
        (("--driver", "container", "-o", "image=x", "-o", "network=bridge"),
         "options.network: must be 'nat' or 'none', got string 'bridge'"),
        (("--driver", "container"), "options.image: required"),
        (("--driver", "kubernetes", "-o", "image=x", "-o", "spot=yes"),
         "options.spot: expected true or false, got string 'yes'"),
        (("--driver", "kubernetes", "-o", "image=x", "-o", "pool=a b"),
         "options.pool: 'a b' is not a label value"),
    ],
)  # fmt: skip
def test_bad_driver_options_are_usage_errors_naming_the_option(
    cli, args: tuple[str, ...], named: str
) -> None:
    refused(cli("alloc", *args, *DRY, env=NO_DEBUG), 2, named)


def test_task_options_are_checked_too(cli) -> None:
    made = cli("alloc", "--driver", "test", "--cpu", "1", "--ram", "1")
    assert made.exit_code == 0, made.stderr
    run = cli("task", made.stdout.strip(), "snapshot", "--options", '{"lable": "x"}', env=NO_DEBUG)
    refused(run, 2, "--options: lable: unknown option of task snapshot; did you mean 'label'?")
    run = cli("task", made.stdout.strip(), "snapshot", "--options", '{"label": 3}', env=NO_DEBUG)
    refused(run, 2, "--options: label: expected a string, got integer 3")


# -- definitions -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("document", "named"),
    [
        ({"driver": "test", "resources": {"cpu": 1, "ram": 1}, "option": {}},
         "option: unknown field; did you mean 'options'?"),
        ({"driver": "test", "resources": {"cpu": 1, "ram": 1, "multitenacy": True}},
         "resources.multitenacy: unknown field; did you mean 'multitenancy'? known: cpu,"),
        ({"driver": "test", "resources": {"cpu": 1, "ram": 1, "disks": {"d1": {"sise": 1}}}},
         "resources.disks.d1.sise: unknown field; did you mean 'size'?"),
        ({"driver": "test", "resources": {"cpu": True, "ram": 1}},
         "resources.cpu: expected an integer, got boolean true"),
        ({"driver": "test", "resources": {"cpu": 1, "ram": 1, "node_filter": "gpu"}},
         "resources.node_filter: expected a list, got string 'gpu'"),
        ({"driver": "test", "resources": {"cpu": 1, "ram": 1, "lifetime": "999999d"}},
         "resources.lifetime: '999999d' is over 100 years"),
        ({"driver": "", "resources": {"cpu": 1, "ram": 1}}, "driver: must not be empty"),
    ],
)  # fmt: skip
def test_a_definition_that_does_not_fit_names_file_and_field(
    cli, tmp_path: Path, document: dict[str, Any], named: str
) -> None:
    path = tmp_path / "def.json"
    path.write_text(json.dumps(document))
    refused(cli("alloc", str(path), "--dry-run", env=NO_DEBUG), 2, f"{path}: {named}")


def test_a_definition_credential_is_never_quoted(cli, tmp_path: Path) -> None:
    path = tmp_path / "def.yaml"
    path.write_text(
        "driver: test\nresources: {cpu: 1, ram: 1}\n"
        "authentication: {username: ci, pasword: hunter2-secret}\n"
    )
    said = refused(cli("alloc", str(path), env=NO_DEBUG), 2, "authentication.pasword")
    assert "hunter2" not in said
    path.write_text("driver: test\nresources: {cpu: 1, ram: 1}\nauthentication: {key: [hunter2]}\n")
    said = refused(cli("alloc", str(path), env=NO_DEBUG), 2, "authentication.key", "not shown")
    assert "hunter2" not in said


def test_a_definition_keeps_its_json_on_the_wire(cli, tmp_path: Path) -> None:
    path = tmp_path / "def.json"
    path.write_text(json.dumps({"driver": "test", "resources": {"cpu": 1, "ram": 2}}))
    made = cli("alloc", str(path), "--json")
    assert made.exit_code == 0, made.stderr
    shown = cli("status", made.json()["id"], "--json").json()
    # Go's omitempty, as before: no slots, disks, network, node_filter or lifetime.
    assert shown["definition"]["resources"] == {
        "cpu": 1, "ram": 2, "multitenancy": False, "cpu_overbook": False, "ram_overbook": False
    }  # fmt: skip


# -- the catalog import file -------------------------------------------------------------------


def test_a_bad_import_file_names_the_field_and_writes_nothing(cli, tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    offer = {"instanceType": "m.large", "arch": "x86_64", "gpu": "", "gpuCount": 0,
             "gpuMemoryGib": 0, "onDemand": "cheap"}  # fmt: skip
    snapshot = {"region": "r1", "fetchedAt": "2024-01-01T00:00:00Z", "offers": [offer]}
    document = {"format": "shoal-catalog", "version": 1, "provider": "x", "snapshots": [snapshot]}
    bad.write_text(json.dumps(document))
    refused(
        cli("catalog", "import", str(bad), env=NO_DEBUG),
        1,
        f"{bad}: snapshots[0].offers[0].onDemand: expected a number, got string 'cheap'",
        "; nothing was imported",
    )
    offer["onDemand"] = 1.5
    document["comment"] = "a key a newer shoal may write"  # ignored, not refused
    bad.write_text(json.dumps(document))
    done = cli("catalog", "import", str(bad), "--json")
    assert done.exit_code == 0, done.stderr
    assert done.json()[0]["imported"] == ["r1"]
