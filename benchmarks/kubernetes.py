#!/usr/bin/env python3
"""`shoal resources --provider kubernetes` on a large cluster, beside the raw list download.

Serves a simulated cluster of --nodes nodes (default 5,000) and --pods pods (default
100,000; tests/providers/kubernetes/objects.synthetic_cluster: Karpenter CPU pools and EKS
H100 node groups, DaemonSet and deadline pods) from the loopback API server
(tests/providers/kubernetes/apiserver.py, plain HTTP) and measures, median of --runs:
- `shoal resources --provider kubernetes --json` end to end (a fresh process: start-up,
  kubeconfig, paged lists, the arithmetic, the JSON on stdout), wall time and peak RSS;
- the raw download of the same lists with the same paging: GET /api/v1/nodes and
  /api/v1/pods (with shoal's field selector) at limit=500, following `metadata.continue`.
  curl cannot follow a token inside a JSON body without a JSON parser, and a full parse
  would charge the baseline for work it does not need; so the baseline is a small Python
  process using http.client over one keep-alive connection that reads each page's bytes,
  pulls the continue token out of the page head with a regex, and discards the body.
  The same loop is also timed with `json.loads` of every page (and nothing else), the
  least any Python client of the JSON API must do; shown for context, not as the target.
Targets: shoal under 1.5x the raw download's time, peak RSS under 300 MB.

Run from a regular `pip install .` of the repository (it borrows the test builders from
tests/ and puts the repository last on sys.path, so `cli` comes from the installed copy):

    python benchmarks/kubernetes.py [--nodes 5000] [--pods 100000] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

sys.path.insert(0, str(Path(__file__).resolve().parent))
# tests/ builders and the API server; appended, so that `cli` still comes from the install
sys.path.append(str(Path(__file__).resolve().parent.parent))
from _timing import check_installed, measure, shoal_command

if TYPE_CHECKING:
    from tests.providers.kubernetes.apiserver import ApiServer

# The same selector and page size as providers/kubernetes (catalog.HOLDING_PODS and the
# client's default limit); spelled out so the baseline does not import shoal.
FIELD_SELECTOR = "status.phase!=Succeeded,status.phase!=Failed"
LIMIT = 500

RAW = r"""
import http.client, json, re, sys, urllib.parse
host, port, selector, limit = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
parse = sys.argv[5:] == ["parse"]
token = re.compile(rb'"continue":\s*"([^"]+)"')
conn = http.client.HTTPConnection(host, port)
total = pages = 0
for path, params in (("/api/v1/nodes", {}), ("/api/v1/pods", {"fieldSelector": selector})):
    query = dict(params, limit=limit)
    while True:
        conn.request("GET", path + "?" + urllib.parse.urlencode(query),
                     headers={"Accept": "application/json"})
        response = conn.getresponse()
        body = response.read()
        if response.status != 200:
            sys.exit(f"{path}: HTTP {response.status}")
        total += len(body)
        if parse:
            json.loads(body)
        pages += 1
        found = token.search(body, 0, 512)  # the list's metadata comes before its items
        if found is None:
            break
        query["continue"] = found.group(1).decode()
print(total, pages)
"""


def build(api: ApiServer, n_nodes: int, n_pods: int) -> None:
    from tests.providers.kubernetes.objects import synthetic_cluster

    nodes, pods = synthetic_cluster(n_nodes, n_pods)
    api.add_many("nodes", nodes)
    api.add_many("pods", pods)


def write_kubeconfig(path: Path, server: str) -> Path:
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "bench",
                "clusters": [{"name": "bench", "cluster": {"server": server}}],
                "users": [{"name": "bench", "user": {}}],
                "contexts": [{"name": "bench", "context": {"cluster": "bench", "user": "bench"}}],
            }
        )
    )
    return path


def check_output(shoal: list[str], env: dict[str, str], n_nodes: int) -> tuple[int, int]:
    """One untimed run (also a warm-up): the answer covers every node. (bytes, pools)"""
    done = subprocess.run(shoal, env=env, capture_output=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(shoal)} failed ({done.returncode}): {done.stderr.decode()}")
    [resource] = json.loads(done.stdout)
    seen = sum(len(pool["nextLevel"]) for pool in resource["overview"])
    if seen != n_nodes:
        raise SystemExit(f"shoal reported {seen} nodes, the cluster has {n_nodes}")
    return len(done.stdout), len(resource["overview"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    check_installed()
    from tests.providers.kubernetes.apiserver import ApiServer

    work = Path(tempfile.mkdtemp(prefix="shoal-bench-k8s-"))
    try:
        with ApiServer() as api:
            began = time.perf_counter()
            print(f"building {args.nodes} nodes and {args.pods} pods ...", file=sys.stderr)
            build(api, args.nodes, args.pods)
            print(f"  built in {time.perf_counter() - began:.1f} s", file=sys.stderr)
            home = work / "home"
            home.mkdir()
            env = {
                **{k: v for k, v in os.environ.items() if not k.startswith("SHOAL_")},
                "SHOAL_HOME": str(home),
                "KUBECONFIG": str(write_kubeconfig(work / "kubeconfig", api.base)),
            }
            shoal = [*shoal_command(), "resources", "--provider", "kubernetes", "--json"]
            raw = [sys.executable, "-c", RAW, "127.0.0.1", str(api.port), FIELD_SELECTOR]
            raw.append(str(LIMIT))
            out_bytes, pools = check_output(shoal, env, args.nodes)
            listed = subprocess.run(raw, env=env, capture_output=True, text=True, check=True)
            size, pages = (int(x) for x in listed.stdout.split())
            expected = -(-args.nodes // LIMIT) + -(-args.pods // LIMIT)  # every pod holds
            if pages != expected:
                raise SystemExit(f"the raw download read {pages} pages, expected {expected}")
            shoal_runs, raw_runs, parse_runs = [], [], []
            for _ in range(args.runs):  # interleaved: drift falls on all alike
                raw_runs.append(measure(raw, env))
                parse_runs.append(measure([*raw, "parse"], env))
                shoal_runs.append(measure(shoal, env))
        report(args, size, pages, out_bytes, pools, raw_runs, parse_runs, shoal_runs)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def report(
    args: argparse.Namespace,
    size: int,
    pages: int,
    out_bytes: int,
    pools: int,
    raw_runs: list[tuple[float, int]],
    parse_runs: list[tuple[float, int]],
    shoal_runs: list[tuple[float, int]],
) -> None:
    raw_time = statistics.median(t for t, _ in raw_runs)
    parse_time = statistics.median(t for t, _ in parse_runs)
    shoal_time = statistics.median(t for t, _ in shoal_runs)
    peak = max(rss for _, rss in shoal_runs)
    ratio = shoal_time / raw_time
    mb = size / 1e6
    print(
        f"cluster: {args.nodes} nodes, {args.pods} pods; lists {mb:.0f} MB in {pages} pages "
        f"of {LIMIT}; median of {args.runs} runs"
    )
    print(
        f"  raw download (http.client, continue by regex)  {raw_time:6.2f} s  "
        f"{mb / raw_time:6.0f} MB/s  peak RSS {max(r for _, r in raw_runs)} MiB"
    )
    print(
        f"  the same, json.loads of every page             {parse_time:6.2f} s  "
        f"{mb / parse_time:6.0f} MB/s  peak RSS {max(r for _, r in parse_runs)} MiB"
    )
    print(
        f"  shoal resources -p kubernetes --json          {shoal_time:6.2f} s  "
        f"{mb / shoal_time:6.0f} MB/s  peak RSS {peak} MiB  ({pools} pools, "
        f"{out_bytes / 1e6:.1f} MB of JSON out)"
    )
    verdict = "ok" if ratio < 1.5 else "OVER"
    memory = "ok" if peak < 300 else "OVER"
    print(
        f"  ratio {ratio:.2f}x of the raw download (target < 1.5x): {verdict}; "
        f"{shoal_time / parse_time:.2f}x of download + json.loads"
    )
    print(f"  peak RSS {peak} MiB (target < 300 MB): {memory}")


if __name__ == "__main__":
    main()
