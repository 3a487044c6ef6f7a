"""The confirmation dialog of every mutating action, built from its Operation's fields.

Each dialog states exactly what will change (from ``operations.preview``), starts with the
focus on Cancel, collects what the core needs and dismisses with the operator's values (or
None on Cancel/Escape). It never calls the core: the app does, through ``operations.execute``,
which re-checks the target. Untrusted text is always plain ``rich.text.Text``, never markup.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Checkbox, Input, Label, RadioButton, RadioSet, Static

from nexus_core.terminal import terminal_safe

from ..logic import operations
from ..logic.operations import Choice, Line, Preview, Tick
from ..widgets.plain import plain
from .base import DialogBody, ErrorLine, NexusDialog

Display = Callable[[str], str]


def bullet_lines(lines: Iterable[str], display: Display) -> Text:
    """One bullet per line; every line is untrusted text (made terminal-safe by ``plain``)."""
    out = Text()
    for index, line in enumerate(lines):
        if index:
            out.append("\n")
        shown = display(line)
        out.append(plain(shown if shown.startswith("  ") else f"• {shown}"))
    return out


class ActionDialog(NexusDialog[dict[str, Any] | None]):
    """The one dialog of every action: title, statement of changes, cautions, the fields its
    :class:`~nexus_tui.logic.operations.Operation` lists, Cancel / Confirm."""

    BINDINGS: ClassVar[list[Any]] = [Binding("escape", "cancel", "Cancel", show=False)]

    def __init__(self, preview: Preview, display: Display | None = None) -> None:
        self.operation = operations.OPERATIONS[preview.action]
        super().__init__(classes="destructive" if self.operation.destructive else None)
        self.preview = preview
        self.shown_text = display or (lambda text: text)
        self.answered = False
        self.errors_shown = False  # once shown, errors follow every edit (and clear when fixed)
        self.prefilled: dict[str, tuple[str, str]] = {}  # field id -> (shown value, original)

    # -- layout
    def compose(self) -> ComposeResult:
        preview = self.preview
        with Vertical(id="dialog"):
            yield Static(plain(self.shown_text(preview.title)), id="dialog-title")
            with DialogBody(id="dialog-body"):
                yield Label("What will change", classes="section")
                yield Static(bullet_lines(preview.changes, self.shown_text), classes="statement")
                if preview.cautions:
                    yield Static(bullet_lines(preview.cautions, self.shown_text), classes="caution")
                if preview.unavailable:
                    yield Static(plain(f"The core will probably refuse: {preview.unavailable}"), classes="unavailable")
                yield from self.compose_fields()
            yield ErrorLine("", id="dialog-error")
            with Horizontal(id="dialog-buttons"):
                yield Button("Cancel", id="cancel")
                yield Button(
                    self.operation.confirm_label,
                    id="confirm",
                    variant="error" if self.operation.destructive else "primary",
                )

    def compose_fields(self) -> ComposeResult:
        for field in self.operation.fields:
            if isinstance(field, Choice):
                yield from self.radio_field(field.key, field.label, field.choices, field.default)
            elif isinstance(field, Line):
                yield from self.text_field(
                    field.key, field.label.format(confirm=self.preview.confirm_text), field.placeholder
                )
            elif isinstance(field, Tick):
                yield Checkbox(field.label, value=False, id=field.key)
            else:
                yield from self.backend_fields()

    def on_mount(self) -> None:
        self.query_one("#cancel", Button).focus()

    # -- fields shared by several families
    def backend_fields(self) -> ComposeResult:
        backend = self.preview.backend
        if backend is None:
            return
        if self.preview.backend_editable:
            yield Label("Backend identity (host handle and session)", classes="field-label")
            yield self.prefilled_input("backend_id", str(backend.get("id") or ""), "handle")
            yield self.prefilled_input("backend_session", str(backend.get("sessionId") or ""), "session")
        else:
            yield Label("Backend identity (from the attempt)", classes="field-label")
            words = f"{backend.get('kind')} {backend.get('id')} / {backend.get('sessionId')}"
            if backend.get("kind") == "process":
                words += f" on {backend.get('hostname')}, supervisor pid {backend.get('ownerPid')}"
            yield Static(plain(self.shown_text(words)), classes="statement")

    def prefilled_input(self, key: str, original: str, placeholder: str) -> Input:
        """An Input showing ``original`` made terminal-safe (an Input renders its value raw);
        left as shown, it still submits the original (a worker's identity must match exactly)."""
        shown = terminal_safe(original, one_line=True)
        self.prefilled[key] = (shown, original)
        return Input(value=shown, placeholder=placeholder, id=key)

    def text_field(self, key: str, label: str, placeholder: str = "", value: str = "") -> ComposeResult:
        yield Label(plain(label), classes="field-label")  # may quote a task id or a fingerprint
        yield Input(value=value, placeholder=placeholder, id=key)

    def radio_field(self, key: str, label: str, choices: Iterable[str], default: str | None) -> ComposeResult:
        yield Label(label, classes="field-label")
        with RadioSet(id=key):
            for choice in choices:
                yield RadioButton(choice, value=choice == default, id=f"{key}-{choice}")

    # -- values
    def values(self) -> dict[str, Any]:
        found: dict[str, Any] = {}
        for field in self.query(Input):
            if field.id:
                shown, original = self.prefilled.get(field.id, (None, None))
                found[field.id] = original if field.value == shown else field.value
        for box in self.query(Checkbox):
            if box.id:
                found[box.id] = box.value
        for radio in self.query(RadioSet):
            pressed = radio.pressed_button
            if radio.id and pressed is not None and pressed.id:
                found[radio.id] = pressed.id.removeprefix(f"{radio.id}-")
        return found

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "cancel":
            self.dismiss(None)
        elif event.button.id == "confirm":
            self.confirm()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        # Enter in a field never confirms by itself: it only validates what is typed so far.
        event.stop()
        self.show_errors(operations.validate(self.preview, self.values()))

    def on_input_changed(self, event: Input.Changed) -> None:
        self.recheck_errors()

    def on_checkbox_changed(self, event: Checkbox.Changed) -> None:
        self.recheck_errors()

    def on_radio_set_changed(self, event: RadioSet.Changed) -> None:
        self.recheck_errors()

    def recheck_errors(self) -> None:
        """After a refused confirm, each edit re-validates: an error leaves as its field is fixed."""
        if self.errors_shown:
            self.show_errors(operations.validate(self.preview, self.values()))

    def confirm(self) -> None:
        if self.answered:
            return  # a second press while the dialog closes must not act twice
        values = self.values()
        errors = operations.validate(self.preview, values)
        if errors:
            self.show_errors(errors)
            return
        self.answered = True
        self.dismiss(values)

    def show_errors(self, errors: dict[str, str]) -> None:
        self.errors_shown = bool(errors)
        self.query_one("#dialog-error", Static).update(plain("\n".join(errors.values())))

    def action_cancel(self) -> None:
        self.dismiss(None)


def dialog_for(preview: Preview, display: Display | None = None) -> ActionDialog:
    return ActionDialog(preview, display)
