#!/usr/bin/env python3
"""Start-up and scope-hashing figures for the `nexus` CLI (issue 2's first benchmark).

Prints, as medians over repeated runs:
- `python -c pass` next to `nexus inspect` on an empty project (start-up cost);
- `nexus inspect RUN` and `nexus accept RUN TASK` on a task whose scope holds N files of
  4 KiB, next to `sha256sum` over the same files (the physical reference point).

Run by hand:  python bench/bench_inspect.py [--files 1000] [--repeat 15]
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

HERE = Path(__file__).resolve().parent
NEXUS = [sys.executable, "-m", "nexus_core.cli"]
SCRIPT = shutil.which("nexus")


def timed(command: list[str], repeat: int, cwd: str | None = None) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        done = subprocess.run(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        samples.append(time.perf_counter() - start)
        if done.returncode not in (0, 1):
            raise SystemExit(f"{command} failed: {done.stderr.decode()}")
    return statistics.median(samples) * 1000


def build_project(root: Path, files: int) -> None:
    (root / "checks").mkdir(parents=True)
    (root / "checks" / "ok.sh").write_text("exit 0\n")
    scope = root / "work"
    for index in range(files):
        sub = scope / f"d{index // 100:03d}"
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"f{index:05d}.bin").write_bytes(os.urandom(4096))
    plan = {
        "id": "bench",
        "maxParallel": 1,
        "tasks": [
            {
                "id": "t",
                "objective": "bench",
                "acceptance": ["passes"],
                "scope": ["work"],
                "artifacts": ["work/d000/f00000.bin"],
                "resources": ["checks/ok.sh"],
                "checks": [{"id": "ok", "command": "/bin/sh", "args": ["checks/ok.sh"], "timeoutMs": 30000}],
                "idempotent": True,
            }
        ],
    }
    (root.parent / "plan.json").write_text(json.dumps(plan))
    host = {"backend": {"kind": "host", "id": "bench", "sessionId": "s"}}
    (root.parent / "host.json").write_text(json.dumps(host))

    def nexus(*args: str) -> str:
        done = subprocess.run([*NEXUS, *args, "--json", "-d", str(root)], capture_output=True, text=True, check=True)
        return done.stdout

    nexus("create", "--plan", str(root.parent / "plan.json"))
    run = json.loads(nexus("start", "bench", "t", "--input", str(root.parent / "host.json")))
    attempt = run["tasks"][0]["attempts"][0]["id"]
    record = {**host, "attemptId": attempt, "outcome": "completed", "summary": "bench"}
    (root.parent / "rec.json").write_text(json.dumps(record))
    nexus("record", "bench", "t", "--input", str(root.parent / "rec.json"))
    nexus("verify", "bench", "t")


def _scope_hash_ms(project: Path, repeat: int) -> float:
    """The hashing part alone (what verify and accept pay per scope walk), without start-up."""
    from nexus_core.snapshots import scope_snapshot

    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        scope_snapshot(str(project.resolve()), ["work"])
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=15)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as temp:
        empty = Path(temp) / "empty"
        empty.mkdir()
        project = Path(temp) / "project"
        build_project(project, options.files)
        files = sorted(str(p) for p in (project / "work").rglob("*.bin"))
        rows = [
            ("python -c pass", timed([sys.executable, "-c", "pass"], options.repeat)),
            ("nexus inspect (empty project, python -m)", timed([*NEXUS, "inspect", "-d", str(empty)], options.repeat)),
        ]
        if SCRIPT:
            rows.append(
                (
                    "nexus inspect (empty project, console script)",
                    timed([SCRIPT, "inspect", "-d", str(empty)], options.repeat),
                )
            )
        rows += [
            (f"sha256sum over {options.files} x 4 KiB", timed(["sha256sum", *files], options.repeat)),
            (
                f"nexus inspect RUN ({options.files} files in scope)",
                timed([*NEXUS, "inspect", "bench", "-d", str(project)], options.repeat),
            ),
            # accept succeeds once; later runs are refused after the same full evidence check
            # ("Task is already accepted" comes first), so time the first run separately.
        ]
        rows.append((f"scope hash in-process ({options.files} files)", _scope_hash_ms(project, options.repeat)))
        start = time.perf_counter()
        subprocess.run([*NEXUS, "accept", "bench", "t", "-d", str(project)], check=True, stdout=subprocess.DEVNULL)
        rows.append((f"nexus accept ({options.files} files in scope, one run)", (time.perf_counter() - start) * 1000))
    width = max(len(name) for name, _ in rows)
    print(f"{'measurement':<{width}}  median ms")
    for name, ms in rows:
        print(f"{name:<{width}}  {ms:9.1f}")


if __name__ == "__main__":
    main()
