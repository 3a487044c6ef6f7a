"""Confirmation dialogs of the mutating actions: one ModalScreen per action family.

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
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Checkbox, Input, Label, RadioButton, RadioSet, Static

from nexus_core.terminal import terminal_safe

from ..logic import operations
from ..logic.operations import Preview
from ..widgets.render import plain

Display = Callable[[str], str]

DIALOG_CSS = """
ActionDialog, ProgressScreen, RecoveryScreen { align: center middle; }
ActionDialog > #dialog, ProgressScreen > #dialog, RecoveryScreen > #dialog {
    width: 96; max-width: 96%; height: auto; max-height: 92%;
    border: thick $primary; background: $surface; padding: 0 1;
}
ActionDialog.destructive > #dialog { border: thick $error; }
#dialog-title { text-style: bold; padding: 0 0 1 0; }
#dialog-body { height: auto; max-height: 65vh; }
.section { text-style: bold; margin-top: 1; }
.statement { padding-left: 1; }
.caution { color: $warning; padding-left: 1; }
.unavailable { color: $error; padding-left: 1; }
.field-label { margin-top: 1; }
.field-error { color: $error; height: auto; }
#dialog-error { color: $error; height: auto; }
#dialog-buttons { height: auto; align-horizontal: right; padding-top: 1; }
#dialog-buttons Button { margin-left: 2; }
RadioSet { width: 100%; }
"""


def bullet_lines(lines: Iterable[str], display: Display) -> Text:
    """One bullet per line; every line is untrusted text (made terminal-safe by ``plain``)."""
    out = Text()
    for index, line in enumerate(lines):
        if index:
            out.append("\n")
        shown = display(line)
        out.append(plain(shown if shown.startswith("  ") else f"• {shown}"))
    return out


class ActionDialog(ModalScreen[dict[str, Any] | None]):
    """The shared frame: title, statement of changes, cautions, fields, Cancel / Confirm."""

    DEFAULT_CSS = DIALOG_CSS
    BINDINGS: ClassVar[list[Any]] = [Binding("escape", "cancel", "Cancel", show=False)]
    CONFIRM_LABELS: ClassVar[dict[str, str]] = {
        "start": "Start",
        "retry": "Retry",
        "record": "Record",
        "reconcile": "Reconcile",
        "cancel": "Request cancellation",
        "verify": "Verify",
        "accept": "Accept",
        "launch": "Launch",
        "collect": "Collect",
        "recover-lock": "Remove writer.lock",
        "create": "Create fresh run",
    }
    DESTRUCTIVE: ClassVar[frozenset[str]] = frozenset({"cancel", "reconcile", "accept", "recover-lock"})

    def __init__(self, preview: Preview, display: Display | None = None) -> None:
        super().__init__(classes="destructive" if preview.action in self.DESTRUCTIVE else None)
        self.preview = preview
        self.shown_text = display or (lambda text: text)
        self.answered = False
        self.prefilled: dict[str, tuple[str, str]] = {}  # field id -> (shown value, original)

    # -- layout
    def compose(self) -> ComposeResult:
        preview = self.preview
        with Vertical(id="dialog"):
            yield Static(plain(self.shown_text(preview.title)), id="dialog-title")
            with VerticalScroll(id="dialog-body"):
                yield Label("What will change", classes="section")
                yield Static(bullet_lines(preview.changes, self.shown_text), classes="statement")
                if preview.cautions:
                    yield Static(bullet_lines(preview.cautions, self.shown_text), classes="caution")
                if preview.unavailable:
                    yield Static(plain(f"The core will probably refuse: {preview.unavailable}"), classes="unavailable")
                yield from self.compose_fields()
            yield Static("", id="dialog-error")
            with Horizontal(id="dialog-buttons"):
                yield Button("Cancel", id="cancel")
                destructive = preview.action in self.DESTRUCTIVE
                yield Button(
                    self.CONFIRM_LABELS[preview.action], id="confirm", variant="error" if destructive else "primary"
                )

    def compose_fields(self) -> ComposeResult:
        yield from ()

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
        yield Label(label, classes="field-label")
        yield Input(value=value, placeholder=placeholder, id=key)

    def radio_field(self, key: str, label: str, choices: Iterable[str], default: str) -> ComposeResult:
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
        self.query_one("#dialog-error", Static).update(plain("\n".join(errors.values())))

    def action_cancel(self) -> None:
        self.dismiss(None)


class ConfirmDialog(ActionDialog):
    """verify, accept, launch, collect: nothing to type, only the statement to confirm."""

    def compose_fields(self) -> ComposeResult:
        yield from self.backend_fields()


class IdentityDialog(ActionDialog):
    """start and retry: the host identity that will own the new attempt (editable)."""

    def compose_fields(self) -> ComposeResult:
        yield from self.backend_fields()


class RecordDialog(ActionDialog):
    """record: the worker's outcome, summary and optional exit code."""

    def compose_fields(self) -> ComposeResult:
        yield from self.radio_field(
            "outcome", "Outcome reported by the worker", operations.RECORD_OUTCOMES, "completed"
        )
        yield from self.text_field("summary", "Summary (what the worker reported)", "e.g. tests written, build green")
        yield from self.text_field("exit_code", "Exit code (optional)", "e.g. 0")
        yield from self.backend_fields()


class ReconcileDialog(ActionDialog):
    """reconcile: outcome, observation, ownerStopped (ticked by the operator), retrySafe."""

    def compose_fields(self) -> ComposeResult:
        yield from self.radio_field(
            "outcome", "What actually happened (your observation)", operations.RECONCILE_OUTCOMES, "failed"
        )
        yield from self.text_field("summary", "Observation (what you checked)", "e.g. worker pid 123 gone, no output")
        yield Checkbox("I checked: the owner (worker/verifier) has stopped", value=False, id="owner_stopped")
        yield Checkbox("Retry-safe: redoing this work is harmless", value=False, id="retry_safe")
        yield from self.backend_fields()


class CancelDialog(ActionDialog):
    """cancel: a reason and the task id typed as confirmation."""

    def compose_fields(self) -> ComposeResult:
        yield from self.text_field("reason", "Reason", "why this attempt must stop")
        yield from self.text_field("typed", f"Type the task id ({self.preview.confirm_text}) to confirm", "")
        yield from self.backend_fields()


class RecoverLockDialog(ActionDialog):
    """recover-lock: a note, ownerStopped, and the fingerprint's first 8 characters typed."""

    def compose_fields(self) -> ComposeResult:
        yield from self.text_field("note", "Note (what you checked)", "e.g. pid 4242 is gone after a reboot")
        yield Checkbox("I checked: the lock owner process has stopped", value=False, id="owner_stopped")
        yield from self.text_field(
            "typed",
            f"Type the first {operations.FINGERPRINT_CHARS} characters of the fingerprint "
            f"({self.preview.confirm_text}) to confirm",
        )


DIALOGS: dict[str, type[ActionDialog]] = {
    "start": IdentityDialog,
    "retry": IdentityDialog,
    "record": RecordDialog,
    "reconcile": ReconcileDialog,
    "cancel": CancelDialog,
    "verify": ConfirmDialog,
    "accept": ConfirmDialog,
    "launch": ConfirmDialog,
    "collect": ConfirmDialog,
    "recover-lock": RecoverLockDialog,
    "create": ConfirmDialog,
}


def dialog_for(preview: Preview, display: Display | None = None) -> ActionDialog:
    return DIALOGS[preview.action](preview, display)
