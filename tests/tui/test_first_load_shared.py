"""A project's first load shared with worker processes (nexus_core.view.first_look), seen in the
dashboard: the runs, their counts and the focus run's detail are what a load in the dashboard's
own process shows."""

from __future__ import annotations

from pathlib import Path

import pytest
from dashboard_kit import caught_up, cell, detail_text, loaded, quiet_app, row_keys
from project_kit import Project, plan, task_def

from nexus_core.view import first_look

pytestmark = pytest.mark.asyncio


def four_runs(directory: Path) -> str:
    project = Project(directory)
    project.create(plan("r1", task_def("a"), task_def("b")))
    project.create(plan("r2", task_def("c")))
    project.create(plan("r3", task_def("d")))
    project.create(plan("r4", task_def("e")))
    project.accepted("r1", "a")
    project.start("r1", "b")
    project.completed("r2", "c")
    project.start("r4", "e")
    return str(directory)


async def test_a_shared_first_load_shows_what_a_load_in_process_shows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = four_runs(tmp_path)
    monkeypatch.setattr(first_look, "UNIT_BYTES", 1)  # a unit per run: four units
    shown = []
    for shared in (False, True):
        app = quiet_app([directory])
        if shared:
            app.share_first_look_from_bytes = 0
        async with app.run_test(size=(140, 40)) as pilot:
            await loaded(app, pilot)
            await caught_up(pilot)
            runs = app.pane.runs
            snapshot = app.sessions[0].snapshot
            assert snapshot is not None
            columns = [column for column in runs.column_keys if column != "updated"]  # an age: the clock moved
            shown.append(
                (
                    [[cell(runs, key, column) for column in columns] for key in row_keys(runs)],
                    [(view.run_id, view.rows, view.needs, view.inspection is not None) for view in snapshot.runs],
                )
            )
            assert detail_text(app).startswith("✔ a  accepted")  # the focus run r1: its first task
            assert app.first_looks_shared == (1 if shared else 0)
            assert app.first_look_workers_failed == 0
    assert shown[0] == shown[1]
    assert len(shown[1][0]) == 4
