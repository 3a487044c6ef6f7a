"""Issue 13 item 20: the runs table's "Accepted" bar, the progress dialog's button once the work
ended, and validation errors that clear as soon as the field is valid."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dashboard_kit import cell, eventually, laid_out, loaded, quiet_app
from textual.app import App
from textual.widgets import Button, Static
from tui_actions_support import accepted, latest, make_project, process_task_plan, start, task_plan

from nexus_core import engine
from nexus_tui.action_flow import ActionFlow
from nexus_tui.logic.model import RunView
from nexus_tui.screens.dialogs import ActionDialog
from nexus_tui.screens.progress import ProgressScreen
from nexus_tui.screens.stop import ConfirmStop
from nexus_tui.widgets.run_cells import progress_cell
from nexus_tui.widgets.styles import DEFAULT_STYLES

BAR_WIDTH = 8


def _bar(text: str) -> str:
    return text.split(" ")[0]


def _run(root: Path, run_id: str, tasks: int, done: int) -> None:
    ids = [f"{run_id}-{n}" for n in range(tasks)]
    for task_id in ids:
        (root / "out" / task_id).mkdir(parents=True, exist_ok=True)
    engine.create_run(str(root), {"id": run_id, "maxParallel": 4, "tasks": [task_plan(t) for t in ids]})
    for task_id in ids[:done]:
        accepted(root, task_id, run_id)


def _project(tmp_path: Path) -> Path:
    root = (tmp_path / "project").resolve()
    (root / "checks").mkdir(parents=True)
    from tui_actions_support import CHECK

    (root / "checks" / "check.py").write_text(CHECK)
    _run(root, "none", 1, 0)
    _run(root, "half", 2, 1)
    _run(root, "all", 2, 2)
    return root


async def test_the_accepted_bar_shows_the_accepted_share(tmp_path: Path) -> None:
    root = _project(tmp_path)
    engine.start_task(str(root), "none", "none-0", {"backend": {"kind": "host", "id": "w", "sessionId": "s"}})
    app = quiet_app([str(root)])
    # Wide enough for the full runs table (narrower, the column shows the count alone).
    async with app.run_test(size=(200, 40)) as pilot:
        await loaded(app, pilot)
        runs = app.pane.runs
        shown = {run: cell(runs, run, "progress") for run in ("none", "half", "all")}
    # 0/1 (its task running): empty; 1/2: half; 2/2: full.
    assert shown["none"] == "░" * BAR_WIDTH + " 0/1"
    assert shown["half"] == "█" * 4 + "░" * 4 + " 1/2"
    assert shown["all"] == "█" * BAR_WIDTH + " 2/2"


def _view(accepted_count: int, total: int) -> RunView:
    rows: Any = tuple(object() for _ in range(total))
    counts = tuple((state, n) for state, n in (("accepted", accepted_count), ("running", total - accepted_count)) if n)
    return RunView("r", "", rows, counts, 0, 0, None, None, 0, None)


def test_the_accepted_bar_is_full_only_when_every_task_is_accepted() -> None:
    assert progress_cell(_view(0, 0), DEFAULT_STYLES).plain == "no tasks"
    assert _bar(progress_cell(_view(0, 1), DEFAULT_STYLES).plain) == "░" * BAR_WIDTH
    assert _bar(progress_cell(_view(1, 2), DEFAULT_STYLES).plain) == "█" * 4 + "░" * 4
    assert _bar(progress_cell(_view(2, 2), DEFAULT_STYLES).plain) == "█" * BAR_WIDTH
    # Never full before the last task, never empty after the first.
    assert _bar(progress_cell(_view(199, 200), DEFAULT_STYLES).plain).count("░") == 1
    assert _bar(progress_cell(_view(1, 200), DEFAULT_STYLES).plain).count("█") == 1


class Host(App[None]):
    """The dashboard's ActionFlow in a bare app."""

    def __init__(self) -> None:
        super().__init__()
        self.flow = ActionFlow(self)


def _shown_buttons(screen: Any) -> dict[str, Button]:
    return {str(b.label): b for b in screen.query(Button) if b.display}


async def test_the_progress_dialog_offers_close_once_the_stopped_launch_ended(tmp_path: Path) -> None:
    root = make_project(tmp_path, [process_task_plan("p")])
    (root / "hold-worker").write_text("")
    app = Host()
    async with app.run_test(size=(110, 44)) as pilot:
        app.flow.open("launch", str(root), "demo", "p")
        await eventually(pilot, lambda: isinstance(app.screen, ActionDialog))
        await eventually(pilot, lambda: laid_out(app.screen, "#confirm"))
        await pilot.click("#confirm")
        await eventually(pilot, lambda: isinstance(app.screen, ProgressScreen))
        screen = app.screen
        assert isinstance(screen, ProgressScreen)
        await eventually(pilot, lambda: any(line.startswith("spawned pid") for line in screen.events))
        await pilot.click("#stop")
        await eventually(pilot, lambda: isinstance(app.screen, ConfirmStop))
        await pilot.click("#confirm")  # Stop asks first
        await eventually(pilot, lambda: screen.finished and "Close" in _shown_buttons(screen))
        await pilot.pause()
        buttons = _shown_buttons(screen)
        assert list(buttons) == ["Close", "Output (o)"], buttons  # Stop is gone; the output stays at hand
        assert not buttons["Close"].disabled and app.focused is buttons["Close"]
    assert latest(root, "p")["process"]["receipt"]["reason"] == "supervisor-interrupted"


async def test_a_validation_error_clears_as_soon_as_the_field_is_valid(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    start(root, "a")
    app = Host()
    async with app.run_test(size=(110, 44)) as pilot:
        app.flow.open("cancel", str(root), "demo", "a")
        await eventually(pilot, lambda: isinstance(app.screen, ActionDialog))
        dialog = app.screen
        await eventually(pilot, lambda: laid_out(dialog, "#confirm"))
        error = dialog.query_one("#dialog-error", Static)
        dialog.query_one("#reason").value = "wrong branch"  # type: ignore[attr-defined]
        await pilot.click("#confirm")
        await pilot.pause()
        refused = str(error.render())
        assert refused.strip(), "the typed confirmation is missing: an error is shown"
        typed = dialog.query_one("#typed")
        typed.focus()
        await pilot.press("b")  # still wrong: the error stays
        await pilot.pause()
        assert str(error.render()).strip()
        await pilot.press("backspace", "a")  # now valid: the error is gone without a confirm
        await pilot.pause()
        assert not str(error.render()).strip()
        assert isinstance(app.screen, ActionDialog)  # fixing a field never confirms by itself
    assert latest(root, "a")["cancellation"]["status"] == "none"
