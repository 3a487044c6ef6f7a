"""Untrusted names are shown literally, never parsed as markup (issue 22, item 1).

A directory name, an identity, a summary, a task or attempt id in a hand-written run file, a
lock owner's host name, a schedule title: anyone's text. Parsed as Textual markup, ``x[b="]y``
killed the dashboard (``MarkupError``) and ``[@click=app.quit]x`` showed as ``x`` and ran the
action when clicked. Every place such text reaches is walked here on real projects (written by
the core, then by hand where the core would refuse the name): the text must be on the screen as
it is, nothing rendered may carry a click action, and clicking it runs none.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dashboard_kit import eventually, laid_out, loaded, quiet_app, select
from textual.app import App
from textual.command import CommandPalette
from tui_actions_support import CHECK, HOST, WORKER, task_plan, write_result

from nexus_core import engine
from nexus_core.schedule import core as schedules
from nexus_core.state import canonical, store
from nexus_tui import actions
from nexus_tui.app import NexusApp
from nexus_tui.discover_app import DiscoverApp
from nexus_tui.screens.dialogs import ActionDialog
from nexus_tui.screens.progress import ProgressScreen
from nexus_tui.screens.quit import QuitScreen
from nexus_tui.screens.recovery import RecoveryListScreen, RecoveryScreen
from nexus_tui.screens.schedules import SchedulesScreen

CLICK = "[@click=app.quit]x"
BROKEN = 'x[b="]y'
# A tag Textual's own markup escape leaves alone (a variable colour).
VARIABLE = "[$error]v"
IDENTITY = {"kind": "host", "id": CLICK, "sessionId": BROKEN}
SIZE = (200, 50)


# ----------------------------------------------------------------- what the screen shows


def screen_lines(app: App[Any]) -> list[str]:
    """The text of every row of the screen on top, as the terminal receives it."""
    return [strip.text for strip in app.screen._compositor.render_strips()]


def click_actions(app: App[Any]) -> set[str]:
    """Every action a click on the screen on top could run (markup's ``@click`` meta)."""
    found: set[str] = set()
    for strip in app.screen._compositor.render_strips():
        for segment in strip:
            meta = segment.style.meta if segment.style is not None and segment.style._meta else {}
            found.update(f"{key}={value}" for key, value in meta.items() if key.startswith("@"))
    return found


def assert_literal(app: App[Any], *texts: str) -> None:
    shown = "\n".join(screen_lines(app))
    for text in texts:
        assert text in shown, f"{text!r} is not on the screen:\n{shown}"
    assert click_actions(app) == set()


async def click_text(app: App[Any], pilot: Any, text: str) -> None:
    """Click the middle of each place ``text`` is shown; nothing may run (app.quit would exit)."""
    places = [(line.index(text) + len(text) // 2, row) for row, line in enumerate(screen_lines(app)) if text in line]
    assert places, f"{text!r} is not on the screen"
    for offset in places:
        await pilot.click(offset=offset)
        await pilot.pause()
        assert app.is_running and app.return_code is None


# ----------------------------------------------------------------- projects with hostile names


def make_project_at(root: Path, run_id: str, tasks: list[dict[str, Any]]) -> str:
    """A real project at exactly ``root`` (its name is the tab label), its run made by the core."""
    for folder, name, text in (("checks", "check.py", CHECK), ("workers", "work.py", WORKER)):
        (root / folder).mkdir(parents=True, exist_ok=True)
        (root / folder / name).write_text(text)
    for task in tasks:
        (root / "out" / task["id"]).mkdir(parents=True, exist_ok=True)
    engine.create_run(str(root), {"id": run_id, "maxParallel": 4, "tasks": tasks})
    return str(root)


def rename(root: str, run_id: str, renames: dict[str, str], attempt_ids: dict[str, str]) -> None:
    """Task and attempt ids the core would refuse to create, written as a hand-made (checksummed)
    run file would carry them: the dashboard reads such a file without refusing it."""
    run: Any = store.load_run(root, run_id)
    for definition in run["plan"]["tasks"]:
        definition["dependsOn"] = [renames.get(d, d) for d in definition.get("dependsOn", [])]
        definition["id"] = renames.get(definition["id"], definition["id"])
    for task in run["tasks"]:
        for attempt in task["attempts"]:
            attempt["id"] = attempt_ids.get(task["id"], attempt["id"])
            attempt["taskId"] = renames.get(task["id"], task["id"])
        task["id"] = renames.get(task["id"], task["id"])
    run["planHash"] = canonical.sha256_bytes(canonical.compact(run["plan"]).encode())
    store.save_run(root, run)


def latest_attempt(root: str, run_id: str, task_id: str) -> str:
    task = next(t for t in store.load_run(root, run_id)["tasks"] if t["id"] == task_id)
    return task["attempts"][-1]["id"]


def foreign_writer_lock(root: str) -> None:
    """writer.lock of a process on another host, whose name is hostile."""
    owner = {"token": "t-1", "pid": 4242, "hostname": CLICK, "createdAt": "2026-12-01T00:00:00.000Z"}
    path = Path(root, ".bmad-plus", "nexus", "writer.lock")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, json.dumps(owner, separators=(",", ":")).encode())
    os.close(fd)


@pytest.fixture
def machine(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """Project ``team[@click=app.quit]x`` (run demo): task a completed by a hostile identity with a
    hostile summary and attempt id; task [@click=app.quit]x blocked; tasks x[b="]y and d
    running; a schedule with a hostile title. Project ``x[b="]y``: writer.lock held on the
    host ``[@click=app.quit]x``."""
    first = make_project_at(
        tmp_path / f"team{CLICK}", "demo", [task_plan("a"), task_plan("b"), task_plan("c"), task_plan("d")]
    )
    engine.start_task(first, "demo", "a", {"backend": IDENTITY})
    write_result(Path(first), "a")
    summary = f"{CLICK} {BROKEN}"
    for task_id, outcome, backend in (("a", "completed", IDENTITY), ("b", "blocked", HOST)):
        if task_id != "a":
            engine.start_task(first, "demo", task_id, {"backend": backend})
        attempt = latest_attempt(first, "demo", task_id)
        body = {"attemptId": attempt, "backend": backend, "outcome": outcome, "summary": summary}
        engine.record_attempt(first, "demo", task_id, body)
    for task_id in ("c", "d"):
        engine.start_task(first, "demo", task_id, {"backend": HOST})
    rename(first, "demo", {"b": CLICK, "c": BROKEN}, {"a": CLICK})
    new = schedules.NewSchedule("demo", "every", "1h", "UTC", False, "run-once", None, summary)
    schedules.add_schedule(first, new, 1_796_083_200_000)
    second = make_project_at(tmp_path / BROKEN, "other", [task_plan("a")])
    foreign_writer_lock(second)
    yield first, second
    Path(first, "hold").unlink(missing_ok=True)  # a check left waiting ends


# ----------------------------------------------------------------- the main screen


async def test_tabs_tables_detail_status_and_notifications_show_names_literally(machine: tuple[str, str]) -> None:
    first, second = machine
    app = quiet_app([first, second])
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await loaded(app, pilot)
        # Both tab labels, as they are; clicking them switches tabs and runs nothing.
        assert_literal(app, f"team{CLICK}", BROKEN)
        await click_text(app, pilot, BROKEN)
        await click_text(app, pilot, f"team{CLICK}")
        await eventually(pilot, lambda: app.pane.index == 0)

        # The task table, the detail (identity, summary, attempt id) and the status bar's path.
        await select(pilot, "demo", "a")
        await eventually(pilot, lambda: f"host {CLICK} / {BROKEN}" in "\n".join(screen_lines(app)))
        assert_literal(app, CLICK, BROKEN, f"{CLICK} {BROKEN}", f"team{CLICK}")
        await click_text(app, pilot, f"{CLICK} {BROKEN}")
        await select(pilot, "demo", CLICK)
        assert_literal(app, f"{CLICK} {BROKEN}")
        await select(pilot, "demo", BROKEN)
        assert_literal(app, BROKEN)

        # Notifications quote the copied value literally.
        await select(pilot, "demo", "a")
        await app.run_action("copy_attempt_id")
        assert app.clipboard == CLICK
        await eventually(pilot, lambda: f"Copied attempt id: {CLICK}" in "\n".join(screen_lines(app)))
        assert_literal(app, f"Copied attempt id: {CLICK}")
        await click_text(app, pilot, f"Copied attempt id: {CLICK}")
        await app.run_action("copy_project_path")
        assert app.clipboard == shlex.quote(first)

        # The other project: its lock owner's host name in the status bar.
        await pilot.press("right_square_bracket")
        await eventually(pilot, lambda: f"pid 4242@{CLICK}" in "\n".join(screen_lines(app)))
        assert_literal(app, f"pid 4242@{CLICK}", BROKEN)
        await click_text(app, pilot, f"pid 4242@{CLICK}")
        assert app.is_running


async def test_recovery_guide_dialogs_and_action_log_show_names_literally(machine: tuple[str, str]) -> None:
    first, second = machine
    app = quiet_app([first, second])
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await loaded(app, pilot)
        await select(pilot, "demo", CLICK)

        # The guide lists the blocked task by its id, and its screen says so.
        await pilot.press("R")
        await eventually(pilot, lambda: isinstance(app.screen, RecoveryListScreen))
        await pilot.pause()
        assert_literal(app, CLICK)
        await click_text(app, pilot, CLICK)  # an option: choosing it opens its guide
        await eventually(pilot, lambda: isinstance(app.screen, RecoveryScreen))
        await pilot.pause()
        assert_literal(app, CLICK)
        await pilot.press("escape")
        await eventually(pilot, lambda: not isinstance(app.screen, (RecoveryScreen, RecoveryListScreen)))

        # A dialog that asks to type the task id quotes it (it was a markup Label).
        app.flow.open("cancel", first, "demo", CLICK)
        await eventually(pilot, lambda: isinstance(app.screen, ActionDialog))
        await eventually(pilot, lambda: laid_out(app.screen, "#cancel"))
        assert_literal(app, f"Type the task id ({CLICK}) to confirm")
        await click_text(app, pilot, f"({CLICK})")
        await pilot.press("escape")
        app.flow.open("cancel", first, "demo", BROKEN)
        await eventually(pilot, lambda: isinstance(app.screen, ActionDialog))
        await eventually(pilot, lambda: laid_out(app.screen, "#cancel"))
        assert_literal(app, f"Type the task id ({BROKEN}) to confirm")
        await pilot.press("escape")

        # A confirmed action: its notification and the action log quote the reason.
        app.flow.open("cancel", first, "demo", "d")
        await eventually(pilot, lambda: isinstance(app.screen, ActionDialog))
        await eventually(pilot, lambda: laid_out(app.screen, "#confirm"))
        for key, value in (("reason", f"{CLICK} {BROKEN}"), ("typed", "d")):
            app.screen.query_one(f"#{key}").value = value  # type: ignore[attr-defined]
        await pilot.click("#confirm")
        await eventually(pilot, lambda: f"reason={CLICK} {BROKEN}" in "\n".join(screen_lines(app)))
        assert_literal(app, f"reason={CLICK} {BROKEN}")
        await click_text(app, pilot, f"reason={CLICK} {BROKEN}")

        # The other project's lock: the recover-lock dialog names its owner's host.
        await pilot.press("right_square_bracket")
        await pilot.press("L")
        await eventually(pilot, lambda: isinstance(app.screen, ActionDialog))
        await eventually(pilot, lambda: laid_out(app.screen, "#cancel"))
        assert_literal(app, CLICK)
        await click_text(app, pilot, CLICK)
        await pilot.press("escape")
        assert app.is_running


async def test_the_quit_dialog_names_the_running_attempt_literally(machine: tuple[str, str]) -> None:
    first, _ = machine
    hold = Path(first, "hold")  # the check waits while it exists
    hold.write_text("")
    app = quiet_app([first])
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await loaded(app, pilot)
        app.flow.open("verify", first, "demo", "a")
        await eventually(pilot, lambda: isinstance(app.screen, ActionDialog))
        await eventually(pilot, lambda: laid_out(app.screen, "#confirm"))
        await pilot.click("#confirm")
        await eventually(pilot, lambda: isinstance(app.screen, ProgressScreen))
        progress = app.screen
        assert isinstance(progress, ProgressScreen)
        await eventually(pilot, lambda: progress.child_pid is not None)
        await pilot.press("ctrl+q")
        await eventually(pilot, lambda: isinstance(app.screen, QuitScreen))
        await eventually(pilot, lambda: f"attempt {CLICK}" in "\n".join(screen_lines(app)))
        assert_literal(app, f"verify of task a (run demo), attempt {CLICK}")
        await click_text(app, pilot, f"attempt {CLICK}")
        await pilot.click("#cancel")
        await eventually(pilot, lambda: app.screen is progress)
        hold.unlink()
        await eventually(pilot, lambda: progress.finished, timeout=60)
        assert app.is_running


async def test_the_schedules_panel_shows_titles_literally(machine: tuple[str, str]) -> None:
    first, _ = machine
    app = quiet_app([first])
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await loaded(app, pilot)
        await pilot.press("w")
        await eventually(pilot, lambda: isinstance(app.screen, SchedulesScreen) and app.screen.loads > 0)
        await pilot.pause()
        assert_literal(app, f"Schedules of team{CLICK}", f"{CLICK} {BROKEN}")
        await click_text(app, pilot, f"{CLICK} {BROKEN}")
        assert isinstance(app.screen, SchedulesScreen)


async def test_palette_entries_show_their_words_literally(
    machine: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An entry's label or its refusal can quote outside text (a task id, a project's name): the
    palette reads both as markup."""
    first, _ = machine
    hostile = actions.ActionSpec(
        "hostile_entry",
        "",
        f"Open {BROKEN} {VARIABLE}",
        "help",
        unavailable=lambda selection: f"{CLICK} {VARIABLE}",
    )
    monkeypatch.setattr(actions, "REGISTRY", [*actions.REGISTRY, hostile])
    app = quiet_app([first])
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await loaded(app, pilot)
        await pilot.press("ctrl+p")
        await eventually(pilot, lambda: isinstance(app.screen, CommandPalette))
        await pilot.press(*"Open x")
        await eventually(pilot, lambda: f"Open {BROKEN} {VARIABLE}" in "\n".join(screen_lines(app)))
        assert_literal(app, f"Open {BROKEN} {VARIABLE}", f"Unavailable: {CLICK} {VARIABLE}")
        await click_text(app, pilot, f"Unavailable: {CLICK}")  # runs the entry: its refusal, shown
        await eventually(pilot, lambda: not isinstance(app.screen, CommandPalette))
        await eventually(pilot, lambda: f"Unavailable: {CLICK} {VARIABLE}" in "\n".join(screen_lines(app)))
        assert_literal(app, f"Unavailable: {CLICK} {VARIABLE}")


# ----------------------------------------------------------------- --discover


async def test_discover_survives_a_hostile_project_made_while_it_runs(tmp_path: Path) -> None:
    root = tmp_path / "root"
    early = make_project_at(root / f"team{CLICK}-notes", "demo", [task_plan("a")])
    app = DiscoverApp(str(root), watch=False, rescan_seconds=0, tick=False, rediscover_seconds=0.2)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await eventually(pilot, lambda: early in app.directories)
        await eventually(pilot, lambda: f"team{CLICK}-notes" in "\n".join(screen_lines(app)))
        # The overview's row and the tab label: clicking either runs nothing.
        assert_literal(app, f"All projects under {root} (1)", f"team{CLICK}-notes")
        await click_text(app, pilot, f"team{CLICK}-notes")
        # A worker makes a directory inside its scope: a project appears while the app runs.
        late = root / f"late{BROKEN}" / ".bmad-plus" / "nexus"
        late.mkdir(parents=True)
        await eventually(pilot, lambda: str(late.parent.parent) in app.directories)
        await pilot.press("left_square_bracket")  # back to the overview
        await eventually(pilot, lambda: f"late{BROKEN}" in "\n".join(screen_lines(app)))
        assert_literal(app, f"late{BROKEN}", f"All projects under {root} (2)")
        await click_text(app, pilot, f"late{BROKEN}")
        await asyncio.sleep(0)
        assert app.is_running


async def test_discover_shows_a_hostile_root_literally(tmp_path: Path) -> None:
    root = tmp_path / f"root{BROKEN}{CLICK}"
    make_project_at(root / "team", "demo", [task_plan("a")])
    app = DiscoverApp(str(root), watch=False, rescan_seconds=0, tick=False, rediscover_seconds=0.2)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await eventually(pilot, lambda: f"All projects under {root} (1)" in "\n".join(screen_lines(app)))
        assert_literal(app, f"All projects under {root} (1)")
        await click_text(app, pilot, CLICK)
        assert isinstance(app, NexusApp) and app.is_running


# ----------------------------------------------------------------- what is copied


async def test_copy_project_path_quotes_it_and_refuses_a_newline(tmp_path: Path) -> None:
    """Pasted into a shell, the second line of a copied path would run: a path is copied
    shell-quoted, and a value holding a control character is not copied at all."""
    spaced = make_project_at(tmp_path / "my project", "demo", [task_plan("a")])
    forged = make_project_at(tmp_path / "x\ntouch pwned", "demo", [task_plan("a")])
    app = quiet_app([spaced, forged])
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await loaded(app, pilot)
        await app.run_action("copy_project_path")
        assert app.clipboard == shlex.quote(spaced) == f"'{spaced}'"
        await app.run_action("copy_state_path")
        assert app.clipboard == shlex.quote(f"{spaced}/.bmad-plus/nexus/runs/demo.json")
        await pilot.press("right_square_bracket")
        await eventually(pilot, lambda: app.pane.index == 1)
        await app.run_action("copy_project_path")
        assert app.clipboard == shlex.quote(f"{spaced}/.bmad-plus/nexus/runs/demo.json")  # unchanged
        shown = "Not copied: the project path holds control characters"
        await eventually(pilot, lambda: shown in "\n".join(screen_lines(app)))
