"""The one action registry: bindings, footer, help screen, command palette and the
read-only gate all come from :data:`REGISTRY`.

To add an action (issue 6 adds the mutating ones): append an :class:`ActionSpec` with
``mutating=True`` (and ``destructive=True`` when it discards or overrides something), and
implement ``action_<id>`` on the app. ``--read-only`` then disables it in :func:`gate`, the
only place that decides; ``available`` says whether the current selection allows it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from textual.binding import Binding

# What an availability predicate sees: the app's current selection (see app.Selection).
Available = Callable[[Any], bool]


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

    @property
    def first_key(self) -> str:
        return self.keys.split(",")[0] if self.keys else ""


def _has_run(selection: Any) -> bool:
    return getattr(selection, "run_id", None) is not None


def _has_attempt(selection: Any) -> bool:
    return getattr(selection, "attempt_id", None) is not None


def _has_task(selection: Any) -> bool:
    return getattr(selection, "task_id", None) is not None


def _has_lock(selection: Any) -> bool:
    return getattr(selection, "lock_fingerprint", None) is not None


REGISTRY: list[ActionSpec] = [
    ActionSpec("help", "question_mark,f1", "Help", "Show every key, the filter syntax and the state legend."),
    ActionSpec("filter", "slash", "Filter", "Filter tasks: state:stale, state:overdue, task:NAME, or free text."),
    ActionSpec("clear_filter", "", "Clear filter", "Show every task again.", footer=False),
    ActionSpec("sort", "s", "Sort", "Sort the focused table by the next column (click a header to pick one)."),
    ActionSpec("reverse_sort", "S", "Reverse", "Reverse the sort order of the focused table.", footer=False),
    ActionSpec("toggle_follow", "p", "Pause", "Pause or resume live updates (follow)."),
    ActionSpec("refresh", "r", "Rescan", "Rescan every run file and scope now."),
    ActionSpec("focus_next_pane", "", "Next pane", "Move focus between runs, tasks and detail.", footer=False),
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
    ActionSpec("change_theme", "t", "Theme", "Pick a colour theme.", footer=False),
    ActionSpec("quit", "q", "Quit", "Leave the dashboard (nothing is written).", priority=False),
]


def _valid_now(operation: str) -> Available:
    """Whether the core may accept ``operation`` for the selection (a cheap mirror of its
    preconditions, no hashing); the dialog re-reads the state and the core decides."""
    from .logic.operations import unavailable_reason

    def check(selection: Any) -> bool:
        return (
            unavailable_reason(
                operation,
                getattr(selection, "inspection", None),
                getattr(selection, "task_id", None),
                getattr(selection, "lock_fingerprint", None),
                getattr(selection, "project", None),
            )
            is None
        )

    return check


# The mutating actions (issue 6): each opens a confirmation dialog that states exactly what
# will change; --read-only disables all of them in gate().
_ACT = "Act (changes state)"
REGISTRY += [
    ActionSpec(
        "start",
        "n",
        "Start",
        "Start a host attempt for the selected task (the worker runs outside Nexus).",
        mutating=True,
        group=_ACT,
        available=_valid_now("start"),
    ),
    ActionSpec(
        "record",
        "o",
        "Record",
        "Record the host worker's report: outcome, summary, exit code.",
        mutating=True,
        group=_ACT,
        available=_valid_now("record"),
    ),
    ActionSpec(
        "verify",
        "v",
        "Verify",
        "Run the task's checks on the current artifacts, with live progress and Stop.",
        mutating=True,
        group=_ACT,
        available=_valid_now("verify"),
    ),
    ActionSpec(
        "accept",
        "A",
        "Accept",
        "Accept the task on its current passed evidence (final; re-hashed first).",
        mutating=True,
        destructive=True,
        group=_ACT,
        available=_valid_now("accept"),
    ),
    ActionSpec(
        "reconcile",
        "e",
        "Reconcile",
        "Record what you observed (completed, failed, cancelled) once the owner has stopped.",
        mutating=True,
        destructive=True,
        group=_ACT,
        available=_valid_now("reconcile"),
    ),
    ActionSpec(
        "retry",
        "N",
        "Retry",
        "Start a new host attempt after a failed/cancelled attempt or a failed verification.",
        mutating=True,
        footer=False,
        group=_ACT,
        available=_valid_now("retry"),
    ),
    ActionSpec(
        "launch",
        "l",
        "Launch",
        "Launch the task's execution contract and supervise it, with live progress and Stop.",
        mutating=True,
        footer=False,
        group=_ACT,
        available=_valid_now("launch"),
    ),
    ActionSpec(
        "collect",
        "C",
        "Collect",
        "Collect the owned process receipt of the latest attempt.",
        mutating=True,
        footer=False,
        group=_ACT,
        available=_valid_now("collect"),
    ),
    ActionSpec(
        "cancel_attempt",
        "x",
        "Cancel attempt",
        "Request cancellation of the latest attempt (type the task id to confirm).",
        mutating=True,
        destructive=True,
        footer=False,
        group=_ACT,
        available=_valid_now("cancel"),
    ),
    ActionSpec(
        "recover_lock",
        "L",
        "Recover lock",
        "Remove a writer.lock left by a dead process (type its fingerprint to confirm).",
        mutating=True,
        destructive=True,
        footer=False,
        group=_ACT,
        available=_valid_now("recover-lock"),
    ),
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


def spec(action_id: str) -> ActionSpec | None:
    for entry in REGISTRY:
        if entry.id == action_id:
            return entry
    return None


def register(entry: ActionSpec) -> None:
    """Add (or replace by id) an action; the bindings of apps created afterwards include it."""
    for index, existing in enumerate(REGISTRY):
        if existing.id == entry.id:
            REGISTRY[index] = entry
            return
    REGISTRY.append(entry)


def bindings(entries: Iterable[ActionSpec] | None = None) -> list[Binding]:
    result = []
    for entry in REGISTRY if entries is None else entries:
        if not entry.keys:
            continue
        result.append(
            Binding(
                entry.keys,
                entry.id,
                entry.label,
                show=entry.footer,
                priority=entry.priority,
                id=entry.id,
                tooltip=entry.help,
            )
        )
    return result


def gate(entry: ActionSpec, read_only: bool, selection: Any) -> bool | None:
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
