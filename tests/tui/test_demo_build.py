"""Issue 13 items 17 and 18: ``nexus-tui --demo`` draws the dashboard at once and builds the demo
after the first frame, one progress line per step; the pids the demo records (verifier,
supervisor, child, writer.lock) name processes that have exited, never the dashboard itself."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from dashboard_kit import eventually, loaded, quiet_app
from textual.css.query import NoMatches

from nexus_core.hostinfo import hostname, owner_liveness
from nexus_tui.logic import recovery
from nexus_tui.logic.demo import DEMO_STEPS, DemoBuild, DemoBuildFailed
from nexus_tui.widgets.demo_progress import STARTING, DemoProgress
from nexus_tui.widgets.project_pane import ProjectPane

GATE_SECONDS = 30


class GatedBuild(DemoBuild):
    """The real build (a child process), held until the test has looked at the first frame."""

    def __init__(self, directory: str) -> None:
        super().__init__(directory)
        self.gate = threading.Event()
        self.reported: list[str] = []

    def run(self, progress: Callable[[str], object]) -> list[str]:
        assert self.gate.wait(GATE_SECONDS)

        def forward(text: str) -> None:
            self.reported.append(text)
            progress(text)

        return super().run(forward)


async def test_the_demo_is_built_after_the_first_frame_with_a_line_per_step(tmp_path: Path) -> None:
    directory = str(tmp_path / "demo")
    os.mkdir(directory)
    build = GatedBuild(directory)
    app = quiet_app([directory], demo=build)
    async with app.run_test(size=(140, 40)) as pilot:
        await loaded(app, pilot)  # the first scan: an empty directory
        line = app.query_one(DemoProgress)
        assert "Building the demo project" in str(line.render())
        assert app.pane.runs.row_count == 0
        build.gate.set()
        await eventually(pilot, lambda: not app.query(DemoProgress), timeout=60)
        await eventually(pilot, lambda: app.pane.runs.row_count == 3)
        assert app.demo_error is None
    assert build.reported == list(DEMO_STEPS)
    assert line.steps == [STARTING, *DEMO_STEPS]


def _pids(value: Any, host: str | None = None) -> Iterator[tuple[str | None, int]]:
    """Every recorded pid with the host recorded beside it (None for a child's: the supervisor's)."""
    if isinstance(value, dict):
        host = value.get("hostname", host)
        for key, item in value.items():
            if key in ("pid", "ownerPid", "childPid") and isinstance(item, int):
                yield host, item
            else:
                yield from _pids(item, host)
    elif isinstance(value, list):
        for item in value:
            yield from _pids(item, host)


def test_the_demo_records_pids_that_mean_what_they_say(tmp_path: Path) -> None:
    directory = str(tmp_path / "demo")
    os.mkdir(directory)
    DemoBuild(directory).run(lambda _text: None)
    state = Path(directory, ".bmad-plus", "nexus")
    recorded = [pid for path in sorted(state.rglob("*.json")) for pid in _pids(json.loads(path.read_text()))]
    recorded += list(_pids(json.loads((state / "writer.lock").read_text())))
    kinds = {key for path in state.rglob("*.json") for key in ("ownerPid", "childPid") if key in path.read_text()}
    assert kinds == {"ownerPid", "childPid"} and len(recorded) > 5  # verifiers, the supervisor, its child
    for host, pid in recorded:
        assert pid != os.getpid(), "the demo recorded the dashboard's own pid"
        assert owner_liveness(host or hostname(), pid) == "dead", (
            f"recorded pid {pid} is alive: it is not the demo's process"
        )
    # The guide's liveness sentences agree: every pid it names is not running.
    sentences = [line for s in recovery.classify_project(directory) for line in [*s.known, *s.checks] if "pid " in line]
    assert sentences and all("is not running" in line for line in sentences), sentences


async def test_a_failed_demo_build_is_shown_and_remembered(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    app = quiet_app([str(tmp_path)], demo=DemoBuild(str(blocker / "demo")))
    async with app.run_test(size=(140, 40)) as pilot:
        await eventually(pilot, lambda: app.demo_error is not None, timeout=60)
        assert "The demo could not be built" in str(app.query_one(DemoProgress).render())
    assert "Not a directory" in str(app.demo_error)  # the builder's own error (FileExistsError's words)


def test_stopping_the_build_ends_the_builder_process(tmp_path: Path) -> None:
    build = DemoBuild(str(tmp_path / "demo"))
    children: list[int] = []

    def first_step(_text: str) -> None:
        if build.pid is not None and not children:
            children.append(build.pid)
            build.stop()

    try:
        build.run(first_step)
    except DemoBuildFailed:
        pass
    else:
        raise AssertionError("a stopped build must not report success")
    assert children and owner_liveness(hostname(), children[0]) == "dead"


async def test_the_demo_builds_under_discover_too(tmp_path: Path) -> None:
    from nexus_tui.discover_app import DiscoverApp

    directory = str(tmp_path / "demo")
    os.mkdir(directory)
    build = GatedBuild(directory)
    app = DiscoverApp(str(tmp_path), directories=[directory], demo=build, watch=False, rescan_seconds=0, tick=False)
    async with app.run_test(size=(140, 40)) as pilot:
        await eventually(pilot, lambda: bool(app.query(DemoProgress)))
        line = app.query_one(DemoProgress)
        build.gate.set()
        await eventually(pilot, lambda: not app.query(DemoProgress), timeout=60)
        await pilot.press("right_square_bracket")  # the demo's tab: its pane is composed when first shown
        await eventually(pilot, lambda: runs_shown(app.panes[0]) == 3)
    assert line.steps == [STARTING, *DEMO_STEPS]


def runs_shown(pane: ProjectPane) -> int | None:
    """The pane's run rows, or None before it is composed (--discover composes a project's pane
    when its tab is first shown, so under load the rows can be asked for before it exists)."""
    try:
        return pane.runs.row_count
    except NoMatches:
        return None
