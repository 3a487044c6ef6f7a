"""How cost grows: inspect, verify and accept against task count and scope size, next to
``sha256sum`` over the same files; and a run state near the 16 MiB limit (load, validate, save).

Run by hand (prints markdown tables; nothing is asserted):

    python bench/bench_scale.py            # the full matrix (a few minutes, ~1.2 GiB in /tmp)
    python bench/bench_scale.py --quick    # a smaller matrix

Times are the best of ``--repeat`` runs (default 3), warm page cache, in seconds unless noted.
Engine calls are timed in-process (no interpreter start-up); ``CLI inspect`` is the whole
``nexus inspect RUN --json`` process.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nexus_core import engine, observe
from nexus_core.snapshots import scope_snapshot
from nexus_core.state import canonical, store

HOST = {"kind": "host", "id": "bench", "sessionId": "s"}


def best(repeat: int, action: Callable[[], Any], before: Callable[[], Any] | None = None) -> float:
    times = []
    for _ in range(repeat):
        if before is not None:
            before()
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return min(times)


def best_both(repeat: int, action: Callable[[], Any]) -> tuple[float, float]:
    """(best wall time, best CPU time of this process): CPU time is steadier under load."""
    walls, cpus = [], []
    for _ in range(repeat):
        started, cpu = time.perf_counter(), time.process_time()
        action()
        walls.append(time.perf_counter() - started)
        cpus.append(time.process_time() - cpu)
    return min(walls), min(cpus)


def task(task_id: str, scope: str, artifact: str) -> dict[str, Any]:
    return {
        "id": task_id,
        "objective": "Bench.",
        "acceptance": ["Bench."],
        "dependsOn": [],
        "scope": [scope],
        "artifacts": [artifact],
        "resources": [],
        "checks": [{"id": "true", "command": "/bin/true", "args": [], "cwd": ".", "timeoutMs": 30000}],
        "maxAttempts": 10,
        "deadlineMs": 3600000,
        "idempotent": True,
        "authorizations": ["Bench."],
    }


def write_files(folder: Path, count: int, size: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    block = os.urandom(min(size, 1 << 20))
    for index in range(count):
        with open(folder / f"f{index:05d}.bin", "wb") as handle:
            left = size
            while left > 0:
                handle.write(block[: min(left, len(block))])
                left -= len(block)


def sha256sum_seconds(root: Path, scope: str) -> float:
    command = f"cd {root} && find {scope} -type f -print0 | sort -z | xargs -0 sha256sum > /dev/null"
    started = time.perf_counter()
    subprocess.run(command, shell=True, check=True)
    return time.perf_counter() - started


def reset_runs(root: Path) -> None:
    shutil.rmtree(root / ".bmad-plus", ignore_errors=True)


def drive_to_passed(root: str, run_id: str, task_ids: list[str]) -> None:
    for task_id in task_ids:
        engine.start_task(root, run_id, task_id, {"backend": HOST})
        run = store.load_run(root, run_id)
        attempt = next(t for t in run["tasks"] if t["id"] == task_id)["attempts"][-1]
        bound = {"attemptId": attempt["id"], "backend": HOST}
        engine.record_attempt(root, run_id, task_id, {**bound, "outcome": "completed", "summary": "ok"})


def cli_inspect_seconds(root: str, run_id: str, repeat: int) -> float:
    command = [sys.executable, "-m", "nexus_core.cli", "inspect", run_id, "--json", "-d", root]
    return best(repeat, lambda: subprocess.run(command, capture_output=True, check=True))


# ----------------------------------------------------------------- task count


def bench_tasks(base: Path, counts: list[int], repeat: int) -> None:
    print("\n### Cost against task count (one 4 KiB file per task scope, one check per task)\n")
    print("| tasks | state file | inspect RUN (engine) | CLI inspect RUN | verify 1 task | accept 1 task |")
    print("|---:|---:|---:|---:|---:|---:|")
    for count in counts:
        root_path = base / f"tasks-{count}"
        for index in range(count):
            write_files(root_path / "t" / f"{index}", 1, 4096)
        root = str(root_path.resolve())
        ids = [f"t{index}" for index in range(count)]
        plan = {
            "id": "bench",
            "maxParallel": 32,
            "config": {},
            "tasks": [task(f"t{i}", f"t/{i}", f"t/{i}/f00000.bin") for i in range(count)],
        }
        verify_times, accept_times = [], []
        for _ in range(repeat):
            reset_runs(root_path)
            engine.create_run(root, plan)
            # Every task gets a completed attempt, so the run file has its realistic size.
            for chunk in range(0, count, 32):
                drive_to_passed(root, "bench", ids[chunk : chunk + 32])
            started = time.perf_counter()
            engine.verify_task(root, "bench", "t0")
            verify_times.append(time.perf_counter() - started)
            started = time.perf_counter()
            engine.accept_task(root, "bench", "t0")
            accept_times.append(time.perf_counter() - started)
        size = os.path.getsize(root_path / ".bmad-plus/nexus/runs/bench.json")
        inspect = best(repeat, lambda root=root: observe.inspect_run(root, "bench"))
        cli = cli_inspect_seconds(root, "bench", repeat)
        print(
            f"| {count} | {size / 1024:.0f} KiB | {inspect:.3f} | {cli:.3f} | "
            f"{min(verify_times):.3f} | {min(accept_times):.3f} |"
        )
        shutil.rmtree(root_path)


# ----------------------------------------------------------------- scope size


def human(size: int) -> str:
    return f"{size >> 20} MiB" if size >= 1 << 20 else f"{size >> 10} KiB"


def bench_scopes(base: Path, shapes: list[tuple[int, int]], repeat: int) -> None:
    print("\n### Cost against scope size (one task whose scope holds the files)\n")
    print("| files | file size | total | sha256sum | scope hash | ratio | verify | accept | inspect RUN (passed) |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for count, size in shapes:
        root_path = base / f"scope-{count}-{size}"
        write_files(root_path / "data", count, size)
        root = str(root_path.resolve())
        scope_snapshot(root, ["data"])  # warm the page cache
        reference = min(sha256sum_seconds(root_path, "data") for _ in range(repeat))
        ours = best(repeat, lambda root=root: scope_snapshot(root, ["data"]))
        plan = {"id": "bench", "maxParallel": 1, "config": {}, "tasks": [task("t0", "data", "data/f00000.bin")]}
        verify_times, accept_times, inspect_times = [], [], []
        for _ in range(repeat):
            reset_runs(root_path)
            engine.create_run(root, plan)
            drive_to_passed(root, "bench", ["t0"])
            started = time.perf_counter()
            engine.verify_task(root, "bench", "t0")
            verify_times.append(time.perf_counter() - started)
            started = time.perf_counter()
            observe.inspect_run(root, "bench")
            inspect_times.append(time.perf_counter() - started)
            started = time.perf_counter()
            engine.accept_task(root, "bench", "t0")
            accept_times.append(time.perf_counter() - started)
        print(
            f"| {count} | {human(size)} | {human(count * size)} | {reference:.3f} | {ours:.3f} | "
            f"{ours / reference:.2f}x | {min(verify_times):.3f} | {min(accept_times):.3f} | {min(inspect_times):.3f} |"
        )
        shutil.rmtree(root_path)


# ----------------------------------------------------------------- a state near 16 MiB


def big_run(root: Path, target: int) -> dict[str, Any]:
    """A valid run grown to about ``target`` payload bytes with recorded attempts whose
    scope snapshots list many files (what a 10,000-file scope leaves behind)."""
    for index in range(4):
        write_files(root / "t" / f"{index}", 1, 16)
    plan = {
        "id": "big",
        "maxParallel": 4,
        "config": {},
        "tasks": [task(f"t{i}", f"t/{i}", f"t/{i}/f00000.bin") for i in range(4)],
    }
    engine.create_run(str(root), plan)
    drive_to_passed(str(root), "big", ["t0"])
    run = store.load_run(str(root), "big")
    template = run["tasks"][0]["attempts"][0]
    hashes = {f"t/0/generated/file-{n:05d}.bin": "ab" * 32 for n in range(10000)}
    filler = canonical.copy(template)
    filler["baseline"]["scopeHashes"] = hashes
    filler["resultHashes"] = hashes
    filler["execution"] = "failed"
    per_attempt = len(canonical.compact(filler))
    task_index = 0
    while len(canonical.compact(run).encode()) + per_attempt < target:
        copy = canonical.copy(filler)
        copy["id"] = f"attempt-{task_index}-{len(run['tasks'][task_index % 4]['attempts'])}"
        copy["taskId"] = f"t{task_index % 4}"
        run["tasks"][task_index % 4]["attempts"].insert(0, copy)
        task_index += 1
    return run


def bench_big_state(base: Path, repeat: int) -> None:
    root_path = base / "big-state"
    root_path.mkdir()
    root = str(root_path.resolve())
    run = big_run(root_path, store.STATE_LIMIT - 512 * 1024)
    store.save_run(root, run)
    path = root_path / ".bmad-plus/nexus/runs/big.json"
    raw = path.read_bytes()
    loaded = store.parse_run(root, "big", raw)
    print("\n### A run state near the 16 MiB limit\n")
    payload = len(canonical.compact(loaded).encode())
    print(f"state file {len(raw) / (1 << 20):.2f} MiB on disk (pretty), payload {payload / (1 << 20):.2f} MiB\n")
    print("| step | wall s | CPU s |")
    print("|---|---:|---:|")
    read = best_both(repeat, lambda: store.read_state_bytes(root, "big"))
    parse = best_both(repeat, lambda: store.parse_run(root, "big", raw))
    encode = best_both(repeat, lambda: store.envelope_text(loaded))
    save = best_both(repeat, lambda: store.save_run(root, loaded))
    load = best_both(repeat, lambda: store.load_run(root, "big"))
    rows = [
        ("read bytes", read),
        ("parse + validate (checksum, lifecycle)", parse),
        ("load (read + parse + validate)", load),
        ("serialize (canonical compact + checksum + pretty)", encode),
        ("save (serialize + atomic write + fsync)", save),
        ("**load + save**", (load[0] + save[0], load[1] + save[1])),
    ]
    for name, (wall, cpu) in rows:
        print(f"| {name} | {wall:.3f} | {cpu:.3f} |")
    inspect = best_both(repeat, lambda: observe.inspect_run(root, "big"))
    print(f"| inspect RUN (engine) | {inspect[0]:.3f} | {inspect[1]:.3f} |")
    command = [sys.executable, "-m", "nexus_core.cli", "inspect", "big", "--json", "-d", root]
    cli = best(repeat, lambda: subprocess.run(command, capture_output=True, check=True))
    print(f"| CLI inspect RUN --json (whole process) | {cli:.3f} | |")
    shutil.rmtree(root_path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a smaller matrix")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", choices=["tasks", "scopes", "state"], help="one table only")
    options = parser.parse_args()
    counts = [1, 10, 50] if options.quick else [1, 10, 50, 100, 200]
    shapes = (
        [(100, 4096), (1000, 4096), (10, 1 << 20)]
        if options.quick
        else [(100, 4096), (1000, 4096), (10000, 4096), (100, 1 << 20), (64, 16 << 20)]
    )
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, best of {options.repeat}")
    base = Path(tempfile.mkdtemp(prefix="nexus-bench-", dir="/tmp"))
    try:
        if options.only in (None, "tasks"):
            bench_tasks(base, counts, options.repeat)
        if options.only in (None, "scopes"):
            bench_scopes(base, shapes, options.repeat)
        if options.only in (None, "state"):
            bench_big_state(base, options.repeat)
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
