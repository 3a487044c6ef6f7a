"""Guided recovery screens: one per situation of ``recovery`` (what is known, what the
operator must check, the safe next step), and a list of the project's situations.

A screen never acts by itself: its "next step" button dismisses with the action id, and the
app opens that action's confirmation dialog (which re-reads the state). The only write it
offers is saving a recovered plan file for a fresh run, outside the project, never under
``--read-only``."""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Input, Label, OptionList, Static
from textual.widgets.option_list import Option

from nexus_core.errors import explained
from nexus_core.terminal import terminal_safe

from ..logic import recovery
from ..logic.operations import OPERATIONS
from ..logic.recovery import Situation
from ..widgets.plain import plain
from .base import DialogBody, ErrorLine, NexusDialog
from .dialogs import Display, bullet_lines


class RecoveryScreen(NexusDialog[str | None]):
    """One situation. Dismisses with the next action id, or None (Close)."""

    DEFAULT_CSS = """
    RecoveryScreen #recovery-command { background: $panel; padding: 0 1; }
    RecoveryScreen #recovery-plan { color: $text-muted; }
    """
    BINDINGS: ClassVar[list[Any]] = [Binding("escape", "close", "Close", show=False)]

    def __init__(self, situation: Situation, *, read_only: bool = False, display: Display | None = None) -> None:
        super().__init__(classes="guide")
        self.situation = situation
        self.read_only = read_only
        self.shown_text = display or (lambda text: text)
        self.saved_plan: str | None = None  # the plan file this screen wrote, if any
        self.shown_default = ""

    def compose(self) -> ComposeResult:
        situation = self.situation
        with Vertical(id="dialog"):
            yield Static(plain(self.shown_text(situation.title)), id="dialog-title")
            with DialogBody(id="dialog-body"):
                yield Label("What is known", classes="section")
                yield Static(bullet_lines(situation.known, self.shown_text), classes="statement")
                yield Label("What you must check", classes="section")
                yield Static(bullet_lines(situation.checks, self.shown_text), classes="caution")
                yield Label("Safe next step", classes="section")
                step = situation.next_step
                if situation.then:
                    step += " Afterwards: " + ", ".join(situation.then) + "."
                yield Static(plain(self.shown_text(step)), classes="statement")
                advice = situation.fresh_run
                if situation.command or (advice is not None and advice.plan is not None):
                    yield Label("Commands (run them yourself after checking)", classes="section")
                    shown = self.commands() or "(none yet: save the plan file below first)"
                    yield Static(plain(self.shown_text(shown)), id="recovery-command")
                if advice is not None:
                    if advice.plan is None:
                        words = f"The plan cannot be recovered from the run file: {advice.plan_problem}."
                    else:
                        words = (
                            f"Save the recovered plan (new id {advice.new_run_id}) to a new file; the "
                            "nexus create command for it then appears above (and is copied)."
                        )
                    yield Static(plain(self.shown_text(words)), id="recovery-plan")
                    if advice.plan is not None:
                        yield Label("Plan file (created new, mode 0600; never overwritten)", classes="field-label")
                        yield self.plan_path_input(advice)
                    if advice.create_problem:
                        refusal = (
                            f"create would refuse this plan now: {advice.create_problem} Move the old run's "
                            "files that the plan names out of the way first (keep them as evidence)."
                        )
                        yield Static(plain(self.shown_text(refusal)), classes="unavailable")
                    yield Static(plain(self.shown_text(advice.warning)), classes="caution")
            yield ErrorLine("", id="dialog-error")
            with Horizontal(id="dialog-buttons"):
                yield Button("Close", id="close")
                if situation.command or (advice is not None and advice.plan is not None):
                    yield Button("Copy command", id="copy-command", disabled=not self.commands())
                if advice is not None and advice.plan is not None:
                    yield Button("Save plan file", id="save-plan", disabled=self.read_only)
                    yield Button("Create fresh run…", id="fresh-run", disabled=self.read_only)
                if situation.next_action:
                    yield Button(
                        OPERATIONS[situation.next_action].button_label,
                        id="next-action",
                        variant="warning",
                        disabled=self.read_only,
                    )

    def on_mount(self) -> None:
        self.query_one("#close", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        button = event.button.id
        if button == "close":
            self.dismiss(None)
        elif button == "next-action" and not self.read_only:
            self.dismiss(self.situation.next_action)
        elif button == "copy-command" and self.commands():
            self.app.copy_to_clipboard(self.commands())
            self.app.notify("Command copied to the clipboard.", markup=False)
        elif button == "save-plan" and not self.read_only:
            self.save_plan()
        elif button == "fresh-run" and not self.read_only:
            self.dismiss("create")

    def commands(self) -> str:
        """The commands to show and copy: the situation's own, then ``nexus create`` only for a
        plan file this screen has just written."""
        lines = [self.situation.command] if self.situation.command else []
        advice = self.situation.fresh_run
        if advice is not None and self.saved_plan is not None:
            lines.append(advice.create_command(self.saved_plan))
        return "\n".join(lines)

    def plan_path_input(self, advice: recovery.FreshRun) -> Input:
        # Shown through the display mapping (snapshots pin paths); left as shown, it saves to the
        # real default path.
        self.shown_default = self.shown_text(advice.default_plan_file)
        return Input(value=terminal_safe(self.shown_default, one_line=True), id="plan-path", disabled=self.read_only)

    def chosen_plan_path(self, advice: recovery.FreshRun) -> str:
        value = self.query_one("#plan-path", Input).value.strip()
        if not value or value == terminal_safe(self.shown_default, one_line=True):
            return advice.default_plan_file
        return value

    def save_plan(self) -> None:
        advice = self.situation.fresh_run
        if advice is None or advice.plan is None:
            return
        error_line = self.query_one("#dialog-error", Static)
        try:
            path = recovery.save_fresh_plan(advice, self.chosen_plan_path(advice))
        except recovery.PlanFileExists as clash:
            self.query_one("#plan-path", Input).value = terminal_safe(clash.suggestion, one_line=True)
            self.refuse_save(error_line, clash.message)
            return
        except Exception as error:  # shown, never raised: the screen stays usable
            self.refuse_save(error_line, explained(error))
            return
        self.saved_plan = path
        self.query_one("#save-plan", Button).disabled = True
        self.query_one("#plan-path", Input).disabled = True
        self.query_one("#copy-command", Button).disabled = False
        self.query_one("#recovery-command", Static).update(plain(self.shown_text(self.commands())))
        error_line.update("")
        self.app.copy_to_clipboard(self.commands())
        self.app.notify(
            terminal_safe(f"Plan saved to {self.shown_text(path)} (mode 0600); the commands are copied."),
            markup=False,
        )

    def refuse_save(self, error_line: Static, message: str) -> None:
        error_line.update(plain(message))
        self.app.notify(terminal_safe(message), title="Plan not saved", severity="error", markup=False)

    def action_close(self) -> None:
        self.dismiss(None)


def situation_label(situation: Situation) -> Text:
    where = plain(f"[{situation.run_id or 'project'}] ", "dim", one_line=True)
    return Text.assemble(where, plain(situation.title, one_line=True))


class RecoveryListScreen(NexusDialog[Situation | None]):
    """Every situation of the project; Enter opens its guided screen (dismisses with it)."""

    DEFAULT_CSS = """
    RecoveryListScreen OptionList { height: auto; max-height: 20; }
    """
    BINDINGS: ClassVar[list[Any]] = [Binding("escape", "close", "Close", show=False)]

    def __init__(self, situations: list[Situation], display: Display | None = None) -> None:
        super().__init__(classes="guide listing")
        self.situations = situations
        self.shown_text = display or (lambda text: text)

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(plain("Guided recovery"), id="dialog-title")
            if self.situations:
                yield OptionList(
                    *[Option(situation_label(s), id=str(index)) for index, s in enumerate(self.situations)],
                    id="situations",
                )
            else:
                yield Static(plain("Nothing needs recovery: no dead lock, no unreadable run, no interrupted work."))
            with Horizontal(id="dialog-buttons"):
                yield Button("Close", id="close")

    def on_mount(self) -> None:
        if self.situations:
            self.query_one(OptionList).focus()
        else:
            self.query_one("#close", Button).focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.dismiss(self.situations[int(event.option.id or 0)])

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(None)

    def action_close(self) -> None:
        self.dismiss(None)
