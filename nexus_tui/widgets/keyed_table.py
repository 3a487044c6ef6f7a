"""A DataTable updated by row key, never cleared: rows that went are removed, new ones added,
changed cells updated (re-measuring a column only when a cell got wider), the cursor kept on its
key, and sorting done by the model's values per row key, never by rendered text. The runs list
and the task table are two of them."""

from __future__ import annotations

from collections.abc import Callable, Container, Sequence
from operator import itemgetter
from typing import Any, ClassVar, Self

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual._two_way_dict import TwoWayDict
from textual._types import SegmentLines
from textual.cache import LRUCache
from textual.geometry import Region
from textual.message import Message
from textual.strip import Strip
from textual.widgets import DataTable
from textual.widgets.data_table import CellType, ColumnKey, RowKey

from .. import actions


class InPlaceCells(DataTable[Any]):
    """A DataTable whose ``update_cell`` re-renders that cell and its row's lines only (the
    overview's table is one too)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Cells changed in place since the last render (see update_cell), and rows a sort moved.
        self._changed_cells: set[tuple[RowKey, ColumnKey]] = set()
        self._moved_rows: set[RowKey] = set()

    def update_cell(
        self, row_key: RowKey | str, column_key: ColumnKey | str, value: CellType, *, update_width: bool = False
    ) -> None:
        """A cell whose column keeps its width (an age ticking, a state changing) costs its row
        only. DataTable's own update renders the whole table again: every cache of rendered
        cells, rows and lines is keyed by one update count, so one changed age re-rendered every
        visible line once a second, most of an idle dashboard's CPU. Here the value is stored,
        the cell's rendering and its row's lines leave the caches just before the next render
        (the row's other cells are reused), and only the row's region is refreshed. A wider
        value (the column re-measured) takes DataTable's way."""
        if update_width or not self.is_mounted:
            super().update_cell(row_key, column_key, value, update_width=update_width)
            return
        row = row_key if isinstance(row_key, RowKey) else RowKey(row_key)
        column = column_key if isinstance(column_key, ColumnKey) else ColumnKey(column_key)
        if row not in self._row_locations or column not in self._column_locations:
            super().update_cell(row, column, value)  # DataTable's refusal: CellDoesNotExist
            return
        self._data[row][column] = value
        self._changed_cells.add((row, column))
        self.refresh_row(self.get_row_index(row))

    def sort(self, *columns: ColumnKey | str, key: Callable[[Any], Any] | None = None, reverse: bool = False) -> Self:
        """DataTable's sort, re-drawing only the rows that moved, from their cells' renderings.
        DataTable's own renders every visible row again (its caches are keyed by one update
        count): for the overview, one project changing rank cost a 40 ms frame after the change
        was applied. Here the moved rows' lines are refreshed, and their cells rendered again only
        where a zebra stripe changed (``_render_cell`` renames the row a reused cell carries)."""
        if not self.is_mounted:
            return super().sort(*columns, key=key, reverse=reverse)

        def sort_value(item: tuple[RowKey, dict[ColumnKey, Any]]) -> Any:
            row = item[1]
            value = itemgetter(*columns)(row) if columns else tuple(row.values())
            return key(value) if key is not None else value

        order = [row_key for row_key, _ in sorted(self._data.items(), key=sort_value, reverse=reverse)]
        locations = self._row_locations
        moved = [(index, row_key) for index, row_key in enumerate(order) if locations.get(row_key) != index]
        if not moved:
            return self
        self._row_locations = TwoWayDict({row_key: index for index, row_key in enumerate(order)})
        # What is keyed by the update count and derived from the order (rows by index, lines by y).
        self._ordered_row_cache.clear()
        self._offset_cache.clear()
        self._row_renderable_cache.clear()
        for index, row_key in moved:
            self._moved_rows.add(row_key)
            self.refresh_row(index)
        return self

    def refresh_row(self, row_index: int) -> Self:
        """DataTable's, with the row's place found from its index while every row is one line
        tall: DataTable's own sums the heights of every row above it, and the overview's
        thousand rows updated one by one while a fleet loads made that 2.5 million additions."""
        if not self.is_valid_row_index(row_index) or len(self._y_offsets) != self.row_count:
            return super().refresh_row(row_index)
        top = self.header_height if self.show_header else 0
        self._refresh_region(Region(0, top + row_index, max(self.size.width, self.virtual_size.width), 1))
        return self

    def _render_cell(
        self,
        row_index: int,
        column_index: int,
        base_style: Style,
        width: int,
        cursor: bool = False,
        hover: bool = False,
    ) -> SegmentLines:
        """DataTable's cell, whose rendering is cached by row key, not index: a cell rendered
        before its row moved (the same stripe, cursor and hover) is reused with the row index its
        segments carry for the mouse renamed, instead of being rendered again (Rich's layout of
        the cell was most of a moved row's cost)."""
        lines = super()._render_cell(row_index, column_index, base_style, width, cursor, hover)
        if row_index < 0 or not lines or not lines[0]:
            return lines  # the header, or nothing drawn
        style = lines[0][0].style
        if style is None or style.meta.get("row") == row_index:
            return lines
        place = Style.from_meta({"row": row_index, "column": column_index})
        return [
            [Segment(text, (drawn + place) if drawn else place, control) for text, drawn, control in line]
            for line in lines
        ]

    def render_lines(self, crop: Region) -> list[Strip]:
        if self._changed_cells or self._moved_rows:
            self._forget_changed_cells()
        return super().render_lines(crop)

    def _forget_changed_cells(self) -> None:
        """Drop what DataTable rendered of the changed cells, and the lines of their rows and of
        the rows that moved (one pass over each cache for everything since the last render); the
        rest is reused."""
        cells, self._changed_cells = self._changed_cells, set()
        rows = {row for row, _ in cells} | self._moved_rows
        self._moved_rows = set()
        indexes = {self._row_locations.get(row) for row in rows}
        if cells:
            _forget(self._cell_render_cache, lambda key: key[:2] in cells)  # (row key, column key, styles..., count)
        _forget(self._row_render_cache, lambda key: key[0] in rows)  # (row key, line, styles..., update count)
        _forget(self._row_renderable_cache, lambda key: key[1] in indexes)  # (update count, row index)
        # Lines are keyed by their y in the table (the header's lines first): the changed rows'
        # only. Rebuilding every visible line from the row caches was half an idle second's
        # work, once a second, for the few ages that ticked.
        top = self.header_height if self.show_header else 0
        lines = {top + y for y, (row, _) in enumerate(self._y_offsets) if row in rows}
        _forget(self._line_cache, lambda key: key[0] in lines)  # (y, x1, x2, width, ...)


class KeyedTable(InPlaceCells):
    # j/k, g/G, Home/End (the registry's TABLE entries): Home and End go to the first and last
    # row, not sideways (they replace DataTable's own, the subclass's binding wins per key).
    BINDINGS: ClassVar[list[Any]] = actions.bindings(screen=actions.TABLE)

    def __init__(
        self, columns: Sequence[tuple[str, str]], *, id: str | None = None, classes: str | None = None
    ) -> None:
        super().__init__(id=id, classes=classes, cursor_type="row", zebra_stripes=True)
        self.column_keys = tuple(key for key, _ in columns)
        self._columns_spec = tuple(columns)
        # The cell objects the table holds, per row key (what sort() hands back).
        self.cells: dict[str, dict[str, Text]] = {}

    class Scrolled(Message):
        """Other rows came into view (scrolled or resized): the owner redraws their ages, which
        the 1 s tick leaves alone while they are out of view."""

        def __init__(self, table: KeyedTable) -> None:
            super().__init__()
            self.table = table

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        if round(old_value) != round(new_value):
            self.post_message(self.Scrolled(self))

    def on_resize(self, event: events.Resize) -> None:
        self.post_message(self.Scrolled(self))

    def shows_row(self, key: str) -> bool:
        """Whether row ``key`` is in view (True before the table has a size)."""
        return self.in_view()(key)

    def in_view(self) -> Callable[[str], bool]:
        """``shows_row`` with the view measured once (the tick asks it of every due row: a
        region computed per row was a tenth of an idle dashboard's UI thread)."""
        height = self.scrollable_content_region.height
        if height <= 0:
            return lambda key: True
        top = round(self.scroll_y)
        locations = self._row_locations

        def shows(key: str) -> bool:
            index = locations.get(RowKey(key))
            return index is not None and top - 1 <= index <= top + height

        return shows

    def on_mount(self) -> None:
        for key, label in self._columns_spec:
            self.add_column(label, key=key)

    def use_columns(self, columns: Sequence[tuple[str, str]]) -> bool:
        """Show these columns instead (the pane's compact form): the one time the table is
        cleared; the caller puts every row again. False if they are the columns shown."""
        columns = tuple(columns)
        if columns == self._columns_spec:
            return False
        self._columns_spec = columns
        self.column_keys = tuple(key for key, _ in columns)
        if self.is_mounted:
            self.clear(columns=True)
            self.cells.clear()
            for key, label in columns:
                self.add_column(label, key=key)
        return True

    def drop_missing(self, wanted: Container[str]) -> list[str]:
        """Remove the rows whose key is not wanted; returns their keys."""
        gone = [key for key in self.cells if key not in wanted]
        for key in gone:
            self.remove_row(key)
            del self.cells[key]
        return gone

    def put(self, key: str, cells: dict[str, Text]) -> bool:
        """Show ``cells`` as row ``key``: add it (True) or update only its changed cells."""
        old = self.cells.get(key)
        if old is None:
            self.add_row(*(cells[column] for column in self.column_keys), key=key)
            self.cells[key] = {column: cells[column] for column in self.column_keys}
            return True
        for column, cell in cells.items():
            if column not in old:
                continue  # a column this form does not show (the compact form has fewer)
            if _changed(old[column], cell):
                # Re-measure the column only when the new value is wider (measuring re-reads
                # every row of the column: far too slow on each change of a 200-row table).
                width = self.columns[column].content_width  # type: ignore[index]
                self.update_cell(key, column, cell, update_width=cell.cell_len > width)
                old[column] = cell
        return False

    def sort_rows(self, value_of: Callable[[str], Any], reverse: bool = False) -> None:
        """Order the rows by ``value_of(row key)``."""
        first = self.column_keys[0]
        key_of = {id(row[first]): key for key, row in self.cells.items()}
        self.sort(first, key=lambda cell: value_of(key_of[id(cell)]), reverse=reverse)

    # -- the cursor, by key
    def cursor_key(self) -> str | None:
        return self.row_key_at(self.cursor_row) if self.row_count else None

    def row_key_at(self, index: int) -> str | None:
        if index < 0 or index >= self.row_count:
            return None
        row_key, _ = self.coordinate_to_cell_key((index, 0))  # type: ignore[arg-type]
        return row_key.value

    def restore_cursor(self, key: str | None) -> None:
        if key is None or self.row_count == 0:
            return
        try:
            index = self.get_row_index(key)
        except Exception:
            return
        if self.cursor_row != index:
            self.move_cursor(row=index, animate=False, scroll=True)


def _forget(cache: LRUCache[Any, Any], gone: Callable[[Any], bool]) -> None:
    """Discard the entries of ``cache`` whose key is ``gone``."""
    for key in [key for key in cache.keys() if gone(key)]:  # noqa: SIM118 (an LRUCache: no iteration of its own)
        cache.discard(key)


def _changed(old: Text, new: Text) -> bool:
    # Rich's Text equality ignores the base style: a theme change alters only that.
    return old != new or old.style != new.style
