#!/usr/bin/env python3
"""`shoal image pull` against the shell baseline `curl | tee >(sha256sum) | tar -x`, and a
registry image against `skopeo copy` + `tar` and `podman pull`.

Archives: builds, in a temp dir, a big archive of semi-compressible data (default 1 GiB) and
an archive of 20,000 small files, each as .tar.gz and .tar.zst; serves them on 127.0.0.1; and
times, in interleaved rounds (the order rotating), `shoal image pull --sum ...` beside two
baselines with the matching decompressor: `curl | tee >(sha256sum) | DEC | tar -x` (the same
work as shoal's checked pull: hash, decompress, unpack) and `curl | DEC | tar -x` (the
issue's baseline). Extraction goes to a tmpfs (/dev/shm) and to disk (a `sync` after each
command there, so none pays for another's writeback). Prints the machine, its load,
throughput, shoal's time over each baseline's and peak memory. Targets: at most 1.1x the
baseline on the big file; on the small files at most 1.5x of `curl | tar` on tmpfs and 1.0x
on disk; peak memory under 100 MB. `--only small` runs the small-file cases alone.

Registry: builds a 5-layer image of about 200 MB (the tests' `sized_image`: incompressible
files, and a file the last layer whites out), pushes it with skopeo to Debian's
docker-registry started on 127.0.0.1 (tests/drivers/image/registry, loaded by path), and
times in interleaved rounds (the order rotating):
- `shoal image pull 127.0.0.1:PORT/bench/big:1 --out DIR`, cold (empty images dir and blob
  cache each round);
- the baseline: `skopeo copy --src-tls-verify=false docker://REF oci:DIR:1`, then each layer
  unpacked in order with `tar` into a root filesystem, whiteouts applied (one process, timed
  whole);
- `podman pull --tls-verify=false REF` with storage of its own, the image removed between
  rounds (skipped, with the reason, where podman does not run);
then the warm pull (everything cached: the same reference again) beside `shoal --help`.
An untimed first round checks that shoal's root filesystem is the baseline's, byte for byte.
Prints the machine, its load, bytes, throughput, medians and spreads. Targets: cold at most
1.0x of skopeo + tar; warm under 2x of `shoal --help`.

Needs curl, gzip, zstd and GNU tar (archives), docker-registry and skopeo (registry); run
from a regular `pip install .`. Only loopback is used; every process and temp dir is removed,
also on ^C.

    python benchmarks/image_pull.py [--only archives|small|registry] [--quick]
        [--big-mib 1024] [--files 20000] [--runs 3] [--no-disk] [--before SHOAL]
        [--image-mib 200] [--rounds 5] [--warm-rounds 15] [--compression gzip|zstd]
        [--no-podman] [--dir /dev/shm]
"""

from __future__ import annotations

import argparse
import contextlib
import filecmp
import functools
import hashlib
import http.server
import importlib
import importlib.util
import io
import json
import os
import platform
import shutil
import signal
import stat
import statistics
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import MEASURE, Machine, check_installed, measure, shoal_command

BLOCK = 1024 * 1024


class SemiCompressible(io.RawIOBase):
    """Deterministic bytes that compress about 2:1: each MiB is half random, half text."""

    def __init__(self, size: int) -> None:
        self.left = size
        self.counter = 0
        self.pending = b""

    def readable(self) -> bool:
        return True

    def _block(self) -> bytes:
        noise = hashlib.shake_256(str(self.counter).encode()).digest(BLOCK // 2)
        line = f"line {self.counter} of semi-compressible data\n".encode()
        text = (line * (BLOCK // 2 // len(line) + 1))[: BLOCK // 2]
        self.counter += 1
        return noise + text

    def readinto(self, buf: Any) -> int:
        if self.left <= 0:
            return 0
        if not self.pending:
            self.pending = self._block()
        n = min(len(buf), self.left, len(self.pending))
        buf[:n] = self.pending[:n]
        self.pending = self.pending[n:]
        self.left -= n
        return n


def build_tar(path: Path, big_bytes: int, files: int) -> None:
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tar:
        if big_bytes:
            info = tarfile.TarInfo("data/big.bin")
            info.size = big_bytes
            tar.addfile(info, io.BufferedReader(SemiCompressible(big_bytes), BLOCK))
        for i in range(files):
            body = (f"file {i}\n" * (1 + i % 60)).encode()
            info = tarfile.TarInfo(f"tree/d{i // 1000:03d}/f{i:05d}.txt")
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))


def compress(tar: Path, kind: str) -> Path:
    if kind == "gz":
        out = tar.with_suffix(".tar.gz")
        with out.open("wb") as fh:
            subprocess.run(["gzip", "-6", "-c", str(tar)], stdout=fh, check=True)
    else:
        out = tar.with_suffix(".tar.zst")
        subprocess.run(["zstd", "-q", "-3", "-T0", "-f", str(tar), "-o", str(out)], check=True)
    return out


def serve(directory: Path) -> tuple[http.server.ThreadingHTTPServer, int]:
    handler = functools.partial(QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, server.server_address[1]


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


def bench_archives(args: argparse.Namespace) -> None:
    for tool in ("curl", "gzip", "zstd", "tar", "bash"):
        if shutil.which(tool) is None:
            raise SystemExit(f"{tool} is needed for the baseline; install it")
    work = Path(tempfile.mkdtemp(prefix="shoal-bench-"))
    shm = Path(tempfile.mkdtemp(prefix="shoal-bench-", dir="/dev/shm"))
    targets = {"tmpfs": shm} if args.no_disk else {"tmpfs": shm, "disk": work / "out"}
    labels = ("small",) if args.only == "small" else ("big", "small")
    try:
        print(f"building archives in {work} ...", file=sys.stderr)
        archives: dict[str, Path] = {}
        sizes: dict[str, int] = {}
        for label in labels:
            big, files = (args.big_mib * BLOCK, 0) if label == "big" else (0, args.files)
            tar = work / f"{label}-1.tar"
            build_tar(tar, big, files)
            for kind in ("gz", "zst"):
                archives[f"{label} {kind}"] = compress(tar, kind)
            sizes[label] = tar.stat().st_size
            tar.unlink()
        server, port = serve(work)
        shoal = shoal_command()
        env = {**os.environ, "SHOAL_HOME": str(work / "home")}
        (work / "home").mkdir()
        machine = Machine()
        print(
            f"machine ({time.strftime('%Y-%m-%d')}): nproc {len(os.sched_getaffinity(0))} "
            f"({os.cpu_count()} CPUs), {cpu_model()}; tmpfs {shm.parent}, disk {work.parent}"
        )
        print(
            f"{args.runs} interleaved rounds per case (order rotating), median; MiB/s of "
            "unpacked data; peak RSS in MiB. `curl|sha|tar`: curl | tee >(sha256sum) | "
            "DECOMPRESSOR | tar -x (shoal --sum's work: hash, decompress, unpack); "
            "`curl|tar`: the same without the hash"
        )
        header = ("case", "target", "shoal s", "MiB/s", "c|sha|t s", "c|tar s", "x sha", "x tar")
        print("{:10s} {:6s} {:>8s} {:>6s} {:>10s} {:>8s} {:>6s} {:>6s}".format(*header), end="")
        print(f" {'RSS':>4s} {'base RSS':>8s}")
        for case in archives:
            path = archives[case]
            unpacked = sizes[case.split()[0]]
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            url = f"http://127.0.0.1:{port}/{path.name}"
            decompress = "gzip -dc" if case.endswith("gz") else "zstd -dc"
            for target_label, root in targets.items():
                out = root / "run"
                commands = {
                    "shoal": [
                        *shoal, "image", "pull", url, "--sum", f"sha256:{digest}",
                        "--out", str(out), "--force",
                    ],
                    "hashed": [
                        "bash", "-c", f"curl -s {url} | tee >(sha256sum >/dev/null) | "
                        f"{decompress} | tar -x -C {out}",
                    ],
                    "plain": ["bash", "-c", f"curl -s {url} | {decompress} | tar -x -C {out}"],
                }  # fmt: skip
                if args.before:  # another build of shoal, for a before/after in one run
                    commands["before"] = [args.before, *commands["shoal"][len(shoal) :]]
                times: dict[str, list[float]] = {name: [] for name in commands}
                peak: dict[str, int] = dict.fromkeys(commands, 0)
                names = list(commands)
                for round_ in range(args.runs):
                    shift = round_ % len(names)
                    for name in names[shift:] + names[:shift]:
                        out.mkdir(parents=True)
                        seconds, rss = measure(commands[name], env)
                        times[name].append(seconds)
                        peak[name] = max(peak[name], rss)
                        shutil.rmtree(out)
                        if target_label == "disk":
                            os.sync()  # the next command must not pay for this one's writeback
                med = {name: statistics.median(values) for name, values in times.items()}
                mib = unpacked / BLOCK
                print(
                    f"{case:10s} {target_label:6s} {med['shoal']:8.2f} {mib / med['shoal']:6.0f} "
                    f"{med['hashed']:10.2f} {med['plain']:8.2f} "
                    f"{med['shoal'] / med['hashed']:5.2f}x {med['shoal'] / med['plain']:5.2f}x "
                    f"{peak['shoal']:4d} {max(peak['hashed'], peak['plain']):8d}"
                    + (
                        f"  before {med['before']:5.2f} s, after/before "
                        f"{med['shoal'] / med['before']:.2f}x"
                        if "before" in med
                        else ""
                    )
                )
        server.shutdown()
        print(f"load: {machine.since()}")
        print(
            "ratios are shoal's time over the baseline's (lower is better). Targets: big <= "
            "1.1x; small <= 1.5x of curl|tar on tmpfs, <= 1.0x on disk; shoal peak RSS < 100 MiB"
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(shm, ignore_errors=True)


# -- a registry image: shoal beside skopeo + tar, and podman -----------------------------------

FIXTURE = Path(__file__).resolve().parent.parent / "tests" / "drivers" / "image" / "registry"
REPOSITORY = "bench/big"
TAG = "1"
MB = 1_000_000

# The baseline, one process timed whole as shoal's is (its peak memory is skopeo's): skopeo
# copies the image into an OCI layout, then GNU tar applies the layers in order. tar -v names
# what each layer wrote, which is what its whiteouts need: a `.wh.NAME` deletes NAME of the
# layers below, an opaque `DIR/.wh..wh..opq` everything in DIR that this layer did not write
# itself (OCI image spec, "Whiteouts"). Its python start-up (~15 ms) counts against it.
BASELINE = r"""
import json, os, shutil, subprocess, sys

skopeo, ref, layout, tag, root, *policy = sys.argv[1:]
subprocess.run(
    [skopeo, *policy, "copy", "--src-tls-verify=false", "docker://" + ref, f"oci:{layout}:{tag}"],
    check=True, stdout=subprocess.DEVNULL,
)


def blob(digest):
    return os.path.join(layout, "blobs", *digest.split(":", 1))


def remove(path):
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.unlink(path)


def hide_below(directory, rel, written):
    for name in os.listdir(directory):
        path, child = os.path.join(directory, name), os.path.join(rel, name)
        if child not in written:
            remove(path)
        elif os.path.isdir(path) and not os.path.islink(path):
            hide_below(path, child, written)


with open(os.path.join(layout, "index.json")) as f:
    index = json.load(f)
(described,) = [
    m for m in index["manifests"]
    if (m.get("annotations") or {}).get("org.opencontainers.image.ref.name") == tag
]
with open(blob(described["digest"])) as f:
    manifest = json.load(f)
os.mkdir(root)
for layer in manifest["layers"]:
    kind = layer["mediaType"].rpartition("+")[2]
    flag = {"gzip": ["--gzip"], "zstd": ["--zstd"]}.get(kind, [])
    listed = subprocess.run(
        ["tar", "-x", "-v", "--quoting-style=literal", *flag, "-f", blob(layer["digest"]),
         "-C", root],
        check=True, stdout=subprocess.PIPE,
    ).stdout
    names = [os.path.normpath(n).lstrip("/") for n in os.fsdecode(listed).splitlines() if n]
    written = set()
    for name in names:
        while name and name not in written:
            written.add(name)
            name = os.path.dirname(name)
    for name in names:
        parent, base = os.path.split(name)
        if base == ".wh..wh..opq":
            os.unlink(os.path.join(root, name))
            hide_below(os.path.join(root, parent), parent, written)
        elif base.startswith(".wh."):
            os.unlink(os.path.join(root, name))
            remove(os.path.join(root, parent, base[len(".wh."):]))
"""


def load_fixture() -> tuple[ModuleType, ModuleType]:
    """The tests' registry fixture and image builder, loaded by path: the repository stays off
    sys.path, so the shoal measured is the installed one."""
    spec = importlib.util.spec_from_file_location(
        "shoal_bench_registry", FIXTURE / "__init__.py", submodule_search_locations=[str(FIXTURE)]
    )
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load the registry fixture from {FIXTURE}")
    package = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = package
    spec.loader.exec_module(package)
    server = importlib.import_module("shoal_bench_registry.server")
    layouts = importlib.import_module("shoal_bench_registry.layouts")
    return server, layouts


class Group:
    """Runs each command in a process group of its own and kills the whole group if this
    script is interrupted or fails meanwhile, so that no shoal, skopeo, tar or podman keeps
    writing into a directory being deleted."""

    def run(
        self, argv: Sequence[str], env: dict[str, str], *, check: bool = True
    ) -> subprocess.CompletedProcess[bytes]:
        with subprocess.Popen(
            argv,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        ) as process:
            try:
                out, err = process.communicate()
            except BaseException:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()
                raise
        done = subprocess.CompletedProcess(argv, process.returncode, out, err)
        if check and done.returncode != 0:
            raise SystemExit(
                f"{' '.join(argv)} failed ({done.returncode}): {err.decode(errors='replace')}"
            )
        return done

    def timed(self, argv: Sequence[str], env: dict[str, str]) -> float:
        start = time.perf_counter()
        self.run(argv, env)
        return time.perf_counter() - start

    def measured(self, argv: Sequence[str], env: dict[str, str]) -> tuple[float, int]:
        """Wall seconds and the peak RSS (MiB) of the largest process of the command, as
        _timing.measure does (the measuring process's start-up is outside the span)."""
        done = self.run([sys.executable, "-c", MEASURE, *argv], env)
        code, seconds, peak = done.stdout.split()
        if int(code) != 0:
            raise SystemExit(f"{' '.join(argv)} failed ({int(code)}): {done.stderr.decode()}")
        return float(seconds), int(peak) // 1024


class Podman:
    """podman with storage of its own under `dir_` (the machine's images are not touched)."""

    def __init__(self, binary: str, dir_: Path, group: Group, env: dict[str, str]) -> None:
        self.dir, self.group, self.env = dir_, group, env
        self.base = [
            binary,
            "--root", str(dir_ / "root"),
            "--runroot", str(dir_ / "run"),
            "--tmpdir", str(dir_ / "tmp"),
            "--events-backend", "none",
        ]  # fmt: skip

    def pull(self, ref: str) -> list[str]:
        return [*self.base, "pull", "--tls-verify=false", ref]

    def remove_images(self) -> None:
        self.group.run([*self.base, "rmi", "--all", "--force"], self.env)

    def delete(self) -> None:
        """Everything it stored: the images, then any mount left under its dir, then the dir."""
        with contextlib.suppress(BaseException):
            self.group.run([*self.base, "rmi", "--all", "--force"], self.env, check=False)
        prefix = str(self.dir) + "/"
        with open("/proc/self/mounts") as mounts:
            points = [line.split()[1] for line in mounts if line.split()[1].startswith(prefix)]
        for point in sorted(points, reverse=True):
            subprocess.run(["umount", "-l", point], check=False, capture_output=True)
        shutil.rmtree(self.dir, ignore_errors=True)


def tree(root: Path) -> dict[str, tuple[str, int]]:
    """Every path under `root`: its kind and, for a file, its size."""
    found: dict[str, tuple[str, int]] = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder) / name
            mode = path.lstat()
            kind = (
                "dir"
                if stat.S_ISDIR(mode.st_mode)
                else "symlink"
                if stat.S_ISLNK(mode.st_mode)
                else "file"
            )
            found[str(path.relative_to(root))] = (kind, mode.st_size if kind == "file" else 0)
    return found


def same_trees(ours: Path, theirs: Path, gone: str) -> None:
    """shoal's root filesystem is the baseline's, byte for byte, and both applied the
    whiteout of `gone`."""
    mine, base = tree(ours), tree(theirs)
    if mine != base:
        only = sorted(set(mine) ^ set(base))[:5]
        raise SystemExit(f"shoal's root ({ours}) differs from the baseline's ({theirs}): {only}")
    for rel, (kind, _) in mine.items():
        if kind == "file" and not filecmp.cmp(ours / rel, theirs / rel, shallow=False):
            raise SystemExit(f"{rel} differs between shoal's root and the baseline's")
    if gone in mine or any(Path(rel).name.startswith(".wh.") for rel in mine):
        raise SystemExit(f"whiteouts not applied: {gone} or a .wh. file is in the root")


def cpu_model() -> str:
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as info:
        for line in info:
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    return platform.processor() or "unknown CPU"


def spread(values: Sequence[float]) -> tuple[float, float, float]:
    return statistics.median(values), min(values), max(values)


def bench_registry(args: argparse.Namespace) -> None:
    for tool in ("skopeo", "tar", "docker-registry"):
        if shutil.which(tool) is None and not os.access(f"/usr/bin/{tool}", os.X_OK):
            raise SystemExit(f"{tool} is needed for the registry benchmark; install it")
    server, layouts = load_fixture()
    group = Group()
    parent = args.dir or ("/dev/shm" if os.path.isdir("/dev/shm") else None)
    work = Path(tempfile.mkdtemp(prefix="shoal-bench-registry.", dir=parent))
    registry = None
    podman: Podman | None = None
    try:
        home = work / "home"
        (home / "shoal").mkdir(parents=True)
        env = layouts.skopeo_env(home)  # no stored logins, no registries.conf of the user's
        (home / "auth.json").write_text('{"auths": {}}\n')  # shoal refuses a missing one
        env.update(SHOAL_HOME=str(home / "shoal"), TMPDIR=str(work / "tmp"))
        (work / "tmp").mkdir()
        print(f"building a {args.image_mib} MiB image in {work} ...", file=sys.stderr)
        layout = layouts.Layout(work / "layout")
        image = layouts.sized_image(
            layout, args.image_mib * BLOCK, tag=TAG, layers=5, compression=args.compression
        )
        registry = server.Registry.start("plain")
        ref = layouts.push(layout, f"{REPOSITORY}:{TAG}", registry)
        shutil.rmtree(work / "layout")  # the registry holds it now
        compressed = sum(layer.size for layer in image.layers) + image.config.size
        unpacked = sum(e.length for layer in image.layers for e in layer.entries)

        shoal = shoal_command()
        out = work / "shoal"
        cold = [*shoal, "image", "pull", ref, "--out", str(out)]
        skopeo = shutil.which("skopeo") or "/usr/bin/skopeo"
        policy = [] if os.path.exists("/etc/containers/policy.json") else ["--insecure-policy"]
        (work / "baseline.py").write_text(BASELINE)
        layout_dir, rootfs = work / "oci", work / "rootfs"
        baseline = [
            sys.executable, "-I", "-S", str(work / "baseline.py"),
            skopeo, ref, str(layout_dir), TAG, str(rootfs), *policy,
        ]  # fmt: skip

        def clear_shoal() -> None:
            shutil.rmtree(out, ignore_errors=True)

        def clear_baseline() -> None:
            shutil.rmtree(layout_dir, ignore_errors=True)
            shutil.rmtree(rootfs, ignore_errors=True)

        cases: dict[str, tuple[list[str], Callable[[], None]]] = {
            "shoal image pull": (cold, clear_shoal),
            "skopeo copy + tar": (baseline, clear_baseline),
        }
        skipped = ""
        found = shutil.which("podman")
        if args.no_podman:
            skipped = "podman: skipped (--no-podman)"
        elif found is None:
            skipped = "podman: skipped (not installed)"
        else:
            podman = Podman(found, work / "podman", group, env)
            tried = group.run(podman.pull(ref), env, check=False)
            if tried.returncode != 0:
                said = " ".join(tried.stderr.decode(errors="replace").split())[-300:]
                skipped = f"podman: skipped (its pull failed here: {said})"
            else:
                podman.remove_images()
                cases["podman pull"] = (podman.pull(ref), podman.remove_images)

        # One untimed round: checks shoal's root against the baseline's (whiteouts too) and
        # that the second pull is the cached one; warms the registry's page cache.
        for argv, clear in cases.values():
            clear()
            group.run(argv, env)
        pulled = json.loads(group.run([*cold, "--json"], env).stdout)
        if not pulled.get("cached"):
            raise SystemExit(f"the second pull was not answered from the cache: {pulled}")
        same_trees(Path(pulled["path"]), rootfs, "data0/removed-later")

        machine = Machine()
        names = list(cases)
        seconds: dict[str, list[float]] = {name: [] for name in names}
        peak: dict[str, int] = dict.fromkeys(names, 0)
        for round_ in range(args.rounds):
            shift = round_ % len(names)  # the order rotates: drift falls on every case alike
            for name in names[shift:] + names[:shift]:
                argv, clear = cases[name]
                clear()
                took, rss = group.measured(argv, env)
                seconds[name].append(took)
                peak[name] = max(peak[name], rss)
        cold_load = machine.since()

        # Warm: shoal's images dir and blob cache as the last cold pull left them.
        machine = Machine()
        warm_cases = {"warm pull": [*cold], "shoal --help": [*shoal, "--help"]}
        for argv in warm_cases.values():
            for _ in range(3):
                group.run(argv, env)
        warm: dict[str, list[float]] = {name: [] for name in warm_cases}
        for round_ in range(args.warm_rounds):
            order = list(warm_cases) if round_ % 2 == 0 else list(reversed(warm_cases))
            for name in order:
                warm[name].append(group.timed(warm_cases[name], env) * 1000)
        warm_load = machine.since()

        cpus = len(os.sched_getaffinity(0))
        print(
            f"registry image {ref}: {len(image.layers)} layers ({args.compression}), "
            f"{compressed:,} bytes ({compressed / MB:.0f} MB) to pull, "
            f"{unpacked:,} bytes of files unpacked; "
            f"one whiteout applied"
        )
        print(
            f"machine ({time.strftime('%Y-%m-%d')}): nproc {cpus} ({os.cpu_count()} CPUs), "
            f"{cpu_model()}; "
            f"files on {'tmpfs' if str(work).startswith('/dev/shm') else 'disk'} ({work.parent})"
        )
        print(
            f"cold: {args.rounds} interleaved rounds (order rotating), empty images dir and "
            f"blob cache each round; {cold_load}"
        )
        print(f"  {'':20} {'median':>7} {'min':>6} {'max':>6}  {'MB/s':>5}  peak RSS")
        for name in names:
            mid, low, high = spread(seconds[name])
            print(
                f"  {name:20} {mid:6.2f}s {low:6.2f} {high:6.2f}  {compressed / MB / mid:5.0f}"
                f"  {peak[name]:4d} MiB"
            )
        if skipped:
            print(f"  {skipped}")
        base = "skopeo copy + tar"
        ratio = statistics.median(seconds["shoal image pull"]) / statistics.median(seconds[base])
        rounds = [s / b for s, b in zip(seconds["shoal image pull"], seconds[base], strict=True)]
        mid, low, high = spread(rounds)
        print(
            f"  shoal / skopeo + tar: {ratio:.2f}x by the medians (per round: median "
            f"{mid:.2f}x, {low:.2f}-{high:.2f}x); target <= 1.00x: "
            f"{'met' if ratio <= 1.0 else 'NOT met'}"
        )
        if "podman pull" in seconds:
            by = statistics.median(seconds["shoal image pull"]) / statistics.median(
                seconds["podman pull"]
            )
            print(f"  shoal / podman pull: {by:.2f}x by the medians (reference)")
        print(
            f"warm (everything cached: the same reference again): {args.warm_rounds} "
            f"interleaved rounds; {warm_load}"
        )
        for name, values in warm.items():
            mid, low, high = spread(values)
            print(f"  {name:20} {mid:5.0f} ms (spread {high - low:.0f} ms, {low:.0f}-{high:.0f})")
        ratio = statistics.median(warm["warm pull"]) / statistics.median(warm["shoal --help"])
        print(
            f"  warm pull / shoal --help: {ratio:.2f}x; target < 2.00x: "
            f"{'met' if ratio < 2.0 else 'NOT met'}"
        )
    finally:
        if podman is not None:
            podman.delete()
        if registry is not None:
            registry.stop()
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--only",
        choices=("archives", "small", "registry"),
        help="run one of the two benchmarks (small: the archives of small files only)",
    )
    parser.add_argument("--quick", action="store_true", help="a trial run: small sizes, few rounds")
    archives = parser.add_argument_group("archives")
    archives.add_argument("--big-mib", type=int, help="default 1024 (--quick: 16)")
    archives.add_argument("--files", type=int, help="default 20000 (--quick: 1000)")
    archives.add_argument("--runs", type=int, help="default 3 (--quick: 1)")
    archives.add_argument("--no-disk", action="store_true", help="skip the on-disk reference")
    archives.add_argument(
        "--before", metavar="SHOAL", help="another shoal executable, timed in the same rounds"
    )
    registry = parser.add_argument_group("registry")
    registry.add_argument("--image-mib", type=int, help="default 200 (--quick: 16)")
    registry.add_argument("--rounds", type=int, help="cold rounds, default 5 (--quick: 2)")
    registry.add_argument("--warm-rounds", type=int, help="default 15 (--quick: 5)")
    registry.add_argument("--compression", choices=("gzip", "zstd"), default="gzip")
    registry.add_argument("--no-podman", action="store_true", help="leave podman out")
    registry.add_argument("--dir", help="where the pulls write (default /dev/shm, a tmpfs)")
    args = parser.parse_args()
    defaults = {
        "big_mib": (1024, 16), "files": (20_000, 1000), "runs": (3, 1),
        "image_mib": (200, 16), "rounds": (5, 2), "warm_rounds": (15, 5),
    }  # fmt: skip
    for name, (full, quick) in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, quick if args.quick else full)
    check_installed()
    # A SIGTERM or SIGHUP unwinds like ^C: the registry, podman's storage, every child
    # process and every temp dir go in the `finally` blocks.
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _interrupted)
    try:
        if args.only in (None, "archives", "small"):
            bench_archives(args)
        if args.only in (None, "registry"):
            bench_registry(args)
    except KeyboardInterrupt:
        raise SystemExit(130) from None


def _interrupted(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


if __name__ == "__main__":
    main()
