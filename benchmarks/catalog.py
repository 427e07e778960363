#!/usr/bin/env python3
"""Cloud catalog refresh throughput and warm queries, on loopback.

Builds an AWS-format EC2 offer file of --aws-mib MB (default 320) for us-east-1 plus two
smaller regions, and Azure Retail Prices pages holding --azure-items items (default 4,000);
serves them on 127.0.0.1 and measures, in the same run:
- AWS refresh: `shoal pricing -p aws -r us-east-1 --refresh --json` beside
  `curl -s URL > /dev/null` of the same offer file (MB/s of the file and of the bytes shoal
  actually read, as the server counted them: shoal hangs up before the Reserved terms; and
  peak RSS). Target: at least 0.5x the raw download speed, peak memory under 200 MB.
  Then both again through a link paced to --link-mbps (default 100 MB/s, a realistic
  download): shoal should finish well before the whole file could have arrived.
- Azure refresh: `shoal pricing -p azure -r eastus --refresh --json` beside curl fetching the
  same pages (items/s).
- Warm query: `shoal pricing --provider aws --region all --select gpu_count>=1 --json`
  beside `shoal --help` (medians of interleaved runs). Target: under 2x.
Needs curl. Run from a regular `pip install .` in the repository root (it borrows the test
payload builders from tests/).

    python benchmarks/catalog.py [--aws-mib 320] [--azure-items 4000] [--runs 3]
"""

from __future__ import annotations

import argparse
import functools
import http.server
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
# tests/ payload builders; appended, so that `cli` still comes from the installed copy
sys.path.append(str(Path(__file__).resolve().parent.parent))
from _timing import check_installed, interleaved_medians, measure, shoal_command

OFFER_PATH = "/offers/v1.0/aws/AmazonEC2/20250101000000/{region}/index.json"
INDEX_PATH = "/offers/v1.0/aws/AmazonEC2/current/region_index.json"
BYTES_PER_PRODUCT = 11_000  # what payloads.write_offer_file writes per product, about


CHUNK = 64 << 10


class QuietFiles(http.server.SimpleHTTPRequestHandler):
    """Static files, sent in chunks that are counted (what a client actually read, give or
    take the socket buffers) and, when the server has a `rate`, paced to it: a link of that
    many bytes per second."""

    server: QuietServer

    def log_message(self, *args: object) -> None:
        pass

    def copyfile(self, source: Any, outputfile: Any) -> None:
        started = time.perf_counter()
        sent = 0
        while chunk := source.read(CHUNK):
            rate = self.server.rate
            if rate:
                ahead = sent / rate - (time.perf_counter() - started)
                if ahead > 0:
                    time.sleep(ahead)
            outputfile.write(chunk)  # raises once the client hangs up
            sent += len(chunk)
            with self.server.lock:
                self.server.sent += len(chunk)


class QuietServer(http.server.ThreadingHTTPServer):
    rate = 0.0  # bytes per second; 0: as fast as loopback goes
    sent = 0
    lock = threading.Lock()

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # shoal hangs up once it has what it needs (it never reads the Reserved terms)


def serve_dir(directory: Path) -> tuple[QuietServer, str]:
    handler = functools.partial(QuietFiles, directory=str(directory))
    server = QuietServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def build_aws(root: Path, mib: int) -> dict[str, int]:
    from tests.providers.aws import payloads

    sizes = {}
    for region, share in (("us-east-1", 1.0), ("eu-west-1", 0.1), ("ap-south-1", 0.1)):
        target = root / OFFER_PATH.format(region=region).lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        products = max(100, int(mib * share * 1024 * 1024 / BYTES_PER_PRODUCT))
        sizes[region] = payloads.write_offer_file(target, products, region=region)
    index = root / INDEX_PATH.lstrip("/")
    index.parent.mkdir(parents=True, exist_ok=True)
    index.write_text(
        json.dumps(
            payloads.region_index({region: OFFER_PATH.format(region=region) for region in sizes})
        )
    )
    return sizes


def azure_rows(items: int) -> list[dict[str, object]]:
    from tests.providers.azure import payloads

    rows = []
    for i in range(items):
        size = f"Standard_D{2 * (i % 48) + 2}s_v{i // 96 + 1}"
        variant = ("", "Spot", "Low Priority")[i % 3]
        rows.append(payloads.price_item(size, 0.05 + i / 1000, variant=variant))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--aws-mib", type=int, default=320)
    parser.add_argument("--azure-items", type=int, default=4000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--link-mbps", type=float, default=100.0, help="the throttled link")
    args = parser.parse_args()
    check_installed()
    if shutil.which("curl") is None:
        raise SystemExit("curl is needed for the baseline; install it")
    from tests.providers.apiserver import ApiServer
    from tests.providers.azure import payloads as azure

    work = Path(tempfile.mkdtemp(prefix="shoal-bench-catalog-"))
    try:
        print(f"building {args.aws_mib} MB of AWS offer files in {work} ...", file=sys.stderr)
        files = work / "files"
        sizes = build_aws(files, args.aws_mib)
        server, base = serve_dir(files)
        home = work / "home"
        home.mkdir()
        rows = azure_rows(args.azure_items)
        with ApiServer() as api:
            prices = azure.PricesApi(rows, base=api.base, page_size=1000)
            api.route(azure.PRICES_PATH, prices)
            env = {
                **os.environ,
                "SHOAL_HOME": str(home),
                "SHOAL_AWS_PRICING_URL": base,
                "SHOAL_AZURE_PRICES_URL": api.base,
            }
            shoal = shoal_command()
            report_aws(shoal, env, base, sizes["us-east-1"], args.runs, server)
            report_throttled(shoal, env, base, sizes["us-east-1"], server, args.link_mbps)
            report_azure(shoal, env, api.base, prices, len(rows), args.runs)
            for region in sizes:  # every region cached for the warm query
                measure([*shoal, "pricing", "-p", "aws", "-r", region, "--json"], env)
            report_warm(shoal, env, args.runs)
        server.shutdown()
    finally:
        shutil.rmtree(work, ignore_errors=True)


def report_aws(
    shoal: list[str], env: dict[str, str], base: str, size: int, runs: int, server: QuietServer
) -> None:
    url = base + OFFER_PATH.format(region="us-east-1")
    refresh = [*shoal, "pricing", "-p", "aws", "-r", "us-east-1", "--refresh", "--json"]
    curl = ["curl", "-s", "-o", "/dev/null", url]
    shoal_runs, curl_runs, read = [], [], []
    for _ in range(runs):
        curl_runs.append(measure(curl, env))
        before = server.sent
        shoal_runs.append(measure(refresh, env))
        read.append(server.sent - before)
    mb = size / 1e6
    read_mb = statistics.median(read) / 1e6
    s_time = statistics.median(t for t, _ in shoal_runs)
    c_time = statistics.median(t for t, _ in curl_runs)
    peak = max(rss for _, rss in shoal_runs)
    print(f"AWS offer file: {mb:.0f} MB, {runs} runs, median")
    print(f"  curl -s URL > /dev/null      {c_time:7.2f} s  {mb / c_time:8.0f} MB/s")
    print(
        f"  shoal pricing -p aws --refresh {s_time:5.2f} s  {mb / s_time:8.0f} MB/s of the file, "
        f"{read_mb / s_time:.0f} MB/s of the {read_mb:.0f} MB it read  peak RSS {peak} MiB"
    )
    print(
        f"  ratio {c_time / s_time:.2f}x of the raw download (target >= 0.50x); "
        f"peak RSS target < 200 MiB"
    )


def report_throttled(
    shoal: list[str], env: dict[str, str], base: str, size: int, server: QuietServer, mbps: float
) -> None:
    """The same refresh through a link of `mbps` MB/s (a realistic download): shoal hangs up
    once it has the products and on-demand terms, so it should finish well before the whole
    file could have arrived, which is what curl takes."""
    url = base + OFFER_PATH.format(region="us-east-1")
    refresh = [*shoal, "pricing", "-p", "aws", "-r", "us-east-1", "--refresh", "--json"]
    server.rate = mbps * 1e6
    try:
        c_time, _ = measure(["curl", "-s", "-o", "/dev/null", url], env)
        before = server.sent
        s_time, peak = measure(refresh, env)
        read_mb = (server.sent - before) / 1e6
    finally:
        server.rate = 0.0
    mb = size / 1e6
    print(f"AWS offer file through a {mbps:.0f} MB/s link (whole file: {mb / mbps:.2f} s at best)")
    print(f"  curl -s URL > /dev/null      {c_time:7.2f} s")
    print(
        f"  shoal pricing -p aws --refresh {s_time:5.2f} s  (read {read_mb:.0f} of {mb:.0f} MB; "
        f"{s_time / (mb / mbps):.2f}x of the whole file's time)  peak RSS {peak} MiB"
    )


def report_azure(
    shoal: list[str], env: dict[str, str], base: str, prices: object, items: int, runs: int
) -> None:
    from tests.providers.azure import payloads as azure

    refresh = [*shoal, "pricing", "-p", "azure", "-r", "eastus", "--refresh", "--json"]
    pages = []
    for skip in range(0, items, 1000):
        query = (
            "api-version=2023-01-01-preview&currencyCode=%27USD%27&$filter=serviceName%20eq%20"
            "%27Virtual%20Machines%27%20and%20armRegionName%20eq%20%27eastus%27%20and%20"
            f"priceType%20eq%20%27Consumption%27&$skip={skip}"
        )
        pages.append(f"{base}{azure.PRICES_PATH}?{query}")
    curl = ["curl", "-s"]
    for page in pages:
        curl += ["-o", "/dev/null", page]
    shoal_runs, curl_runs = [], []
    for _ in range(runs):
        curl_runs.append(measure(curl, env))
        shoal_runs.append(measure(refresh, env))
    s_time = statistics.median(t for t, _ in shoal_runs)
    c_time = statistics.median(t for t, _ in curl_runs)
    print(f"Azure Retail Prices: {items} items in {len(pages)} pages, {runs} runs, median")
    print(f"  curl of the same pages       {c_time:7.2f} s  {items / c_time:8.0f} items/s")
    print(
        f"  shoal pricing -p azure --refresh {s_time:5.2f} s  {items / s_time:8.0f} items/s"
        f"  peak RSS {max(r for _, r in shoal_runs)} MiB"
    )


def report_warm(shoal: list[str], env: dict[str, str], runs: int) -> None:
    query = [
        *shoal,
        "pricing",
        "--provider",
        "aws",
        "--region",
        "all",
        "--select",
        "gpu_count>=1",
        "--json",
    ]
    done = subprocess.run(query, env=env, capture_output=True, text=True, check=True)
    found = sum(len(p["items"]) for p in json.loads(done.stdout))
    medians = interleaved_medians(
        {"help": ([*shoal, "--help"], env), "query": (query, env)}, max(runs * 5, 15)
    )
    ratio = medians["query"] / medians["help"]
    print(f"warm query (--region all, gpu_count>=1: {found} rows), median of interleaved runs")
    print(f"  shoal --help                 {medians['help']:7.1f} ms")
    print(f"  shoal pricing ... --json     {medians['query']:7.1f} ms  {ratio:.2f}x (target < 2x)")


if __name__ == "__main__":
    main()
