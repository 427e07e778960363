"""The `container` driver against a real Podman (tests/drivers/container/conftest.py), through
the CLI: limits, labels, env, networks, exits, free, tasks, pulled images, capacity, restarts."""

from __future__ import annotations

import json
import re
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Run, wait_for
from tests.drivers.container.conftest import BUSYBOX_APPLETS, Podman, find_busybox
from tests.drivers.image import archives as A
from tests.drivers.image.server import ImageServer

pytestmark = pytest.mark.engine

# busybox sleep as PID 1 ignores SIGTERM (PID 1 has no default handlers), so without this
# every free would wait the full default grace of 10 s before the kill.
CONFIG = '[drivers."container/default"]\ngrace_seconds = 1\n'
IDLE = "sleep 600"

Shoal = Callable[..., Run]


def alloc(shoal: Shoal, podman: Podman, *args: str, entry: str = IDLE) -> dict[str, Any]:
    run = shoal(
        "alloc", "--driver", "container", "--cpu", "1", "--ram", "1",
        "-o", f"image={podman.image}", "-o", f"entry={entry}", "--json", *args,
    )  # fmt: skip
    assert run.exit_code == 0, run.stderr
    return dict(run.json())


def inspect(podman: Podman, cid: str) -> dict[str, Any]:
    return dict(json.loads(podman.run("inspect", "--type", "container", cid))[0])


def exists(podman: Podman, cid: str) -> bool:
    return cid in podman.run("ps", "-a", "-q", "--no-trunc").split()


def engine_info(podman: Podman) -> dict[str, Any]:
    from providers.core.http import httpx

    # A loaded machine's Podman can take seconds over /info: not what these tests are about.
    transport = httpx.HTTPTransport(uds=str(podman.sock))
    with httpx.Client(transport=transport, timeout=60) as client:
        return dict(client.get("http://engine/v1.41/info").json())


def status(shoal: Shoal, alloc_id: str) -> dict[str, Any]:
    run = shoal("status", alloc_id, "--json")
    assert run.exit_code == 0, run.stderr
    return dict(run.json())


def test_alloc_runs_a_limited_labelled_container(shoal: Shoal, podman_engine: Podman) -> None:
    one = alloc(shoal, podman_engine, "-m", "RUN=7", "-o", 'env={"GREETING": "hi there"}')
    res = one["resource"]
    seen = inspect(podman_engine, res["metadata"]["container"])
    assert seen["State"]["Running"] is True
    assert seen["HostConfig"]["NanoCpus"] == 10**9
    assert seen["HostConfig"]["Memory"] == 2**30
    assert seen["HostConfig"]["MemorySwap"] == 2**30  # no swap beyond the limit
    labels = seen["Config"]["Labels"]
    assert labels["dev.shoal.managed-by"] == "shoal"
    assert labels["dev.shoal.allocation"] == one["id"]
    env = seen["Config"]["Env"]
    assert {"RUN=7", "GREETING=hi there", f"SHOAL_ALLOCATION_ID={one['id']}"} <= set(env)
    # nat: the address and MAC the container really has are reported
    assert res["ip_addr"] and res["ip_addr"] == _network(seen)["IPAddress"]
    assert res["hw_addr"] == _network(seen)["MacAddress"]
    after = status(shoal, one["id"])
    assert (after["status"], after["driver_status"]) == ("ALLOCATED", "ALLOCATED")
    assert after["detail"]["state"] == "running"


def test_nat_mac_is_the_generated_locally_administered_one(
    shoal: Shoal, podman_engine: Podman
) -> None:
    """The driver generates a 02:xx MAC; the container must carry it (Podman takes a MAC only
    per network, in NetworkingConfig.EndpointsConfig, not the top-level MacAddress)."""
    one = alloc(shoal, podman_engine)
    # Podman's own random MACs are locally administered too: only the 02 prefix tells them apart
    assert one["resource"]["hw_addr"].startswith("02:"), one["resource"]["hw_addr"]
    seen = inspect(podman_engine, one["resource"]["metadata"]["container"])
    assert _network(seen)["MacAddress"] == one["resource"]["hw_addr"]


def test_network_none_has_no_address(shoal: Shoal, podman_engine: Podman) -> None:
    one = alloc(shoal, podman_engine, "-o", "network=none")
    # empty fields are left out of the wire form
    assert (one["resource"].get("ip_addr"), one["resource"].get("hw_addr")) in {
        ("", ""),
        (None, None),
    }
    seen = inspect(podman_engine, one["resource"]["metadata"]["container"])
    assert seen["HostConfig"]["NetworkMode"] == "none"
    assert seen["State"]["Running"] is True


def ledger_status(home: Path, alloc_id: str) -> str:
    from drivers.ledger.book import Ledger

    ledger = Ledger(home / "state" / "ledger.sqlite")
    try:
        return ledger.get(alloc_id).status
    finally:
        ledger.close()


def test_a_container_that_exits_at_once_is_exited_with_its_code_and_log(
    shoal: Shoal, podman_engine: Podman, home: Path
) -> None:
    one = alloc(shoal, podman_engine, entry='sh -c "echo boom; exit 3"')
    # Recorded by its supervisor, with no shoal command asking the engine.
    wait_for(lambda: ledger_status(home, one["id"]) == "EXITED", "the ledger to say EXITED", 30)
    after = status(shoal, one["id"])
    assert after["status"] == "EXITED"
    assert after["note"].startswith("exited with code 3 at ")
    assert after["driver_status"] == "NONE"
    assert after["detail"]["exit_code"] == 3
    assert "boom" in after["detail"]["log_tail"]
    assert after["detail"]["state"] == "exited"


def test_a_finished_container_gives_its_capacity_back(
    shoal: Shoal, podman_engine: Podman, home: Path
) -> None:
    """docker shows Exited at once; the capacity must follow without a `status ID`."""
    cpus = int(engine_info(podman_engine)["NCPU"])
    run = shoal(
        "alloc", "--driver", "container", "--cpu", str(cpus), "--ram", "1",
        "-o", f"image={podman_engine.image}", "-o", "entry=sleep 1", "--json",
    )  # fmt: skip
    assert run.exit_code == 0, run.stderr
    first = run.json()["id"]
    wait_for(lambda: ledger_status(home, first) == "EXITED", "EXITED", 30)
    second = shoal(
        "alloc", "--driver", "container", "--cpu", str(cpus), "--ram", "1",
        "-o", f"image={podman_engine.image}", "-o", f"entry={IDLE}", "--json",
    )  # fmt: skip
    assert second.exit_code == 0, second.stderr
    assert shoal("free", second.json()["id"]).exit_code == 0
    assert shoal("free", first).exit_code == 0


def test_a_container_removed_outside_shoal_is_gone_at_once(
    shoal: Shoal, podman_engine: Podman, home: Path
) -> None:
    one = alloc(shoal, podman_engine)
    podman_engine.run("rm", "-f", "-t", "0", one["resource"]["metadata"]["container"])
    wait_for(lambda: ledger_status(home, one["id"]) in ("GONE", "EXITED"), "the end", 30)


def test_free_stops_and_removes_and_is_harmless_twice(shoal: Shoal, podman_engine: Podman) -> None:
    one = alloc(shoal, podman_engine)
    cid = one["resource"]["metadata"]["container"]
    first = shoal("free", one["id"])
    assert first.exit_code == 0, first.stderr
    assert not exists(podman_engine, cid)
    second = shoal("free", one["id"])
    assert second.exit_code == 0, second.stderr
    assert "already freed" in second.stdout + second.stderr


def test_free_of_a_container_removed_by_hand(shoal: Shoal, podman_engine: Podman) -> None:
    one = alloc(shoal, podman_engine)
    podman_engine.run("rm", "-f", "-t", "0", one["resource"]["metadata"]["container"])
    run = shoal("free", one["id"])
    assert run.exit_code == 0, run.stderr
    assert status(shoal, one["id"])["status"] == "FREED"


def test_snapshot_commits_an_image_that_exists(shoal: Shoal, podman_engine: Podman) -> None:
    one = alloc(shoal, podman_engine)
    repo = f"shoal-test-snap-{podman_engine.token}"
    run = shoal("task", one["id"], "snapshot", "--options", json.dumps({"repo": repo}))
    assert run.exit_code == 0, run.stderr
    image = run.json()["image"]
    assert image
    seen = json.loads(podman_engine.run("image", "inspect", image))[0]
    assert seen["Id"].removeprefix("sha256:").startswith(image.removeprefix("sha256:")[:12])
    assert any(repo in name for name in seen.get("RepoTags") or [])


def test_export_writes_the_filesystem_as_a_tar(
    shoal: Shoal, podman_engine: Podman, tmp_path: Path
) -> None:
    one = alloc(shoal, podman_engine)
    target = tmp_path / "fs.tar"
    run = shoal("task", one["id"], "export", "--options", json.dumps({"path": str(target)}))
    assert run.exit_code == 0, run.stderr
    assert run.json()["bytes"] == target.stat().st_size
    with tarfile.open(target) as tar:
        names = {name.removeprefix("./") for name in tar.getnames()}
    assert "bin/busybox" in names
    assert not list(tmp_path.glob(".*.part"))


def test_pulled_rootfs_image_is_imported_once(
    shoal: Shoal, podman_engine: Podman, tmp_path: Path
) -> None:
    busybox = find_busybox()
    assert busybox is not None
    entries: list[A.Entry] = [
        A.Dir("bin", mode=0o755),
        A.File("bin/busybox", busybox.read_bytes(), mode=0o755),
        *(A.Symlink(f"bin/{applet}", "busybox") for applet in BUSYBOX_APPLETS),
    ]
    name = f"bb{podman_engine.token}"  # the token: session cleanup removes the import
    with ImageServer() as server:
        url = server.add(f"/{name}-1.0.tar.gz", A.make_tar(entries, "gz"))
        pulled = shoal("image", "pull", url, "--json")
    assert pulled.exit_code == 0, pulled.stderr
    one = alloc(shoal, podman_engine, "-o", f"image={name}-1.0")
    reference = one["resource"]["metadata"]["image"]
    assert name in reference
    assert inspect(podman_engine, one["resource"]["metadata"]["container"])["State"]["Running"]
    image_id = json.loads(podman_engine.run("image", "inspect", reference))[0]["Id"]
    two = alloc(shoal, podman_engine, "-o", f"image={name}-1.0")
    assert two["resource"]["metadata"]["image"] == reference
    # imported again would be a new image (a new config with its own creation time)
    assert json.loads(podman_engine.run("image", "inspect", reference))[0]["Id"] == image_id
    listed = json.loads(podman_engine.run("images", "--format", "json"))
    assert sum(1 for i in listed for n in i.get("Names") or [] if name in n) == 1


def test_a_missing_image_from_an_unreachable_registry_is_69(
    shoal: Shoal, podman_engine: Podman
) -> None:
    # The engine pulls what it lacks (drivers/container/pull.py); a registry on a loopback
    # port nothing listens on keeps the test off every network (a missing image a registry
    # answers for is in test_container_pull.py).
    run = shoal(
        "alloc", "--driver", "container", "--cpu", "1", "--ram", "1",
        "-o", f"image=127.0.0.1:1/shoal-test-absent-{podman_engine.token}:1",
        "-o", f"entry={IDLE}",
    )  # fmt: skip
    assert run.exit_code == 69, run.stderr
    assert "127.0.0.1:1" in run.stderr


def test_capacity_is_the_engine_cpus(shoal: Shoal, podman_engine: Podman) -> None:
    info = engine_info(podman_engine)
    cpus, ram = int(info["NCPU"]), int(info["MemTotal"]) // 2**30
    base = ["alloc", "--driver", "container", "--ram", "1", "-o", f"image={podman_engine.image}"]
    run = shoal(*base, "--cpu", "1", "--dry-run", "--json")
    assert run.exit_code == 0, run.stderr
    assert run.json()["fits"] == min(cpus, ram)
    over = shoal(*base, "--cpu", str(cpus + 1), "--dry-run", "--json")
    assert over.exit_code == 2, over.stderr
    assert f"cpu={cpus} ram={ram}GiB" in over.stderr
    real = shoal(*base, "--cpu", str(cpus + 1), "-o", f"entry={IDLE}")
    assert real.exit_code == 2, real.stderr
    assert f"can never fit: the driver's total is {cpus} (cpu), the engine's" in real.stderr


def test_resources_breakdown_shows_the_container_driver(
    shoal: Shoal, podman_engine: Podman
) -> None:
    alloc(shoal, podman_engine)
    run = shoal("resources", "--provider", "local")
    assert run.exit_code == 0, run.stderr
    assert "driver=container/default" in run.stdout


def test_engine_restart_status_tells_the_truth(shoal: Shoal, podman_engine: Podman) -> None:
    one = alloc(shoal, podman_engine)
    cid = one["resource"]["metadata"]["container"]
    podman_engine.stop()
    try:
        down = status(shoal, one["id"])
        assert down["driver_status"] == "ERROR"
        assert str(podman_engine.sock) in down["drift"]
        assert down["status"] == "ALLOCATED"  # an unreachable engine is no proof it is gone
    finally:
        podman_engine.start()
    running = cid in podman_engine.run("ps", "-q", "--no-trunc")
    # What Podman 4.3 does: conmon, not the service, holds the container, so it lives on.
    assert running
    after = status(shoal, one["id"])
    assert after["driver_status"] == ("ALLOCATED" if running else "NONE")
    assert after["status"] == ("ALLOCATED" if running else "GONE")


def _network(seen: dict[str, Any]) -> dict[str, Any]:
    networks = seen["NetworkSettings"].get("Networks") or {}
    return dict(next(iter(networks.values())))


def test_export_into_a_missing_directory_is_a_usage_error(
    shoal: Shoal, podman_engine: Podman, tmp_path: Path
) -> None:
    one = alloc(shoal, podman_engine)
    target = tmp_path / "nowhere" / "fs.tar"
    run = shoal("task", one["id"], "export", "--options", json.dumps({"path": str(target)}))
    assert run.exit_code == 2 and "not a directory" in run.stderr


def test_env_cannot_forge_the_allocation_id(shoal: Shoal, podman_engine: Podman) -> None:
    one = alloc(shoal, podman_engine, "-o", 'env={"SHOAL_ALLOCATION_ID": "forged"}')
    env = inspect(podman_engine, one["resource"]["metadata"]["container"])["Config"]["Env"]
    assert f"SHOAL_ALLOCATION_ID={one['id']}" in env
    assert "SHOAL_ALLOCATION_ID=forged" not in env


def test_image_dirs_with_one_name_stay_apart_and_files_belong_to_root(
    shoal: Shoal, podman_engine: Podman, tmp_path: Path
) -> None:
    busybox = find_busybox()
    assert busybox is not None
    made = []
    for side in ("one", "two"):
        root = tmp_path / side / f"rootfs{podman_engine.token}"
        (root / "bin").mkdir(parents=True)
        (root / "bin" / "busybox").write_bytes(busybox.read_bytes())
        (root / "bin" / "busybox").chmod(0o755)
        for applet in BUSYBOX_APPLETS:
            (root / "bin" / applet).symlink_to("busybox")
        (root / "who").write_text(side)
        made.append(alloc(shoal, podman_engine, "-o", f"image={root}", entry="cat /who"))
    first, second = (m["resource"]["metadata"]["image"] for m in made)
    assert first != second
    listing = podman_engine.run("run", "--rm", first, "ls", "-ln", "/who")
    assert listing.split()[2:4] == ["0", "0"]


def test_status_remote_lists_the_engine_containers_of_shoal(
    shoal: Shoal, podman_engine: Podman, tmp_path: Path
) -> None:
    one = alloc(shoal, podman_engine)
    other_home = tmp_path / "other-machine"  # another ledger on the same engine
    other_home.mkdir()
    (other_home / "config.toml").write_text(CONFIG)
    made = shoal(
        "alloc", "--driver", "container", "--cpu", "1", "--ram", "1",
        "-o", f"image={podman_engine.image}", "-o", f"entry={IDLE}", "--json",
        env={"SHOAL_HOME": str(other_home)},
    )  # fmt: skip
    assert made.exit_code == 0, made.stderr
    two = made.json()
    run = shoal("status", "--remote", "container", "--json")
    assert run.exit_code == 0, run.stderr
    listed = {r["id"]: r for r in run.json()}
    assert listed[one["id"]]["detail"]["state"] == listed[two["id"]]["detail"]["state"] == "running"
    # The fields every driver's listing shares, as `status` shows them: RFC 3339 times.
    assert listed[one["id"]]["status"] == "running"
    assert listed[one["id"]]["driver"] == "container/default"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", listed[one["id"]]["created"])
    table = shoal("status", "--remote", "container")
    assert table.exit_code == 0 and "Age" in table.stdout and one["id"] in table.stdout
    shoal("free", two["id"], env={"SHOAL_HOME": str(other_home)})
