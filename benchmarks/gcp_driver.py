#!/usr/bin/env python3
"""`shoal alloc -> status -> free` of a Compute Engine VM, beside the same lifecycle by the
Google Cloud CLI (`gcloud compute instances create`, `describe`, `delete`), on one loopback
Compute Engine.

Starts the Compute Engine v1 stand-in of the gcp driver's tests (tests/drivers/gcp/
standin.py: every request held to the API's discovery document; operations go PENDING ->
RUNNING -> DONE on its clock, with the tests' timing) and a loopback Cloud Billing SKU list
for the price catalog (tests/providers/gcp/payloads.py; shoal never needs it here, since
the type is named, and the run says how many requests it got). gcloud is configured by
tests/drivers/gcp/gcloud.py: `api_endpoint_overrides/compute` = the stand-in, an access
token file, and every other address sent to a dead loopback port. Then --rounds
interleaved rounds (default 10, the order rotated each round), each one sequential cycle
of both kinds:

- `shoal`: three processes of the installed `shoal` (alloc --json, status ID --json,
  free ID), as a user runs them;
- `gcloud compute`: three `gcloud` processes asked for what shoal asks: the same zone,
  machine type, image, labels (shoal-allocation, shoal-managed-by, shoal-expires),
  startup-script (shoal's bytes, its allocation id swapped for gcloud's), maxRunDuration
  with instanceTerminationAction DELETE, and no service account (shoal sets none); then
  `describe` of the instance and `delete --quiet`. gcloud has no flag for the boot disk's
  labels, which shoal also sets.

Both wait for their operations to be DONE. After every cycle the stand-in is asked whether
the VM was created, ran, and is gone with its boot disk; after the warm-up cycle the two
insert bodies are compared field by field. Target (issue 25): shoal at most 1.0x gcloud.

Run from a regular install with the test extras, the Google Cloud CLI on PATH:

    pip install '.[test]'
    python benchmarks/gcp_driver.py [--rounds 10]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
# the tests' stand-in and gcloud helpers; appended, so that `cli` still comes from the install
sys.path.append(str(Path(__file__).resolve().parent.parent))
from _timing import Machine, check_installed, shoal_command
from aws_driver import measure, quartiles, timed
from container import run

if TYPE_CHECKING:
    from tests.drivers.gcp.gcloud import Gcloud
    from tests.drivers.gcp.standin import ComputeStandin

ZONE = "us-central1-a"
TYPE = "e2-standard-2"
IMAGE = "projects/debian-cloud/global/images/family/debian-12"
LIFETIME_SECONDS = 3600
SHOAL, GCLOUD = "shoal", "gcloud compute"
TARGET = 1.0


class Cycles:
    """Both lifecycles on one stand-in, and what each asked of it."""

    def __init__(self, gce: ComputeStandin, gcloud: Gcloud, env: dict[str, str]) -> None:
        self.gce, self.gcloud, self.env = gce, gcloud, env
        self.script = ("", "")  # shoal's first startup-script, and its allocation id
        self.asked: dict[str, list[str]] = {}  # per kind, the methods of its last cycle
        self.ids: dict[str, str] = {}  # per kind, the allocation id of its last cycle

    def shoal(self) -> list[float]:
        shoal = shoal_command()
        steps: list[float] = []
        seen = len(self.gce.requests)
        out = timed(
            steps,
            [*shoal, "alloc", "--driver", "gcp", "--lifetime", "1h",
             "-o", f"machine_type={TYPE}", "-o", f"image={IMAGE}", "--json"],
            self.env,
        )  # fmt: skip
        made = json.loads(out)
        alloc_id, meta = made["id"], made["resource"]["metadata"]
        if (meta["zone"], meta["machine_type"]) != (ZONE, TYPE):
            raise SystemExit(f"{alloc_id}: allocated {meta['machine_type']} in {meta['zone']}")
        status = json.loads(timed(steps, [*shoal, "status", alloc_id, "--json"], self.env))
        if status["driver_status"] != "ALLOCATED":
            raise SystemExit(f"{alloc_id}: driver reports {status['driver_status']}")
        timed(steps, [*shoal, "free", alloc_id], self.env)
        self._lived(meta["instance"])
        self.asked[SHOAL], self.ids[SHOAL] = self._methods(seen), alloc_id
        if not self.script[0]:
            (item,) = self._insert_of(meta["instance"])["metadata"]["items"]
            self.script = (item["value"], alloc_id)
        return steps

    def gcloud_cycle(self) -> list[float]:
        """What shoal asks of Compute Engine, said to gcloud."""
        if not self.script[0]:
            raise SystemExit("shoal's cycle runs first: gcloud is given its startup-script")
        alloc_id = f"gcp-{uuid.uuid4().hex[:8]}"  # shoal's shape of id, so as many bytes
        name = f"shoal-{alloc_id}"
        script = self.gcloud.root / f"{alloc_id}.sh"
        script.write_text(self.script[0].replace(self.script[1], alloc_id))
        expires = math.ceil(time.time()) + LIFETIME_SECONDS
        labels = f"shoal-allocation={alloc_id},shoal-managed-by=shoal,shoal-expires={expires}"
        gcloud = [self.gcloud.binary, "compute", "instances"]
        steps: list[float] = []
        seen = len(self.gce.requests)
        timed(
            steps,
            [*gcloud, "create", name, f"--zone={ZONE}", f"--machine-type={TYPE}",
             f"--image={IMAGE}", f"--labels={labels}",
             f"--metadata-from-file=startup-script={script}",
             f"--max-run-duration={LIFETIME_SECONDS}s", "--instance-termination-action=DELETE",
             "--no-service-account", "--no-scopes", "--format=json"],
            self.gcloud.env,
        )  # fmt: skip
        out = timed(
            steps, [*gcloud, "describe", name, f"--zone={ZONE}", "--format=json"], self.gcloud.env
        )
        if json.loads(out)["status"] != "RUNNING":
            raise SystemExit(f"{name} is {json.loads(out)['status']}")
        timed(steps, [*gcloud, "delete", name, f"--zone={ZONE}", "--quiet"], self.gcloud.env)
        script.unlink()
        self._lived(name)
        self.asked[GCLOUD], self.ids[GCLOUD] = self._methods(seen), alloc_id
        return steps

    def _lived(self, name: str) -> None:
        """The stand-in created the VM, ran it, and deleted it with its boot disk."""
        where = f"{ZONE}/{name}"
        with self.gce.lock:
            happened = [(what, why) for what, at, why in self.gce.events if at == where]
        wanted = [("created", "insert"), ("running", "insert"), ("deleted", "delete")]
        if [e for e in happened if e[0] != "stopping"] != wanted:
            raise SystemExit(f"{where}: the stand-in saw {happened}, not {wanted}")
        if self.gce.instance(ZONE, name) is not None or self.gce.disk(ZONE, name) is not None:
            raise SystemExit(f"{where}: still there after the delete")

    def _methods(self, since: int) -> list[str]:
        with self.gce.lock:
            return [s.method for s in self.gce.requests[since:]]

    def _insert_of(self, name: str) -> dict[str, Any]:
        for seen in reversed(self.gce.calls("compute.instances.insert")):
            if seen.body.get("name") == name:
                body: dict[str, Any] = seen.body
                return body
        raise SystemExit(f"the stand-in got no insert of {name}")

    def compare(self) -> list[str]:
        """How the last inserts of the two differ (apart from the id, names and links)."""
        bodies = {
            kind: essentials(self._insert_of(f"shoal-{alloc_id}"), alloc_id, self.gce.project)
            for kind, alloc_id in self.ids.items()
        }
        ours, theirs = bodies[SHOAL], bodies[GCLOUD]
        return [
            f"{key}: shoal {ours.get(key)!r}, gcloud {theirs.get(key)!r}"
            for key in sorted(ours.keys() | theirs.keys())
            if ours.get(key) != theirs.get(key)
        ]


def essentials(body: dict[str, Any], alloc_id: str, project: str) -> dict[str, Any]:
    """What an insert asks for: links cut to their path, the allocation's id and expiry
    replaced, the lifetime to the minute."""

    def path(link: str) -> str:
        return link.split("/compute/v1/", 1)[-1].removeprefix(f"projects/{project}/")

    labels = dict(body.get("labels") or {})
    expires = labels.pop("shoal-expires", "")
    labels = {k: v.replace(alloc_id, "ID") for k, v in labels.items()}
    (disk,) = body["disks"]
    params = disk["initializeParams"]
    scheduling = dict(body.get("scheduling") or {})
    seconds = int((scheduling.pop("maxRunDuration", None) or {}).get("seconds", 0))
    (nic,) = body["networkInterfaces"]
    return {
        "machineType": path(body["machineType"]),
        "sourceImage": path(params["sourceImage"]),
        "boot, autoDelete": (disk.get("boot"), disk.get("autoDelete")),
        "boot disk labels": sorted(params.get("labels") or {}),
        "labels": labels,
        "shoal-expires in 1h": abs(int(expires or 0) - time.time() - LIFETIME_SECONDS) < 300,
        "metadata": [
            (i["key"], i["value"].replace(alloc_id, "ID")) for i in body["metadata"]["items"]
        ],
        "maxRunDuration, minutes": round(seconds / 60),
        "instanceTerminationAction": scheduling.get("instanceTerminationAction"),
        "external address": len(nic.get("accessConfigs") or []),
        "serviceAccounts": [a.get("email") for a in body.get("serviceAccounts") or []],
    }


def report(taken: dict[str, list[list[float]]], machine: str) -> None:
    rounds = len(taken[SHOAL])
    print(f"{rounds} interleaved rounds, ms per alloc -> status -> free cycle; {machine}")
    print(f"  {'':16} {'median':>7} {'q1':>7} {'q3':>7} {'min':>7} {'max':>7}   steps (medians)")
    walls = {kind: [sum(steps) for steps in values] for kind, values in taken.items()}
    for kind, values in walls.items():
        q1, median, q3 = (v * 1000 for v in quartiles(values))
        low, high = min(values) * 1000, max(values) * 1000
        steps = " + ".join(
            f"{statistics.median(s[i] for s in taken[kind]) * 1000:.0f}" for i in range(3)
        )
        print(f"  {kind:16} {median:7.0f} {q1:7.0f} {q3:7.0f} {low:7.0f} {high:7.0f}   {steps}")
    ratio = statistics.median(walls[SHOAL]) / statistics.median(walls[GCLOUD])
    paired = [s / g for s, g in zip(walls[SHOAL], walls[GCLOUD], strict=True)]
    q1, mid, q3 = quartiles(paired)
    verdict = "met" if ratio <= TARGET else "NOT MET"
    print(
        f"  shoal / gcloud: {ratio:.2f}x by the medians (per round: median {mid:.2f}x, "
        f"quartiles {q1:.2f}-{q3:.2f}x); target <= {TARGET}x: {verdict}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    check_installed()
    from tests.drivers.gcp.gcloud import DEAD, Gcloud, gcloud_path
    from tests.drivers.gcp.standin import TOKEN, ComputeStandin, Timing
    from tests.providers.apiserver import ApiServer
    from tests.providers.gcp import payloads

    if gcloud_path() is None:
        raise SystemExit("no `gcloud` on PATH: install the Google Cloud CLI")
    work = Path(tempfile.mkdtemp(prefix="shoal-bench-gcp-"))
    timing = Timing()  # the tests' (short) operation times: the same wait for both sides
    try:
        with ComputeStandin(timing=timing) as gce, ApiServer() as billing:
            gce.tokens = {TOKEN}
            billing.route(payloads.SKUS_PATH, payloads.skus_handler([payloads.catalog()]))
            (work / "gcloud").mkdir()
            gcloud = Gcloud(gce.endpoint, TOKEN, gce.project, root=work / "gcloud")
            home = work / "shoal"
            home.mkdir()
            drop = ("SHOAL_", "GOOGLE_", "CLOUDSDK_", "GCE_METADATA")
            env = {
                **{k: v for k, v in os.environ.items() if not k.startswith(drop)},
                # as gcloud's: anything but loopback goes to a dead port, not the network
                **{k: DEAD for k in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")},
                "NO_PROXY": "127.0.0.1,localhost",
                "no_proxy": "127.0.0.1,localhost",
                "SHOAL_HOME": str(home),
                "SHOAL_GCP_TOKEN": TOKEN,
                "SHOAL_GCP_PROJECT": gce.project,
                "SHOAL_GCP_COMPUTE_URL": gce.base,
                "SHOAL_GCP_BILLING_URL": billing.base,
                "SHOAL_GCP_API_KEY": payloads.API_KEY,
            }
            both = Cycles(gce, gcloud, env)
            cycles: dict[str, Callable[[], list[float]]] = {
                SHOAL: both.shoal,
                GCLOUD: both.gcloud_cycle,
            }
            for cycle in cycles.values():  # warm: page cache; shoal's first gives the script
                cycle()
            differ = both.compare()
            version = run([gcloud.binary, "--version"], gcloud.env).splitlines()[0]
            print(f"shoal: {' '.join(shoal_command())}; {version}; stand-in at {gce.base}")
            print(
                f"{TYPE} in {ZONE}, {IMAGE}, --lifetime 1h on both sides; operations on the "
                f"stand-in: insert {(timing.pending + timing.provision + timing.stage):g} s, "
                f"delete {(timing.pending + timing.stop):g} s"
            )
            print("inserts differ only in: " + ("; ".join(differ) or "nothing"))
            for kind, methods in both.asked.items():
                counted = ", ".join(f"{m.removeprefix('compute.')} x{n}" if n > 1 else
                                    m.removeprefix("compute.")
                                    for m, n in Counter(methods).items())  # fmt: skip
                print(f"requests per {kind} cycle ({len(methods)}): {counted}")
            machine = Machine()
            taken = measure(cycles, args.rounds)
            report(taken, machine.since())
            print(f"price catalog requests by shoal: {len(billing.seen)}")
            with gce.lock:
                broken, unserved = list(gce.violations), list(gce.unserved)
            if broken or unserved:
                raise SystemExit(f"the stand-in's contract was broken: {broken} {unserved}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
