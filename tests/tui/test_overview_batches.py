"""The "All projects" overview while a fleet loads: rows shown a few at a time, each row's
values exactly the summary's, and a change after the load shown at once."""

from __future__ import annotations

from typing import Any

import pytest
from dashboard_kit import cell, row_keys
from textual.app import App, ComposeResult

from nexus_tui.logic.discovery import ProjectSummary
from nexus_tui.widgets.overview import COALESCE_SECONDS, OverviewPane

pytestmark = pytest.mark.asyncio


class OverviewOnly(App[None]):
    def compose(self) -> ComposeResult:
        yield OverviewPane("/fleet")


def summary(index: int, blocked: int = 0) -> ProjectSummary:
    return ProjectSummary(directory=f"/fleet/p{index}", runs=index + 1, tasks=10, accepted=index, blocked=blocked)


def shown(app: App[Any]) -> dict[str, tuple[str, str]]:
    table = app.query_one(OverviewPane).table
    return {
        cell(table, key, "project"): (cell(table, key, "runs"), cell(table, key, "accepted")) for key in row_keys(table)
    }


async def test_rows_arriving_together_while_loading_are_drawn_in_one_redraw() -> None:
    app = OverviewOnly()
    async with app.run_test(size=(120, 30)) as pilot:
        pane = app.query_one(OverviewPane)
        pane.add_all([(index, f"p{index}") for index in range(5)])
        before = pane.updates
        for index in range(5):
            pane.show(index, summary(index), soon=True)
        # The first is drawn at once; the four after it wait for one redraw together.
        assert pane.updates == before + 1
        assert list(pane.summaries) == [0]
        await pilot.pause(COALESCE_SECONDS + 0.2)
        assert pane.updates == before + 2
        assert shown(app) == {f"p{index}": (str(index + 1), f"{index}/10") for index in range(5)}

        # While loading, rows keep their places (a re-sort renders every row again)...
        assert list(shown(app)) == ["p0", "p1", "p2", "p3", "p4"]
        pane.show(2, summary(2, blocked=1), soon=True)
        pane.show(3, summary(3, blocked=1), soon=True)
        await pilot.pause(COALESCE_SECONDS + 0.2)
        assert pane.summaries[2].blocked == pane.summaries[3].blocked == 1
        assert list(shown(app)) == ["p0", "p1", "p2", "p3", "p4"]
        # ... until flush, at the end of the load, puts the most urgent first.
        pane.flush()
        assert list(shown(app))[:2] == ["p2", "p3"]
        assert pane.updates == before + 4
        # After the load (soon=False) every change is drawn at once, however close together.
        pane.show(4, summary(4, blocked=2))
        pane.show(1, summary(1, blocked=2))
        assert pane.updates == before + 6
        await pilot.pause()
        assert sorted(list(shown(app))[:2]) == ["p1", "p4"]  # the most urgent first
        # The same summary again draws nothing.
        pane.show(1, summary(1, blocked=2), soon=True)
        assert pane.updates == before + 6
