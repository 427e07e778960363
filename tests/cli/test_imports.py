"""Cold start: what a command imports is pinned, so heavy modules stay where they are used."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import shoal_env

PROBE = """
import json, sys
sys.argv = ["shoal", *json.loads(sys.argv[1])]
from cli.main import main
try:
    main()
except SystemExit:
    pass
sys.stdout.flush()
sys.stderr.write("\\nMODULES " + json.dumps(sorted(sys.modules)) + "\\n")
"""

# pydantic checks input, imported only where there is some (providers/core/schema.py);
# msgspec reads Kubernetes list pages, imported only by the views that read them.
# psycopg: the team ledger's, imported only with a PostgreSQL ledger URL.
NEVER_AT_START = {
    "httpx", "yaml", "boto3", "botocore", "pydantic", "pydantic_core", "msgspec", "psycopg",
}  # fmt: skip
JSON_COMMANDS = (["regions", "--json"], ["resources", "--json"], ["status", "--json"])


def _probe(home: Path, *args: str, env: dict[str, str] | None = None) -> tuple[set[str], str]:
    """(the modules a command imported, what it printed)."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(list(args))],
        capture_output=True,
        text=True,
        env=shoal_env(home, env),
        check=True,
    )
    line = [ln for ln in done.stderr.splitlines() if ln.startswith("MODULES ")][-1]
    return set(json.loads(line[len("MODULES ") :])), done.stdout


def _modules(home: Path, *args: str) -> set[str]:
    return _probe(home, *args)[0]


def _top(modules: set[str]) -> set[str]:
    return {m.split(".")[0] for m in modules}


def test_help_imports_no_provider_driver_or_storage_code(home: Path) -> None:
    loaded = _modules(home, "--help")
    assert not (_top(loaded) & NEVER_AT_START)
    assert "sqlite3" not in loaded
    assert not [m for m in loaded if m.startswith(("drivers.", "providers.local"))]
    assert "platformdirs" not in loaded


def test_json_commands_do_not_import_rich_or_parsers(home: Path) -> None:
    for args in JSON_COMMANDS:
        loaded = _modules(home, *args)
        assert not (_top(loaded) & (NEVER_AT_START | {"rich"})), args
        assert "cli.tables" not in loaded, args  # the table module is for tables (~3 ms)


def test_config_sections_are_checked_by_the_commands_that_read_them(home: Path) -> None:
    (home / "config.toml").write_text(
        '[aws]\nttl_hours = 12\n[kubernetes]\npool_label = "team"\n'
        '[drivers."process/dev"]\ngrace_seconds = 5\n'
    )
    for args in JSON_COMMANDS:  # the local provider reads none of these tables
        assert "pydantic" not in _top(_modules(home, *args)), args
    # The probe does see pydantic where a command has input to check: a definition.
    assert "pydantic" in _top(_modules(home, "alloc", "--driver", "test/default", "--cpu", "1",
                                       "--ram", "1", "--dry-run"))  # fmt: skip


def test_regions_and_types_do_not_open_the_ledger(home: Path) -> None:
    for args in (["regions", "--json"], ["types", "--json"]):
        loaded = _modules(home, *args)
        assert "sqlite3" not in loaded, args
        assert "drivers.ledger.book" not in loaded, args


def test_image_list_does_not_import_the_http_client(home: Path) -> None:
    loaded = _modules(home, "image", "list", "--json")
    assert not (_top(loaded) & {"httpx", "zstandard", "yaml"})


def test_cloud_answers_from_the_cache_do_not_import_pydantic(home: Path) -> None:
    """pydantic checks provider payloads (providers/core/payload.py): a fetch imports it, an
    answer from the cache (--offline, or a fresh cache) never does."""
    from tests.providers.apiserver import ApiServer
    from tests.providers.azure import payloads as azure
    from tests.providers.gcp import payloads as gcp

    with ApiServer() as api:
        gcp.serve(api)
        api.route(azure.PRICES_PATH, azure.PricesApi(azure.catalog(), base=api.base))
        env = {
            "SHOAL_AZURE_PRICES_URL": api.base,
            "SHOAL_GCP_BILLING_URL": api.base,
            "SHOAL_GCP_API_KEY": gcp.API_KEY,
        }
        for provider, region in (("azure", "eastus"), ("gcp", "us-central1")):
            ask = ["pricing", "-p", provider, "-r", region, "--json"]
            fetched, said = _probe(home, *ask, env=env)
            assert "pydantic" in _top(fetched) and json.loads(said)[0]["items"], provider
            for cached in ([*ask, "--offline"], ask):  # --offline, then a fresh cache
                loaded, again = _probe(home, *cached, env=env)
                assert "pydantic" not in _top(loaded) and json.loads(again) == json.loads(said)


def test_msgspec_is_imported_only_by_the_kubernetes_views_that_read_lists() -> None:
    probe = (
        "import sys, providers.kubernetes.catalog, providers.kubernetes.capacity, "
        "providers.kubernetes.client, drivers.kubernetes.fit\n"
        "print('msgspec' in sys.modules)\n"
        "import providers.kubernetes.lists\n"
        "print('msgspec' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "True"]


def test_a_table_is_drawn_by_rich(home: Path) -> None:
    """Results render as Rich tables or JSON: a table command draws with Rich (imported
    when the table is drawn), its --json twin never imports it."""
    loaded, said = _probe(home, "regions", "-p", "local")
    assert "rich.table" in loaded and "rich.console" in loaded
    assert "local" in said
    assert "rich" not in _top(_modules(home, "regions", "-p", "local", "--json"))


def test_output_tables_and_progress_are_three_modules_without_a_circle() -> None:
    """cli.output keeps the formats and the messages; tables and progress import it, never
    the reverse, and it re-exports nothing of theirs."""
    probe = (
        "import sys, cli.output as o\n"
        "print(sorted(m for m in sys.modules if m in ('cli.tables', 'cli.progress')))\n"
        "print([n for n in ('table', 'Col', 'Figure', 'number_text', 'byte_progress', "
        "'fetch_progress', 'status_line', 'human_bytes', 'rate', 'progress_clock', "
        "'LogProgress') if hasattr(o, n)])\n"
        "import cli.tables, cli.progress\n"
        "print('rich' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.split("\n")[:3] == ["[]", "[]", "False"]


def test_gcp_credentials_import_cryptography_only_to_sign(home: Path, tmp_path: Path) -> None:
    """Application Default Credentials (providers/gcp/credentials.py) are read only by the
    commands that ask GCP; `cryptography` (~45 ms) only when a key signs, not when a token
    is given or one the last command got is still good (STATE/gcp-tokens.json)."""
    from tests.providers.apiserver import ApiServer
    from tests.providers.gcp import account_payloads
    from tests.providers.gcp.oauthserver import OAuthServer, new_key
    from tests.providers.gcp.payloads import PROJECT, TOKEN

    for args in (["--help"], *JSON_COMMANDS):
        loaded = _modules(home, *args)
        assert "providers.gcp.credentials" not in loaded and "cryptography" not in _top(loaded)
    with ApiServer() as api, OAuthServer() as oauth:
        account_payloads.ProjectApi().serve(api)
        key = tmp_path / "key.json"
        key.write_text(json.dumps(oauth.service_account(new_key(), project_id=PROJECT)))
        ask = ["resources", "-p", "gcp", "-r", "us-central1", "--refresh", "--json"]
        compute = {"SHOAL_GCP_COMPUTE_URL": api.base}
        given = {**compute, "SHOAL_GCP_TOKEN": TOKEN, "SHOAL_GCP_PROJECT": PROJECT}
        loaded, said = _probe(home, *ask, env=given)
        assert json.loads(said) and "providers.gcp.credentials" in loaded
        assert "cryptography" not in _top(loaded)
        keyed = {**compute, "GOOGLE_APPLICATION_CREDENTIALS": str(key)}
        signed, said = _probe(home, *ask, env=keyed)
        assert json.loads(said) and "cryptography" in _top(signed)
        again, said = _probe(home, *ask, env=keyed)  # the token the last one got
        assert json.loads(said) and "cryptography" not in _top(again)
        assert len(oauth.claims) == 1


def test_the_sqlite_ledger_never_imports_psycopg(home: Path) -> None:
    """psycopg (~60-90 ms) is for a team ledger only: a machine without one never pays."""
    loaded, out = _probe(home, "alloc", "--driver", "test", "--cpu", "1", "--ram", "1", "--json")
    alloc_id = json.loads(out)["id"]
    for args in (["status", "--json"], ["status", alloc_id], ["free", alloc_id]):
        loaded |= _modules(home, *args)
    assert "sqlite3" in loaded
    assert "psycopg" not in _top(loaded)


def test_only_commands_with_input_to_check_import_pydantic(home: Path) -> None:
    """An allocation's `status`, `logs` and `free` check no input (its id is a ledger key):
    they import no pydantic, for the process and test drivers alike, while the `alloc` that
    made it checked its definition and options with pydantic. A table for the instance is
    input they read, and is checked (pydantic) where it is read."""
    for driver, options in (("process", ["-o", "entry=sleep 600"]), ("test", [])):
        made, out = _probe(
            home, "alloc", "--driver", driver, "--cpu", "1", "--ram", "1", *options, "--json"
        )
        assert "pydantic" in _top(made), driver
        alloc_id = json.loads(out)["id"]
        asks = [["status", alloc_id], ["status", alloc_id, "--json"], ["status", "--json"]]
        if driver == "process":
            asks.append(["logs", alloc_id])
        for args in [*asks, ["free", alloc_id, "--json"]]:
            loaded, said = _probe(home, *args)
            assert alloc_id in said or args[0] == "logs", args  # no output yet: logs are empty
            assert "pydantic" not in _top(loaded), args
    (home / "config.toml").write_text('[drivers."process/default"]\ngrace_seconds = 5\n')
    _, out = _probe(home, "alloc", "-d", "process", "--cpu", "1", "--ram", "1", "-o",
                    "entry=sleep 600", "--json")  # fmt: skip
    alloc_id = json.loads(out)["id"]
    loaded, said = _probe(home, "free", alloc_id, "--json")
    assert alloc_id in said and "pydantic" in _top(loaded)
