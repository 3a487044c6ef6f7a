"""Concurrency: many ``nexus`` processes mutate one project and several runs at once.

One writer at a time; every refusal is a clean, known error; no lost update: each run's
``sequence`` grows by exactly one per save of an acknowledged mutation, and every
acknowledged state is contained in the final one.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from reliability_support import (
    HOST_BACKEND,
    RAW_ERROR,
    add_work,
    assert_contains,
    is_run,
    latest_attempt,
    load_all_runs,
    make_project,
    plan_for,
    run_cli_json,
    write_json,
)

from nexus_core.state import store
from nexus_core.state.locks import WRITER_BUSY

LONG = os.environ.get("NEXUS_LONG") == "1"
ROUNDS = 3 if LONG else 1
CLEAN_REFUSALS = {
    "writer.lock": WRITER_BUSY,
    "capacity": "Run capacity is occupied until active work is reconciled.",
    "scope": "Write scope is owned by active attempt: ",
}


class Driver:
    """One thread per task, each bringing its task to accepted through CLI subprocesses."""

    def __init__(self, root: Path, inputs: Path, seed: int) -> None:
        self.root = root
        self.inputs = inputs
        self.seed = seed
        self.lock = threading.Lock()
        self.acknowledged: list[tuple[str, str, dict[str, Any]]] = []
        self.refusals: Counter[str] = Counter()
        self.unexpected: list[str] = []
        self.uncertain_runs: set[str] = set()
        self.counter = 0

    def input_file(self, value: dict[str, Any]) -> Path:
        with self.lock:
            self.counter += 1
            name = f"in-{self.counter}.json"
        return write_json(self.inputs / name, value)

    def next_step(self, run_id: str, task_id: str) -> tuple[str, dict[str, Any] | None] | None:
        run = store.load_run(str(self.root), run_id)
        task = next(t for t in run["tasks"] if t["id"] == task_id)
        if task["integration"] == "accepted":
            return None
        attempt = latest_attempt(run, task_id)
        if attempt is None:
            return "start", {"backend": HOST_BACKEND}
        bound = {"attemptId": attempt["id"], "backend": HOST_BACKEND}
        if attempt["verification"]["status"] in ("running", "ambiguous"):
            # Only when a verify lost its patient lock race: reconcile, then verify again.
            return "reconcile", {**bound, "outcome": "completed", "ownerStopped": True, "summary": "Verifier gave up."}
        if attempt["execution"] == "running":
            return "record", {**bound, "outcome": "completed", "summary": "Done.", "exitCode": 0}
        if attempt["verification"]["status"] == "pending":
            return "verify", None
        return "accept", None

    def drive(self, run_id: str, task_id: str) -> None:
        rng = random.Random(f"{self.seed}-{run_id}-{task_id}")
        for _ in range(400):
            step = self.next_step(run_id, task_id)
            if step is None:
                return
            action, options = step
            input_file = self.input_file(options) if options is not None else None
            code, out, err = run_cli_json(self.root, action, run_id, task_id, input_file=input_file)
            if is_run(out):
                with self.lock:
                    self.acknowledged.append((action, task_id, out))
                continue
            message = out.get("error", "") if isinstance(out, dict) else ""
            kind = next((k for k, text in CLEAN_REFUSALS.items() if message.startswith("Nexus: " + text)), None)
            with self.lock:
                if code != 1 or kind is None or err or RAW_ERROR.search(message):
                    self.unexpected.append(f"{action} {run_id}/{task_id}: exit {code} {out!r} {err}")
                    return
                self.refusals[kind] += 1
                if action == "verify" and kind == "writer.lock":
                    # Refused at its first save (nothing written) or at a later patient save.
                    self.uncertain_runs.add(run_id)
            time.sleep(rng.uniform(0.005, 0.05))
        with self.lock:
            self.unexpected.append(f"{run_id}/{task_id} did not finish")


def saves_of(action: str, task_id: str, result: dict[str, Any]) -> int:
    """Saves one acknowledged mutation made: verify saves its start, each receipt, its verdict."""
    if action != "verify":
        return 1
    attempt = latest_attempt(result, task_id)
    assert attempt is not None and attempt["verification"]["status"] in ("passed", "failed")
    return 2 + len(attempt["verification"]["checks"])


def test_many_processes_one_writer_no_lost_update(tmp_path: Path) -> None:
    root = make_project(tmp_path / "project")
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    seed = random.randrange(1 << 30)
    for generation in range(ROUNDS):
        layouts = {
            f"a{generation}": (["s/a0", "s/a1", "s/a2", "s/a3"], 2),
            f"b{generation}": (["s/a0", "s/b1"], 2),  # s/a0 is shared with run a: scope ownership
            f"c{generation}": (["s/c0", "s/c1", "s/c2"], 3),
        }
        before = {run_id: run["sequence"] for run_id, run in load_all_runs(root).items()}
        for run_id, (scopes, parallel) in layouts.items():
            for scope in scopes:
                add_work(root, scope)
            plan = write_json(inputs / f"plan-{run_id}.json", plan_for(run_id, scopes, parallel, checks=2))
            code, out, err = run_cli_json(root, "create", plan=plan)
            assert code == 0 and is_run(out), (out, err)
        driver = Driver(root, inputs, seed + generation)
        threads = [
            threading.Thread(target=driver.drive, args=(run_id, f"t{index}"))
            for run_id, (scopes, _) in layouts.items()
            for index in range(len(scopes))
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=300)
        assert driver.unexpected == []
        runs = load_all_runs(root)
        assert set(before) | set(layouts) == set(runs)
        for run_id in layouts:
            run = runs[run_id]
            assert all(task["integration"] == "accepted" for task in run["tasks"])
            mine = [entry for entry in driver.acknowledged if entry[2]["id"] == run_id]
            sequences = [result["sequence"] for _, _, result in mine]
            assert len(sequences) == len(set(sequences)), "two writers produced the same sequence"
            for _, _, result in mine:
                assert_contains(run, result)
            expected = 1 + sum(saves_of(*entry) for entry in mine)
            if run_id in driver.uncertain_runs:
                assert run["sequence"] >= expected
            else:
                assert run["sequence"] == expected, "a save was lost or doubled"
        for run_id, sequence in before.items():
            assert runs[run_id]["sequence"] == sequence, "an untouched run changed"
        assert not (root / ".bmad-plus/nexus/writer.lock").exists()
        print(
            f"\nconcurrency round {generation}: {len(driver.acknowledged)} acknowledged, "
            f"refusals {dict(driver.refusals)}"
        )
