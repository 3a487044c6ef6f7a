"""No key or label is taken twice in the dashboard's registry (issue 25 item 2).

A key means one thing where it is pressed: on the main screen (the app's bindings) or on a panel
(a modal screen, which hides the app's bindings: Textual's modal binding chain stops at it, so
``r`` on the schedules panel resumes and never rescans). A label means one thing everywhere: the
help screen and the command palette list every entry together. Before: ``p`` was "Pause" both
for live updates and for a schedule; live updates are now ``f``, "Follow".
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from dashboard_kit import eventually, loaded, quiet_app, small_project

from nexus_core.schedule import core
from nexus_core.timeutil import now_ms
from nexus_tui import actions
from nexus_tui.app import NexusApp
from nexus_tui.screens.schedules import SchedulesScreen


def clashes(entries: list[actions.ActionSpec]) -> dict[str, list[str]]:
    """Keys taken twice on one screen, and labels and ids taken twice anywhere."""
    found: dict[str, list[str]] = {}
    for screen in {entry.screen for entry in entries}:
        keys = Counter(key for entry in entries if entry.screen == screen for key in entry.keys.split(",") if key)
        found |= {f"key {key} on {screen}": [] for key, count in keys.items() if count > 1}
    for what, values in (("label", [e.label for e in entries]), ("id", [e.id for e in entries])):
        found |= {f"{what} {value}": [] for value, count in Counter(values).items() if count > 1}
    return found


def test_no_key_label_or_id_is_taken_twice() -> None:
    assert clashes(actions.REGISTRY) == {}


@pytest.mark.parametrize(
    "extra",
    [
        actions.ActionSpec("twin_key", "v", "Twin key", "Bound to verify's key."),
        actions.ActionSpec("twin_label", "F2", "Verify", "Verify's label again."),
        actions.ActionSpec("twin_panel_key", "d", "Twin panel key", "Delete's key.", screen=actions.SCHEDULES),
    ],
    ids=["key", "label", "panel-key"],
)
def test_a_clash_is_found(extra: actions.ActionSpec) -> None:
    assert clashes([*actions.REGISTRY, extra]) != {}


def test_the_same_key_on_the_main_screen_and_on_a_panel_is_no_clash() -> None:
    main = {e.keys for e in actions.REGISTRY if e.screen == actions.MAIN}
    panel = {e.keys for e in actions.REGISTRY if e.screen == actions.SCHEDULES}
    assert {"r", "n"} <= main & panel  # rescan / resume, next need / run now: each where it is pressed


async def test_a_panels_key_never_reaches_the_main_screen(tmp_path: Path) -> None:
    root = small_project(tmp_path / "p")
    core.add_schedule(root, core.NewSchedule("live", "every", "1h", "UTC"), now_ms())
    app = quiet_app([root])
    async with app.run_test(size=(140, 40)) as pilot:
        await loaded(app, pilot)
        await pilot.press("w")
        await eventually(pilot, lambda: isinstance(app.screen, SchedulesScreen) and app.screen.loads > 0)
        await pilot.press("f")  # follow is the main screen's key: nothing on the panel
        await pilot.pause()
        assert app.following and isinstance(app.screen, SchedulesScreen)
        await pilot.press("escape")
        await pilot.press("f")
        await eventually(pilot, lambda: not app.following)


def test_follow_is_f_and_pause_is_the_schedules() -> None:
    follow = actions.spec("toggle_follow")
    assert follow is not None and (follow.keys, follow.label) == ("f", "Follow")
    assert [e.id for e in actions.REGISTRY if e.label == "Pause"] == ["schedule_pause"]
    assert any(b.key == "f" and b.action == "toggle_follow" for b in NexusApp.BINDINGS)
