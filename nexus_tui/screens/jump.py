"""The jump prompt (``:``): a run or a task by id, with completion. The list under the input shows
the candidates for what is typed (runs, RUN/TASK, and task ids one run only has); Tab completes
to the highlighted one, ↓/↑ pick in the list, Enter goes to what is typed (or to the one picked).
Dismisses with the chosen candidate."""

from __future__ import annotations

from typing import Any, ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from ..logic.navigation import Candidate, completions, resolve_jump
from ..widgets.plain import plain
from ..widgets.styles import styles_of
from .base import NexusDialog

SHOWN = 50  # candidates listed at most (typing narrows them)


class JumpScreen(NexusDialog[Candidate | None]):
    DEFAULT_CSS = """
    JumpScreen #dialog-body { height: auto; max-height: 12; }
    JumpScreen #jump-problem { color: $warning; height: auto; }
    """
    BINDINGS: ClassVar[list[Any]] = [
        Binding("escape", "close", "Close", show=False),
        Binding("tab", "complete", "Complete", show=False, priority=True),
        Binding("down", "move(1)", show=False, priority=True),
        Binding("up", "move(-1)", show=False, priority=True),
    ]

    def __init__(self, candidates: list[Candidate], project: str) -> None:
        super().__init__(classes="listing")
        self.candidates = candidates
        self.project = project
        self.shown: list[Candidate] = []
        self.picked = False  # ↓/↑ moved in the list since the last keystroke: Enter takes that one

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(plain(f"Jump to a run or a task of {self.project}"), id="dialog-title")
            yield Input(placeholder="RUN, RUN/TASK or TASK  (Tab completes, Enter goes, Esc closes)", id="jump-input")
            yield Static("", id="jump-problem")
            yield OptionList(id="dialog-body")

    def on_mount(self) -> None:
        self.query_one("#jump-problem", Static).display = False
        self._list("")
        self.query_one(Input).focus()

    @property
    def input(self) -> Input:
        return self.query_one("#jump-input", Input)

    @property
    def options(self) -> OptionList:
        return self.query_one(OptionList)

    def _list(self, typed: str) -> None:
        self.shown = completions(self.candidates, typed, SHOWN)
        options = self.options
        options.clear_options()
        options.add_options([Option(_prompt(candidate), id=str(i)) for i, candidate in enumerate(self.shown)])
        if self.shown:
            options.highlighted = 0

    @on(Input.Changed, "#jump-input")
    def _changed(self, event: Input.Changed) -> None:
        self._problem(None)
        self.picked = False
        self._list(event.value)

    @on(Input.Submitted, "#jump-input")
    def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        highlighted = self.options.highlighted
        exact = resolve_jump(self.candidates, event.value)
        if isinstance(exact, Candidate):
            self.dismiss(exact)
        elif self.picked and highlighted is not None and self.shown:
            self.dismiss(self.shown[highlighted])
        else:
            self._problem(exact)

    def _problem(self, words: str | None) -> None:
        line = self.query_one("#jump-problem", Static)
        line.update(plain(words or "", styles_of(self.app).themed("$warning")))
        line.display = words is not None

    @on(OptionList.OptionSelected)
    def _selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.dismiss(self.shown[int(event.option.id or 0)])

    def action_complete(self) -> None:
        """Tab: the input takes the highlighted candidate's text."""
        highlighted = self.options.highlighted
        if highlighted is not None and self.shown:
            self.input.value = self.shown[highlighted].text
            self.input.cursor_position = len(self.input.value)

    def action_move(self, step: int) -> None:
        options = self.options
        if not self.shown:
            return
        current = options.highlighted if options.highlighted is not None else -step
        options.highlighted = max(0, min(len(self.shown) - 1, current + step))
        self.picked = True

    def action_close(self) -> None:
        self.dismiss(None)


def _prompt(candidate: Candidate) -> Any:
    text = plain(candidate.text, one_line=True)
    if candidate.task_id is None:
        text.append("  run", style="dim")
    elif candidate.text == candidate.task_id:
        text.append(f"  in {candidate.run_id}", style="dim")
    return text
