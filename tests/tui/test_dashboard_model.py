"""The scanner's shortcuts never make the screen disagree with `inspect`.

The dashboard re-observes only the tasks whose record changed and, on the 1 s tick, only
recomputes the clock-derived flags. Both must give exactly the observations that the core's
full inspection gives at the same moment.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from dashboard_kit import HOST, finish, small_project
from fixture_tools import FIXTURE_NAMES, relocate

from nexus_core import engine, observe
from nexus_core.observe import inspect_loaded
from nexus_core.shapes import Observation, Run, Task
from nexus_core.state import canonical
from nexus_core.state.store import load_run
from nexus_core.timeutil import parse_iso_ms
from nexus_tui.logic.model import ProjectScanner, task_state


def _observations(root: str, run_id: str, now: int) -> list[Observation]:
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
    steps: list[tuple[Callable[[], object], set[str]]] = [
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
    assert view is not None
    assert view.rows[0].stale


def test_a_rescan_rereads_only_changed_run_files_and_reobserves_only_changed_tasks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """README: rescans reread only run files whose bytes changed (stat, then a hash of the
    bytes) and call observe_task only for tasks whose record changed and their dependents."""
    root = small_project(tmp_path / "p")  # run live: t1 running, t2 and t3 not started
    engine.create_run(root, _plan_with_a_dependency("dep"))  # b depends on a
    opened: Counter[str] = Counter()
    real_open = os.open

    def counting_open(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        name = os.fsdecode(path)
        if f"{os.sep}runs{os.sep}" in name and name.endswith(".json"):
            opened[Path(name).stem] += 1
        return real_open(path, flags, *args, **kwargs)

    observed: list[tuple[str, str]] = []
    real_observe = observe.observe_task

    def counting_observe(root: str, run: Run, task: Task, *args: Any, **kwargs: Any) -> Any:
        observed.append((run["id"], task["id"]))
        return real_observe(root, run, task, *args, **kwargs)

    parsed: list[str] = []  # run files parsed (the state's envelope parse)
    real_parse = canonical.parse_for_hashing

    def counting_parse(text: str) -> Any:
        parsed.append(canonical.parse(text)["run"]["id"])
        return real_parse(text)

    real_parse_plain = canonical.parse_plain  # the orjson path, taken once orjson is loaded

    def counting_parse_plain(raw: bytes) -> Any:
        result = real_parse_plain(raw)
        if result is not None:
            parsed.append(result[0]["run"]["id"])
        return result

    monkeypatch.setattr(os, "open", counting_open)
    monkeypatch.setattr(observe, "observe_task", counting_observe)
    monkeypatch.setattr(canonical, "parse_for_hashing", counting_parse)
    monkeypatch.setattr(canonical, "parse_plain", counting_parse_plain)
    scanner = ProjectScanner(root)

    def scan() -> frozenset[str]:
        opened.clear()
        observed.clear()
        parsed.clear()
        return scanner.scan().changed

    assert scan() == {"live", "dep"} and opened == {"live": 1, "dep": 1} and sorted(parsed) == ["dep", "live"]
    assert sorted(observed) == [("dep", t) for t in "abc"] + [("live", t) for t in ("t1", "t2", "t3")]
    # Nothing changed: no run file is even opened.
    assert scan() == set() and opened == {} and parsed == [] and observed == []
    # Same bytes, new stat (touched): read and hashed once, not parsed, nothing re-observed.
    os.utime(Path(root, ".bmad-plus/nexus/runs/live.json"))
    assert scan() == set() and opened == {"live": 1} and parsed == [] and observed == []
    # One task's record changes: only that file is read and parsed, only that task and its
    # dependent are observed again.
    engine.start_task(root, "dep", "a", {"backend": HOST})
    assert scan() == {"dep"} and opened == {"dep": 1} and parsed == ["dep"]
    assert sorted(observed) == [("dep", "a"), ("dep", "b")]
    engine.start_task(root, "live", "t2", {"backend": HOST})
    assert scan() == {"live"} and opened == {"live": 1} and parsed == ["live"] and observed == [("live", "t2")]


def _plan_with_a_dependency(run_id: str) -> dict[str, Any]:
    def task(task_id: str, depends_on: list[str]) -> dict[str, Any]:
        return {
            "id": task_id,
            "objective": f"Write {run_id}/{task_id}/r.txt containing ok.",
            "scope": [f"{run_id}/{task_id}"],
            "artifacts": [f"{run_id}/{task_id}/r.txt"],
            "resources": ["checks/check.py"],
            "dependsOn": depends_on,
            "checks": [{"id": "ok", "command": "python", "args": ["checks/check.py", f"{run_id}/{task_id}/r.txt"]}],
        }

    return {"id": run_id, "maxParallel": 4, "tasks": [task("a", []), task("b", ["a"]), task("c", [])]}


def test_scans_catch_up_once_every_request_asked_is_applied() -> None:
    """What caught_up (the tests' wait) reads: a scan taken covers every request asked before it;
    a request asked while it runs needs the next one."""
    from nexus_tui.scanning import ScanRequests

    requests = ScanRequests(2)
    assert requests.caught_up
    requests.ask(0, runs=["a"])
    requests.ask(0, runs=["b"])
    assert not requests.caught_up
    [(index, _, runs, _, catch_up, answers)] = requests.take(0)
    assert (index, runs, catch_up, answers) == (0, {"a", "b"}, False, 2)
    assert not requests.caught_up  # taken, not yet applied
    requests.ask(0, everything=True)  # while that scan runs
    requests.ask(0, catch_up=True)
    requests.applied(0, answers)
    assert not requests.caught_up
    [(_, everything, _, _, catch_up, answers)] = requests.take(0)
    requests.applied(0, answers)
    assert everything and catch_up and requests.caught_up
    index = requests.add()  # --discover's new project starts caught up
    assert requests.caught_up
    requests.ask(index, everything=True)
    assert not requests.caught_up
