"""The scanner's shortcuts never make the screen disagree with `inspect`.

The dashboard re-observes only the tasks whose record changed and, on the 1 s tick, only
recomputes the clock-derived flags. Both must give exactly the observations that the core's
full inspection gives at the same moment.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from dashboard_kit import HOST, finish, small_project
from fixture_tools import FIXTURE_NAMES, relocate

from nexus_core import engine
from nexus_core.observe import inspect_loaded
from nexus_core.store import load_run
from nexus_core.timeutil import parse_iso_ms
from nexus_tui.logic.model import ProjectScanner, task_state


def _observations(root: str, run_id: str, now: int) -> list[dict]:
    return inspect_loaded(root, load_run(root, run_id), now)["observations"]


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_ticks_give_the_same_observations_as_a_full_inspection(name: str, tmp_path: Path) -> None:
    root = str(relocate(name, tmp_path))
    scanner = ProjectScanner(root)
    first = scanner.scan(now=parse_iso_ms("2026-11-29T19:00:00.000Z"))
    # Before, during and long after every deadline and heartbeat of the fixtures.
    for moment in ("2026-11-29T19:03:30.000Z", "2026-11-29T20:03:04.000Z", "2026-12-02T00:00:00.000Z"):
        now = parse_iso_ms(moment)
        assert now is not None
        snapshot = scanner.scan(now=now)
        for view in snapshot.runs:
            assert list(view.observations) == _observations(root, view.run_id, now), (view.run_id, moment)
            assert [r.overdue for r in view.rows] == [o["overdue"] for o in view.observations]
    assert [v.run_id for v in first.runs] == [v.run_id for v in snapshot.runs]


def test_incremental_reobservation_matches_a_full_inspection(tmp_path: Path) -> None:
    root = small_project(tmp_path / "p", tasks=4)
    scanner = ProjectScanner(root)
    scanner.scan()
    # (change, what the app would ask for): run-file changes need nothing more; a scope edit
    # comes from the watcher, which asks to re-inspect the runs whose evidence scopes it touches.
    steps = [
        (lambda: finish(root, "live", "t1", accept=True), set()),
        (lambda: engine.start_task(root, "live", "t2", {"backend": HOST}), set()),
        (lambda: finish(root, "live", "t2", accept=False), set()),
        (lambda: Path(root, "out", "t1", "r.txt").write_text("ok, edited\n"), {"live"}),
        (lambda: engine.start_task(root, "live", "t4", {"backend": HOST}), set()),
    ]
    for index, (change, reinspect) in enumerate(steps):
        change()
        now = 1_900_000_000_000 + index * 1000
        view = scanner.scan(reinspect=reinspect, now=now).run("live")
        assert view is not None
        assert list(view.observations) == _observations(root, "live", now), index
        assert [r.state for r in view.rows] == [task_state(t) for t in load_run(root, "live")["tasks"]]
    assert view.rows[0].stale
