"""How fast the dashboard's watcher shows a scope edit as STALE, by the kind of file name (run by
hand, prints a table; never a test).

    python bench/bench_watch_names.py [--repeats 5]

One accepted task whose scope is out/t1 (made by the real engine); the app runs with the file
watcher only (no tick, no periodic rescan). For a UTF-8 name and a name that is not UTF-8
(b"bad-\\xff.txt"), a new file in the scope is timed until the task row shows STALE, then its
removal until the row clears; median and max over the repeats. A floor measured in the same run
(one rescan requested by hand, to the row changing) helps read the figures under load.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from nexus_core import engine
from nexus_core.state.store import load_run

HOST = {"kind": "host", "id": "bench", "sessionId": "s1"}
CHECK = "import sys\nsys.exit(0 if 'ok' in open(sys.argv[1]).read() else 1)\n"
NAMES = {"utf-8 name": b"plain.txt", "non-utf-8 name": b"bad-\xff.txt"}


def accepted_project(root: Path) -> None:
    (root / "checks").mkdir(parents=True)
    (root / "checks" / "check.py").write_text(CHECK)
    (root / "out" / "t1").mkdir(parents=True)
    plan = {
        "id": "live",
        "maxParallel": 1,
        "config": {},
        "tasks": [
            {
                "id": "t1",
                "objective": "Write out/t1/r.txt containing ok.",
                "scope": ["out/t1"],
                "artifacts": ["out/t1/r.txt"],
                "resources": ["checks/check.py"],
                "checks": [{"id": "ok", "command": "python", "args": ["checks/check.py", "out/t1/r.txt"]}],
            }
        ],
    }
    directory = str(root)
    engine.create_run(directory, plan)
    engine.start_task(directory, "live", "t1", {"backend": HOST})
    (root / "out" / "t1" / "r.txt").write_text("ok\n")
    attempt = load_run(directory, "live")["tasks"][0]["attempts"][-1]
    body = {"attemptId": attempt["id"], "backend": HOST, "outcome": "completed", "summary": "done"}
    engine.record_attempt(directory, "live", "t1", body)
    engine.verify_task(directory, "live", "t1")
    engine.accept_task(directory, "live", "t1")


async def until(condition: Callable[[], bool], limit: float = 30.0) -> float:
    began = time.perf_counter()
    while not condition():
        if time.perf_counter() - began > limit:
            raise TimeoutError("not reached in 30 s")
        await asyncio.sleep(0.002)
    return (time.perf_counter() - began) * 1000


async def measure(root: Path, repeats: int) -> dict[str, float]:
    from nexus_tui.app import NexusApp

    figures: dict[str, float] = {}
    app = NexusApp([str(root)], tick=False, rescan_seconds=0)
    async with app.run_test(size=(140, 40)) as pilot:
        await asyncio.wait_for(app.loaded.wait(), 60)
        pane = app.pane
        await until(lambda: any(path.endswith("/out/t1") for path in pane.session.scope_paths))
        await pilot.pause(1.0)  # the restarted watcher arms

        def stale() -> bool:
            return str(pane.tasks.get_cell("t1", "stale")) == "STALE"

        scope = os.path.join(os.fsencode(str(root)), b"out", b"t1")
        for label, name in NAMES.items():
            shown, cleared = [], []
            for _ in range(repeats):
                path = os.path.join(scope, name)
                with open(path, "wb") as handle:
                    handle.write(b"edit\n")
                shown.append(await until(stale))
                await pilot.pause(0.3)
                os.unlink(path)
                cleared.append(await until(lambda: not stale()))
                await pilot.pause(0.3)
            figures[f"{label}: STALE shown, median (ms)"] = statistics.median(shown)
            figures[f"{label}: STALE shown, max (ms)"] = max(shown)
            figures[f"{label}: STALE cleared, median (ms)"] = statistics.median(cleared)
            figures[f"{label}: STALE cleared, max (ms)"] = max(cleared)
        figures["watcher back-offs (count)"] = float(app.watch_backoffs)
        floor = []
        for _ in range(repeats):  # a rescan asked by hand, to the row changing back and forth
            path = os.path.join(scope, b"floor.txt")
            with open(path, "wb") as handle:
                handle.write(b"edit\n")
            app.request_scan(everything=True)
            floor.append(await until(stale))
            os.unlink(path)
            app.request_scan(everything=True)
            await until(lambda: not stale())
        figures["floor: rescan by hand to STALE, median (ms)"] = statistics.median(floor)
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    parent = Path(tempfile.mkdtemp(prefix="nexus-bench-"))
    try:
        root = (parent / "project").resolve()
        accepted_project(root)
        figures = asyncio.run(measure(root, args.repeats))
    finally:
        shutil.rmtree(parent, ignore_errors=True)
    width = max(len(k) for k in figures)
    for key, value in figures.items():
        print(f"{key:<{width}}  {value:10.1f}")
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
