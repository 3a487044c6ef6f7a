"""Where a mutation of the 200-task run (about 1.4 MiB) spends its time, phase by phase.

Run by hand (prints a markdown table; nothing is asserted):

    python bench/bench_phases.py --repeat 11

Each call is a fresh process running what ``nexus ACTION big t199 --json`` runs (the CLI's
fast path: imports, ``cli.dispatch``, the JSON output), with wall clocks around the phases
(wrappers installed after the imports, so they cost nothing inside the imports). The floor is
``python -c pass`` run alternately with the calls; the process's own start and exit are what
its whole wall time has beyond the phases. Medians over the repeats, in milliseconds.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_workloads import HOST, grown_run, restore, task, write_files

from nexus_core import engine

# The child: imports timed, then the phases of one dispatch timed through wrappers.
CHILD = r"""
import sys, time
started = time.perf_counter()
import gc
gc.disable()  # as the CLI's one-shot path does
from nexus_core import actions, engine
from nexus_core.backend import checks
from nexus_core.cli import inputs, main as cli
from nexus_core.state import canonical, locks, store
canonical.plain_path()
if sys.argv[1] == "verify":
    import subprocess, selectors, signal, threading  # what verify imports on its way
imported = time.perf_counter()
spent = {}
def timed(module, name, phase):
    original = getattr(module, name)
    def wrapper(*args, **kwargs):
        begun = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            spent[phase] = spent.get(phase, 0.0) + time.perf_counter() - begun
    setattr(module, name, wrapper)
timed(store, "parse_run", "load: parse, hashes, checks")
timed(store, "_envelope_parts", "save: serialise, prove, hash")
timed(store, "atomic_write", "save: write, fsync, rename, fsync dir")
timed(locks, "try_acquire_writer", "writer.lock take + release")
timed(locks, "_release", "writer.lock take + release")
timed(engine, "try_acquire_writer", "writer.lock take + release")  # verify's patient saves
timed(engine, "run_check", "the check (/bin/true)")
options = {"start": "host.json", "record": "record.json"}.get(sys.argv[1])
begun = time.perf_counter()
result = cli.dispatch(sys.argv[1], "big", "t199", "mutation", None, options)
dispatched = time.perf_counter()
sys.stdout.buffer.write(canonical.pretty_bytes(result) + b"\n")
sys.stdout.flush()
printed = time.perf_counter()
phases = {"imports": imported - started, **spent}
phases["everything else in the action"] = dispatched - begun - sum(spent.values())
phases["JSON output"] = printed - dispatched
sys.stderr.write(repr(phases))
sys.stderr.flush()
import os
os._exit(0)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=11)
    options = parser.parse_args()
    import compileall

    import nexus_core

    compileall.compile_dir(os.path.dirname(nexus_core.__file__), quiet=1)
    base = Path(tempfile.mkdtemp(prefix="nexus-phases-"))
    try:
        root_path = base / "mutation"
        for index in range(200):
            write_files(root_path / "t" / str(index), 1, 1024)
        root = str(root_path.resolve())
        tasks = [task(f"t{i}", f"t/{i}", f"t/{i}/f00000.bin") for i in range(200)]
        engine.create_run(root, {"id": "big", "maxParallel": 4, "config": {}, "tasks": tasks})
        grown_run(root, 200)
        state = root_path / ".bmad-plus/nexus/runs/big.json"
        pristine = state.read_bytes()
        (base / "host.json").write_text(json.dumps({"backend": HOST}))
        actions = ("start", "record", "verify", "accept")
        phases: dict[str, dict[str, list[float]]] = {action: {} for action in actions}
        floor: list[float] = []
        print(f"load {os.getloadavg()[0]:.1f} at the start", flush=True)
        for _ in range(options.repeat):
            restore(state, pristine)
            for action in actions:
                began = time.perf_counter()
                subprocess.run([sys.executable, "-c", "pass"], check=True)
                floor.append(time.perf_counter() - began)
                began = time.perf_counter()
                done = subprocess.run([sys.executable, "-c", CHILD, action], cwd=base, capture_output=True, check=True)
                whole = time.perf_counter() - began
                measured = ast.literal_eval(done.stderr.decode())
                measured["interpreter start and exit"] = whole - sum(measured.values())
                measured["whole call"] = whole
                for phase, value in measured.items():
                    phases[action].setdefault(phase, []).append(value)
                if action == "start":
                    attempt = json.loads(done.stdout)["tasks"][-1]["attempts"][-1]["id"]
                    record = {"attemptId": attempt, "backend": HOST, "outcome": "completed", "summary": "ok"}
                    (base / "record.json").write_text(json.dumps(record))
        floor_ms = statistics.median(floor) * 1000
        print(f"load {os.getloadavg()[0]:.1f} at the end; floor (python -c pass) {floor_ms:.1f} ms")
        names = list(dict.fromkeys(name for action in actions for name in phases[action]))
        print("\n| phase (ms, medians) | " + " | ".join(f"`{action}`" for action in actions) + " |")
        print("|---|" + "---:|" * len(actions))
        for name in names:
            cells = [
                f"{statistics.median(phases[action][name]) * 1000:.1f}" if name in phases[action] else ""
                for action in actions
            ]
            print(f"| {name} | " + " | ".join(cells) + " |")
        ratios = [f"{statistics.median(phases[action]['whole call']) * 1000 / floor_ms:.2f}x" for action in actions]
        print("| whole call / floor | " + " | ".join(ratios) + " |")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
