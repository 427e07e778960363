#!/usr/bin/env python3
"""`shoal image pull` against the shell baseline `curl | tee >(sha256sum) | tar -x`.

Builds, in a temp dir, a big archive of semi-compressible data (default 1 GiB) and an
archive of 20,000 small files, each as .tar.gz and .tar.zst; serves them on 127.0.0.1; and
times, in the same run, `shoal image pull --sum ...` and the baseline with the matching
decompressor. Extraction goes to a tmpfs (/dev/shm: small-file creation on disk varies
tenfold between runs) and, for reference, to disk. Prints throughput, the ratio to the
baseline and peak memory. Targets: >= 0.9x the baseline on the big file, >= 0.6x on the
small files, peak memory under 100 MB. Needs curl, gzip, zstd and GNU tar on PATH; run from
a regular `pip install .`.

    python benchmarks/image_pull.py [--big-mib 1024] [--files 20000] [--runs 3]
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import http.server
import io
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import threading
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import check_installed, measure, shoal_command

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--big-mib", type=int, default=1024)
    parser.add_argument("--files", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--no-disk", action="store_true", help="skip the on-disk reference")
    args = parser.parse_args()
    check_installed()
    for tool in ("curl", "gzip", "zstd", "tar", "bash"):
        if shutil.which(tool) is None:
            raise SystemExit(f"{tool} is needed for the baseline; install it")
    work = Path(tempfile.mkdtemp(prefix="shoal-bench-"))
    shm = Path(tempfile.mkdtemp(prefix="shoal-bench-", dir="/dev/shm"))
    targets = {"tmpfs": shm} if args.no_disk else {"tmpfs": shm, "disk": work / "out"}
    try:
        print(f"building archives in {work} ...", file=sys.stderr)
        archives: dict[str, Path] = {}
        for label, big, files in (("big", args.big_mib * BLOCK, 0), ("small", 0, args.files)):
            tar = work / f"{label}-1.tar"
            build_tar(tar, big, files)
            for kind in ("gz", "zst"):
                archives[f"{label} {kind}"] = compress(tar, kind)
            unpacked = tar.stat().st_size
            tar.unlink()
            archives[f"{label} size"] = Path(str(unpacked))
        server, port = serve(work)
        shoal = shoal_command()
        env = {**os.environ, "SHOAL_HOME": str(work / "home")}
        (work / "home").mkdir()
        print(f"{args.runs} runs per case, median; MiB/s of unpacked data; peak RSS in MiB")
        header = (
            "case",
            "target",
            "shoal s",
            "MiB/s",
            "base s",
            "MiB/s",
            "ratio",
            "RSS",
            "base RSS",
        )
        print("{:10s} {:6s} {:>8s} {:>7s} {:>8s} {:>7s} {:>6s} {:>5s} {:>8s}".format(*header))
        for case in ("big gz", "big zst", "small gz", "small zst"):
            path = archives[case]
            unpacked = int(str(archives[case.split()[0] + " size"]))
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            url = f"http://127.0.0.1:{port}/{path.name}"
            decompress = "gzip -dc" if case.endswith("gz") else "zstd -dc"
            for target_label, root in targets.items():
                shoal_times, base_times, shoal_rss, base_rss = [], [], 0, 0
                for i in range(args.runs):
                    out = root / f"run-{i}"
                    seconds, rss = measure(
                        [
                            *shoal,
                            "image",
                            "pull",
                            url,
                            "--sum",
                            f"sha256:{digest}",
                            "--out",
                            str(out),
                            "--force",
                        ],
                        env,
                    )
                    shoal_times.append(seconds)
                    shoal_rss = max(shoal_rss, rss)
                    shutil.rmtree(out)
                    out.mkdir(parents=True)
                    pipeline = (
                        f"curl -s {url} | tee >(sha256sum >/dev/null) | {decompress} "
                        f"| tar -x -C {out}"
                    )
                    seconds, rss = measure(["bash", "-c", pipeline], env)
                    base_times.append(seconds)
                    base_rss = max(base_rss, rss)
                    shutil.rmtree(out)
                s_med, b_med = statistics.median(shoal_times), statistics.median(base_times)
                mib = unpacked / BLOCK
                print(
                    f"{case:10s} {target_label:6s} {s_med:8.2f} {mib / s_med:7.0f} {b_med:8.2f} "
                    f"{mib / b_med:7.0f} {b_med / s_med:5.2f}x {shoal_rss:5d} {base_rss:8d}"
                )
        server.shutdown()
        print("targets: big >= 0.90x, small >= 0.60x, shoal peak RSS < 100 MiB")
    finally:
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(shm, ignore_errors=True)


if __name__ == "__main__":
    main()
