"""The task filter: an unknown state:WORD is said (and not applied), never a silent empty table;
the valid words are one list (FILTER_STATES) that the parser, the message and the help share."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from dashboard_kit import loaded, quiet_app, row_keys
from fixture_tools import relocate
from textual.widgets import Static

from nexus_core.state.store import EXECUTIONS, INTEGRATIONS, VERIFICATIONS
from nexus_tui.logic.model import NOT_STARTED, STATE_ORDER, TaskRow
from nexus_tui.logic.selection import FILTER_STATES, parse_filter, row_matches
from nexus_tui.screens.help import HelpScreen


def _row(state: str, execution: str, verification: str, acceptance: str, stale: bool, overdue: bool) -> TaskRow:
    return TaskRow("t", (), execution, verification, acceptance, 1, 2, stale, overdue, None, state, "objective")


def test_an_unknown_state_word_is_reported_with_the_valid_ones_and_not_applied() -> None:
    parsed = parse_filter("state:bogus task:build STATE:Stale free")
    assert parsed.unknown_states == ("bogus",)
    assert parsed.terms == (("task", "build"), ("state", "stale"), ("text", "free"))
    assert parsed.problem is not None
    assert parsed.problem.startswith("Unknown state:bogus (not applied). Valid states: ")
    assert parsed.problem.endswith(", ".join(FILTER_STATES) + ".")
    assert parse_filter("state:stale state:not-started").problem is None
    assert parse_filter("").terms == () and parse_filter("").problem is None


def test_every_word_a_task_row_can_carry_is_a_valid_state_and_matches() -> None:
    """FILTER_STATES is complete: no row has a flag the parser would call unknown."""
    for values in itertools.product(
        STATE_ORDER, (*EXECUTIONS, NOT_STARTED), VERIFICATIONS, INTEGRATIONS, (False, True), (False, True)
    ):
        row = _row(*values)
        for word in row.flags():
            typed = word.replace(" ", "-")
            assert typed in FILTER_STATES, word
            assert row_matches(row, parse_filter(f"state:{typed}").terms)


@pytest.mark.asyncio
async def test_the_filter_says_which_state_is_unknown_under_the_input(tmp_path: Path) -> None:
    root = str(relocate("lifecycle-mix", tmp_path))
    app = quiet_app([root])
    async with app.run_test(size=(140, 40)) as pilot:
        await loaded(app, pilot)
        pane = app.pane
        every = row_keys(pane.tasks)
        problem = pane.query_one("#filter-problem-0", Static)
        assert not problem.display
        await pilot.press("slash", *"state:bogus")
        await pilot.pause()
        assert problem.display
        shown = str(problem.content)
        assert "Unknown state:bogus (not applied)" in shown
        assert all(word in shown for word in FILTER_STATES)
        assert row_keys(pane.tasks) == every  # not applied: the table does not go silently empty
        pane.filter_input.value = "state:overdue"
        await pilot.pause()
        assert not problem.display
        assert row_keys(pane.tasks) == ["t-running"]


@pytest.mark.asyncio
async def test_the_help_lists_every_filter_state(tmp_path: Path) -> None:
    root = str(relocate("lifecycle-mix", tmp_path))
    app = quiet_app([root])
    async with app.run_test(size=(140, 40)) as pilot:
        await loaded(app, pilot)
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        text = "\n".join(str(static.content) for static in app.screen.query(Static))
        syntax = text[text.index("Filter syntax") :]
        line = next(line for line in syntax.splitlines() if line.lstrip().startswith("state:"))
        assert line.strip() == f"state:WORD, WORD one of: {', '.join(FILTER_STATES)}"
        assert "..." not in syntax.split("Task states")[0]
