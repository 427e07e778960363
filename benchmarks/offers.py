#!/usr/bin/env python3
"""`shoal offers --gpus 8 -p aws,azure,gcp -r all` against the same answer assembled the way
a script does it today: `shoal pricing -p P -r all --json` and `shoal resources -p P -r all
--json` for each provider, one after another, then a Python join.

One loopback server serves every cloud from the tests' recorded payloads (tests/providers:
AWS Price List files, EC2 XML and Service Quotas JSON for 17 regions; Azure Retail Prices,
locations, usages and capacity reservation groups for 8 regions; GCP's SKU list, machine
types, regions.list with quotas, the project and its reservations for 3 regions) and waits
50 ms before every answer (a realistic round trip to a cloud API). Cold: an empty cache
each round, shoal and the script in interleaved rounds, medians and spreads. Warm: the
same `offers` answered from the cache, beside `shoal --help`. Targets: cold at most 0.5x
of the script's time; warm under 2x of `--help`. Run from a regular `pip install .` in the
repository root (it borrows the tests' payload builders).

    python benchmarks/offers.py [--runs 5] [--latency-ms 50]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent))
# tests/ payload builders; appended, so that `cli` still comes from the installed copy
sys.path.append(str(Path(__file__).resolve().parent.parent))
from _timing import check_installed, interleaved_medians, shoal_command
from accounts import REGIONS as AWS_REGIONS
from accounts import ec2_answer, quotas_answer

from tests.providers.apiserver import Reply
from tests.providers.aws import payloads as aws
from tests.providers.azure import account_payloads as az_account
from tests.providers.azure import payloads as az
from tests.providers.gcp import account_payloads as gcp_account
from tests.providers.gcp import payloads as gcp

COLD_TARGET = 0.5
WARM_TARGET = 2.0
AZ_REGIONS = [
    "australiaeast", "centralus", "eastus", "eastus2", "northeurope", "southcentralus",
    "westeurope", "westus2",
]  # fmt: skip
AZ_SIZES = [  # (size, on-demand, spot)
    ("Standard_ND96isr_H100_v5", 98.32, 29.5),
    ("Standard_NC40ads_H100_v5", 6.98, 2.1),
    ("Standard_NC24ads_A100_v4", 3.673, 0.7346),
    ("Standard_NC4as_T4_v3", 0.526, 0.158),
    ("Standard_D4s_v5", 0.192, 0.0384),
]
GCP_ZONES = {"us-central1": "a", "us-east1": "b", "europe-west1": "b"}
Route = Callable[[dict[str, list[str]], dict[str, str], bytes], Reply]


class Routes:
    """Handlers by path, under a prefix per cloud (what the tests' APIs `serve` onto)."""

    def __init__(self, prefix: str, table: dict[str, Route]) -> None:
        self.prefix, self.table = prefix, table

    def route(self, path: str, target: Any) -> None:
        if isinstance(target, bytes):
            self.table[self.prefix + path] = lambda q, h, b, data=target: Reply(200, data)
        else:
            self.table[self.prefix + path] = lambda q, h, b, handle=target: handle(q, h)


def aws_routes(base: str, table: dict[str, Route]) -> None:
    pricing = Routes("/aws-pricing", table)
    index = aws.region_index({r: aws.OFFER_PATH.format(region=r) for r in AWS_REGIONS})
    pricing.route(aws.REGION_INDEX_PATH, json.dumps(index).encode())
    for region in AWS_REGIONS:
        products, on_demand, reserved = aws.catalog_products(region, "USD")
        pricing.route(
            aws.OFFER_PATH.format(region=region), aws.offer_file(products, on_demand, reserved)
        )
        spot = aws.spot_page(
            [
                ("p5.48xlarge", f"{region}a", "39.3"),
                ("p4d.24xlarge", f"{region}b", "12.1"),
                ("g5.xlarge", f"{region}a", "0.43"),
                ("g6.xlarge", f"{region}c", "0.35"),
            ]
        )

        def ec2(q: dict[str, list[str]], h: dict[str, str], b: bytes, r: str = region,
                spot: bytes = spot) -> Reply:  # fmt: skip
            action = q.get("Action", [""])[0]
            body = spot if action == "DescribeSpotPriceHistory" else ec2_answer(action, r)
            return Reply(200, body, {"Content-Type": "text/xml"})

        table[f"/ec2/{region}"] = ec2
        table[f"/quotas/{region}"] = lambda q, h, b, r=region: Reply(
            200, quotas_answer(r), {"Content-Type": "application/x-amz-json-1.1"}
        )


def azure_routes(base: str, table: dict[str, Route]) -> None:
    rows = [
        az.price_item(size, price, region=region, **({"variant": "Spot"} if spot else {}))
        for region in AZ_REGIONS
        for size, od, sp in AZ_SIZES
        for price, spot in ((od, False), (sp, True))
    ]
    prices = Routes("/azure-prices", table)
    prices.route(az.PRICES_PATH, az.PricesApi(rows, base=base + "/azure-prices", page_size=100))
    management = Routes("/azure-mgmt", table)
    api = az_account.SubscriptionApi(
        base=base + "/azure-mgmt",
        usages={r: az_account.eastus_usages() for r in AZ_REGIONS},
        page_size=100,
    )
    api.serve(management)
    locations = [az.location(r, r) for r in AZ_REGIONS]
    management.route(az.LOCATIONS_PATH, api.handler(az.LOCATIONS_PATH, locations, "2022-12-01"))
    management.route(az.SKUS_PATH, lambda q, h: Reply.json({"value": []}))


def gcp_routes(base: str, table: dict[str, Route]) -> None:
    billing = Routes("/gcp-billing", table)
    billing.route(gcp.SKUS_PATH, gcp.skus_handler(gcp.pages(gcp.catalog(), 8)))
    compute = Routes("/gcp-compute", table)
    types: dict[str, Any] = {}
    for region, zone in GCP_ZONES.items():
        at = f"{region}-{zone}"
        types[f"zones/{at}"] = {
            "machineTypes": [
                gcp.machine_type("a3-highgpu-8g", 208, 1872 * 1024, at, "nvidia-h100-80gb", 8),
                gcp.machine_type("a2-highgpu-1g", 12, 87040, at, "nvidia-tesla-a100", 1),
                gcp.machine_type("a2-highgpu-8g", 96, 696320, at, "nvidia-tesla-a100", 8),
                gcp.machine_type("g2-standard-8", 8, 32768, at, "nvidia-l4", 1),
                gcp.machine_type("n2-standard-4", 4, 16384, at),
            ]
        }
    compute.route(gcp.MACHINE_TYPES_PATH, gcp.compute_handler([{"items": types}]))
    quotas = [
        gcp_account.quota("CPUS", 2400.0, 8.0),
        gcp_account.quota("A3_CPUS", 2400.0, 0.0),
        gcp_account.quota("A2_CPUS", 960.0, 0.0),
        gcp_account.quota("NVIDIA_H100_GPUS", 16.0, 0.0),
        gcp_account.quota("NVIDIA_A100_GPUS", 16.0, 0.0),
        gcp_account.quota("NVIDIA_L4_GPUS", 8.0, 0.0),
    ]
    regions = [gcp_account.region(r, ["a", "b", "c"], quotas) for r in GCP_ZONES]
    gcp_account.ProjectApi(regions=regions).serve(compute)


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hangs up (shoal stops reading an offer file once it has what it
        # needs) is expected; anything else is printed.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)

    # A cloud API's listen queue is deep; the default 5 drops SYNs when many requests start
    # at once, and the kernel's 1 s SYN retry would be timed as shoal's.
    request_queue_size = 256
    latency = 0.05
    requests = 0
    lock = threading.Lock()
    routes: dict[str, Route] = {}


class Handler(BaseHTTPRequestHandler):
    server: Server
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def _answer(self) -> None:
        parts = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        with self.server.lock:
            self.server.requests += 1
        time.sleep(self.server.latency)
        query = parse_qs(parts.query, keep_blank_values=True)
        headers = {k.lower(): v for k, v in self.headers.items()}
        route = self.server.routes.get(parts.path)
        reply = route(query, headers, body) if route else Reply.json({"error": "not found"}, 404)
        self.send_response(reply.status)
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(reply.body)))
        self.end_headers()
        self.wfile.write(reply.body)

    do_GET = _answer
    do_POST = _answer


# The baseline: a script as one is written today, in a fresh Python process.
SCRIPT = r"""
import json, math, subprocess, sys
shoal = json.loads(sys.argv[1])
offers = []
for provider in ("aws", "azure", "gcp"):
    ask = lambda *a: json.loads(subprocess.run([*shoal, *a, "-p", provider, "-r", "all",
        "--json"], capture_output=True, check=True).stdout)
    prices, accounts = ask("pricing"), ask("resources")
    regions = {r["region"]["name"] for r in accounts}
    for entry in prices:
        for name, item in entry.get("items", {}).items():
            shape = entry.get("shapes", {}).get(name) or {}
            gpus = shape.get("gpu_count") or 0
            price = item.get("onDemandPrice")
            if gpus < 1 or price is None:
                continue
            count = math.ceil(8 / gpus)
            offers.append((price * count, provider, entry["region"]["name"], name, count,
                           entry["region"]["name"] in regions))
offers.sort()
print(json.dumps(offers[:20]))
"""


def env_for(base: str, home: str) -> dict[str, str]:
    return {
        **os.environ,
        "SHOAL_HOME": home,
        "AWS_ACCESS_KEY_ID": "AKIDBENCHMARK",
        "AWS_SECRET_ACCESS_KEY": "benchmark-secret",
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        "SHOAL_AWS_PRICING_URL": base + "/aws-pricing",
        "SHOAL_AWS_EC2_URL": base + "/ec2/{region}",
        "SHOAL_AWS_QUOTAS_URL": base + "/quotas/{region}",
        "SHOAL_AZURE_PRICES_URL": base + "/azure-prices",
        "SHOAL_AZURE_MANAGEMENT_URL": base + "/azure-mgmt",
        "SHOAL_AZURE_TOKEN": az.TOKEN,
        "AZURE_SUBSCRIPTION_ID": az.SUBSCRIPTION,
        "SHOAL_GCP_BILLING_URL": base + "/gcp-billing",
        "SHOAL_GCP_COMPUTE_URL": base + "/gcp-compute",
        "SHOAL_GCP_API_KEY": gcp.API_KEY,
        "SHOAL_GCP_TOKEN": gcp.TOKEN,
        "SHOAL_GCP_PROJECT": gcp.PROJECT,
    }


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):7.0f} ms  ({min(values):.0f}-{max(values):.0f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    args = parser.parse_args()
    check_installed()
    server = Server(("127.0.0.1", 0), Handler)
    server.latency = args.latency_ms / 1000
    base = f"http://127.0.0.1:{server.server_address[1]}"
    routes: dict[str, Route] = {}
    aws_routes(base, routes)
    azure_routes(base, routes)
    gcp_routes(base, routes)
    server.routes = routes
    threading.Thread(target=server.serve_forever, daemon=True).start()
    shoal = shoal_command()
    question = [*shoal, "offers", "--gpus", "8", "-p", "aws,azure,gcp", "-r", "all", "--json"]
    script = [sys.executable, "-c", SCRIPT, json.dumps(shoal)]
    with tempfile.TemporaryDirectory() as root:
        # One run of each to check the answers and count the requests.
        counts: dict[str, int] = {}
        for name, argv in (("offers", question), ("script", script)):
            home = tempfile.mkdtemp(dir=root)
            server.requests = 0
            done = subprocess.run(argv, env=env_for(base, home), capture_output=True, text=True)
            if done.returncode != 0:
                raise SystemExit(f"{name} failed ({done.returncode}): {done.stderr}")
            counts[name] = server.requests
            if name == "offers":
                answer = json.loads(done.stdout)
                if answer["failures"]:
                    raise SystemExit(f"offers: failures {answer['failures']}")
                regions = {(o["provider"], o["region"]["name"]) for o in answer["offers"]}
                answered = len(answer["offers"])
        samples: dict[str, list[float]] = {"offers": [], "script": []}
        for _ in range(args.runs):  # interleaved rounds, each on an empty cache
            for name, argv in (("offers", question), ("script", script)):
                env = env_for(base, tempfile.mkdtemp(dir=root))
                start = time.perf_counter()
                subprocess.run(argv, env=env, capture_output=True, check=True)
                samples[name].append((time.perf_counter() - start) * 1000)
        warm_home = tempfile.mkdtemp(dir=root)
        warm_env = env_for(base, warm_home)
        subprocess.run(question, env=warm_env, capture_output=True, check=True)
        server.requests = 0
        medians = interleaved_medians(
            {"warm": (question, warm_env), "--help": ([*shoal, "--help"], warm_env)}, args.runs * 3
        )
        warm_requests = server.requests
    print(
        f"8 GPUs over aws ({len(AWS_REGIONS)} regions), azure ({len(AZ_REGIONS)}), gcp "
        f"({len(GCP_ZONES)}); {args.latency_ms:.0f} ms per request; {args.runs} interleaved "
        "rounds on an empty cache, median (min-max)"
    )
    print(f"  offers: {answered} offers in {len({r for r in regions})} provider regions")
    print(f"  shoal offers --gpus 8 -r all   {_spread(samples['offers'])}  "
          f"{counts['offers']} requests")  # fmt: skip
    print(f"  pricing + resources x3 + join  {_spread(samples['script'])}  "
          f"{counts['script']} requests")  # fmt: skip
    ratio = statistics.median(samples["offers"]) / statistics.median(samples["script"])
    print(f"  cold ratio {ratio:.2f}x of the script (target <= {COLD_TARGET}x)")
    warm_ratio = medians["warm"] / medians["--help"]
    print(
        f"  warm (cached): {medians['warm']:.0f} ms; shoal --help: {medians['--help']:.0f} ms; "
        f"ratio {warm_ratio:.2f}x (target < {WARM_TARGET}x); {warm_requests} requests while warm"
    )


if __name__ == "__main__":
    main()
