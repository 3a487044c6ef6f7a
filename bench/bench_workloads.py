"""Issue 11's workloads, each as a ratio against a floor measured in the same run.

Run by hand (prints a markdown table; nothing is asserted):

    python bench/bench_workloads.py              # every workload, 9 repeats
    python bench/bench_workloads.py --repeat 15 --only mutation inspect

Every CLI row is a whole ``nexus`` process (start-up included), timed against ``python -c pass``
run alternately with it (same interpreter, same moment), so machine load hits both alike. Scope
rows are timed against one in-process hashlib pass over the same files (sorted walk, open, read,
sha256), measured alternately too. Figures are medians over the repeats; on a shared machine
they are still noisy, the ratios less so.

Workloads (targets from issue 11):

- ``inspect RUN --json`` on a 5-task run (5 accepted tasks): within floor + 25 ms;
- ``start``, ``record``, ``verify`` (one ``/bin/true`` check), ``accept`` of one task of a
  200-task run of about 1.4 MiB: under 3x the floor (verify under 4x);
- ``accept`` and ``inspect RUN --json`` with a 10,000 x 1 KiB scope: within 2.5x of the hashlib
  pass; with a 10 x 16 MiB scope: within 1.5x;
- load + save of a state near 16 MiB (in-process): under 0.25 s.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nexus_core import engine
from nexus_core.state import canonical, store

HOST = {"kind": "host", "id": "bench", "sessionId": "s"}
CLI = [sys.executable, "-m", "nexus_core.cli"]
FLOOR = [sys.executable, "-c", "pass"]


def task(task_id: str, scope: str, artifact: str, checks: int = 1) -> dict[str, Any]:
    return {
        "id": task_id,
        "objective": "Bench.",
        "acceptance": ["Bench."],
        "dependsOn": [],
        "scope": [scope],
        "artifacts": [artifact],
        "resources": [],
        "checks": [
            {"id": f"true{n}", "command": "/bin/true", "args": [], "cwd": ".", "timeoutMs": 30000}
            for n in range(checks)
        ],
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


def hashlib_pass(folder: Path) -> None:
    """The floor for scope rows: what hashing the same files costs at the least, in-process."""
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames.sort()
        for name in sorted(filenames):
            with open(os.path.join(dirpath, name), "rb") as handle:
                hashlib.sha256(handle.read()).hexdigest()


CPU: dict[int, float] = {}  # id of a sample list -> CPU seconds (user + system) of the same calls


def seconds(action: Callable[[], Any]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def cpu_seconds() -> float:
    """CPU time of this process and its finished children: steadier than wall time on a busy
    machine (waiting for a core is not counted)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def timed(samples: list[float], action: Callable[[], Any]) -> None:
    """Append the wall time of ``action`` to ``samples`` and its CPU time to CPU[id(samples)]."""
    cpu = cpu_seconds()
    samples.append(seconds(action))
    CPU.setdefault(id(samples), 0.0)
    CPU[id(samples)] += cpu_seconds() - cpu


def run_process(command: list[str], check: bool = True) -> None:
    done = subprocess.run(command, capture_output=True)
    if check and done.returncode != 0:
        raise SystemExit(f"{command} failed: {done.stdout[-400:]!r} {done.stderr[-400:]!r}")


def cli(root: str, *args: str) -> list[str]:
    return [*CLI, *args, "--json", "-d", root]


class Table:
    def __init__(self) -> None:
        self.rows: list[tuple[str, float, float, str, str, str]] = []

    def add(self, name: str, ours: list[float], floor: list[float], target: str, kind: str = "x") -> None:
        ours_ms, floor_ms = statistics.median(ours) * 1000, statistics.median(floor) * 1000
        ratio = f"{ours_ms / floor_ms:.2f}x" if kind == "x" else f"+{ours_ms - floor_ms:.0f} ms"
        cpu = ""
        if id(ours) in CPU and id(floor) in CPU:
            # Mean CPU per call (the floor list may hold more calls than ours).
            ours_cpu, floor_cpu = CPU[id(ours)] / len(ours) * 1000, CPU[id(floor)] / len(floor) * 1000
            cpu = f"{ours_cpu / floor_cpu:.2f}x" if kind == "x" else f"+{ours_cpu - floor_cpu:.0f} ms"
        self.rows.append((name, ours_ms, floor_ms, ratio, cpu, target))
        print(f"  {name}: {ours_ms:.1f} ms against {floor_ms:.1f} ms -> {ratio}, CPU {cpu} ({target})", flush=True)

    def print(self) -> None:
        print("\n| workload | ours ms | floor ms | wall ratio | CPU ratio | target |")
        print("|---|---:|---:|---:|---:|---|")
        for name, ours, floor, ratio, cpu, target in self.rows:
            print(f"| {name} | {ours:.1f} | {floor:.1f} | {ratio} | {cpu} | {target} |")


def restore(path: Path, data: bytes) -> None:
    """Put a state file back as it was (same bytes, mode 0600) for the next repeat."""
    temp = path.with_name(path.name + ".bench")
    temp.write_bytes(data)
    os.chmod(temp, 0o600)
    os.replace(temp, path)


# ----------------------------------------------------------------- workloads


def bench_inspect_small(base: Path, repeat: int, table: Table) -> None:
    root_path = base / "small"
    for index in range(5):
        write_files(root_path / "t" / str(index), 1, 1024)
    root = str(root_path.resolve())
    tasks = [task(f"t{i}", f"t/{i}", f"t/{i}/f00000.bin") for i in range(5)]
    engine.create_run(root, {"id": "small", "maxParallel": 5, "config": {}, "tasks": tasks})
    for index in range(5):
        drive(root, "small", f"t{index}", accept=True)
    ours, floor = [], []
    for _ in range(repeat):
        timed(floor, lambda: run_process(FLOOR))
        timed(ours, lambda: run_process(cli(root, "inspect", "small")))
    table.add("`inspect RUN --json`, 5 accepted tasks", ours, floor, "floor + 25 ms", kind="+")
    run_process(cli(root, "inspect"))
    ours, floor = [], []
    for _ in range(repeat):
        timed(floor, lambda: run_process(FLOOR))
        timed(ours, lambda: run_process(cli(root, "inspect")))
    table.add("`inspect --json` (inventory, start-up)", ours, floor, "(context)", kind="+")


def drive(root: str, run_id: str, task_id: str, accept: bool) -> None:
    run = engine.start_task(root, run_id, task_id, {"backend": HOST})
    attempt = next(t for t in run["tasks"] if t["id"] == task_id)["attempts"][-1]
    bound = {"attemptId": attempt["id"], "backend": HOST}
    engine.record_attempt(root, run_id, task_id, {**bound, "outcome": "completed", "summary": "ok"})
    engine.verify_task(root, run_id, task_id)
    if accept:
        engine.accept_task(root, run_id, task_id)


def grown_run(root: str, count: int) -> None:
    """A run of ``count`` tasks where all but the last have an accepted, verified attempt: the
    first task is driven for real, the others get a copy of its attempt (own ids)."""
    drive(root, "big", "t0", accept=True)
    run = store.load_run(root, "big")
    first = run["tasks"][0]
    for index in range(1, count - 1):
        record = run["tasks"][index]
        attempt = canonical.copy(first["attempts"][0])
        attempt["id"] = f"{attempt['id'][:-6]}{index:06d}"
        attempt["taskId"] = record["id"]
        attempt["verification"]["attemptId"] = attempt["id"]
        for check in attempt["verification"]["checks"]:
            check["attemptId"] = attempt["id"]
        record["integration"] = "accepted"
        record["attempts"].append(attempt)
        record["acceptedAt"] = first["acceptedAt"]
        receipt = canonical.copy(first["integrationReceipt"])
        receipt["attemptId"] = attempt["id"]
        record["integrationReceipt"] = receipt
    store.save_run(root, run)


def bench_mutations(base: Path, repeat: int, table: Table) -> None:
    root_path = base / "mutation"
    count = 200
    for index in range(count):
        write_files(root_path / "t" / str(index), 1, 1024)
    root = str(root_path.resolve())
    tasks = [task(f"t{i}", f"t/{i}", f"t/{i}/f00000.bin") for i in range(count)]
    engine.create_run(root, {"id": "big", "maxParallel": 4, "config": {}, "tasks": tasks})
    grown_run(root, count)
    state = root_path / ".bmad-plus/nexus/runs/big.json"
    pristine = state.read_bytes()
    print(f"  200-task state file: {len(pristine) / (1 << 20):.2f} MiB", flush=True)
    last = f"t{count - 1}"
    identity = root_path.parent / "mutation-host.json"
    identity.write_text(json.dumps({"backend": HOST}))
    observation = root_path.parent / "mutation-record.json"
    recorded = str(observation)
    times: dict[str, list[float]] = {"start": [], "record": [], "verify": [], "accept": []}
    floor: list[float] = []
    for _ in range(repeat):
        restore(state, pristine)
        timed(floor, lambda: run_process(FLOOR))
        timed(times["start"], lambda: run_process(cli(root, "start", "big", last, "--input", str(identity))))
        attempt = json.loads(state.read_text())["run"]["tasks"][-1]["attempts"][-1]["id"]
        bound = {"attemptId": attempt, "backend": HOST}
        observation.write_text(json.dumps({**bound, "outcome": "completed", "summary": "ok"}))
        timed(floor, lambda: run_process(FLOOR))
        timed(times["record"], lambda: run_process(cli(root, "record", "big", last, "--input", recorded)))
        timed(floor, lambda: run_process(FLOOR))
        timed(times["verify"], lambda: run_process(cli(root, "verify", "big", last)))
        timed(floor, lambda: run_process(FLOOR))
        timed(times["accept"], lambda: run_process(cli(root, "accept", "big", last)))
    size = f"{len(pristine) / (1 << 20):.1f} MiB"
    for action in ("start", "record", "accept"):
        table.add(f"`{action}`, 200-task run ({size})", times[action], floor, "under 3x")
    table.add(f"`verify` (1 `/bin/true` check), 200-task run ({size})", times["verify"], floor, "under 4x")


def bench_scope(base: Path, repeat: int, table: Table, count: int, size: int, label: str, target: str) -> None:
    root_path = base / f"scope-{count}"
    write_files(root_path / "data", count, size)
    root = str(root_path.resolve())
    plan = {"id": "scope", "maxParallel": 1, "config": {}, "tasks": [task("t0", "data", "data/f00000.bin")]}
    engine.create_run(root, plan)
    drive(root, "scope", "t0", accept=False)
    state = root_path / ".bmad-plus/nexus/runs/scope.json"
    verified = state.read_bytes()
    hashlib_pass(root_path / "data")  # warm the page cache
    floor, accept, inspect = [], [], []
    for _ in range(repeat):
        restore(state, verified)
        timed(floor, lambda: hashlib_pass(root_path / "data"))
        timed(inspect, lambda: run_process(cli(root, "inspect", "scope")))
        timed(floor, lambda: hashlib_pass(root_path / "data"))
        timed(accept, lambda: run_process(cli(root, "accept", "scope", "t0")))
    table.add(f"`accept`, {label} scope", accept, floor, target)
    table.add(f"`inspect RUN --json`, {label} scope", inspect, floor, target)
    shutil.rmtree(root_path)


def bench_big_state(base: Path, repeat: int, table: Table) -> None:
    sys.path.insert(0, str(Path(__file__).parent))
    from bench_scale import big_run  # the same near-16 MiB state as bench_scale's table

    root_path = base / "big-state"
    root_path.mkdir()
    root = str(root_path.resolve())
    run = big_run(root_path, store.STATE_LIMIT - 512 * 1024)
    store.save_run(root, run)
    size = (root_path / ".bmad-plus/nexus/runs/big.json").stat().st_size
    print(f"  big state file: {size / (1 << 20):.2f} MiB", flush=True)

    def load_and_save() -> None:
        store.save_run(root, store.load_run(root, "big"))

    times = [seconds(load_and_save) for _ in range(repeat)]
    table.add(f"load + save, {size / (1 << 20):.1f} MiB state (in-process)", times, [0.25] * repeat, "under 0.25 s")
    shutil.rmtree(root_path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=9)
    choices = ["inspect", "mutation", "small-scope", "large-scope", "state"]
    parser.add_argument("--only", nargs="+", choices=choices, default=choices)
    parser.add_argument(
        "--no-bytecode", action="store_true", help="do not byte-compile nexus_core first (see PYTHONDONTWRITEBYTECODE)"
    )
    options = parser.parse_args()
    if not options.no_bytecode:
        # An installed package has its bytecode (pip compiles it); an editable checkout under
        # PYTHONDONTWRITEBYTECODE=1 would recompile every module on every call.
        import compileall

        import nexus_core

        compileall.compile_dir(os.path.dirname(nexus_core.__file__), quiet=1)
    bytecode = "no" if options.no_bytecode else "yes"
    print(f"bytecode cache: {bytecode}; PYTHONDONTWRITEBYTECODE={os.environ.get('PYTHONDONTWRITEBYTECODE', '')}")
    load = os.getloadavg()[0]
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load {load:.1f}, medians of {options.repeat}")
    base = Path(tempfile.mkdtemp(prefix="nexus-bench-"))
    table = Table()
    try:
        if "inspect" in options.only:
            bench_inspect_small(base, options.repeat, table)
        if "mutation" in options.only:
            bench_mutations(base, options.repeat, table)
        if "small-scope" in options.only:
            bench_scope(base, options.repeat, table, 10000, 1024, "10,000 x 1 KiB", "within 2.5x")
        if "large-scope" in options.only:
            bench_scope(base, options.repeat, table, 10, 16 << 20, "10 x 16 MiB", "within 1.5x")
        if "state" in options.only:
            bench_big_state(base, options.repeat, table)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    table.print()
    print("\nfloor: `python -c pass` for CLI rows, one in-process hashlib pass for scope rows;")
    print("the state row's floor column is its 0.25 s target")


if __name__ == "__main__":
    main()
