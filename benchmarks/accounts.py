#!/usr/bin/env python3
"""`shoal resources -p aws --region all` over 17 regions, against the requests it needs.

A loopback server speaks the EC2 Query API (XML: DescribeRegions, DescribeInstances,
DescribeInstanceTypes, DescribeCapacityReservations) and the Service Quotas JSON protocol
(ListServiceQuotas) for 17 regions, and waits 50 ms before every answer (a realistic round
trip to a cloud API). The baseline is the sum of the minimal sequential requests: the
requests shoal made (counted by the server) times 50 ms, which is what a tool asking them
one after another spends waiting at the least. Target: shoal's wall time at most 0.3x that.

The warm call (answered from the cache, within the quota TTL) is timed beside
`shoal --help`; target under 2x. Rounds are interleaved; medians and spreads are printed.
Run from a regular `pip install .` (not editable).

    python benchmarks/accounts.py [--runs N] [--latency-ms 50]
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
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import check_installed, interleaved_medians, shoal_command

REGIONS = [
    "ap-northeast-1", "ap-northeast-2", "ap-northeast-3", "ap-south-1", "ap-southeast-1",
    "ap-southeast-2", "ca-central-1", "eu-central-1", "eu-north-1", "eu-west-1", "eu-west-2",
    "eu-west-3", "sa-east-1", "us-east-1", "us-east-2", "us-west-1", "us-west-2",
]  # fmt: skip
TARGET_RATIO = 0.3
WARM_TARGET = 2.0
NS = "http://ec2.amazonaws.com/doc/2016-11-15/"
# The EC2 vCPU quota codes (Service Quotas, service `ec2`) and a few others of the real list.
QUOTAS = {
    "L-1216C47A": "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances",
    "L-74FC7D96": "Running On-Demand F instances",
    "L-DB2E81BA": "Running On-Demand G and VT instances",
    "L-417A185B": "Running On-Demand P instances",
    "L-7295265B": "Running On-Demand X instances",
    "L-1945791B": "Running On-Demand Inf instances",
    "L-6E869C2A": "Running On-Demand DL instances",
    "L-2C3B7624": "Running On-Demand Trn instances",
    "L-F7808C92": "Running On-Demand HPC instances",
    "L-43DA4232": "Running On-Demand High Memory instances",
    "L-34B43A08": "All Standard (A, C, D, H, I, M, R, T, Z) Spot Instance Requests",
    "L-88CF9481": "All F Spot Instance Requests",
    "L-3819A6DF": "All G and VT Spot Instance Requests",
    "L-7212CCBC": "All P Spot Instance Requests",
    "L-E3A00192": "All X Spot Instance Requests",
    "L-B5D1601B": "All Inf Spot Instance Requests",
    "L-85EED4F7": "All DL Spot Instance Requests",
    "L-6B0D517C": "All Trn Spot Instance Requests",
    "L-0263D0A3": "EC2-VPC Elastic IPs",
    "L-FB451C26": "Number of EBS snapshots",
}
INSTANCES = [  # (type, zone suffix, lifecycle, vcpus, gpus)
    ("m5.large", "a", "", 2, 0),
    ("m5.2xlarge", "b", "", 8, 0),
    ("c6i.4xlarge", "a", "spot", 16, 0),
    ("g6.xlarge", "c", "", 4, 1),
    ("p5.48xlarge", "a", "", 192, 8),
]


def _xml(action: str, body: str) -> bytes:
    return (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<{action}Response xmlns="{NS}">'
        f"<requestId>bench</requestId>{body}</{action}Response>"
    ).encode()


def ec2_answer(action: str, region: str) -> bytes:
    if action == "DescribeRegions":
        items = "".join(
            f"<item><regionName>{r}</regionName><regionEndpoint>ec2.{r}.amazonaws.com"
            "</regionEndpoint><optInStatus>opt-in-not-required</optInStatus></item>"
            for r in REGIONS
        )
        return _xml(action, f"<regionInfo>{items}</regionInfo>")
    if action == "DescribeInstances":
        items = "".join(
            f"<item><instanceId>i-{n:017x}</instanceId><instanceType>{t}</instanceType>"
            "<instanceState><code>16</code><name>running</name></instanceState>"
            f"<placement><availabilityZone>{region}{zone}</availabilityZone></placement>"
            + (f"<instanceLifecycle>{life}</instanceLifecycle>" if life else "")
            + f"<cpuOptions><coreCount>{max(1, v // 2)}</coreCount><threadsPerCore>"
            f"{2 if v > 1 else 1}</threadsPerCore></cpuOptions></item>"
            for n, (t, zone, life, v, _) in enumerate(INSTANCES)
        )
        return _xml(
            action,
            "<reservationSet><item><reservationId>r-0</reservationId>"
            f"<instancesSet>{items}</instancesSet></item></reservationSet>",
        )
    if action == "DescribeInstanceTypes":
        items = "".join(
            f"<item><instanceType>{t}</instanceType><vCpuInfo><defaultVCpus>{v}"
            "</defaultVCpus></vCpuInfo>"
            + (
                f"<gpuInfo><gpus><item><name>{'H100' if g == 8 else 'L4'}</name>"
                f"<manufacturer>NVIDIA</manufacturer><count>{g}</count></item></gpus></gpuInfo>"
                if g
                else ""
            )
            + "</item>"
            for t, _, _, v, g in INSTANCES
        )
        return _xml(action, f"<instanceTypeSet>{items}</instanceTypeSet>")
    if action == "DescribeCapacityReservations":
        start = datetime.now(UTC).replace(microsecond=0) + timedelta(days=1)
        end = start + timedelta(days=2)
        return _xml(
            action,
            "<capacityReservationSet><item><capacityReservationId>cr-0123456789abcdef0"
            "</capacityReservationId><instanceType>p5.48xlarge</instanceType>"
            f"<availabilityZone>{region}a</availabilityZone><totalInstanceCount>2"
            "</totalInstanceCount><availableInstanceCount>2</availableInstanceCount>"
            f"<state>scheduled</state><startDate>{start.isoformat()}</startDate>"
            f"<endDate>{end.isoformat()}</endDate><reservationType>capacity-block"
            "</reservationType></item></capacityReservationSet>",
        )
    return _xml(action, "")


def quotas_answer(region: str) -> bytes:
    quotas = [
        {
            "ServiceCode": "ec2",
            "ServiceName": "Amazon Elastic Compute Cloud (Amazon EC2)",
            "QuotaArn": f"arn:aws:servicequotas:{region}:123456789012:ec2/{code}",
            "QuotaCode": code,
            "QuotaName": name,
            "Value": 640.0 if "Standard" in name else 96.0,
            "Unit": "None",
            "Adjustable": True,
            "GlobalQuota": False,
        }
        for code, name in QUOTAS.items()
    ]
    return json.dumps({"Quotas": quotas}).encode()


class Server(ThreadingHTTPServer):
    daemon_threads = True
    # A cloud API's listen queue is deep; the default 5 drops SYNs when 32 requests start
    # at once, and the kernel's 1 s SYN retry would be timed as shoal's.
    request_queue_size = 256
    latency = 0.05
    requests = 0
    lock = threading.Lock()
    seen: list[tuple[str, str, str, str]] = []  # method, path, body, X-Amz-Target


class Handler(BaseHTTPRequestHandler):
    server: Server
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def _answer(self, method: str) -> None:
        parts = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        with self.server.lock:
            self.server.requests += 1
            target = self.headers.get("X-Amz-Target") or ""
            self.server.seen.append((method, self.path, body.decode(), target))
        time.sleep(self.server.latency)
        segments = parts.path.strip("/").split("/")
        service, region = [*segments, "", ""][:2]
        if service == "quotas":
            payload, kind = quotas_answer(region), "application/x-amz-json-1.1"
        else:
            fields = parse_qs(parts.query) | parse_qs(body.decode() if method == "POST" else "")
            payload, kind = ec2_answer(fields.get("Action", [""])[0], region), "text/xml"
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def do_GET(self) -> None:
        self._answer("GET")

    def do_POST(self) -> None:
        self._answer("POST")


# The baseline: the same requests, one after another, from a fresh Python process.
REPLAY = """
import json, sys, urllib.request
base, requests = sys.argv[1], json.loads(sys.stdin.read())
for method, path, body, target in requests:
    headers = {"X-Amz-Target": target} if target else {}
    request = urllib.request.Request(base + path, data=body.encode() if method == "POST" else None,
                                     headers=headers, method=method)
    with urllib.request.urlopen(request) as answer:
        answer.read()
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    args = parser.parse_args()
    check_installed()
    server = Server(("127.0.0.1", 0), Handler)
    server.latency = args.latency_ms / 1000
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    shoal = shoal_command()
    with tempfile.TemporaryDirectory() as home:
        env = {
            **os.environ,
            "SHOAL_HOME": home,
            "AWS_ACCESS_KEY_ID": "AKIDBENCHMARK",
            "AWS_SECRET_ACCESS_KEY": "benchmark-secret",
            "SHOAL_AWS_EC2_URL": base + "/ec2/{region}",
            "SHOAL_AWS_QUOTAS_URL": base + "/quotas/{region}",
            "AWS_CONFIG_FILE": os.devnull,
            "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        }
        cold = [*shoal, "resources", "-p", "aws", "--region", "all", "--refresh", "--json"]
        warm = [*shoal, "resources", "-p", "aws", "--region", "all", "--json"]
        # One run to count the requests (and check the answer), then timed rounds.
        server.requests = 0
        done = subprocess.run(cold, env=env, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise SystemExit(f"shoal failed ({done.returncode}): {done.stderr}")
        answered = json.loads(done.stdout)
        per_run = server.requests
        if len(answered) != len(REGIONS):
            raise SystemExit(f"expected {len(REGIONS)} regions, got {len(answered)}")
        sequential_ms = per_run * args.latency_ms
        replay = json.dumps(server.seen)
        samples: dict[str, list[float]] = {"shoal": [], "sequential": []}
        for _ in range(args.runs):  # interleaved rounds
            start = time.perf_counter()
            subprocess.run(cold, env=env, capture_output=True, check=True)
            samples["shoal"].append((time.perf_counter() - start) * 1000)
            start = time.perf_counter()
            subprocess.run([sys.executable, "-c", REPLAY, base], input=replay.encode(), check=True)
            samples["sequential"].append((time.perf_counter() - start) * 1000)
        medians = interleaved_medians(
            {"warm": (warm, env), "--help": ([*shoal, "--help"], env)}, args.runs
        )
    print(f"regions: {len(REGIONS)}, requests per run: {per_run}, latency {args.latency_ms:.0f} ms")
    print(f"sum of the requests' latency:              {sequential_ms:8.0f} ms")
    for name, label in (
        ("sequential", "the same requests in sequence (urllib)"),
        ("shoal", "shoal resources --region all --refresh"),
    ):
        values = samples[name]
        print(
            f"{label:<42} {statistics.median(values):8.0f} ms "
            f"(spread {max(values) - min(values):.0f} ms over {args.runs} rounds)"
        )
    cold_ms = statistics.median(samples["shoal"])
    print(
        f"ratio: {cold_ms / sequential_ms:.2f}x of the latency sum, "
        f"{cold_ms / statistics.median(samples['sequential']):.2f}x of the sequential replay "
        f"(target <= {TARGET_RATIO}x)"
    )
    warm_ratio = medians["warm"] / medians["--help"]
    print(
        f"warm (cached) call: {medians['warm']:.0f} ms; shoal --help: {medians['--help']:.0f} ms; "
        f"ratio {warm_ratio:.2f}x (target < {WARM_TARGET}x)"
    )


if __name__ == "__main__":
    main()
