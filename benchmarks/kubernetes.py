#!/usr/bin/env python3
"""`shoal resources --provider kubernetes --json` on a large cluster, beside what other tools
spend on the same lists.

Serves a simulated cluster of --nodes nodes (default 5,000) and --pods pods (default
100,000) from the loopback API server (tests/providers/kubernetes/apiserver.py, plain
HTTP), built by tests/providers/kubernetes/objects.synthetic_cluster: Karpenter CPU pools
and EKS H100 node groups, with objects of a live cluster's size (pods of 9-19 KB: managed
fields, env, volumes, probes, annotations, Istio sidecars; nodes with their image lists),
or with --small-pods the same pods without managed fields, env, volumes and probes (3-4 KB).
The server answers a list from stored bytes (each page joined once, then kept), so no
request costs it JSON work a real API server's watch cache would not skip either: the CPU
stays with the clients on a small machine. Interleaved rounds (the order rotated each
round), each command a fresh process; medians, the spread (min-max), CPU time (user +
system: what neighbours on a shared machine change least) and peak RSS, with the load;
shoal's ratios also per round (to the baseline timed beside it in the same round), median
and spread:

- raw download: the same lists (GET /api/v1/nodes and /api/v1/pods with shoal's field
  selector, limit=500, following `metadata.continue`) by a small Python process over one
  keep-alive http.client connection, the continue token taken from each page's head by a
  regex and the body discarded: what the bytes cost to move.
- download + json.loads of every page: the same loop decoding each page with the standard
  `json` module and nothing else, what a straightforward Python tool spends before any
  arithmetic (the target's denominator); and the same with the cycle collector off
  (`gc.disable()`), the best `json.loads` does here, printed for honesty.
- `shoal resources --provider kubernetes --json` end to end (start-up, kubeconfig, paged
  lists, the arithmetic, the JSON on stdout).
- `kubectl get nodes,pods -A -o json > /dev/null` (the `kubectl` package, Debian's or the
  Google Cloud SDK's, if installed; skipped with the reason otherwise) against the same
  server, which answers its discovery requests (/api, /apis, /api/v1, and /version for the
  SDK's dispatcher); its discovery cache lives in a fresh HOME, filled by a warm-up run as
  a user's would be. kubectl holds every object of a `-o json` list in memory at once (it
  prints one List): with 1.2 GB of JSON it needs tens of GB, so on the full cluster it runs
  once, killed past --kubectl-max-rss (default 4 GiB) and said so; it is then timed in the
  rounds on a cluster --kubectl-scale the size (default 1/10), beside shoal on that cluster.

- with --before PATH, another shoal (an install of an earlier version) in the same rounds.

Presets (issue 29): `--preset fixed` (10 nodes, 100 small pods, kubectl on the same cluster:
start-up and fixed costs, with `shoal --help` in the rounds as their floor), `--preset 1k`
(1,000 nodes, 20,000 pods) and `--preset 5k` (5,000 nodes, 100,000 pods), the last two
without kubectl (its -o json of such lists takes gigabytes); `--quick` makes a run of a
few minutes (3 rounds, no gc-off case).

Targets (issues 17, 29): shoal at most 0.5x of download + json.loads, peak RSS under 300 MB,
and no slower than kubectl, its fixed cost on a small cluster included. --link MBPS sends
every answer at that rate instead of loopback's (a real network, where fetching is mostly
waiting: shoal then fetches the next page while it reads this one).

Run from a regular `pip install .` of the repository (it borrows the test builders from
tests/ and puts the repository last on sys.path, so `cli` comes from the installed copy):

    python benchmarks/kubernetes.py [--nodes 5000] [--pods 100000] [--runs 5] [--link MBPS]
        [--small-pods] [--preset fixed|1k|5k] [--quick] [--before SHOAL] [--kubectl PATH]
        [--save-json FILE] [--no-kubectl]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

sys.path.insert(0, str(Path(__file__).resolve().parent))
# tests/ builders and the API server; appended, so that `cli` still comes from the install
sys.path.append(str(Path(__file__).resolve().parent.parent))
from _timing import Machine, check_installed, shoal_command

if TYPE_CHECKING:
    from tests.providers.kubernetes.apiserver import ApiServer

# The same selector and page size as providers/kubernetes (catalog.HOLDING_PODS and the
# client's default limit); spelled out so the baselines do not import shoal.
FIELD_SELECTOR = "status.phase!=Succeeded,status.phase!=Failed"
LIMIT = 500
TARGET_RATIO = 0.5
TARGET_RSS_MB = 300
# --preset: (nodes, pods, kubectl's scale: 1 on the same cluster, 0 none: its -o json holds
# every object at once, a 1,000-node cluster's already takes gigabytes)
PRESETS = {"fixed": (10, 100, 1.0), "1k": (1000, 20_000, 0.0), "5k": (5000, 100_000, 0.0)}

# _timing.MEASURE, with the command's CPU seconds (user + system, its children's too): on a
# shared machine, what neighbours do shows in wall time much more than in CPU time.
MEASURE = """
import resource, subprocess, sys, time
start = time.perf_counter()
done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
seconds = time.perf_counter() - start
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
sys.stderr.write(done.stderr.decode())
print(done.returncode, seconds, usage.ru_maxrss, usage.ru_utime + usage.ru_stime)
"""

DOWNLOAD = r"""
import gc, http.client, json, re, sys, urllib.parse
host, port, selector, limit, mode = sys.argv[1], int(sys.argv[2]), *sys.argv[3:6]
if mode == "nogc":
    gc.disable()
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
        if mode != "raw":
            json.loads(body)  # and let it go: no page is held while the next one decodes
        pages += 1
        found = token.search(body, 0, 512)  # the list's metadata comes before its items
        if found is None:
            break
        query["continue"] = found.group(1).decode()
print(total, pages)
"""


@dataclass
class Case:
    """A command measured in the rounds: wall seconds, CPU seconds and peak RSS (MiB) per
    run."""

    key: str
    label: str
    argv: list[str]
    env: dict[str, str]
    seconds: list[float] = field(default_factory=list)
    rss: list[int] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)

    def median(self) -> float:
        return statistics.median(self.seconds)

    def cpu_median(self) -> float:
        return statistics.median(self.cpu)

    def line(self, size_mb: float) -> str:
        low, high = min(self.seconds), max(self.seconds)
        if size_mb < 10:  # a small cluster's: start-up and fixed costs, in ms
            return (
                f"  {self.label:<44} {self.median() * 1000:5.0f} ms  "
                f"({low * 1000:.0f}-{high * 1000:.0f})  CPU {self.cpu_median() * 1000:4.0f} ms  "
                f"peak RSS {max(self.rss):5d} MiB"
            )
        return (
            f"  {self.label:<44} {self.median():7.2f} s  ({low:.2f}-{high:.2f})  "
            f"CPU {self.cpu_median():6.2f} s  {size_mb / self.median():6.0f} MB/s  "
            f"peak RSS {max(self.rss):5d} MiB"
        )


def run(
    argv: list[str], env: dict[str, str], max_rss_mib: int = 0
) -> tuple[float, int, str, float]:
    """(wall seconds, peak RSS in MiB, why it was stopped or "", CPU seconds), measured by a
    fresh small process (MEASURE: its children's peak is this command's alone, and its own
    start-up is outside the timed span). With `max_rss_mib`, the command is killed once
    its processes hold more."""
    proc = subprocess.Popen(
        [sys.executable, "-c", MEASURE, *argv],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    stopped: list[str] = []
    if max_rss_mib:
        threading.Thread(target=_guard, args=(proc, max_rss_mib, stopped), daemon=True).start()
    out, errors = proc.communicate()
    if stopped:
        return float("nan"), max_rss_mib, stopped[0], float("nan")
    code, seconds, peak, cpu = out.split()
    if int(code) != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({code}): {errors}")
    return float(seconds), int(peak) // 1024, "", float(cpu)


def _guard(proc: subprocess.Popen[str], limit_mib: int, stopped: list[str]) -> None:
    start = time.perf_counter()
    while proc.poll() is None:
        held = _tree_rss_mib(proc.pid)
        if held > limit_mib:
            stopped.append(
                f"killed holding {held / 1024:.1f} GiB after {time.perf_counter() - start:.0f} s"
            )
            os.killpg(proc.pid, signal.SIGKILL)
            return
        time.sleep(0.05)


def _tree_rss_mib(pid: int) -> int:
    """The resident memory of a process and its descendants (Linux /proc)."""
    total, todo = 0, [pid]
    while todo:
        current = todo.pop()
        try:
            status = Path(f"/proc/{current}/status").read_text()
            for task in Path(f"/proc/{current}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except (OSError, ValueError):
            continue
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1]) // 1024
    return total


def serve(api: ApiServer, nodes: int, pods: int, small: bool = False) -> None:
    from tests.providers.kubernetes.objects import synthetic_cluster

    node_objs, pod_objs = synthetic_cluster(nodes, pods, small=small)
    api.add_many("nodes", node_objs)
    api.add_many("pods", pod_objs)


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


def check_shoal(shoal: list[str], env: dict[str, str], n_nodes: int, save: str) -> str:
    """One untimed run (also a warm-up): the answer covers every node. Its size and pools."""
    done = subprocess.run(shoal, env=env, capture_output=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(shoal)} failed ({done.returncode}): {done.stderr.decode()}")
    if save:
        Path(save).write_bytes(done.stdout)
    [resource] = json.loads(done.stdout)
    seen = sum(len(pool["nextLevel"]) for pool in resource["overview"])
    if seen != n_nodes:
        raise SystemExit(f"shoal reported {seen} nodes, the cluster has {n_nodes}")
    return f"{len(resource['overview'])} pools, {len(done.stdout) / 1e6:.1f} MB of JSON out"


def kubectl_state(path: str = "") -> tuple[str | None, str]:
    """(the kubectl to run, what it is), or (None, why there is none)."""
    found = shutil.which(path or "kubectl")
    if found is None:
        return None, (
            "kubectl is not installed (Debian/Ubuntu: the `kubectl` package, where the "
            "distribution has one; check `apt-cache policy kubectl`)"
        )
    done = subprocess.run(
        [found, "version", "--client", "-o", "json"], capture_output=True, text=True, check=False
    )
    try:
        version = json.loads(done.stdout)["clientVersion"]["gitVersion"]
    except (ValueError, KeyError, TypeError):
        version = "version unknown"
    package = subprocess.run(
        ["dpkg-query", "-W", "-f", "${Version}", "kubectl"], capture_output=True, text=True
    ).stdout
    return found, f"kubectl {version}" + (f" (package kubectl {package})" if package else "")


def rounds(cases: list[Case], runs: int) -> None:
    for r in range(runs):  # interleaved, the order rotated: drift falls on all alike
        for case in cases[r % len(cases) :] + cases[: r % len(cases)]:
            seconds, rss, _, cpu = run(case.argv, case.env)
            case.seconds.append(seconds)
            case.rss.append(rss)
            case.cpu.append(cpu)
        print(f"  round {r + 1}/{runs} done", file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--link", type=float, default=0.0, help="MB/s (0: loopback's own)")
    parser.add_argument("--save-json", default="", help="keep shoal's output here")
    parser.add_argument("--no-kubectl", action="store_true")
    parser.add_argument("--no-nogc", action="store_true", help="skip json.loads with gc off")
    parser.add_argument(
        "--kubectl-scale",
        type=float,
        default=0.1,
        help="the size of kubectl's own cluster (1: kubectl on the full cluster only)",
    )
    parser.add_argument(
        "--kubectl",
        default="",
        help="the kubectl to time (default: the one on PATH; the Google Cloud SDK's is a "
        "dispatcher that asks the server's version and runs a kubectl.1.NN beside it)",
    )
    parser.add_argument("--kubectl-max-rss", type=int, default=4096, help="MiB")
    parser.add_argument(
        "--small-pods",
        action="store_true",
        help="pods of 3-4 KB (no managed fields, env, volumes, probes) instead of 9-19 KB",
    )
    parser.add_argument(
        "--preset",
        choices=sorted(PRESETS),
        help="fixed: 10 nodes, 100 pods of 3-4 KB, beside kubectl (start-up and fixed costs); "
        "1k: 1,000 nodes, 20,000 pods; 5k: 5,000 nodes, 100,000 pods",
    )
    parser.add_argument(
        "--before",
        default="",
        help="another shoal executable (an install of an earlier version), timed in the same "
        "rounds: a before/after pair on a shared machine",
    )
    parser.add_argument(
        "--quick", action="store_true", help="3 rounds, no gc-off case (a run of a few minutes)"
    )
    args = parser.parse_args()
    if args.preset:
        args.nodes, args.pods, scale = PRESETS[args.preset]
        args.kubectl_scale = scale if scale else args.kubectl_scale
        args.no_kubectl = args.no_kubectl or scale == 0
        args.small_pods = args.small_pods or args.preset == "fixed"
    if args.quick:
        args.runs, args.no_nogc = min(args.runs, 3), True
    check_installed()
    from tests.providers.kubernetes.apiserver import ApiServer

    kubectl, about_kubectl = kubectl_state(args.kubectl)
    if args.no_kubectl:
        kubectl, about_kubectl = None, "kubectl skipped (--no-kubectl)"
    work = Path(tempfile.mkdtemp(prefix="shoal-bench-k8s-"))
    try:
        with ApiServer() as api, ApiServer() as small:
            api.link_rate = small.link_rate = args.link * 1e6
            began = time.perf_counter()
            print(f"building {args.nodes} nodes and {args.pods} pods ...", file=sys.stderr)
            serve(api, args.nodes, args.pods, args.small_pods)
            small_nodes = max(1, round(args.nodes * args.kubectl_scale))
            small_pods = round(args.pods * args.kubectl_scale)
            separate = kubectl is not None and args.kubectl_scale < 1
            if separate:
                serve(small, small_nodes, small_pods, args.small_pods)
            print(f"  built in {time.perf_counter() - began:.1f} s", file=sys.stderr)
            home = work / "home"
            home.mkdir()
            base_env = {k: v for k, v in os.environ.items() if not k.startswith("SHOAL_")}
            env = {
                **base_env,
                "SHOAL_HOME": str(home),
                "HOME": str(work),  # kubectl's discovery cache
                "KUBECONFIG": str(write_kubeconfig(work / "kubeconfig", api.base)),
            }
            small_env = dict(env, KUBECONFIG=str(write_kubeconfig(work / "small", small.base)))
            shoal = [*shoal_command(), "resources", "--provider", "kubernetes", "--json"]
            download = [sys.executable, "-c", DOWNLOAD, "127.0.0.1", str(api.port)]
            download += [FIELD_SELECTOR, str(LIMIT)]
            out = check_shoal(shoal, env, args.nodes, args.save_json)
            listed = subprocess.run(
                [*download, "raw"], env=env, capture_output=True, text=True, check=True
            )
            size, pages = (int(x) for x in listed.stdout.split())
            expected = -(-args.nodes // LIMIT) + -(-args.pods // LIMIT)  # every pod holds
            if pages != expected:
                raise SystemExit(f"the raw download read {pages} pages, expected {expected}")
            cases = [
                Case(
                    "raw", "raw download (http.client, continue by regex)", [*download, "raw"], env
                ),
                Case("loads", "download + json.loads of every page", [*download, "loads"], env),
                Case("shoal", "shoal resources -p kubernetes --json", shoal, env),
            ]
            if args.before:
                before = [args.before, *shoal[len(shoal_command()) :]]
                check_shoal(before, env, args.nodes, "")
                cases.append(Case("before", "the same, shoal before (--before)", before, env))
            if args.preset == "fixed":  # the floor: what any shoal command pays first
                help_argv = [*shoal_command(), "--help"]
                cases.append(Case("help", "shoal --help (its start-up alone)", help_argv, env))
            if not args.no_nogc:
                cases.insert(
                    2, Case("nogc", "the same, json.loads with gc off", [*download, "nogc"], env)
                )
            full_kubectl, small_size = "", 0
            small_cases: list[Case] = []
            if separate:
                small_list = [*download, "raw"]
                small_list[small_list.index(str(api.port))] = str(small.port)
                listed = subprocess.run(small_list, capture_output=True, text=True, check=True)
                small_size = int(listed.stdout.split()[0])
            if kubectl is not None:
                get = [kubectl, "get", "nodes,pods", "-A", "-o", "json"]
                run(get, small_env if separate else env)  # warm-up: fills its discovery cache
                _, rss, stopped, _ = run(get, env, max_rss_mib=args.kubectl_max_rss)
                full_kubectl = stopped or f"finished, peak RSS {rss} MiB (timed in the rounds)"
                if separate:
                    small_cases = [
                        Case("kubectl", "kubectl get nodes,pods -A -o json", get, small_env),
                        Case("shoal", "shoal resources -p kubernetes --json", shoal, small_env),
                    ]
                if not stopped:
                    cases.append(Case("kubectl", "kubectl get nodes,pods -A -o json", get, env))
            machine = Machine()
            rounds(cases, args.runs)
            state = machine.since()
            small_state = ""
            if small_cases:
                machine = Machine()
                rounds(small_cases, args.runs)
                small_state = machine.since()
        report(args, size, pages, out, cases, state)
        print(f"kubectl: {about_kubectl}")
        if kubectl is not None:
            print(f"  on the full cluster: {full_kubectl}")
        if small_cases:
            print(
                f"  on a cluster of {small_nodes} nodes and {small_pods} pods "
                f"({small_size / 1e6:.0f} MB of lists), median (min-max) of {args.runs} "
                f"interleaved rounds; {small_state}"
            )
            for case in small_cases:
                print(case.line(small_size / 1e6))
            ratio = small_cases[1].median() / small_cases[0].median()
            verdict = "met" if ratio < 1 else "NOT met"
            print(
                f"  shoal {ratio:.2f}x of kubectl's time "
                f"({per_round(small_cases[1], small_cases[0])}; target < 1x): {verdict}"
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)


def per_round(case: Case, base: Case) -> str:
    """The ratio of `case` to `base` within each round (both ran in it, one after the
    other): a neighbour's burst falls on both, so on a shared machine these spread less
    than the ratio of the medians does."""
    ratios = sorted(a / b for a, b in zip(case.seconds, base.seconds, strict=True))
    return f"per round {statistics.median(ratios):.2f}x ({ratios[0]:.2f}-{ratios[-1]:.2f})"


def report(
    args: argparse.Namespace, size: int, pages: int, out: str, cases: list[Case], state: str
) -> None:
    mb = size / 1e6
    link = f"a {args.link:.0f} MB/s link" if args.link else "loopback"
    kind = "3-4 KB" if args.small_pods else "9-19 KB"
    print(
        f"cluster: {args.nodes} nodes, {args.pods} pods of {kind}; lists {mb:.1f} MB in {pages} "
        f"pages of "
        f"{LIMIT} over {link}; median (min-max) of {args.runs} interleaved rounds; {state}"
    )
    for case in cases:
        print(case.line(mb))
    by = {case.key: case for case in cases}
    shoal = by["shoal"]
    ratio = shoal.median() / by["loads"].median()
    cpu_ratio = shoal.cpu_median() / by["loads"].cpu_median()
    peak = max(shoal.rss)
    print(f"  shoal: {out}")
    print(
        f"  shoal {ratio:.2f}x of download + json.loads (target <= {TARGET_RATIO}x): "
        f"{'met' if ratio <= TARGET_RATIO else 'NOT met'} ({per_round(shoal, by['loads'])}; "
        f"CPU time {cpu_ratio:.2f}x); "
        f"{shoal.median() / by['raw'].median():.2f}x of the raw download"
        + (
            f"; {shoal.median() / by['nogc'].median():.2f}x of json.loads, gc off"
            if "nogc" in by
            else ""
        )
    )
    if "before" in by:
        was = by["before"].median()
        was_cpu = by["before"].cpu_median()
        print(
            f"  shoal before: {was / by['loads'].median():.2f}x of download + json.loads "
            f"(CPU time {was_cpu / by['loads'].cpu_median():.2f}x); "
            f"now {shoal.median() / was:.2f}x of before ({per_round(shoal, by['before'])}), "
            f"{(shoal.median() - was) * 1000:+.0f} ms (CPU "
            f"{(shoal.cpu_median() - was_cpu) * 1000:+.0f} ms)"
            + (
                f"; before {was / by['kubectl'].median():.2f}x of kubectl's time"
                if "kubectl" in by
                else ""
            )
        )
    if "kubectl" in by:
        versus = shoal.median() / by["kubectl"].median()
        verdict = "met" if versus < 1 else "NOT met"
        gap = (shoal.median() - by["kubectl"].median()) * 1000
        cpu_versus = shoal.cpu_median() / by["kubectl"].cpu_median()
        print(
            f"  shoal {versus:.2f}x of kubectl's time ({per_round(shoal, by['kubectl'])}), "
            f"{gap:+.0f} ms (target < 1x): {verdict} "
            f"(CPU time {cpu_versus:.2f}x: kubectl's Go runtime works on several threads)"
        )
    if "help" in by:
        start = by["help"].median()
        others = [by[k] for k in ("kubectl", "before") if k in by]
        print(
            f"  shoal's start-up alone (--help): {start * 1000:.0f} ms, "
            f"{(shoal.median() - start) * 1000:.0f} ms of the command after it"
            + "".join(f"; {per_round(by['help'], other)} of {other.key}'s" for other in others)
        )
    print(
        f"  shoal peak RSS {peak} MiB (target < {TARGET_RSS_MB} MB): "
        f"{'met' if peak * 1.048576 < TARGET_RSS_MB else 'NOT met'}"
    )


if __name__ == "__main__":
    main()
