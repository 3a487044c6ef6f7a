"""Issue 8 figures: do verifications that began finish while other clients write?

Each client is its own process and loops the whole life of a host task on its own runs, through
the core API: create, start, record completed, verify (CHECKS real check processes), accept.
Every user-facing call is fail-fast, as the SPEC says; a refused call ("Another mutation owns
writer.lock") is simply retried by the client. Reported per scenario:

- successful mutations per second (all clients together);
- verify calls, those refused at their start (nothing began), verifications started, and how
  many of the started ones finished (passed/failed/ambiguous) versus were left `running`.

`--impatient` makes the in-operation saves fail at once, like the reference, for comparison.

    python bench/bench_concurrency.py                 # 1 client, then 8 clients, 20 s each
    python bench/bench_concurrency.py --clients 8 --seconds 30 --checks 3 --impatient
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nexus_core import engine
from nexus_core.errors import NexusError

BUSY = "owns writer.lock"


def make_project(root: Path) -> str:
    (root / "checks").mkdir(parents=True)
    (root / "checks" / "ok.sh").write_text('grep -q ok "work/c$1/$2/out.txt"\n')
    return str(root.resolve())


def plan(run_id: str, client: int, index: int, checks: int) -> dict[str, Any]:
    scope = f"work/c{client}/{index}"
    return {
        "id": run_id,
        "tasks": [
            {
                "id": "t",
                "objective": "Bench task.",
                "scope": [scope],
                "artifacts": [f"{scope}/out.txt"],
                "resources": ["checks/ok.sh"],
                "checks": [
                    {"id": f"c{i}", "command": "/bin/sh", "args": ["checks/ok.sh", str(client), str(index)]}
                    for i in range(checks)
                ],
            }
        ],
    }


def client(root: str, number: int, seconds: float, checks: int, impatient: bool, queue: Any) -> None:
    if impatient:
        engine.VERIFY_SAVE_PATIENCE_SECONDS = 0.0
    host = {"kind": "host", "id": f"bench-{number}", "sessionId": "s"}
    counts = {"mutations": 0, "refused": 0, "verify_calls": 0, "verify_refused": 0, "started": 0, "finished": 0}
    counts["left_running"] = 0
    end = time.monotonic() + seconds
    index = 1

    def attempt_of(run_id: str) -> dict[str, Any]:
        return engine.load_run(root, run_id)["tasks"][0]["attempts"][-1]  # type: ignore[no-any-return]

    def call(run_id: str, step: Any, is_verify: bool = False) -> bool:
        while time.monotonic() < end:
            if is_verify:
                counts["verify_calls"] += 1
            try:
                step()
                counts["mutations"] += 1
                return True
            except NexusError as error:
                if not is_verify:
                    if BUSY not in error.message:
                        raise
                    counts["refused"] += 1
                    continue
                # Did this verify get past its start? Then it either finished or died half way.
                if attempt_of(run_id)["verification"]["status"] != "pending":
                    return False
                if BUSY not in error.message:
                    raise
                counts["verify_refused"] += 1
        return False

    def cycle(index: int) -> bool:
        run_id = f"c{number}-{index}"
        scope = Path(root) / f"work/c{number}/{index}"
        scope.mkdir(parents=True, exist_ok=True)
        (scope / "out.txt").write_text("ok\n")
        if not call(run_id, lambda: engine.create_run(root, plan(run_id, number, index, checks))):
            return False
        if not call(run_id, lambda: engine.start_task(root, run_id, "t", {"backend": host})):
            return False
        ident = attempt_of(run_id)["id"]
        record = {"attemptId": ident, "backend": host, "outcome": "completed", "summary": "bench"}
        if not call(run_id, lambda: engine.record_attempt(root, run_id, "t", record)):
            return False
        call(run_id, lambda: engine.verify_task(root, run_id, "t"), is_verify=True)
        status = attempt_of(run_id)["verification"]["status"]
        if status != "pending":
            counts["started"] += 1
            if status == "running":
                counts["left_running"] += 1
            else:
                counts["finished"] += 1
        if status == "passed":
            call(run_id, lambda: engine.accept_task(root, run_id, "t"))
        return True

    try:
        while time.monotonic() < end and cycle(index):
            index += 1
    finally:
        queue.put(counts)


def scenario(clients: int, seconds: float, checks: int, impatient: bool) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="nexus-bench-") as folder:
        root = make_project(Path(folder) / "project")
        context = multiprocessing.get_context("fork")
        queue = context.Queue()
        workers = [
            context.Process(target=client, args=(root, n, seconds, checks, impatient, queue)) for n in range(clients)
        ]
        began = time.monotonic()
        for worker in workers:
            worker.start()
        results = [queue.get(timeout=seconds + 300) for _ in workers]
        for worker in workers:
            worker.join()
        elapsed = time.monotonic() - began
        runs = len(os.listdir(Path(root) / ".bmad-plus" / "nexus" / "runs"))
    total = {key: sum(r[key] for r in results) for key in results[0]}
    total["elapsed"] = elapsed
    total["runs"] = runs
    return total


def report(label: str, clients: int, figures: dict[str, Any]) -> None:
    started = figures["started"]
    share = 100.0 * figures["finished"] / started if started else float("nan")
    print(
        f"{label:<22} clients={clients:<2} mutations={figures['mutations']:<5} "
        f"mutations/s={figures['mutations'] / figures['elapsed']:6.1f}  "
        f"refused-at-start={figures['refused'] + figures['verify_refused']:<6} "
        f"verify calls={figures['verify_calls']:<5} started={started:<4} finished={figures['finished']:<4} "
        f"left running={figures['left_running']:<3} finished share={share:5.1f}%"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--checks", type=int, default=3)
    parser.add_argument("--impatient", action="store_true", help="in-operation saves fail at once (reference)")
    args = parser.parse_args()
    print(f"cpus={os.cpu_count()} seconds={args.seconds} checks per verify={args.checks}")
    modes = [("patient (nexus)", False)] + ([("impatient (reference)", True)] if args.impatient else [])
    for label, impatient in modes:
        for clients in (1, args.clients):
            report(label, clients, scenario(clients, args.seconds, args.checks, impatient))


if __name__ == "__main__":
    main()
