"""Issue 24 item 3: long work in the background, with its output live. A verify's progress dialog
starts on a harmless button and goes to the background (Esc); the task's row shows the work
running with its elapsed time; the jobs view (J) lists it and streams the check's output as it
is captured, followed, paused and searched; its end raises a notification; Stop asks first (an
Enter on that question does not stop) and says what a stop costs; q opens the quit dialog.

The check is a real Python script that prints its lines in steps, each step released by a gate
file the test creates: every wait is for a condition, never for a fixed time."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dashboard_kit import cell, eventually, focused, laid_out, loaded, quiet_app, select
from textual.binding import Binding
from textual.widgets import Button, DataTable, Input, Static
from tui_actions_support import latest, make_project, process_task_plan, record, start, task_plan, write_result

from nexus_core import engine
from nexus_tui import actions
from nexus_tui.app import NexusApp
from nexus_tui.screens.dialogs import ActionDialog
from nexus_tui.screens.jobs import STDERR_MARK, JobLog, JobsScreen
from nexus_tui.screens.progress import ProgressScreen
from nexus_tui.screens.quit import QuitScreen
from nexus_tui.screens.stop import ConfirmStop

SIZE = (120, 40)
BULK = 60  # lines of step 2: more than the log pane shows, so following and pausing differ

# Step 1 prints three lines (one on stderr, one with an escape sequence), then waits for
# gates/1; step 2 prints BULK lines, then waits for gates/2; step 3 prints its last line and
# passes if the task's result says ok.
TALKER = f"""\
import pathlib, sys, time
gates = pathlib.Path("gates")
def wait(name):
    while not (gates / name).exists():
        time.sleep(0.02)
print("line one", flush=True)
print("a warning on stderr", file=sys.stderr, flush=True)
print("colour \\x1b[31mred", flush=True)
wait("1")
for number in range({BULK}):
    print(f"bulk {{number}}", flush=True)
wait("2")
print("last line", flush=True)
text = pathlib.Path("out", sys.argv[1], "result.txt").read_text()
sys.exit(0 if "ok" in text.split() else 1)
"""


def _talking_ready(tmp_path: Path) -> Path:
    """A project whose task a's check is the talker (created before the run that names it as a
    protected resource), a and b completed."""
    root = make_project(tmp_path, [task_plan("setup")], run_id="setup")
    (root / "checks" / "talk.py").write_text(TALKER)
    (root / "gates").mkdir()
    for task_id in ("a", "b"):
        (root / "out" / task_id).mkdir(parents=True, exist_ok=True)
    talking = task_plan(
        "a",
        resources=["checks/check.py", "checks/talk.py"],
        checks=[{"id": "talk", "command": "python", "args": ["checks/talk.py", "a"]}],
    )
    engine.create_run(str(root), {"id": "demo", "maxParallel": 4, "tasks": [talking, task_plan("b")]})
    for task_id in ("a", "b"):
        start(root, task_id)
        write_result(root, task_id)
        record(root, task_id)
    return root


def _release(root: Path, gate: str) -> None:
    (root / "gates" / gate).write_text("")


def _log_lines(screen: JobsScreen) -> list[str]:
    return list(screen.query_one(JobLog).lines)


def _heading(screen: JobsScreen) -> str:
    return str(screen.query_one("#job-heading", Static).render())


def _notifications(app: NexusApp) -> list[tuple[str, str, str]]:
    return [(n.title, n.message, n.severity) for n in app._notifications]


async def _verify(app: NexusApp, pilot: Any, task_id: str = "a") -> ProgressScreen:
    """Select the task, press v, confirm: the progress dialog of the running verify."""
    await select(pilot, "demo", task_id)
    await pilot.press("v")
    await eventually(pilot, lambda: isinstance(app.screen, ActionDialog) and laid_out(app.screen, "#confirm"))
    await pilot.click("#confirm")
    await eventually(pilot, lambda: isinstance(app.screen, ProgressScreen))
    screen = app.screen
    assert isinstance(screen, ProgressScreen)
    return screen


async def test_verify_goes_to_the_background_its_row_runs_and_its_end_is_notified(tmp_path: Path) -> None:
    root = _talking_ready(tmp_path)
    app = quiet_app([str(root)])
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, pilot)
        progress = await _verify(app, pilot)
        background = progress.query_one("#close", Button)
        assert app.focused is background and str(background.label) == "Background (b)"
        await eventually(pilot, lambda: progress.child_pid is not None)
        await pilot.press("escape")  # the work goes on; the dashboard is usable again
        await eventually(pilot, lambda: not isinstance(app.screen, ProgressScreen))
        assert app.jobs.running() and not progress.finished
        tasks = app.pane.tasks
        await eventually(pilot, lambda: "⧗ " in cell(tasks, "a", "task"))  # compact columns: "⧗ 3s"
        assert "⧗" not in cell(tasks, "b", "task")
        await select(pilot, "demo", "b")  # another task can be worked on meanwhile
        assert app.pane.task_id == "b"
        _release(root, "1")
        _release(root, "2")
        await eventually(pilot, lambda: not app.jobs.running(), timeout=30)
        await eventually(pilot, lambda: any(t == "verify finished" for t, _, _ in _notifications(app)))
        _, message, severity = next(n for n in _notifications(app) if n[0] == "verify finished")
        assert message.startswith("verify demo/a: passed.") and severity == "information"
        await eventually(pilot, lambda: "⧗" not in cell(tasks, "a", "task"))
    assert latest(root, "a")["verification"]["status"] == "passed"


async def test_the_jobs_view_streams_the_output_and_follows_or_pauses_it(tmp_path: Path) -> None:
    root = _talking_ready(tmp_path)
    app = quiet_app([str(root)])
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, pilot)
        progress = await _verify(app, pilot)
        await pilot.press("o")  # the dialog's Output: the jobs view on this job
        await eventually(pilot, lambda: isinstance(app.screen, JobsScreen))
        jobs = app.screen
        assert isinstance(jobs, JobsScreen) and jobs.job is progress.job
        await eventually(pilot, lambda: "line one" in _log_lines(jobs))
        lines = _log_lines(jobs)
        assert lines[0].startswith("── check talk (1 of 1): ")
        assert f"{STDERR_MARK}a warning on stderr" in lines
        assert "colour \\x1b[31mred" in lines  # terminal-safe: the escape shown, not acted on
        assert "running" in _heading(jobs) and "following" in _heading(jobs)
        table = jobs.query_one("#jobs", DataTable)
        assert cell(table, "1", "task") == "demo/a" and cell(table, "1", "state") == "running"
        # Following: the new lines arrive as the check prints them and the view stays at the end.
        _release(root, "1")
        await eventually(pilot, lambda: f"bulk {BULK - 1}" in _log_lines(jobs))
        log = jobs.query_one(JobLog)
        await eventually(pilot, lambda: log.max_scroll_y > 0 and log.scroll_y == log.max_scroll_y)
        # Paused: the view stays where the operator put it while the lines keep arriving.
        await pilot.press("p")
        assert "paused" in _heading(jobs)
        log.scroll_home(animate=False)
        await eventually(pilot, lambda: log.scroll_y == 0)
        _release(root, "2")
        await eventually(pilot, lambda: "last line" in _log_lines(jobs), timeout=30)
        await pilot.pause()
        assert log.scroll_y == 0
        # Following again: back to the end.
        await pilot.press("p")
        await eventually(pilot, lambda: log.scroll_y == log.max_scroll_y)
        assert "following" in _heading(jobs)
        await eventually(pilot, lambda: cell(table, "1", "state") == "passed", timeout=30)
        assert _log_lines(jobs)[-1].startswith("── talk: exit code 0")


async def test_the_jobs_view_finds_lines_and_esc_clears_the_search(tmp_path: Path) -> None:
    root = _talking_ready(tmp_path)
    _release(root, "1")
    _release(root, "2")
    app = quiet_app([str(root)])
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, pilot)
        await _verify(app, pilot)
        await pilot.press("escape")
        await eventually(pilot, lambda: not app.jobs.running(), timeout=30)
        await pilot.press("J")
        await eventually(pilot, lambda: isinstance(app.screen, JobsScreen))
        jobs = app.screen
        assert isinstance(jobs, JobsScreen)
        await eventually(pilot, lambda: "last line" in _log_lines(jobs))
        everything = _log_lines(jobs)
        await pilot.press("f")
        search = jobs.query_one("#job-search", Input)
        assert search.display and app.focused is search
        await pilot.press(*"BULK 1")  # case-insensitive
        expected = ["bulk 1", *[f"bulk {n}" for n in range(10, 20)]]
        await eventually(pilot, lambda: _log_lines(jobs) == expected)
        assert "find 'BULK 1': 11 lines" in _heading(jobs)
        await pilot.press("enter")  # keeps the search, back to the list
        assert _log_lines(jobs) == expected and focused(app) is jobs.query_one("#jobs", DataTable)
        await pilot.press("escape")  # clears the search first
        await eventually(pilot, lambda: _log_lines(jobs) == everything)
        assert not search.display and isinstance(app.screen, JobsScreen)
        await pilot.press("escape")  # then closes the view
        await eventually(pilot, lambda: not isinstance(app.screen, JobsScreen))


async def test_stop_asks_first_and_enter_keeps_the_work_running(tmp_path: Path) -> None:
    root = _talking_ready(tmp_path)
    app = quiet_app([str(root)])
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, pilot)
        progress = await _verify(app, pilot)
        await eventually(pilot, lambda: progress.child_pid is not None)
        check_pid = progress.child_pid
        await pilot.press("s")
        await eventually(pilot, lambda: isinstance(app.screen, ConfirmStop))
        question = app.screen
        assert isinstance(question, ConfirmStop)
        assert app.focused is question.query_one("#cancel", Button)
        words = " ".join(str(s.render()) for s in question.query(Static))
        assert "acceptance becomes 'rejected'" in words
        assert "verification round 1 of 2" in words and "restart limit" in words
        await pilot.press("enter")  # on Keep running: nothing is stopped
        await eventually(pilot, lambda: app.screen is progress)
        assert not progress.job.stop_requested.is_set() and not progress.finished
        await pilot.click("#stop")
        await eventually(pilot, lambda: isinstance(app.screen, ConfirmStop))
        await pilot.click("#confirm")  # Stop it
        await eventually(pilot, lambda: progress.finished, timeout=30)
    verification = latest(root, "a")["verification"]
    assert verification["status"] == "ambiguous", verification
    assert str(verification["checks"][0]["error"]).startswith(
        f"Stopped on the operator's request: the check's process group {check_pid} got SIGTERM"
    ), verification["checks"]


async def test_q_opens_the_quit_dialog_over_the_progress_dialog_and_over_background_work(tmp_path: Path) -> None:
    root = _talking_ready(tmp_path)
    app = quiet_app([str(root)])
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, pilot)
        progress = await _verify(app, pilot)
        await eventually(pilot, lambda: progress.child_pid is not None)
        await pilot.press("q")
        await eventually(pilot, lambda: isinstance(app.screen, QuitScreen))
        assert "verify of task a (run demo)" in str(app.screen.query_one("#quit-running", Static).render())
        await pilot.press("escape")  # cancel the quit
        await eventually(pilot, lambda: app.screen is progress)
        await pilot.press("escape")  # to the background
        await eventually(pilot, lambda: not isinstance(app.screen, ProgressScreen))
        await pilot.press("q")  # the work still runs in the background: the dialog names it
        await eventually(pilot, lambda: isinstance(app.screen, QuitScreen))
        assert app.is_running
        _release(root, "1")
        _release(root, "2")
        await eventually(pilot, lambda: not app.jobs.running(), timeout=30)
        await pilot.press("escape")
        await eventually(pilot, lambda: not isinstance(app.screen, QuitScreen))


async def test_the_launch_dialog_and_progress_never_show_none(tmp_path: Path) -> None:
    root = make_project(tmp_path, [process_task_plan("p")])
    app = quiet_app([str(root)])
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, pilot)
        await select(pilot, "demo", "p")
        await pilot.press("l")
        await eventually(pilot, lambda: isinstance(app.screen, ActionDialog) and laid_out(app.screen, "#confirm"))
        dialog_words = " ".join(str(s.render()) for s in app.screen.query(Static))
        await pilot.click("#confirm")
        await eventually(pilot, lambda: isinstance(app.screen, ProgressScreen))
        progress = app.screen
        assert isinstance(progress, ProgressScreen)
        await eventually(pilot, lambda: progress.finished, timeout=30)
        await pilot.pause()
        shown = " ".join(str(s.render()) for s in progress.query(Static))
    assert "process ended: outcome completed" in shown
    assert "None" not in shown and "None" not in dialog_words


def test_the_jobs_keys_come_from_the_one_registry() -> None:
    """J on the main screen (no other action takes it there), and the jobs view's own keys, each
    with its help, bound on the view from the registry's entries."""
    assert [e.id for e in actions.REGISTRY if e.screen == actions.MAIN and "J" in e.keys.split(",")] == ["jobs"]
    entries = [e for e in actions.REGISTRY if e.screen == actions.JOBS]
    assert sorted(e.keys for e in entries) == ["f", "p", "x"] and all(e.help for e in entries)
    bound = {(b.key, b.action) for b in JobsScreen.BINDINGS if isinstance(b, Binding)}
    assert all((e.keys, e.action) in bound for e in entries)
    assert not any(b.action.startswith("job(") for b in actions.bindings())  # not on the main screen
