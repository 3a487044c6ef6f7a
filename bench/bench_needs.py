"""The classifier's cost on a 200-task run (run by hand, prints a table; never a test).

    python bench/bench_needs.py [--tasks 200] [--repeat 50]

One run made by the real engine (bench_tui.template_run: accepted, passed, completed, running and
not-started tasks), looked at two hours later so that its running attempts are overdue (needs).
Timed, median of --repeat: the floors every look already pays (parsing the run file's JSON,
inspect_loaded with a warm hash cache, i.e. what the dashboard's scanner does for a changed
run), then the classifier (needs.stand_run), the needs with their ids (needs.run_needs) and the
dashboard's build_view (rows + needs). Figures are ratios to the floors measured in the same run.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_tui import template_run

from nexus_core import needs
from nexus_core.observe import inspect_loaded
from nexus_core.snapshots import observational_hashes
from nexus_core.state import canonical
from nexus_core.state.store import load_run
from nexus_core.timeutil import now_ms
from nexus_tui.logic.model import build_view


def median_ms(action: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        action()
        times.append((time.perf_counter() - began) * 1000)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="nexus-bench-needs-") as parent:
        root = Path(parent) / "project"
        template_run(root, args.tasks)
        directory = str(root)
        raw = (root / ".bmad-plus/nexus/runs/r000.json").read_text("utf-8")
        run = load_run(directory, "r000")
        later = now_ms() + 2 * 3600_000  # the running attempts are past their deadline
        cache: dict[tuple[int, ...], str] = {}
        with observational_hashes(cache):
            inspection = inspect_loaded(directory, run, later)
        observations = needs.observations_of(inspection)
        found = needs.run_needs(directory, run, observations, later)

        def inspect() -> object:
            with observational_hashes(cache):
                return inspect_loaded(directory, run, later)

        parse = median_ms(lambda: canonical.parse(raw), args.repeat)
        inspected = median_ms(inspect, args.repeat)
        stand = median_ms(lambda: needs.stand_run(run, observations, later), args.repeat)
        with_needs = median_ms(lambda: needs.run_needs(directory, run, observations, later), args.repeat)
        view = median_ms(lambda: build_view("r000", inspection, now=later, project=directory), args.repeat)
    kinds = ", ".join(sorted({n.kind for n in found}))
    print(f"{args.tasks} tasks, {len(found)} needs ({kinds}); medians of {args.repeat}")
    print(f"{'step':<44}{'ms':>9}{'x parse':>9}{'x inspect':>11}")
    for name, value in (
        ("parse the run file's JSON (floor)", parse),
        ("inspect_loaded, warm hash cache (floor)", inspected),
        ("needs.stand_run (where every task stands)", stand),
        ("needs.run_needs (standings + need ids)", with_needs),
        ("build_view (rows + needs, the dashboard)", view),
    ):
        print(f"{name:<44}{value:>9.2f}{value / parse:>9.2f}{value / inspected:>11.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
