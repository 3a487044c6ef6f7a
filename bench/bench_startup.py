"""Start-up: ``nexus inspect`` on a small project next to ``python -c pass``.

Run by hand (prints a markdown table; nothing is asserted):

    python bench/bench_startup.py [--runs 30] [--imports]

Each command runs ``--runs`` times, interleaved so that a burst of load hits all rows alike;
the table gives the minimum and the median wall time, and the median CPU time (user + system
of the child), which a loaded machine disturbs less. ``--imports`` adds the slowest imports
of ``nexus inspect`` (``python -X importtime``, cumulative microseconds, best of 5).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HOST = {"kind": "host", "id": "bench", "sessionId": "s"}


def small_project(base: Path) -> Path:
    """One run of three tasks, one started: what a typical ``inspect`` meets."""
    root = base / "project"
    (root / "checks").mkdir(parents=True)
    (root / "checks" / "check.sh").write_text("exit 0\n")
    tasks = []
    for index in range(3):
        (root / "work" / f"t{index}").mkdir(parents=True)
        (root / "work" / f"t{index}" / "result.txt").write_text("done\n")
        tasks.append(
            {
                "id": f"t{index}",
                "objective": "Bench.",
                "acceptance": ["Bench."],
                "scope": [f"work/t{index}"],
                "artifacts": [f"work/t{index}/result.txt"],
                "resources": ["checks/check.sh"],
                "checks": [{"id": "c", "command": "/bin/sh", "args": ["checks/check.sh"], "cwd": "."}],
            }
        )
    plan = base / "plan.json"
    plan.write_text(json.dumps({"id": "small", "maxParallel": 2, "tasks": tasks}))
    host = base / "host.json"
    host.write_text(json.dumps({"backend": HOST}))
    nexus = [sys.executable, "-m", "nexus_core.cli"]
    subprocess.run([*nexus, "create", "--plan", str(plan), "-d", str(root)], check=True, capture_output=True)
    subprocess.run(
        [*nexus, "start", "small", "t0", "--input", str(host), "-d", str(root)], check=True, capture_output=True
    )
    return root


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--imports", action="store_true")
    options = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="nexus-startup-", dir="/tmp"))
    try:
        root = str(small_project(base))
        script = shutil.which("nexus") or str(Path(sys.executable).parent / "nexus")
        commands = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "python -c 'import nexus_core.cli.main'": [sys.executable, "-c", "import nexus_core.cli.main"],
            "nexus inspect (inventory)": [script, "inspect", "-d", root],
            "nexus inspect --json (inventory)": [script, "inspect", "--json", "-d", root],
            "nexus inspect small (one run, 3 tasks)": [script, "inspect", "small", "-d", root],
            "nexus --version (click path)": [script, "--version"],
        }
        times: dict[str, list[float]] = {name: [] for name in commands}
        cpu: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(options.runs):
            for name, command in commands.items():
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                started = time.perf_counter()
                subprocess.run(command, capture_output=True, check=True)
                times[name].append(time.perf_counter() - started)
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpu[name].append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
        base_median = statistics.median(times["python -c pass"])
        print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, {options.runs} runs each, interleaved\n")
        print("| command | wall min ms | wall median ms | median minus python -c pass | CPU median ms |")
        print("|---|---:|---:|---:|---:|")
        for name, values in times.items():
            median = statistics.median(values)
            print(
                f"| {name} | {min(values) * 1000:.0f} | {median * 1000:.0f} | {(median - base_median) * 1000:+.0f} | "
                f"{statistics.median(cpu[name]) * 1000:.0f} |"
            )
        if options.imports:
            print_imports(script, root)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def print_imports(script: str, root: str) -> None:
    best: dict[str, int] = {}
    for _ in range(5):
        done = subprocess.run(
            [sys.executable, "-X", "importtime", script, "inspect", "-d", root], capture_output=True, text=True
        )
        for line in done.stderr.splitlines():
            parts = line.split("|")
            if len(parts) != 3 or not parts[1].strip().isdigit():
                continue
            name = parts[2].strip()
            cumulative = int(parts[1])
            best[name] = min(best.get(name, cumulative), cumulative)
    print("\n| module (top level and nexus_core) | cumulative µs, best of 5 |")
    print("|---|---:|")
    top = [(name, value) for name, value in best.items() if "." not in name or name.startswith("nexus_core")]
    for name, value in sorted(top, key=lambda item: -item[1])[:15]:
        print(f"| {name} | {value} |")


if __name__ == "__main__":
    main()
