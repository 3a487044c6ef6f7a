"""The dashboard at the sizes operators use (issue 13, items 13-16): the main screen and every
dialog at 80x24 and 120x36, the help at 80x24 and 160x45, plus what a snapshot cannot say on
its own (nothing clipped, no invisible Tab stop, the footer's labels whole).

Every dialog is built on real state written by the core, with the frozen clock and ids of
``dialog_kit``; the main-screen views run on the frozen demo. Review every SVG you accept:
`pytest tests/tui/test_layout_snapshots.py --snapshot-update`, then open them."""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from dashboard_kit import cell, select, then
from dialog_kit import (
    FROZEN,
    SNAPSHOT_HOST,
    ScreenHost,
    action_dialog,
    completed,
    display,
    finished_job,
    running,
)
from textual.containers import ScrollableContainer
from textual.errors import NoWidget
from textual.pilot import Pilot
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Button, Checkbox, DataTable, Footer, Input, OptionList, RadioSet, Static
from textual.widgets._footer import FooterKey
from tui_actions_support import (
    accepted,
    latest,
    make_project,
    process_task_plan,
    record,
    start,
    task_plan,
    write_dead_writer_lock,
    write_result,
)

from nexus_core import engine, timeutil
from nexus_core.attention import Looker
from nexus_core.backend import process
from nexus_core.needs import oldest_first
from nexus_core.schedule import core as schedules
from nexus_core.timeutil import now_ms
from nexus_tui import actions
from nexus_tui.job_flow import start_job, target_of
from nexus_tui.logic import operations, recovery
from nexus_tui.logic.demo import DemoInfo
from nexus_tui.logic.jobs import Job, Jobs
from nexus_tui.logic.operations import LogEntry
from nexus_tui.logic.schedules import SCHEDULE_ACTIONS
from nexus_tui.screens.dialogs import dialog_for
from nexus_tui.screens.help import HelpScreen, HelpText
from nexus_tui.screens.inbox import InboxScreen
from nexus_tui.screens.jobs import JobsScreen
from nexus_tui.screens.progress import ProgressScreen
from nexus_tui.screens.quit import QuitScreen
from nexus_tui.screens.recovery import RecoveryListScreen, RecoveryScreen
from nexus_tui.screens.schedules import ConfirmSchedule, SchedulesScreen
from nexus_tui.screens.stop import ConfirmStop
from nexus_tui.widgets.footer import FittingFooter
from nexus_tui.widgets.styles import VALUE_GLYPH

SIZES = {"80x24": (80, 24), "120x36": (120, 36)}
Step = Callable[[Pilot[None]], Awaitable[None]]


# ----------------------------------------------------------------- dialogs on real state


def _fresh(tmp_path: Path) -> Path:
    return make_project(tmp_path)


def _passed(tmp_path: Path) -> Path:
    root = completed(tmp_path)
    engine.verify_task(str(root), "demo", "a")
    return root


def _failed(tmp_path: Path) -> Path:
    root = running(tmp_path)
    record(root, "a", outcome="failed")
    return root


def _process(tmp_path: Path) -> Path:
    return make_project(tmp_path, [process_task_plan("a")])


def _dead_lock(tmp_path: Path) -> Path:
    root = make_project(tmp_path)
    write_dead_writer_lock(root, SNAPSHOT_HOST)
    return root


def _corrupt(tmp_path: Path) -> Path:
    root = make_project(tmp_path)
    state = root / ".bmad-plus/nexus/runs/demo.json"
    state.write_bytes(state.read_bytes()[:200])
    return root


def _unsafe_mode(tmp_path: Path) -> Path:
    """A run file the core refuses to read (group/world-writable) whose plan is recoverable."""
    root = make_project(tmp_path)
    os.chmod(root / ".bmad-plus/nexus/runs/demo.json", 0o666)
    return root


def _collect_dialog(tmp_path: Path) -> Screen[Any]:
    """A launched process that has finished: its receipt awaits collect. The supervisor's pid
    is shown as a fixed one (the dialog names it)."""
    root = _process(tmp_path)
    process.launch_task(str(root), "demo", "a", {})
    pid = latest(root, "a")["process"]["owner"]["ownerPid"]
    preview = operations.preview(str(root), "collect", "demo", "a")
    shown = display(root)
    return dialog_for(preview, lambda text: shown(text).replace(f"pid {pid}", "pid 4242"))


def _interrupted(tmp_path: Path) -> Path:
    root = running(tmp_path)
    engine.cancel_task(str(root), "demo", "a", {"reason": "worker host rebooted"})
    return root


def _situation(root: Path, kind: str) -> recovery.Situation:
    return next(s for s in recovery.classify_project(str(root)) if s.kind == kind)


def _fresh_run_dialog(root: Path) -> Screen[Any]:
    advice = _situation(root, "run-unreadable").fresh_run
    assert advice is not None and advice.plan is not None
    preview = operations.preview_fresh_run(
        str(root), advice.old_run_id, advice.new_run_id, advice.plan, advice.create_problem
    )
    return dialog_for(preview, display(root))


def _progress(root: Path) -> Screen[Any]:
    return ProgressScreen(finished_job(root), display=display(root))


# A check that talks like a test runner: lines on stdout and stderr, then its verdict.
TALKING_CHECK = (
    "import pathlib, sys\n"
    "print('collecting 3 items')\n"
    "print('checks/test_result.py::test_exists PASSED')\n"
    "print('checks/test_result.py::test_content PASSED')\n"
    "print('DeprecationWarning: the result format will change', file=sys.stderr)\n"
    "ok = 'ok' in pathlib.Path('out', sys.argv[1], 'result.txt').read_text().split()\n"
    "print('checks/test_result.py::test_says_ok ' + ('PASSED' if ok else 'FAILED'))\n"
    "if not ok:\n"
    "    print('AssertionError: out/' + sys.argv[1] + '/result.txt does not say ok', file=sys.stderr)\n"
    "print(('3 passed' if ok else '1 failed, 2 passed') + ' in 0.01s')\n"
    "sys.exit(0 if ok else 1)\n"
)


def _talking(tmp_path: Path) -> Path:
    """Tasks a (its result says ok) and b (it does not), both completed, checked by TALKING_CHECK
    (written before the run that protects it is created, hence the setup run)."""
    root = make_project(tmp_path, [task_plan("setup")], run_id="setup")
    (root / "checks" / "talk.py").write_text(TALKING_CHECK)
    check = {"id": "tests", "command": "python", "args": ["checks/talk.py"]}
    tasks = [
        task_plan(
            task, resources=["checks/check.py", "checks/talk.py"], checks=[{**check, "args": ["checks/talk.py", task]}]
        )
        for task in ("a", "b")
    ]
    for task in ("a", "b"):
        (root / "out" / task).mkdir(parents=True, exist_ok=True)
    engine.create_run(str(root), {"id": "demo", "maxParallel": 4, "tasks": tasks})
    for task, text in (("a", "ok\n"), ("b", "not yet\n")):
        start(root, task)
        write_result(root, task, text)
        record(root, task)
    return root


def _jobs_view(tmp_path: Path) -> Screen[Any]:
    """The jobs view after two verifications ran: a passed one, then a failed one (selected)."""
    root = _talking(tmp_path)
    jobs = Jobs(clock=lambda: 0.0)
    finished_job(root, "verify", "a", jobs)
    finished_job(root, "verify", "b", jobs)
    return JobsScreen(jobs, display=display(root))


def _stop_confirm(tmp_path: Path, action: str) -> Screen[Any]:
    root = completed(tmp_path) if action == "verify" else _process(tmp_path)
    job = Jobs(clock=lambda: 0.0).add(target_of(operations.preview(str(root), action, "demo", "a")))
    return ConfirmStop(job, display=display(root))


def _with_schedules(tmp_path: Path) -> Path:
    root = make_project(tmp_path)
    schedules.add_schedule(str(root), schedules.NewSchedule("demo", "daily", "09:00", "UTC", title="morning"), now_ms())
    schedules.add_schedule(str(root), schedules.NewSchedule("demo", "every", "1h", "UTC"), now_ms())
    return root


def _stale_after_acceptance(tmp_path: Path) -> Path:
    root = make_project(tmp_path)
    accepted(root, "a")
    write_result(root, "a", "ok, edited after acceptance\n")
    return root


def _guide_list(tmp_path: Path) -> Screen[Any]:
    root = make_project(tmp_path, [task_plan("a"), task_plan("b")])
    start(root, "a")
    engine.cancel_task(str(root), "demo", "a", {"reason": "stop"})
    write_dead_writer_lock(root, SNAPSHOT_HOST)
    return RecoveryListScreen(recovery.classify_project(str(root)), display=display(root))


def _inbox(tmp_path: Path) -> Screen[Any]:
    """Two projects' needs, made at different times (the ages differ), oldest first."""
    web = make_project(tmp_path / "web", [task_plan("login"), task_plan("signup"), task_plan("search")])
    api = make_project(tmp_path / "api", [task_plan("users"), process_task_plan("export")])
    for hours, step in (
        (5, lambda: write_dead_writer_lock(api, SNAPSHOT_HOST)),
        (3, lambda: (start(web, "login"), engine.cancel_task(str(web), "demo", "login", {"reason": "stop"}))),
        (2, lambda: (start(web, "signup"), record(web, "signup", outcome="blocked"))),
        (1, lambda: (start(web, "search"), record(web, "search", outcome="failed"))),
    ):

        def clock(hours: int = hours) -> float:
            return FROZEN - hours * 3600

        timeutil.set_clock(clock)
        step()
    timeutil.set_clock(lambda: FROZEN)
    found = [(0, "web", need) for need in Looker().project(str(web), now_ms())]
    found += [(1, "api", need) for need in Looker().project(str(api), now_ms())]
    order = {need.id: i for i, need in enumerate(oldest_first(need for _, _, need in found))}
    return InboxScreen(sorted(found, key=lambda entry: order[entry[2].id]), now_ms())


# name -> the screen, built on a project made in tmp_path. One per action's confirmation, then
# every other modal: recover-lock, the fresh run, the recovery guide (a task's, a lock's, a
# corrupt run's, the list), progress, the stop confirmations, the jobs view, help, the schedules
# panel and its confirmation.
DIALOGS: dict[str, Callable[[Path], Screen[Any]]] = {
    "start": lambda tmp: action_dialog(_fresh(tmp), "start"),
    "record": lambda tmp: action_dialog(running(tmp), "record"),
    "verify": lambda tmp: action_dialog(completed(tmp), "verify"),
    "accept": lambda tmp: action_dialog(_passed(tmp), "accept"),
    "reconcile": lambda tmp: action_dialog(running(tmp), "reconcile"),
    "retry": lambda tmp: action_dialog(_failed(tmp), "retry"),
    "launch": lambda tmp: action_dialog(_process(tmp), "launch"),
    "collect": _collect_dialog,
    "cancel": lambda tmp: action_dialog(running(tmp), "cancel"),
    "recover-lock": lambda tmp: action_dialog(_dead_lock(tmp), "recover-lock", None),
    "create-fresh-run": lambda tmp: _fresh_run_dialog(_unsafe_mode(tmp)),
    "guide-interrupted": lambda tmp: (
        lambda root: RecoveryScreen(_situation(root, "attempt-interrupted"), display=display(root))
    )(_interrupted(tmp)),
    "guide-dead-lock": lambda tmp: (
        lambda root: RecoveryScreen(_situation(root, "writer-lock-dead"), display=display(root))
    )(_dead_lock(tmp)),
    "guide-stale": lambda tmp: (lambda root: RecoveryScreen(_situation(root, "accepted-stale"), display=display(root)))(
        _stale_after_acceptance(tmp)
    ),
    "guide-corrupt-run": lambda tmp: (
        lambda root: RecoveryScreen(_situation(root, "run-unreadable"), display=display(root))
    )(_corrupt(tmp)),
    "guide-list": _guide_list,
    "inbox": _inbox,
    "progress": lambda tmp: _progress(completed(tmp)),
    "stop-verify": lambda tmp: _stop_confirm(tmp, "verify"),
    "stop-launch": lambda tmp: _stop_confirm(tmp, "launch"),
    "jobs": _jobs_view,
    "help": lambda tmp: HelpScreen(),
    "schedules": lambda tmp: SchedulesScreen(str(_with_schedules(tmp)), "project", read_only=False),
    "schedule-confirm": lambda tmp: ConfirmSchedule(SCHEDULE_ACTIONS["delete"], "5eed0001"),
}


class StyledHost(ScreenHost):
    """The dashboard's stylesheet too (the help screen and the schedules panel are styled there)."""

    CSS_PATH = str(Path(__file__).parents[2] / "nexus_tui" / "nexus.tcss")


async def _settled(pilot: Pilot[None]) -> None:
    """Until the screen is still: a progress screen's worker done, a panel's first load in."""
    screen = pilot.app.screen
    deadline = time.monotonic() + 30
    while not _is_settled(screen):
        assert time.monotonic() < deadline, "the screen never settled"
        await pilot.pause(0.05)
    await pilot.pause()


def _is_settled(screen: Screen[Any]) -> bool:
    if isinstance(screen, ProgressScreen):
        return screen.finished
    if isinstance(screen, SchedulesScreen):
        return screen.loads > 0
    return True


pytestmark = pytest.mark.usefixtures("deterministic")  # conftest.py


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("dialog", DIALOGS)
def test_dialog_at_size(snap_compare: Any, tmp_path: Path, dialog: str, size: str) -> None:
    assert snap_compare(StyledHost(DIALOGS[dialog](tmp_path)), terminal_size=SIZES[size], run_before=_settled)


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("dialog", DIALOGS)
async def test_dialog_buttons_are_whole_on_screen(tmp_path: Path, dialog: str, size: str) -> None:
    """Nothing to act on is clipped: every button lies whole inside the screen and its frame."""
    app = StyledHost(DIALOGS[dialog](tmp_path))
    async with app.run_test(size=SIZES[size]) as pilot:
        await _settled(pilot)
        screen = app.screen
        frames = screen.query("#dialog, #panel")
        inside = frames.first().content_region if frames else screen.region
        for button in screen.query(Button):
            if button.display:
                assert inside.contains_region(button.region), f"{button.id} clipped: {button.region} in {inside}"


@pytest.mark.parametrize("size", SIZES)
async def test_a_refusal_in_the_dialog_shows_above_the_buttons(tmp_path: Path, size: str) -> None:
    app = StyledHost(DIALOGS["reconcile"](tmp_path))
    async with app.run_test(size=SIZES[size]) as pilot:
        await pilot.pause()
        app.screen.query_one("#confirm", Button).press()  # without the owner-stopped tick
        await pilot.pause()
        await pilot.pause()
        error = app.screen.query_one("#dialog-error", Static)
        assert "owner" in str(getattr(error.content, "plain", error.content))
        assert _visible(error), f"the error line is covered or off screen: {error.region}"
        assert error.region.bottom <= app.screen.query_one("#dialog-buttons").region.y


@pytest.mark.parametrize("size", [(80, 24), (80, 16)], ids=["80x24", "80x16"])
async def test_every_validation_message_of_a_dialog_with_many_fields_is_visible(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    """Issue 24 item 5: the record dialog (outcome, summary, exit code, handle, session) with
    every field wrong, on a small terminal: each message shows whole beside the buttons, whatever
    the body's scroll, and every button stays whole."""
    app = StyledHost(DIALOGS["record"](tmp_path))
    async with app.run_test(size=size) as pilot:
        await _settled(pilot)
        screen = app.screen
        wrong = {"summary": "", "exit_code": "not a number", "backend_id": "", "backend_session": ""}
        for field, value in wrong.items():
            screen.query_one(f"#{field}", Input).value = value
        screen.query_one("#dialog-body").scroll_home(animate=False)  # the fields scrolled away
        screen.query_one("#confirm", Button).press()
        await pilot.pause()
        await pilot.pause()
        error = screen.query_one("#dialog-error", Static)
        words = str(getattr(error.content, "plain", error.content)).splitlines()
        assert len(words) == 4, words
        assert _visible(error), f"the error line is covered or off screen: {error.region}"
        assert screen.region.contains_region(error.region) and error.region.height >= len(words)
        assert error.region.bottom <= screen.query_one("#dialog-buttons").region.y
        inside = screen.query_one("#dialog").content_region
        for button in screen.query(Button):
            assert inside.contains_region(button.region), f"{button.id} clipped: {button.region} in {inside}"


class _QuitOverVerify(StyledHost):
    """The quit dialog over a verify whose check holds until ``hold`` goes (its pid shown fixed).
    The hold goes once the screenshot is taken, so the check ends and the app shuts down at once."""

    def __init__(self, root: Path) -> None:
        self.hold = root / "hold"
        self.hold.write_text("")
        shown = display(root)
        self.preview = operations.preview(str(root), "verify", "demo", "a")
        self.jobs = Jobs(clock=lambda: 0.0)
        self.job: Job | None = None
        self.show_text = lambda text: shown(text).replace(f"pid {self.job.child_pid if self.job else 0}", "pid 4242")
        super().__init__(Screen())

    def on_mount(self) -> None:
        self.job = start_job(self, self.jobs, self.preview, {}, operations.ActionLog(), changed=lambda job: None)
        self.push_screen(ProgressScreen(self.job, display=self.show_text))

    def export_screenshot(self, *args: Any, **kwargs: Any) -> str:
        try:
            return super().export_screenshot(*args, **kwargs)
        finally:
            self.hold.unlink(missing_ok=True)


async def _quit_asked(pilot: Pilot[None]) -> None:
    app = pilot.app
    assert isinstance(app, _QuitOverVerify)
    deadline = time.monotonic() + 30
    while app.job is None or app.job.child_pid is None:
        assert time.monotonic() < deadline, "the check never started"
        await pilot.pause(0.05)
    app.push_screen(QuitScreen([app.job], clock=lambda: 0.0, display=app.show_text))
    await pilot.pause()
    await pilot.pause()


@pytest.mark.parametrize("size", SIZES)
def test_quit_dialog_at_size(snap_compare: Any, tmp_path: Path, size: str) -> None:
    app = _QuitOverVerify(completed(tmp_path))
    try:
        assert snap_compare(app, terminal_size=SIZES[size], run_before=_quit_asked)
    finally:
        app.hold.unlink(missing_ok=True)


# ----------------------------------------------------------------- Tab stops (item 14)

ACTIONABLE = (Button, Input, Checkbox, RadioSet, OptionList, DataTable)


def _visible(widget: Widget) -> bool:
    """On screen and not covered by another widget (its top-left cell shows it or its child)."""
    region = widget.region
    if not widget.display or region.area == 0:
        return False
    try:
        shown, _ = widget.screen.get_widget_at(*region.offset)
    except NoWidget:
        return False
    return shown is widget or widget in shown.ancestors


def _actionable(widget: Widget) -> bool:
    """A field or button, or a scroll container with something to scroll (its keys scroll)."""
    if isinstance(widget, ACTIONABLE):
        return True
    return isinstance(widget, ScrollableContainer) and widget.max_scroll_y > 0


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("dialog", DIALOGS)
async def test_every_tab_stop_is_visible_and_actionable(tmp_path: Path, dialog: str, size: str) -> None:
    app = StyledHost(DIALOGS[dialog](tmp_path))
    async with app.run_test(size=SIZES[size]) as pilot:
        await _settled(pilot)
        chain = app.screen.focus_chain
        assert chain, "no Tab stop at all"
        seen: list[Widget] = []
        for _ in range(len(chain) + 1):
            await pilot.press("tab")
            await pilot.pause()
            focused = app.focused
            assert focused is not None, "Tab left the focus nowhere"
            assert _actionable(focused), f"{focused!r} is a Tab stop with nothing to act on"
            assert _visible(focused), f"{focused!r} is focused but not visible ({focused.region})"
            seen.append(focused)
        assert seen[-1] is seen[0], "Tab does not cycle through the dialog"


@pytest.mark.parametrize(
    ("dialog", "first_field"),
    [("recover-lock", "note"), ("record", "outcome"), ("reconcile", "outcome"), ("cancel", "reason")],
)
@pytest.mark.parametrize("size", SIZES)
async def test_one_tab_from_confirm_reaches_the_first_field(
    tmp_path: Path, dialog: str, first_field: str, size: str
) -> None:
    app = StyledHost(DIALOGS[dialog](tmp_path))
    async with app.run_test(size=SIZES[size]) as pilot:
        await pilot.pause()
        app.screen.query_one("#confirm", Button).focus()
        await pilot.press("tab")
        await pilot.pause()
        assert app.focused is not None and app.focused.id == first_field


async def test_the_record_dialog_needs_no_scrolling_at_160x45(tmp_path: Path) -> None:
    app = StyledHost(DIALOGS["record"](tmp_path))
    async with app.run_test(size=(160, 45)) as pilot:
        await pilot.pause()
        await pilot.pause()
        assert app.screen.query_one("#dialog-body").max_scroll_y == 0


# ----------------------------------------------------------------- the main screen


LONG_REFUSAL = (
    "Nexus: Task migrate cannot be accepted: its latest verification is not 'passed' for the current "
    "artifacts and resources (out/migrate/migrate.txt changed since the verification at "
    "2026-11-30T23:59:00.000Z); verify it again, then accept."
)


async def _pick_migrate(pilot: Pilot[None]) -> None:
    await select(pilot, "release", "migrate")


async def _log_with_a_long_refusal(pilot: Pilot[None]) -> None:
    await select(pilot, "release", "migrate")
    app: Any = pilot.app
    app.flow.log.append(LogEntry("2026-12-01T00:00:00.000Z", "accept", "release/migrate", "", False, LONG_REFUSAL))
    app.action_toggle_action_log()
    await pilot.pause()


async def _help(pilot: Pilot[None]) -> None:
    await select(pilot, "release", "release-notes")
    await pilot.press("question_mark")


MAIN_VIEWS: dict[str, Step] = {"tasks": _pick_migrate, "action-log": _log_with_a_long_refusal}


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("view", MAIN_VIEWS)
def test_main_screen_at_size(snap_compare: Any, demo_app: Callable[[], Any], view: str, size: str) -> None:
    assert snap_compare(demo_app(), terminal_size=SIZES[size], run_before=then(MAIN_VIEWS[view]))


@pytest.mark.parametrize("size", [(80, 24), (160, 45)], ids=["80x24", "160x45"])
def test_help_over_the_dashboard(snap_compare: Any, demo_app: Callable[[], Any], size: tuple[int, int]) -> None:
    assert snap_compare(demo_app(), terminal_size=size, run_before=then(_help))


# ----------------------------------------------------------------- what a snapshot cannot say

MOST_NEEDED = ("task", "acceptance", "attempts", "stale", "overdue")


def _column_ends(table: DataTable[Any]) -> dict[str, int]:
    """Each column's right edge, in cells from the table's left (as drawn, unscrolled)."""
    ends, x = {}, 0
    for column in table.ordered_columns:
        x += column.get_render_width(table)
        ends[str(column.key.value)] = x
    return ends


@pytest.mark.parametrize("size", SIZES)
async def test_the_columns_that_decide_stay_on_screen(demo_app: Callable[[], Any], size: str) -> None:
    app = demo_app()
    async with app.run_test(size=SIZES[size]) as pilot:
        await then(_pick_migrate)(pilot)
        pane = app.pane
        width = pane.tasks.scrollable_content_region.width
        ends = _column_ends(pane.tasks)
        assert all(ends[key] <= width for key in MOST_NEEDED), (ends, width)
        runs = _column_ends(pane.runs)
        assert runs["stale"] <= width and runs["overdue"] <= width, (runs, width)
        # STALE and OVERDUE are in those columns.
        cells = {key: pane.tasks.get_row(key) for key in ("release-notes", "backfill")}
        assert any("STALE" in str(cell) for cell in cells["release-notes"])
        assert any("OVERDUE" in str(cell) for cell in cells["backfill"])
        # Compact values are the glyphs of the model's values (the help's legend).
        for row in pane.current_view().rows:
            for column in ("execution", "verification", "acceptance"):
                assert cell(pane.tasks, row.task_id, column) == VALUE_GLYPH[getattr(row, column)]
        if size == "80x24":  # the detail pane is below the tables, as wide as the screen
            detail = pane.query_one(f"#detail-{pane.index}")
            assert detail.region.y >= pane.tasks.region.bottom and detail.region.width == pane.region.width


async def test_at_120x36_every_column_fits_and_attempt_ids_are_whole(demo_app: Callable[[], Any]) -> None:
    """Issue 24 item 5: no header cut ("Obse"), no age cut ("2h59"), no attempt id cut."""
    app = demo_app()
    async with app.run_test(size=(120, 36)) as pilot:
        await then(_pick_migrate)(pilot)
        pane = app.pane
        for table in (pane.tasks, pane.runs):
            width = table.scrollable_content_region.width
            ends = _column_ends(table)
            assert max(ends.values()) <= width, (table.id, ends, width)
        tree = pane.attempts_tree
        lines = ["".join(segment.text for segment in tree.render_line(y)) for y in range(tree.size.height)]
        task = next(t for t in pane.current_view().inspection["tasks"] if t["id"] == "migrate")
        first, second = (attempt["id"] for attempt in task["attempts"])
        assert sum(first in line for line in lines) == 2  # its own id, and the retry's "retry of"
        assert any(second in line for line in lines)


async def test_crossing_the_width_threshold_keeps_the_selection(demo_app: Callable[[], Any]) -> None:
    app = demo_app()
    async with app.run_test(size=(160, 45)) as pilot:
        await then(_pick_migrate)(pilot)
        pane = app.pane
        assert not pane.narrow and pane.tasks.column_keys[1] == "depends"
        for size, narrow in (((80, 24), True), ((160, 45), False)):
            await pilot.resize_terminal(*size)
            await pilot.pause()
            await pilot.pause()
            assert pane.narrow is narrow
            assert (pane.run_id, pane.task_id, pane.tasks.cursor_key()) == ("release", "migrate", "migrate")
            assert pane.tasks.row_count == 8


@pytest.mark.parametrize("size", [(80, 24), (100, 30), (120, 36)], ids=["80x24", "100x30", "120x36"])
async def test_the_footer_shows_whole_key_labels_and_the_palette(
    demo_app: Callable[[], Any], size: tuple[int, int]
) -> None:
    app = demo_app()
    async with app.run_test(size=size) as pilot:
        await then(_pick_migrate)(pilot)
        footer = app.query_one(Footer)
        keys = list(footer.query(FooterKey))
        palette = [key for key in keys if key.has_class("-command-palette")]
        assert len(palette) == 1 and footer.region.contains_region(palette[0].region)
        shown = [key for key in keys if key not in palette]
        assert shown, "no key hint at all"
        for key in shown:
            assert key.region.right <= palette[0].region.x, f"{key.description} runs under the palette"
            assert key.region.width >= len(key.key_display) + len(key.description) + 2, f"{key.description} cut"


async def test_a_long_refusal_reads_in_full_at_80_columns(demo_app: Callable[[], Any]) -> None:
    app = demo_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await then(_log_with_a_long_refusal)(pilot)
        panel = app.query_one("#action-log")
        line = panel.query_one(".log-result")
        shown = " ".join(str(getattr(line.content, "plain", line.content)).split())
        assert " ".join(LONG_REFUSAL.split()) in shown
        assert app.screen.region.contains_region(line.region) and line.region.height >= 3  # wrapped, whole
        # The line follows the selected entry.
        app.flow.log.append(LogEntry("2026-12-01T00:00:01.000Z", "verify", "release/migrate", "", True, "passed"))
        await pilot.pause()
        assert "ok: passed" in str(getattr(line.content, "plain", line.content))
        table = panel.query_one(DataTable)
        table.focus()
        await pilot.press("up")
        await pilot.pause()
        assert "refused: Nexus: Task migrate" in str(getattr(line.content, "plain", line.content))


@pytest.mark.parametrize("size", [(80, 24), (160, 45)], ids=["80x24", "160x45"])
async def test_the_help_keeps_keys_labels_and_descriptions_apart(size: tuple[int, int]) -> None:
    app = StyledHost(HelpScreen())
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        await pilot.pause()
        body = app.screen.query_one(HelpText)
        text = str(getattr(body.content, "plain", body.content))
        lines = text[: text.index("Filter syntax")].splitlines()  # the keys' columns
        too_wide = [line for line in lines if len(line) > body.size.width]
        assert not too_wide, f"wraps at {body.size.width}: {too_wide}"
        entry = next(e for e in actions.REGISTRY if e.id == "copy_lock_fingerprint")
        joined = next(line for line in lines if entry.label in line)
        assert f"{entry.label}  " in joined or joined.rstrip().endswith(entry.label), joined
        assert entry.help.split()[0] in " ".join(lines)
        next_pane = next(line for line in lines if "Next pane" in line)
        assert next_pane.split()[0] == "Tab"
        assert "(changes state)" not in " ".join(lines[lines.index("Act (changes state)") + 1 :])


async def test_discover_overview_at_80x24_shows_whole_cells_and_a_fitting_footer(frozen_demo: DemoInfo) -> None:
    """On the demo the first summary shown ("loading") is narrower than the final one."""
    from dashboard_kit import eventually, loaded

    from nexus_tui.discover_app import DiscoverApp

    root = os.path.dirname(frozen_demo.directory)
    app = DiscoverApp(root, watch=False, rescan_seconds=0, tick=False, rediscover_seconds=0.1)
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(app, pilot)
        await eventually(pilot, lambda: len(app.overview.summaries) == 1)
        await pilot.pause()
        table = app.overview.table
        for column in table.ordered_columns:
            for row in table.rows:
                value = table.get_cell(row, column.key)
                assert value.cell_len <= column.content_width, f"{column.key.value} cut: {value.plain!r}"
        assert isinstance(app.query_one(Footer), FittingFooter)
