"""A first load shared among processes (nexus_core.view.first_look): real worker processes look
at parts of the projects' runs, each project's scanner adopts what they found, and its next
scan answers exactly as a scanner that looked by itself."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterable
from pathlib import Path

import pytest
from project_kit import Project, plan, task_def

from nexus_core.view import first_look
from nexus_core.view.model import Looked, ProjectScanner, ProjectSnapshot


def _fleet(root: Path, projects: int = 3) -> list[str]:
    directories = []
    for n in range(projects):
        directory = root / f"p{n}"
        directory.mkdir()
        project = Project(directory)
        project.create(plan("r1", task_def("a"), task_def("b")))
        project.create(plan("r2", task_def("c")))
        project.create(plan("r3", task_def("d")))
        project.accepted("r1", "a")
        project.completed("r2", "c")
        project.start("r3", "d")
        directories.append(str(directory))
    return directories


def _seen(snapshot: ProjectSnapshot) -> list[object]:
    """What a snapshot shows, without the moment it was taken."""
    return [
        (view.run_id, view.rows, view.error, view.observations, view.needs, view.inspection is not None)
        for view in snapshot.runs
    ] + [snapshot.needs]


def _shared(directories: list[str], unit_bytes: int, monkeypatch: pytest.MonkeyPatch) -> list[ProjectScanner]:
    monkeypatch.setattr(first_look, "UNIT_BYTES", unit_bytes)
    scanners = [ProjectScanner(directory) for directory in directories]
    units = first_look.plan(enumerate(scanners))
    with first_look.FirstLooks(2) as looks:
        answered = _by_project(looks.look(units))
    assert looks.failed_units == 0
    assert sorted(answered) == list(range(len(directories)))
    for index, parts in answered.items():
        assert parts, f"project {index} came back with nothing"
        for looked in parts:
            scanners[index].adopt(looked)
    return scanners


@pytest.mark.parametrize("unit_bytes", [1, 10**9], ids=["a unit per run", "a unit per project"])
def test_an_adopted_first_look_answers_as_the_scanner_s_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, unit_bytes: int
) -> None:
    directories = _fleet(tmp_path)
    monkeypatch.setattr(first_look, "UNIT_BYTES", unit_bytes)
    units = first_look.plan(enumerate(ProjectScanner(directory) for directory in directories))
    assert len(units) == (9 if unit_bytes == 1 else 3)
    if unit_bytes == 1:  # split here: each unit names the project's focus run, its first
        assert {unit.focus for unit in units} == {"r1"}
    else:  # whole projects: the worker lists the runs and picks the focus as the scanner would
        assert {(unit.run_ids, unit.focus, unit.shown) for unit in units} == {(None, None, True)}
    scanners = _shared(directories, unit_bytes, monkeypatch)
    for directory, scanner in zip(directories, scanners, strict=True):
        assert not scanner.never_scanned()
        assert _seen(scanner.scan()) == _seen(ProjectScanner(directory).scan())


def test_a_run_changed_after_the_workers_looked_is_read_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    directories = _fleet(tmp_path, projects=1)
    [scanner] = _shared(directories, 1, monkeypatch)
    before = scanner.scan()
    Project(Path(directories[0])).record("r3", "d", Project.latest(_run(directories[0], "r3"), "d")["id"])
    after = scanner.scan()
    assert _seen(after) == _seen(ProjectScanner(directories[0]).scan())
    assert _seen(after) != _seen(before)
    # Keys the worker computed are the scanner's keys: the task that did not change keeps its row.
    r1_before, r1_after = before.run("r1"), after.run("r1")
    assert r1_before is not None and r1_before is r1_after


def test_a_changed_task_is_the_only_one_observed_again_after_adoption(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Task fingerprints are the same in every process (``hash`` of bytes is salted per
    process): after adopting a worker's look of a run that is not the focus, changing one of
    its tasks rebuilds that task's row only."""
    directory = tmp_path / "p"
    directory.mkdir()
    project = Project(directory)
    project.create(plan("r0", task_def("z")))
    project.create(plan("r1", task_def("a"), task_def("b")))
    project.start("r1", "a")
    project.start("r1", "b")
    [scanner] = _shared([str(directory)], 1, monkeypatch)
    before = scanner.scan().run("r1")
    assert before is not None and before.inspection is None  # not the focus run: keys, not records
    project.record("r1", "a", Project.latest(_run(str(directory), "r1"), "a")["id"])
    after = scanner.scan().run("r1")
    assert after is not None
    rows_before = {row.task_id: row for row in before.rows}
    rows_after = {row.task_id: row for row in after.rows}
    assert rows_after["a"] != rows_before["a"]
    assert rows_after["b"] is rows_before["b"]


def test_what_a_worker_cannot_look_at_is_left_to_the_scanner(tmp_path: Path) -> None:
    directories = _fleet(tmp_path, projects=2)
    units = first_look.plan(enumerate(ProjectScanner(directory) for directory in directories))
    os.rename(directories[1], directories[1] + "-gone")  # after the plan, before the look
    with first_look.FirstLooks(2) as looks:
        answered = _by_project(looks.look(units))
    assert looks.failed_units == 1
    assert answered[1] == []
    assert len(answered[0]) == 1


def test_a_worker_killed_mid_load_leaves_its_units_to_the_scanners(tmp_path: Path) -> None:
    # More units than a worker is sent before its first answer comes back, and than it may be
    # sent while that answer is read (IN_FLIGHT each time).
    never_sent_from = 2 * first_look.IN_FLIGHT
    directories = _fleet(tmp_path, projects=never_sent_from + 2)
    units = first_look.plan(enumerate(ProjectScanner(directory) for directory in directories))
    answers = []
    with first_look.FirstLooks(1) as looks:
        for answer in looks.look(units):
            answers.append(answer)
            if len(answers) == 1:
                [worker] = _workers_of_this_process()
                os.kill(worker, signal.SIGKILL)  # the only worker dies after its first answer
    answered = _by_project(answers)
    assert sorted(answered) == list(range(len(directories)))
    assert len(answered[0]) == 1
    # What it was sent may have come back before it died (answers wait in its pipe); the units
    # after those were never sent.
    assert all(answered[project] == [] for project in range(never_sent_from, len(directories)))
    assert looks.failed_units == sum(1 for parts in answered.values() if not parts) >= 2


def test_a_small_first_load_stays_in_process(tmp_path: Path) -> None:
    directories = _fleet(tmp_path, projects=2)
    units = first_look.plan(enumerate(ProjectScanner(directory) for directory in directories))
    assert not first_look.worth_sharing(units, processes=2)  # a few kilobytes
    assert first_look.worth_sharing(units, processes=2, threshold=0)
    assert not first_look.worth_sharing(units, processes=1, threshold=0)


def test_a_project_that_cannot_be_listed_is_not_planned(tmp_path: Path) -> None:
    directories = _fleet(tmp_path, projects=2)
    focused, hidden = ProjectScanner(directories[0]), ProjectScanner(directories[1])
    focused.focus, hidden.shown = "r2", False
    units = first_look.plan([(0, focused), (1, ProjectScanner(str(tmp_path / "nowhere"))), (2, hidden)])
    assert [(unit.project, unit.focus, unit.shown) for unit in units] == [(0, "r2", True), (2, None, False)]


def test_a_project_no_pane_shows_keeps_no_inspection_until_shown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--discover's projects not opened yet: every run's rows and needs, no run inspected for a
    detail pane, shared or not; shown, its focus run is inspected on the next scan."""
    [directory] = _fleet(tmp_path, projects=1)
    alone = ProjectScanner(directory)
    alone.shown = False
    monkeypatch.setattr(first_look, "UNIT_BYTES", 1)
    hidden = ProjectScanner(directory)
    hidden.shown = False
    with first_look.FirstLooks(2) as looks:
        for answer in looks.look(first_look.plan([(0, hidden)])):
            assert answer.looked is not None
            hidden.adopt(answer.looked)
    shown = ProjectScanner(directory).scan()
    for scanner in (alone, hidden):
        snapshot = scanner.scan()
        assert [view.inspection for view in snapshot.runs] == [None, None, None]
        assert [view.rows for view in snapshot.runs] == [view.rows for view in shown.runs]
        assert snapshot.needs == shown.needs
        scanner.shown = True
        assert _seen(scanner.scan()) == _seen(shown)


def _run(directory: str, run_id: str) -> dict[str, object]:
    from nexus_core.observe import inspect_run

    return dict(inspect_run(directory, run_id))


def test_a_stopped_look_ends_at_once_and_leaves_no_worker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The dashboard quitting in the middle of a first load: the look ends at its next answer or
    within STOP_CHECK_SECONDS, and closing it ends every worker."""
    directories = _fleet(tmp_path, projects=4)
    monkeypatch.setattr(first_look, "UNIT_BYTES", 1)
    units = first_look.plan(enumerate(ProjectScanner(directory) for directory in directories))
    answered: list[int] = []
    with first_look.FirstLooks(2) as looks:
        for answer in looks.look(units, stopped=lambda: bool(answered)):
            answered.append(answer.project)
            assert len(_workers_of_this_process()) == 2
    assert len(answered) == 1
    assert _workers_of_this_process() == []


def _by_project(answers: Iterable[first_look.Answer]) -> dict[int, list[Looked]]:
    """Each project's looked parts (a failed unit adds none), checking that each project's
    last answer is the one that says so."""
    parts: dict[int, list[Looked]] = {}
    ended: set[int] = set()
    for answer in answers:
        assert answer.project not in ended
        parts.setdefault(answer.project, [])
        if answer.looked is not None:
            parts[answer.project].append(answer.looked)
        if answer.last:
            ended.add(answer.project)
    assert ended == set(parts)
    return parts


def _workers_of_this_process() -> list[int]:
    """The pids of this process's first-look workers still running (zombies are not)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text().rpartition(")")[2].split()
            command = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if int(stat[1]) == os.getpid() and stat[0] != "Z" and b"nexus_core.view.first_look" in command:
            found.append(int(entry))
    return found


def test_a_fleet_is_a_unit_per_project_listed_by_the_workers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """MANY_PROJECTS or more: nothing is listed before the workers start (each lists its
    project), sharing is worth it whatever the size, and the answer is the scanners' own."""
    monkeypatch.setattr(first_look, "MANY_PROJECTS", 3)
    directories = _fleet(tmp_path, projects=3)
    scanners = [ProjectScanner(directory) for directory in directories]
    units = first_look.plan(enumerate(scanners))
    assert [(unit.project, unit.run_ids, unit.size) for unit in units] == [(0, None, 0), (1, None, 0), (2, None, 0)]
    assert first_look.worth_sharing(units, processes=2)
    with first_look.FirstLooks(2) as looks:
        answered = _by_project(looks.look(units))
    assert looks.failed_units == 0
    for index in (0, 1, 2):
        [looked] = answered[index]
        scanners[index].adopt(looked)
        assert _seen(scanners[index].scan()) == _seen(ProjectScanner(directories[index]).scan())
