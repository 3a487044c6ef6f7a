"""The one action registry: bindings, footer, help screen, command palette and the
read-only gate all come from :data:`REGISTRY`.

Mutating actions are not written here: each :class:`~nexus_tui.logic.operations.Operation`
(``nexus_tui/logic/operations/``) becomes one entry, bound to the app's ``act('<name>')``. A view
action (no state change) is an :class:`ActionSpec` below plus ``action_<id>`` on the app.
``--read-only`` disables every mutating entry in :func:`gate`, the only place that decides;
``available`` says whether the current selection allows it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from textual.binding import Binding

from .logic.operations import OPERATIONS, Operation, Target
from .logic.schedules import SCHEDULE_ACTIONS
from .logic.selection import Selection

Available = Callable[[Selection], bool]
MAIN = "main"
SCHEDULES = "schedules"  # the schedules panel (w): screens/schedules.py
READ_ONLY_REFUSAL = "The dashboard is read-only (--read-only): no action changes state."


@dataclass(frozen=True)
class ActionSpec:
    id: str
    keys: str  # comma-separated Textual key names; "" for palette-only actions
    label: str  # short, for the footer and the palette
    help: str  # one sentence, for the help screen and the palette
    mutating: bool = False
    destructive: bool = False
    footer: bool = True
    palette: bool = True
    group: str = "View"
    available: Available | None = None
    priority: bool = False
    action: str = ""  # the Textual action string; "" = the id (a mutation: "act('<name>')")
    screen: str = MAIN  # where its key is bound: the main screen, or a panel (SCHEDULES)

    def __post_init__(self) -> None:
        if not self.action:
            object.__setattr__(self, "action", self.id)

    @property
    def first_key(self) -> str:
        return self.keys.split(",")[0] if self.keys else ""


def _has_run(selection: Selection) -> bool:
    return selection.run_id is not None


def _has_attempt(selection: Selection) -> bool:
    return selection.attempt_id is not None


def _has_task(selection: Selection) -> bool:
    return selection.task_id is not None


def _has_lock(selection: Selection) -> bool:
    return selection.lock_fingerprint is not None


REGISTRY: list[ActionSpec] = [
    ActionSpec("help", "question_mark,f1", "Help", "Show every key, the filter syntax and the state legend."),
    ActionSpec("filter", "slash", "Filter", "Filter tasks: state:stale, state:overdue, task:NAME, or free text."),
    ActionSpec("clear_filter", "", "Clear filter", "Show every task again.", footer=False),
    ActionSpec("sort", "s", "Sort", "Sort the focused table by the next column (click a header to pick one)."),
    ActionSpec("reverse_sort", "S", "Reverse", "Reverse the sort order of the focused table.", footer=False),
    ActionSpec("toggle_follow", "p", "Pause", "Pause or resume live updates (follow)."),
    ActionSpec("refresh", "r", "Rescan", "Rescan every run file and scope now."),
    ActionSpec("focus_next_pane", "tab", "Next pane", "Move focus between runs, tasks and detail.", footer=False),
    ActionSpec("next_project", "right_square_bracket", "Next project", "Show the next project tab.", footer=False),
    ActionSpec(
        "previous_project", "left_square_bracket", "Prev project", "Show the previous project tab.", footer=False
    ),
    ActionSpec(
        "copy_focused",
        "c",
        "Copy",
        "Copy the focused id: the run id in the runs list, the latest attempt id in the task table.",
        group="Copy",
    ),
    ActionSpec(
        "copy_run_id", "", "Copy run id", "Copy the selected run id.", footer=False, group="Copy", available=_has_run
    ),
    ActionSpec(
        "copy_task_id",
        "",
        "Copy task id",
        "Copy the selected task id.",
        footer=False,
        group="Copy",
        available=_has_task,
    ),
    ActionSpec(
        "copy_attempt_id",
        "",
        "Copy attempt id",
        "Copy the selected task's latest attempt id.",
        footer=False,
        group="Copy",
        available=_has_attempt,
    ),
    ActionSpec(
        "copy_lock_fingerprint",
        "",
        "Copy writer.lock fingerprint",
        "Copy the full sha256 of writer.lock (what recover-lock expects).",
        footer=False,
        group="Copy",
        available=_has_lock,
    ),
    ActionSpec(
        "copy_state_path",
        "",
        "Copy state file path",
        "Copy the absolute path of the selected run's state file.",
        footer=False,
        group="Copy",
        available=_has_run,
    ),
    ActionSpec("copy_project_path", "", "Copy project path", "Copy the project directory.", footer=False, group="Copy"),
    ActionSpec(
        "schedules",
        "w",
        "Schedules",
        "The project's schedules (nexus schedule): pause, resume, run now, delete.",
        footer=False,
    ),
    ActionSpec("change_theme", "t", "Theme", "Pick a colour theme.", footer=False),
    ActionSpec("quit", "q", "Quit", "Leave the dashboard (nothing is written).", priority=False),
]


def _valid_now(operation: Operation) -> Available:
    """Whether the core may accept ``operation`` for the selection (a cheap mirror of its
    preconditions, no hashing); the dialog re-reads the state and the core decides."""

    def check(selection: Selection) -> bool:
        target = Target(selection.project, selection.inspection, selection.task_id, selection.lock_fingerprint)
        return operation.unavailable(target) is None

    return check


# The mutating actions, one per Operation (nexus_tui/logic/operations): each opens a confirmation
# dialog that states exactly what will change; --read-only disables all of them in gate().
_ACT = "Act (changes state)"
REGISTRY += [
    ActionSpec(
        operation.name,
        operation.keys,
        operation.label,
        operation.help,
        mutating=True,
        destructive=operation.destructive,
        footer=operation.footer,
        group=_ACT,
        available=_valid_now(operation),
        action=f"act({operation.name!r})",
    )
    for operation in OPERATIONS.values()
    if operation.in_registry
]
REGISTRY += [
    ActionSpec(
        "recovery_guide",
        "g",
        "Recovery",
        "Guided recovery: every situation that needs an operator, what to check, the safe next step.",
        group=_ACT,
    ),
    ActionSpec(
        "toggle_action_log",
        "h",
        "Action log",
        "Show or hide the log of the actions made in this session (input and result).",
        footer=False,
        group=_ACT,
    ),
]

# The schedules panel's actions (logic/schedules.py), bound on that panel only; each asks for a
# confirmation and, like every mutating entry, is off in --read-only.
REGISTRY += [
    ActionSpec(
        f"schedule_{action.id}",
        action.key,
        action.label,
        action.help,
        mutating=True,
        destructive=action.destructive,
        group="Schedules panel (w)",
        action=f"schedule({action.id!r})",
        screen=SCHEDULES,
    )
    for action in SCHEDULE_ACTIONS.values()
]


def spec(action_id: str) -> ActionSpec | None:
    """The entry of an id, or of a Textual action string (``act('start')`` finds ``start``)."""
    for entry in REGISTRY:
        if action_id in (entry.id, entry.action):
            return entry
    return None


def register(entry: ActionSpec) -> None:
    """Add (or replace by id) an action; the bindings of apps created afterwards include it."""
    for index, existing in enumerate(REGISTRY):
        if existing.id == entry.id:
            REGISTRY[index] = entry
            return
    REGISTRY.append(entry)


def bindings(entries: Iterable[ActionSpec] | None = None, screen: str = MAIN) -> list[Binding]:
    """The key bindings of ``screen``'s entries."""
    result = []
    for entry in REGISTRY if entries is None else entries:
        if not entry.keys or entry.screen != screen:
            continue
        result.append(
            Binding(
                entry.keys,
                entry.action,
                entry.label,
                show=entry.footer,
                priority=entry.priority,
                id=entry.id,
                tooltip=entry.help,
            )
        )
    return result


def gate(entry: ActionSpec, read_only: bool, selection: Selection) -> bool | None:
    """The only decision on whether an action may run: True, or None (shown disabled)."""
    if entry.mutating and read_only:
        return None
    if entry.available is not None and not entry.available(selection):
        return None
    return True


def key_label(keys: str) -> str:
    names = {
        "question_mark": "?",
        "slash": "/",
        "right_square_bracket": "]",
        "left_square_bracket": "[",
        "escape": "Esc",
        "enter": "Enter",
        "tab": "Tab",
    }
    return ", ".join(
        names.get(k, k.upper() if k.startswith("f") and k[1:].isdigit() else k) for k in keys.split(",") if k
    )
