"""Shell completion latency on a project of 100 runs, next to ``python -c pass``.

Run by hand (prints a markdown table; nothing is asserted):

    python bench/bench_completion.py [--runs 30] [--project-runs 100]

Each completion is what bash asks the ``nexus`` console script for (``COMP_WORDS``,
``COMP_CWORD``, ``_NEXUS_COMPLETE=bash_complete``). Commands run interleaved so a burst of load
hits all rows alike; the table gives the minimum and median wall time, the median as a ratio to
the floor (``python -c pass``, measured in the same run) and the median CPU time of the child.
The target (issue 17): under 100 ms on a project of 100 runs.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HOST = {"kind": "host", "id": "bench", "sessionId": "s"}
TASKS_PER_RUN = 8


def task(run_id: str, task_id: str) -> dict[str, Any]:
    return {
        "id": task_id,
        "objective": "Bench.",
        "acceptance": ["Bench."],
        "scope": [f"work/{run_id}/{task_id}"],
        "artifacts": [f"work/{run_id}/{task_id}/result.txt"],
        "resources": ["checks/check.sh"],
        "checks": [{"id": "c", "command": "/bin/sh", "args": ["checks/check.sh"], "cwd": "."}],
    }


def project(base: Path, runs: int) -> Path:
    """``runs`` runs of TASKS_PER_RUN tasks each; in every run the first task is started."""
    from nexus_core import engine

    root = base / "project"
    (root / "checks").mkdir(parents=True)
    (root / "checks" / "check.sh").write_text("exit 0\n")
    for index in range(runs):
        run_id = f"run-{index:03d}"
        tasks = [task(run_id, f"task-{number}") for number in range(TASKS_PER_RUN)]
        engine.create_run(str(root), {"id": run_id, "maxParallel": 4, "tasks": tasks})
        engine.start_task(str(root), run_id, "task-0", {"backend": HOST})
    return root


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--project-runs", type=int, default=100)
    options = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="nexus-completion-", dir="/tmp"))
    try:
        root = project(base, options.project_runs)
        script = shutil.which("nexus") or str(Path(sys.executable).parent / "nexus")
        middle = f"run-{options.project_runs // 2:03d}"
        lines = {
            "nexus <TAB> (actions)": "nexus ",
            "nexus inspect <TAB> (run ids)": "nexus inspect ",
            "nexus verify run-0<TAB> (run ids)": "nexus verify run-0",
            f"nexus verify {middle} <TAB> (task ids)": f"nexus verify {middle} ",
            f"nexus start {middle} <TAB> (task ids)": f"nexus start {middle} ",
            "nexus inspect -<TAB> (options)": "nexus inspect -",
            f"nexus wait {middle} --task <TAB> (loads wait)": f"nexus wait {middle} --task ",
        }
        commands: dict[str, tuple[list[str], dict[str, str] | None]] = {
            "python -c pass (floor)": ([sys.executable, "-c", "pass"], None)
        }
        for name, line in lines.items():
            env = dict(
                os.environ,
                COMP_WORDS=line,
                COMP_CWORD=str(len(line.split(" ")) - 1),
                _NEXUS_COMPLETE="bash_complete",
            )
            commands[name] = ([script], env)
        times: dict[str, list[float]] = {name: [] for name in commands}
        cpu: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(options.runs):
            for name, (command, env) in commands.items():
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                started = time.perf_counter()
                subprocess.run(command, capture_output=True, check=True, cwd=root, env=env)
                times[name].append(time.perf_counter() - started)
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpu[name].append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
        floor = statistics.median(times["python -c pass (floor)"])
        print(
            f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, {options.project_runs} runs of "
            f"{TASKS_PER_RUN} tasks, {options.runs} samples each, interleaved\n"
        )
        print("| completion | wall min ms | wall median ms | median / floor | CPU median ms |")
        print("|---|---:|---:|---:|---:|")
        for name, samples in times.items():
            median = statistics.median(samples)
            print(
                f"| {name} | {min(samples) * 1000:.0f} | {median * 1000:.0f} | {median / floor:.1f}x | "
                f"{statistics.median(cpu[name]) * 1000:.0f} |"
            )
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
