"""KeyedTable's in-place cell updates: a cell whose column keeps its width re-renders its row
only (DataTable's own update re-renders the whole table, once a second for ticking ages). What
reaches the screen must be exactly what a full re-render draws, through cursor moves, scrolling,
sorting and rows coming and going."""

from __future__ import annotations

import random
from typing import Any

from rich.text import Text
from textual.app import App, ComposeResult

from nexus_tui.widgets.keyed_table import KeyedTable

COLUMNS = [("id", "Id"), ("state", "State"), ("age", "Age")]
STATES = ("running", "blocked", "passed ", "stale  ")


def row(key: str, state: str, age: int) -> dict[str, Text]:
    return {
        "id": Text(key),
        "state": Text(state, style="bold" if state == "stale  " else ""),
        "age": Text(f"{age:>4}s"),
    }


class TableApp(App[None]):
    def compose(self) -> ComposeResult:
        yield KeyedTable(COLUMNS, id="table")


def drawn(app: App[Any]) -> list[list[tuple[str, str]]]:
    """The screen as the terminal would receive it: every line's text with its styles."""
    return [
        [(segment.text, str(segment.style)) for segment in strip] for strip in app.screen._compositor.render_strips()
    ]


def redrawn_in_full(app: App[Any], table: KeyedTable) -> list[list[tuple[str, str]]]:
    """The screen after every cache of the table is dropped and the whole table drawn again."""
    table.notify_style_update()
    table.refresh()
    return drawn(app)


async def test_in_place_updates_draw_what_a_full_redraw_draws() -> None:
    rng = random.Random(27)
    app = TableApp()
    async with app.run_test(size=(40, 12)) as pilot:
        table = app.query_one(KeyedTable)
        values = {f"t{n:02d}": (rng.choice(STATES), rng.randrange(100)) for n in range(30)}
        for key, (state, age) in values.items():
            table.put(key, row(key, state, age))
        await pilot.pause()
        for step in range(60):
            for key in rng.sample(sorted(values), 5):
                state, age = values[key]
                values[key] = (rng.choice(STATES), (age + 1) % 1000)
                table.put(key, row(key, *values[key]))
            if step % 7 == 0:
                await pilot.press(rng.choice(["down", "up", "pagedown", "pageup", "end", "home"]))
            if step % 11 == 0:
                table.sort_rows(lambda key: values[key][1], reverse=step % 2 == 0)
            if step % 13 == 0:
                gone = rng.choice(sorted(values))
                table.drop_missing({key for key in values if key != gone})
                del values[gone]
            await pilot.pause()
            shown = drawn(app)
            assert shown == redrawn_in_full(app, table), f"step {step}"
            await pilot.pause()
        for key, (state, age) in values.items():  # what the table holds is what was put
            assert [str(cell) for cell in table.get_row(key)] == [key, state, f"{age:>4}s"]


async def test_a_wider_value_re_measures_its_column() -> None:
    app = TableApp()
    async with app.run_test(size=(60, 8)) as pilot:
        table = app.query_one(KeyedTable)
        table.put("a", row("a", "running", 5))
        await pilot.pause()
        table.put("a", {"id": Text("a"), "state": Text("running"), "age": Text("1h02m03s")})
        await pilot.pause()
        assert any("1h02m03s" in "".join(text for text, _ in line) for line in drawn(app))


async def test_a_click_after_a_sort_picks_the_row_drawn_there() -> None:
    """A sort re-draws only the rows that moved (each row's cells carry its index, for the
    mouse; a cell drawn before, on the same stripe, is reused with its index renamed): a click on
    any row after sorts picks the row drawn there, moved by an odd or an even distance or not."""
    app = TableApp()
    async with app.run_test(size=(40, 14)) as pilot:
        table = app.query_one(KeyedTable)
        ranks = {f"t{n}": n for n in range(8)}
        for key in ranks:
            table.put(key, row(key, "running", ranks[key]))
        await pilot.pause()
        for swap in (("t1", "t6"), ("t0", "t7"), ("t3", "t4"), ("t2", "t4"), ("t5", "t1"), ("t2", "t4")):
            first, second = swap
            ranks[first], ranks[second] = ranks[second], ranks[first]
            table.sort_rows(lambda key: ranks[key])
            await pilot.pause()
            order = sorted(ranks, key=ranks.__getitem__)
            for index, key in enumerate(order):
                line = drawn(app)[1 + index]  # under the header
                assert "".join(text for text, _ in line).strip().startswith(key)
                await pilot.click(KeyedTable, offset=(1, 1 + index))
                assert table.cursor_key() == key
