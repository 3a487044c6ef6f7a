"""An unchanged scope, looked at again by a long-lived reader (run by hand; never a test).

    python bench/bench_scope_cache.py [--files 10000] [--size 1024] [--looks 5]

The dashboard, ``wait``, ``loop`` and the scheduler read scopes inside
``observational_hashes``: a file's hash is kept per version (device, inode, size, mtime_ns,
ctime_ns; a file stamped within the racy window of its hash is hashed again). This times one
scope of ``--files`` files (100 per directory):

- "inspect" (no cache, as the short-lived CLI commands do): every look hashes every file;
- first look with an empty cache, then later looks (the median of ``--looks``);

against two floors measured in the same run: a stat walk (os.walk + lstat of every file) and
a raw read + sha256 of every file. Finally a same-size edit with its mtime set back: the next
look must give the new hash (printed as a check, not timed).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from nexus_core import snapshots
from nexus_core.snapshots import observational_hashes, scope_snapshot


def timed(action: Callable[[], object]) -> float:
    began = time.perf_counter()
    action()
    return time.perf_counter() - began


def stat_walk(top: Path) -> None:
    for directory, _, files in os.walk(top):
        for name in files:
            os.lstat(os.path.join(directory, name))


def read_and_hash(top: Path) -> None:
    for directory, _, files in os.walk(top):
        for name in files:
            with open(os.path.join(directory, name), "rb") as handle:
                hashlib.sha256(handle.read()).hexdigest()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=10000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--looks", type=int, default=5)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="nexus-bench-scope-")).resolve()
    try:
        scope = root / "out"
        for index in range(args.files):
            directory = scope / f"d{index // 100:03d}"
            directory.mkdir(parents=True, exist_ok=True)
            (directory / f"f{index:05d}.txt").write_bytes(os.urandom(args.size // 2).hex().encode()[: args.size])
        # Hashes are kept only for files stamped outside the racy window: wait it out.
        time.sleep(snapshots.RACY_NANOSECONDS / 1e9 + 0.2)
        figures: dict[str, float] = {}
        figures["floor: stat walk (s)"] = min(timed(lambda: stat_walk(scope)) for _ in range(3))
        figures["floor: raw read + sha256 (s)"] = min(timed(lambda: read_and_hash(scope)) for _ in range(3))
        figures["inspect, no cache, each look (s)"] = statistics.median(
            timed(lambda: scope_snapshot(str(root), ["out"])) for _ in range(args.looks)
        )
        cache: dict[tuple[int, ...], str] = {}

        def look() -> dict[str, str | None]:
            with observational_hashes(cache):
                return scope_snapshot(str(root), ["out"])

        figures["cached: first look (s)"] = timed(look)
        figures["cached: later looks, median (s)"] = statistics.median(timed(look) for _ in range(args.looks))
        # The racy rule: a same-size edit with its mtime set back is seen at the next look.
        target = scope / "d000" / "f00000.txt"
        before, info = look()["out/d000/f00000.txt"], target.stat()
        data = target.read_bytes()
        target.write_bytes(bytes([data[0] ^ 1]) + data[1:])
        os.utime(target, ns=(info.st_atime_ns, info.st_mtime_ns))
        changed = look()["out/d000/f00000.txt"] != before
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"scope: {args.files} files of {args.size} bytes")
    width = max(len(key) for key in figures)
    for key, value in figures.items():
        print(f"{key:<{width}}  {value:8.3f}")
    walk, read = figures["floor: stat walk (s)"], figures["floor: raw read + sha256 (s)"]
    later, uncached = figures["cached: later looks, median (s)"], figures["inspect, no cache, each look (s)"]
    print(f"later look / stat walk:          {later / walk:6.2f}")
    print(f"later look / no-cache look:      {later / uncached:6.2f}")
    print(f"first look / raw read + sha256:  {figures['cached: first look (s)'] / read:6.2f}")
    print(f"same-size edit, mtime set back, seen at the next look: {'yes' if changed else 'NO'}")
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    return 0 if changed else 1


if __name__ == "__main__":
    raise SystemExit(main())
