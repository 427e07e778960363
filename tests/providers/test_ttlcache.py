"""The one JSON TTL cache (providers/core/ttlcache.py): what its three users rely on, on real
files."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from providers.core.ttlcache import TtlCache
from tests.conftest import REPO


def test_a_value_is_kept_until_its_time_is_up(tmp_path: Path) -> None:
    path = tmp_path / "cache" / "c.json"  # its directory is made on the first write
    TtlCache(path).put("shapes", "m5.large", {"vcpus": 2}, 3600)
    TtlCache(path).put("shapes", "gone", 1, -1)  # already expired
    TtlCache(path).put("host", "gpus", ["A100"], None)  # no TTL: until it is replaced
    again = TtlCache(path)
    assert again.get("shapes", "m5.large") == {"vcpus": 2}
    assert again.get("shapes", "gone") is None
    assert again.get("host", "gpus") == ["A100"]
    assert again.get("shapes", "other") is None and again.get("other", "m5.large") is None
    kept = json.loads(path.read_text())
    assert set(kept["shapes"]) == {"m5.large"}  # the expired entry went at the next write
    assert kept["host"] == {"gpus": {"value": ["A100"]}}
    assert time.time() < kept["shapes"]["m5.large"]["until"] <= time.time() + 3600


def test_the_aws_drivers_memo_file_reads_as_before(tmp_path: Path) -> None:
    """aws-driver.json as drivers/aws/memo.py wrote it is this format: kept across the move."""
    path = tmp_path / "aws-driver.json"
    future, past = time.time() + 600, time.time() - 1
    path.write_text(json.dumps({
        "shapes": {"m5.large": {"value": {"name": "m5.large", "vcpus": 2}, "until": future}},
        "offered": {"us-east-1/m5.large": {"value": True, "until": future}},
        "quotas_down": {"AKID/us-east-1": {"value": "throttled", "until": past}},
    }))  # fmt: skip
    cache = TtlCache(path)
    assert cache.get("shapes", "m5.large") == {"name": "m5.large", "vcpus": 2}
    assert cache.get("offered", "us-east-1/m5.large") is True
    assert cache.get("quotas_down", "AKID/us-east-1") is None


@pytest.mark.parametrize(
    "text",
    [
        "",
        "{not json",
        "[1, 2]",
        '"a string"',
        "[" * 100_000,  # nested past the recursion limit
        b"\xff\xfe".decode("latin-1"),
        '{"s": [1]}',
        '{"s": {"k": 5}}',
        '{"s": {"k": {"until": 1e300}}}',  # no value
        '{"s": {"k": {"value": 1, "until": true}}}',
        '{"s": {"k": {"value": 1, "until": "2099-01-01"}}}',
        '{"s": {"k": {"value": 1, "until": NaN}}}',
    ],
)
def test_a_corrupt_file_or_entry_is_a_miss_and_is_written_over(tmp_path: Path, text: str) -> None:
    path = tmp_path / "c.json"
    path.write_text(text, encoding="latin-1")
    assert TtlCache(path).get("s", "k") is None
    TtlCache(path).put("s", "k", 7, 60)
    assert TtlCache(path).get("s", "k") == 7
    assert set(json.loads(path.read_text())) == {"s"}


def test_older_formats_read_as_a_miss_and_go_at_the_next_write(tmp_path: Path) -> None:
    host = tmp_path / "host.json"  # providers/local/host.py's own format before
    host.write_text(json.dumps({"boot_id": "b", "path": "/bin", "gpus": [{"model": "A100"}]}))
    engines = tmp_path / "container-engines.json"  # drivers/container/driver.py's before
    engines.write_text(json.dumps({"unix:///e.sock": {"cpus": 64, "ram_gib": 9, "at": 9e9}}))
    assert TtlCache(host).get("host", "gpus") is None
    assert TtlCache(host).get("gpus", "0") is None
    assert TtlCache(engines).get("totals", "unix:///e.sock") is None
    assert TtlCache(engines).get("unix:///e.sock", "cpus") is None
    TtlCache(engines).put("totals", "unix:///e.sock", {"cpus": 4, "ram_gib": 8}, 300)
    assert set(json.loads(engines.read_text())) == {"totals"}


def test_a_write_keeps_what_another_process_wrote_since_the_read(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    one, two = TtlCache(path), TtlCache(path)
    assert one.get("s", "a") is None and two.get("s", "b") is None  # both have read
    one.put("s", "a", 1, 60)
    two.put("s", "b", 2, 60)
    again = TtlCache(path)
    assert (again.get("s", "a"), again.get("s", "b")) == (1, 2)


def test_the_file_is_the_owners_alone_and_no_temporary_is_left(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text("{}")
    path.chmod(0o644)  # as the host cache was written before
    TtlCache(path).put("s", "k", "v", 60)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["c.json"]


def test_a_cache_that_cannot_be_written_costs_nothing_but_the_write(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    cache = TtlCache(blocker / "sub" / "c.json")  # its directory cannot be made
    cache.put("s", "k", 1, 60)
    assert cache.get("s", "k") == 1  # this run still has it
    assert TtlCache(blocker / "sub" / "c.json").get("s", "k") is None


def test_it_imports_nothing_but_json() -> None:
    """Read on every local command's start (the host's GPUs): nothing heavy comes with it,
    only the small standard modules it names (a fresh venv has not imported `typing` by
    then; a machine whose site-packages run .pth files may have)."""
    probe = (
        "import __future__, contextlib, json, os, sys, time, typing, providers.core; "
        "before = set(sys.modules); "
        "import providers.core.ttlcache; print(json.dumps(sorted(set(sys.modules) - before)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=REPO
    )
    assert json.loads(done.stdout) == ["providers.core.ttlcache"]
