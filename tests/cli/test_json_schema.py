"""Every command's JSON against the JSON Schema shipped for it (cli/schemas/, README "JSON
shapes"), and one allocation object wherever an allocation is printed."""

from __future__ import annotations

import fnmatch
import json
import tomllib
from collections.abc import Callable, Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from providers.cloud.catalog import CloudCatalog
from providers.core.errors import CredentialsError, ShoalError
from providers.core.settings import Settings
from providers.registry import register
from tests.cli.test_cloud_commands import Fetcher
from tests.conftest import read_ledger
from tests.drivers.image import archives as A
from tests.drivers.image.server import ImageServer
from tests.drivers.kubernetes.test_kubernetes_driver import TOKEN, kubeconfig
from tests.providers.kubernetes.apiserver import ApiServer
from tests.providers.kubernetes.objects import eks_node

REPO = Path(__file__).resolve().parents[2]
ALLOC = ("alloc", "--driver", "test", "--cpu", "1", "--ram", "1")
LIMIT = '[drivers."test/default"]\ncpu_limit = 8\nram_limit = 16\n'
Cli = Callable[..., Any]

pytestmark = pytest.mark.usefixtures("ledger_backend")


def _schemas() -> dict[str, dict[str, Any]]:
    """The schemas as the installed package holds them, by file name."""
    folder = resources.files("cli").joinpath("schemas")
    return {
        entry.name: json.loads(entry.read_text())
        for entry in folder.iterdir()
        if entry.name.endswith(".schema.json")
    }


SCHEMAS = _schemas()
# The files refer to each other by file name (free-item.schema.json -> allocation.schema.json).
REGISTRY: Registry[Any] = Registry().with_resources(
    (name, Resource.from_contents(schema, default_specification=DRAFT202012))
    for name, schema in SCHEMAS.items()
)


def check(document: Any, schema: str) -> None:
    """`document` is valid against cli/schemas/`schema`.schema.json (every error listed)."""
    validator = Draft202012Validator({"$ref": f"{schema}.schema.json"}, registry=REGISTRY)
    errors = [
        f"{'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}"
        for e in validator.iter_errors(document)
    ]
    assert not errors, f"{schema}: " + "; ".join(errors)


def check_each(documents: list[Any], schema: str) -> None:
    assert isinstance(documents, list), documents
    for document in documents:
        check(document, schema)


def ok(run: Any, code: int = 0) -> Any:
    assert run.exit_code == code, run.stderr
    return run.json()


@pytest.fixture
def limited(write_config: Callable[[str], Path]) -> None:
    write_config(LIMIT)


# -- the schemas themselves ----------------------------------------------------------------


def test_every_schema_is_a_valid_draft_2020_12_schema_and_the_package_ships_it() -> None:
    names = {
        "allocation", "free-item", "dry-run", "driver", "region", "instance-type", "resource",
        "pricing", "image-pull", "image", "config-item", "catalog-status", "offers",
        "ledger-migrate", "ledger-copy",
    }  # fmt: skip
    assert {n.removesuffix(".schema.json") for n in SCHEMAS} == names
    for name, schema in SCHEMAS.items():
        assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema", name
        Draft202012Validator.check_schema(schema)
    # A regular `pip install .` ships them: the package data names every one.
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["cli"]
    for name in SCHEMAS:
        assert any(fnmatch.fnmatch(f"schemas/{name}", p) for p in patterns), name


def test_the_allocation_schema_knows_the_keys_the_views_print() -> None:
    from drivers.spec.views import ALLOCATION_KEYS

    allocation = SCHEMAS["allocation.schema.json"]["$defs"]["allocation"]
    assert allocation["required"] == list(ALLOCATION_KEYS)
    assert list(allocation["properties"]) == list(ALLOCATION_KEYS)
    # Strict: a key added to the object must be documented here first.
    with pytest.raises(AssertionError, match="Unevaluated properties"):
        check({**dict.fromkeys(ALLOCATION_KEYS), "id": "x", "extra": 1}, "allocation")


# -- catalog commands ------------------------------------------------------------------------


def test_regions_types_resources_and_pricing_of_the_local_provider(cli: Cli) -> None:
    check_each(ok(cli("regions", "--json")), "region")
    check_each(ok(cli("types", "--json")), "instance-type")
    check_each(ok(cli("resources", "--json")), "resource")
    check_each(ok(cli("pricing", "--json")), "pricing")


def test_resources_in_a_window_with_a_booking(cli: Cli, limited: None) -> None:
    ok(cli(*ALLOC, "--at", "+1h", "--lifetime", "1h", "--json"))
    window = ok(cli("resources", "--start", "now", "--end", "+3h", "--json"))
    assert isinstance(window, dict) and window
    for resource in window.values():  # keyed by RFC 3339 timestamp
        check(resource, "resource")
    # The booking is in the `scheduled` stat, which the schema describes too.
    now = ok(cli("resources", "--json"))
    check_each(now, "resource")
    assert "scheduled" in now[0]["overview"][0]["stat"]


@pytest.fixture
def clouds() -> Iterator[dict[str, Fetcher]]:
    fetchers = {
        "cloud-a": Fetcher("cloud-a", {"a.small": 1.0, "a.gpu": 9.0}, None),
        "cloud-down": Fetcher("cloud-down", {}, CredentialsError("cloud-down: set DOWN_KEY")),
        "cloud-off": Fetcher("cloud-off", {}, ShoalError("cannot reach the price list")),
    }
    for name, fetcher in fetchers.items():

        def factory(settings: Settings, fetcher: Fetcher = fetcher) -> CloudCatalog:
            return CloudCatalog(fetcher.provider, settings, lambda: fetcher, "r1")

        register(name, factory)
    yield fetchers


def test_pricing_of_clouds_and_the_catalog_status(cli: Cli, clouds: dict[str, Fetcher]) -> None:
    check_each(ok(cli("pricing", "-p", "cloud-a", "--region", "all", "--json")), "pricing")
    mixed = ok(cli("pricing", "-p", "cloud-a,cloud-down", "--json"))
    check_each(mixed, "pricing")
    assert mixed[-1]["error"] == "cloud-down: set DOWN_KEY"
    status = ok(cli("catalog", "status", "--json"))
    assert {(s["provider"], s["region"]) for s in status} == {("cloud-a", "r1"), ("cloud-a", "r2")}
    check_each(status, "catalog-status")


def test_pricing_when_every_provider_fails_prints_the_error_entries(
    cli: Cli, clouds: dict[str, Fetcher]
) -> None:
    # Was: nothing on stdout. Now the documented entries, and still the failure's exit code.
    run = cli("pricing", "-p", "cloud-down,cloud-off", "--json")
    entries = ok(run, code=1)
    check_each(entries, "pricing")
    assert [(e["provider"], e["error"]) for e in entries] == [
        ("cloud-down", "cloud-down: set DOWN_KEY"),
        ("cloud-off", "cloud-off: cannot reach the price list"),
    ]
    assert all(e["items"] == {} for e in entries)
    # Each failure said once on stderr, as before (no warning beside the error).
    assert run.stderr.splitlines() == [
        "shoal: error: cloud-down: set DOWN_KEY",
        "shoal: error: cloud-off: cannot reach the price list",
    ]
    credentials = cli("pricing", "-p", "cloud-off,cloud-down", "--json")
    assert credentials.exit_code == 77 and len(credentials.json()) == 2  # the last one's code
    table = cli("pricing", "-p", "cloud-down,cloud-off")
    assert table.exit_code == 1 and table.stdout == ""


def test_pricing_of_one_provider_that_fails_prints_its_error_entry(
    cli: Cli, clouds: dict[str, Fetcher]
) -> None:
    # Was: nothing on stdout when the only provider asked failed (a script reading the JSON
    # got no entry to tell it which provider and why); a request error still prints nothing.
    run = cli("pricing", "-p", "cloud-down", "--json")
    entries = ok(run, code=77)
    check_each(entries, "pricing")
    assert [(e["provider"], e["error"]) for e in entries] == [
        ("cloud-down", "cloud-down: set DOWN_KEY")
    ]
    assert run.stderr.splitlines() == ["shoal: error: cloud-down: set DOWN_KEY"]
    unreachable = cli("pricing", "-p", "cloud-off", "--json")
    assert unreachable.exit_code == 1 and len(unreachable.json()) == 1
    wrong = cli("pricing", "-p", "cloud-down", "--sort", "nonsense", "--json")
    assert wrong.exit_code == 2 and wrong.stdout == ""


# -- drivers, config, images -----------------------------------------------------------------


def test_drivers_and_config(cli: Cli, home: Path) -> None:
    check_each(ok(cli("drivers", "--json")), "driver")
    items = ok(cli("config", "--json", env={"SHOAL_IMAGE_PASSWORD": "pw-never-shown"}))
    check_each(items, "config-item")
    by_name = {i["name"]: i for i in items}
    # Values are data: the path alone, the prose in `note` (was "PATH (absent: defaults apply)").
    assert by_name["config file"]["value"] == str(home / "config.toml")
    assert by_name["config file"]["note"] == "absent: defaults apply"
    assert by_name["$SHOAL_IMAGE_PASSWORD"]["value"] is None
    assert all("(" not in (i["value"] or "") for i in items), items
    table = cli("config")
    assert f"{home / 'config.toml'} (absent: defaults apply)" in table.stdout  # unchanged


def test_image_pull_and_list(cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.netrc of the machine's
    out = tmp_path / "images"
    data = A.make_tar([A.Dir("etc"), A.File("etc/release", b"v1\n")], "gz")
    server = ImageServer().start()
    try:
        url = server.add("/dl/base-1.tar.gz", data)
        pulled = ok(cli("image", "pull", url, "--out", str(out), "--json"))
        check(pulled, "image-pull")
        again = ok(cli("image", "pull", url, "--out", str(out), "--json"))
        check(again, "image-pull")
        assert again["cached"] is True
    finally:
        server.stop()
    listed = ok(cli("image", "list", "--out", str(out), "--json"))
    assert [i["name"] for i in listed] == ["base"]
    check_each(listed, "image")


# -- allocations -----------------------------------------------------------------------------


def test_alloc_status_and_free_print_allocations(cli: Cli, limited: None) -> None:
    made = ok(cli(*ALLOC, "-m", "JOB=7", "--json"))
    check(made, "allocation")
    booked = ok(cli(*ALLOC, "--at", "+1h", "--lifetime", "1h", "--json"))
    check(booked, "allocation")
    assert booked["status"] == "RESERVED" and booked["starts"] and booked["claim_by"]
    waited = ok(cli(*ALLOC, "--wait", "--timeout", "30s", "--json"))
    check(waited, "allocation")
    dry = ok(cli(*ALLOC, "--dry-run", "--json"))
    check(dry, "dry-run")
    check(ok(cli(*ALLOC, "--dry-run", "--at", "+1h", "--json")), "dry-run")

    check(ok(cli("status", made["id"], "--json")), "allocation")
    listed = ok(cli("status", "--json"))
    assert [r["id"] for r in listed] == [made["id"], booked["id"], waited["id"]]
    check_each(listed, "allocation")
    # The list carries what the ledger holds: metadata and definition, never credentials.
    assert listed[0]["metadata"] == {"JOB": "7"} and listed[0]["definition"]["driver"]
    check_each(ok(cli("status", "--sort", "-created", "--driver", "test", "--json")), "allocation")

    one = ok(cli("free", made["id"], "--json"))
    assert isinstance(one, list) and len(one) == 1  # always an array
    check_each(one, "free-item")
    many = ok(cli("free", waited["id"], booked["id"], made["id"], "--json"))
    check_each(many, "free-item")
    assert [(i["status"], i["changed"]) for i in many] == [
        ("FREED", True),
        ("FREED", True),
        ("FREED", False),
    ]
    assert many[1]["note"] == "reservation cancelled"
    check_each(ok(cli("status", "--all", "--json")), "allocation")
    check_each(ok(cli("free", "--expired", "--json")), "free-item")


def test_free_of_an_unknown_id_and_a_failure_keep_one_shape(cli: Cli, limited: None) -> None:
    stuck = ok(cli(*ALLOC, "-o", "fail_deallocate=255", "--json"))
    run = cli("free", stuck["id"], "test-00000000", "--json")
    items = ok(run, code=1)
    check_each(items, "free-item")
    failed, unknown = items
    # A failure keeps the row's real status (no made-up ERROR status), and says why.
    assert (failed["status"], failed["changed"]) == ("ALLOCATED", False)
    assert failed["error"]["exit_code"] == 1 and failed["error"]["message"] in run.stderr
    assert unknown["status"] is None and unknown["driver"] is None
    assert "no allocation 'test-00000000'" in unknown["error"]["message"]
    alone = cli("free", "test-00000000", "--json")
    (item,) = ok(alone, code=1)
    assert item["error"]["exit_code"] == 1 and alone.stderr.count("shoal: error:") == 1
    human = cli("free", "test-00000000")  # unchanged: the error, nothing on stdout
    assert human.exit_code == 1 and human.stdout == ""


def test_expired_free_items(cli: Cli, limited: None, home: Path) -> None:
    short = ok(cli(*ALLOC, "--lifetime", "1h", "--json"))
    # its lifetime over, without waiting for it
    read_ledger(
        home,
        "UPDATE allocations SET expires='2000-01-01T00:00:00.000000Z' WHERE id=?",
        (short["id"],),
    )
    (item,) = ok(cli("free", "--expired", "--json"))
    check(item, "free-item")
    assert item["id"] == short["id"] and item["status"] == "FREED" and item["changed"] is True


# -- one allocation object everywhere --------------------------------------------------------


@pytest.fixture
def kube_env(tmp_path: Path) -> Iterator[dict[str, str]]:
    with ApiServer(tokens=[TOKEN]) as server:
        server.add("nodes", eks_node("cpu-1", nodegroup="general", instance_type="m6i.2xlarge"))
        yield {"KUBECONFIG": str(kubeconfig(tmp_path / "kubeconfig", server.base))}


def test_an_allocation_has_the_same_keys_wherever_it_is_printed(
    cli: Cli, limited: None, kube_env: dict[str, str]
) -> None:
    from drivers.spec.views import ALLOCATION_KEYS

    made = ok(cli(*ALLOC, "--json"))
    shapes = {
        "alloc": made,
        "alloc --at": ok(cli(*ALLOC, "--at", "+1h", "--lifetime", "1h", "--json")),
        "alloc --wait": ok(cli(*ALLOC, "--wait", "--json")),
        "status ID": ok(cli("status", made["id"], "--json")),
        "status": ok(cli("status", "--json"))[0],
        "status --sort": ok(cli("status", "--sort", "-created", "--json"))[0],
    }
    kube = ("alloc", "--driver", "kubernetes", "--cpu", "1", "--ram", "1", "-o", "image=x")
    pod = ok(cli(*kube, "--json", env=kube_env))
    (remote,) = ok(cli("status", "--remote", "kubernetes", "--json", env=kube_env))
    assert remote["id"] == pod["id"] and remote["detail"]["kind"] == "pod"
    shapes["status --remote"] = remote
    (waited,) = ok(cli("wait", made["id"], "--for", "allocated", "--json"))
    shapes["wait"] = waited
    freed = ok(cli("free", made["id"], "--json"))[0]
    assert (freed.pop("changed"), freed.pop("error")) == (True, None)
    shapes["free"] = freed
    shapes["status --all"] = ok(cli("status", "--all", "--json"))[0]
    for where, shown in shapes.items():
        assert list(shown) == list(ALLOCATION_KEYS), where
        check(shown, "allocation")


def test_the_listing_survives_a_row_whose_json_is_damaged(
    cli: Cli, limited: None, home: Path
) -> None:
    made = ok(cli(*ALLOC, "--json"))
    read_ledger(home, "UPDATE allocations SET definition='{bad' WHERE id=?", (made["id"],))
    (row,) = ok(cli("status", "--json"))
    assert row["id"] == made["id"] and row["definition"] is None
    check(row, "allocation")


def test_the_python_fallback_builds_the_same_listing_as_sqlite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from drivers.ledger import store as S
    from drivers.ledger.book import Ledger
    from tests.drivers.ledger.test_ledger import reserve

    ledger = Ledger(tmp_path / "ledger.sqlite")
    made = reserve(ledger)
    by_sql = ledger.summaries_json(include_ended=True)
    encoded = ledger.summaries(include_ended=True, encoded=True)
    # An SQLite without JSON functions: the same objects, built in Python.
    monkeypatch.setattr(S, "LISTED_JSON", "no_such_json_function(id)")
    monkeypatch.setattr(S, "_NO_JSON", "no such function")
    by_python = ledger.summaries_json(include_ended=True)
    assert [json.loads(r) for r in by_python] == [json.loads(r) for r in by_sql]
    again = ledger.summaries(include_ended=True, encoded=True, metadata=True)
    assert [json.loads(r["json"]) for r in again] == [json.loads(r["json"]) for r in encoded]
    assert [r["metadata"] for r in again] == [{"who": "test"}]
    assert json.loads(by_sql[0])["id"] == made
    ledger.close()
