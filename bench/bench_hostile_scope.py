#!/usr/bin/env python3
"""Issue 22 item 4: what one `nexus inspect RUN` costs when a worker fills its task's scope.

Three scopes, each behind a passed verification (so inspect snapshots the scope to tell whether
the evidence is current), each timed as the median wall time of `nexus inspect RUN --json` and
the peak memory (maxrss) of that process:

- floor:  10 files of 4 KiB (what an ordinary inspect costs, the same run);
- sparse: 200 sparse files of 16 MiB - 1 byte (no disk used; every byte is still hashed);
- many:   300,000 empty files (far past the 10,000-file limit).

Figures are ratios against the floor measured in the same run (never absolute claims).
Run by hand:  python bench/bench_hostile_scope.py [--repeat 3] [--many 300000] [--sparse 200]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

NEXUS = [sys.executable, "-m", "nexus_core.cli"]
HOST = {"kind": "host", "id": "bench", "sessionId": "s1"}


def nexus(root: Path, *args: str, input_value: object = None) -> str:
    command = [*NEXUS, *args, "-d", str(root)]
    if input_value is not None:
        path = root.parent / f"{root.name}-{args[0]}.json"
        path.write_text(json.dumps(input_value))
        command += ["--plan" if args[0] == "create" else "--input", str(path)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{args} failed: {done.stderr}")
    return done.stdout


def completed_task(root: Path) -> None:
    """A run whose task t has a passed verification over work/ (10 files of 4 KiB)."""
    (root / "work").mkdir(parents=True)
    for index in range(10):
        (root / "work" / f"f{index}.bin").write_bytes(os.urandom(4096))
    task = {
        "id": "t",
        "objective": "bench",
        "scope": ["work"],
        "artifacts": ["work/f0.bin"],
        "checks": [{"id": "ok", "command": "/bin/true", "args": [], "timeoutMs": 30000}],
    }
    nexus(root, "create", input_value={"id": "bench", "maxParallel": 1, "tasks": [task]})
    started = json.loads(nexus(root, "start", "bench", "t", "--json", input_value={"backend": HOST}))
    attempt = started["tasks"][0]["attempts"][-1]["id"]
    record = {"attemptId": attempt, "backend": HOST, "outcome": "completed", "summary": "done"}
    nexus(root, "record", "bench", "t", input_value=record)
    nexus(root, "verify", "bench", "t")  # passed: inspect now checks that its evidence is current


def add_sparse(root: Path, count: int) -> None:
    for index in range(count):
        with open(root / "work" / f"sparse{index:03d}.bin", "wb") as handle:
            handle.truncate(16 * 1024 * 1024 - 1)


def add_many(root: Path, count: int) -> None:
    folder = root / "work" / "many"
    folder.mkdir()
    for index in range(count):
        os.close(os.open(folder / f"e{index:06d}", os.O_WRONLY | os.O_CREAT, 0o600))


def measure(root: Path, repeat: int) -> tuple[float, float, str]:
    """(median seconds, max maxrss in MiB, the task's staleReason) of `nexus inspect bench --json`."""
    seconds: list[float] = []
    peak = 0.0
    reason = ""
    for _ in range(repeat):
        start = time.perf_counter()
        child = subprocess.Popen(
            [*NEXUS, "inspect", "bench", "--json", "-d", str(root)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
        assert child.stdout is not None
        out = child.stdout.read()
        _, status, usage = os.wait4(child.pid, 0)  # this child's own rusage (maxrss in KiB)
        child.returncode = os.waitstatus_to_exitcode(status)
        seconds.append(time.perf_counter() - start)
        peak = max(peak, usage.ru_maxrss / 1024)
        reason = json.loads(out)["observations"][0].get("staleReason") or ""
    return statistics.median(seconds), peak, reason


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--sparse", type=int, default=200)
    parser.add_argument("--many", type=int, default=300_000)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="nexus-bench-hostile-") as base:
        rows = []
        cases = (("floor", None, 0), ("sparse", add_sparse, options.sparse), ("many", add_many, options.many))
        for name, fill, count in cases:
            root = Path(base) / name
            completed_task(root)
            if fill is not None:
                fill(root, count)
            rows.append((name, count, *measure(root, options.repeat)))
    floor_seconds, floor_memory = rows[0][2], rows[0][3]
    print(f"{'scope':8} {'files':>8} {'median s':>9} {'x floor':>8} {'maxrss MiB':>11} {'x floor':>8}  staleReason")
    for name, count, seconds, memory, reason in rows:
        print(
            f"{name:8} {count:>8} {seconds:>9.3f} {seconds / floor_seconds:>8.1f} {memory:>11.1f} "
            f"{memory / floor_memory:>8.2f}  {reason[:90]}"
        )


if __name__ == "__main__":
    main()
