"""The one action registry: bindings, footer, help screen, command palette and the
read-only gate all come from :data:`REGISTRY`.

Mutating actions are not written here: each :class:`~nexus_tui.logic.operations.Operation`
(``nexus_tui/logic/operations/``) becomes one entry, bound to the app's ``act('<name>')``. A view
action (no state change) is an :class:`ActionSpec` below plus ``action_<id>`` on the app.
``--read-only`` disables every mutating entry in :func:`refusal`, the only place that decides;
``unavailable`` says why the current selection does not allow it. The reason is what a key press
on a disabled action and the palette's entry for it both show (:func:`refused_words`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from textual.app import App
from textual.binding import Binding
from textual.widget import Widget

from nexus_core.terminal import terminal_safe

from .logic.operations import OPERATIONS, Operation, Target
from .logic.schedules import SCHEDULE_ACTIONS
from .logic.selection import Selection

Unavailable = Callable[[Selection], str | None]  # why the selection does not allow it, or None
MAIN = "main"
SCHEDULES = "schedules"  # the schedules panel (w): screens/schedules.py
TIMELINE = "timeline"  # a run's timeline (t): screens/timeline.py
JOBS = "jobs"  # the jobs view (J): screens/jobs.py
# The runs list and the task table (widgets/keyed_table.py): bound on the focused table, so they
# share the main screen's keys (keymap_clash checks them together).
TABLE = "table"
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
    unavailable: Unavailable | None = None
    priority: bool = False
    action: str = ""  # the Textual action string; "" = the id (a mutation: "act('<name>')")
    screen: str = MAIN  # where its key is bound: the main screen, or a panel (SCHEDULES)
    # Reads the project's files itself (not the scanner's snapshot): not on a remote project.
    local_files: bool = False

    def __post_init__(self) -> None:
        if not self.action:
            object.__setattr__(self, "action", self.id)

    @property
    def first_key(self) -> str:
        return self.keys.split(",")[0] if self.keys else ""


def _no_run(selection: Selection) -> str | None:
    return None if selection.run_id is not None else "Select a run first."


def _no_attempt(selection: Selection) -> str | None:
    return None if selection.attempt_id is not None else "The selected task has no attempt yet."


def _no_task(selection: Selection) -> str | None:
    return None if selection.task_id is not None else "Select a task first."


def _no_lock(selection: Selection) -> str | None:
    return None if selection.lock_fingerprint is not None else "writer.lock is not held."


REGISTRY: list[ActionSpec] = [
    ActionSpec("help", "question_mark,f1", "Help", "Show every key, the filter syntax and the state legend."),
    ActionSpec(
        "filter",
        "slash",
        "Filter",
        "Filter tasks: state:stale, state:overdue, task:NAME, or free text; the other runs' matching tasks "
        "are listed under it (↓ picks one, Enter goes there).",
    ),
    ActionSpec("clear_filter", "", "Clear filter", "Show every task again.", footer=False),
    ActionSpec("sort", "s", "Sort", "Sort the focused table by the next column (click a header to pick one)."),
    ActionSpec("reverse_sort", "S", "Reverse", "Reverse the sort order of the focused table.", footer=False),
    ActionSpec("toggle_follow", "f", "Follow", "Pause or resume live updates (follow)."),
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
        "copy_run_id", "", "Copy run id", "Copy the selected run id.", footer=False, group="Copy", unavailable=_no_run
    ),
    ActionSpec(
        "copy_task_id",
        "",
        "Copy task id",
        "Copy the selected task id.",
        footer=False,
        group="Copy",
        unavailable=_no_task,
    ),
    ActionSpec(
        "copy_attempt_id",
        "",
        "Copy attempt id",
        "Copy the selected task's latest attempt id.",
        footer=False,
        group="Copy",
        unavailable=_no_attempt,
    ),
    ActionSpec(
        "copy_lock_fingerprint",
        "",
        "Copy writer.lock fingerprint",
        "Copy the full sha256 of writer.lock (what recover-lock expects).",
        footer=False,
        group="Copy",
        unavailable=_no_lock,
    ),
    ActionSpec(
        "copy_state_path",
        "",
        "Copy state file path",
        "Copy the absolute path of the selected run's state file.",
        footer=False,
        group="Copy",
        unavailable=_no_run,
    ),
    ActionSpec("copy_project_path", "", "Copy project path", "Copy the project directory.", footer=False, group="Copy"),
    ActionSpec(
        "schedules",
        "w",
        "Schedules",
        "The project's schedules (nexus schedule): pause, resume, run now, delete.",
        footer=False,
        local_files=True,
    ),
    ActionSpec(
        "timeline",
        "t",
        "Timeline",
        "The selected run's timeline: each attempt a bar, verification, cancellation, acceptance, deadline, stale.",
        footer=False,
        unavailable=_no_run,
    ),
    ActionSpec(
        "jobs",
        "J",
        "Jobs",
        "Verify and launch runs of this session, running and finished, with their live output.",
        footer=False,
    ),
    ActionSpec("change_theme", "T", "Theme", "Pick a colour theme.", footer=False),
    ActionSpec("quit", "q", "Quit", "Leave the dashboard (nothing is written).", priority=False),
    ActionSpec(
        "inbox",
        "i",
        "Inbox",
        "What needs a person, in every project, oldest first; Enter goes there and opens what to do.",
    ),
    ActionSpec(
        "oldest_need",
        "o",
        "Oldest need",
        "Go to the oldest need (its project, run and task) and open its guided action.",
        footer=False,
    ),
]


# Moving around: in the focused table (TABLE), and across the project by id or by need.
_MOVE = "Move"
REGISTRY += [
    ActionSpec(f"{name}", keys, label, words, footer=False, palette=False, group=_MOVE, action=action, screen=TABLE)
    for name, keys, label, words, action in (
        ("row_down", "j", "Row down", "Move down in the focused table (as ↓).", "cursor_down"),
        ("row_up", "k", "Row up", "Move up in the focused table (as ↑).", "cursor_up"),
        ("first_row", "g,home", "First row", "Go to the first row of the focused table.", "scroll_top"),
        ("last_row", "G,end", "Last row", "Go to the last row of the focused table.", "scroll_bottom"),
    )
]
REGISTRY += [
    ActionSpec(
        "jump",
        "colon",
        "Jump",
        "Jump to a run or a task by id: RUN, RUN/TASK, or a task id that one run only has (Tab completes).",
        group=_MOVE,
        footer=False,
    ),
    ActionSpec(
        "next_need",
        "n",
        "Next need",
        "Go to the next task that needs attention in this project (what the inbox lists), wrapping round.",
        group=_MOVE,
        footer=False,
    ),
    ActionSpec(
        "previous_need",
        "N",
        "Prev need",
        "Go to the previous task that needs attention in this project.",
        group=_MOVE,
        footer=False,
    ),
]


def _invalid_now(operation: Operation) -> Unavailable:
    """Why the core would refuse ``operation`` for the selection, or None: its state checks,
    asked (no hashing, no file read); the dialog re-reads the state and the core decides."""

    def check(selection: Selection) -> str | None:
        target = Target(selection.project, selection.inspection, selection.task_id, selection.lock_fingerprint)
        return operation.unavailable(target)

    return check


# The mutating actions, one per Operation (nexus_tui/logic/operations): each opens a confirmation
# dialog that states exactly what will change; --read-only disables all of them in refusal().
_ACT = "Act (changes state)"


def operation_entry(operation: Operation) -> ActionSpec:
    """The registry entry of a mutating action: everything in it comes from its Operation."""
    return ActionSpec(
        operation.name,
        operation.keys,
        operation.label,
        operation.help,
        mutating=True,
        destructive=operation.destructive,
        footer=operation.footer,
        group=_ACT,
        unavailable=_invalid_now(operation),
        action=f"act({operation.name!r})",
    )


REGISTRY += [operation_entry(operation) for operation in OPERATIONS.values() if operation.in_registry]
REGISTRY += [
    ActionSpec(
        "recovery_guide",
        "R",
        "Recovery",
        "Guided recovery: every situation that needs an operator, what to check, the safe next step.",
        group=_ACT,
        local_files=True,
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


# The timeline's own keys (screens/timeline.py), bound on that screen only; views, never a change.
_TIMELINE = "Timeline (t)"
REGISTRY += [
    ActionSpec(f"timeline_{name}", keys, label, words, footer=footer, group=_TIMELINE, screen=TIMELINE)
    for name, keys, label, words, footer in (
        ("lane_up", "up,k", "Task up", "Select the task above (its latest attempt).", False),
        ("lane_down", "down,j", "Task down", "Select the task below (its latest attempt).", False),
        ("previous_attempt", "left,h", "Prev attempt", "Select the task's previous attempt.", False),
        ("next_attempt", "right,l", "Next attempt", "Select the task's next attempt.", False),
        ("zoom_in", "plus,equals_sign", "Zoom in", "Show less time, in more detail.", True),
        ("zoom_out", "minus", "Zoom out", "Show more time.", True),
        ("earlier", "shift+left,less_than_sign", "Earlier", "Pan back in time by a quarter of the width.", True),
        ("later", "shift+right,greater_than_sign", "Later", "Pan forward in time by a quarter of the width.", True),
        ("now", "n,end", "Now", "Jump to now (the growing bars' end).", True),
        ("fit", "f,0", "Fit", "Zoom to show the whole run.", True),
        ("close", "escape,t,q", "Close", "Back to the dashboard.", True),
    )
]

# The jobs view's actions (screens/jobs.py), bound on that view only.
REGISTRY += [
    ActionSpec(
        "jobs_follow",
        "p",
        "Pause/follow",
        "Pause the output where it is (lines keep arriving) or follow it again.",
        group="Jobs view (J)",
        action="job('follow')",
        screen=JOBS,
    ),
    ActionSpec(
        "jobs_find",
        "f",
        "Find",
        "Show only the output lines containing a text, highlighted (Esc clears).",
        group="Jobs view (J)",
        action="job('find')",
        screen=JOBS,
    ),
    ActionSpec(
        "jobs_stop",
        "x",
        "Stop…",
        "Stop the selected job: asks first and says what a stop costs.",
        mutating=True,
        destructive=True,
        group="Jobs view (J)",
        action="job('stop')",
        screen=JOBS,
    ),
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
    """The key bindings of ``screen``'s entries.

    Each entry gets a second, hidden binding on the same keys: Textual skips a binding whose
    ``check_action`` is not True and tries the next, so the key of a refused action reaches
    ``explain`` (of the app, or of the panel), which says why (check_action itself stays a
    cached lookup). Both carry the entry's id, so a keymap (the settings' ``[keys]``, applied
    with Textual's ``set_keymap``) moves both."""
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
        if entry.screen != TABLE:  # a move in a table is never refused
            result.append(
                Binding(entry.keys, f"explain({entry.id!r})", show=False, priority=entry.priority, id=entry.id)
            )
    return result


# Keys the dashboard uses outside the registry (Textual's own, moving in tables and dialogs): a
# key override may not take them.
RESERVED_KEYS = {
    "ctrl+q": "quit",
    "ctrl+p": "the command palette",
    "ctrl+c": "copy",
    "tab": "next pane",
    "shift+tab": "previous pane",
    "escape": "close / clear",
    "enter": "open / confirm",
    "up": "move up",
    "down": "move down",
    "pageup": "page up",
    "pagedown": "page down",
}


def normalize_keys(keys: str) -> str:
    """Keys as the bindings name them ("?" is "question_mark"), comma-separated."""
    from textual.keys import _character_to_key  # Textual's own naming (the version is pinned)

    return ",".join(_character_to_key(key) if len(key) == 1 else key for key in (k.strip() for k in keys.split(",")))


def effective_keys(entry: ActionSpec, keymap: Mapping[str, str]) -> str:
    """The keys of ``entry`` once the settings' overrides are applied."""
    return normalize_keys(keymap[entry.id]) if entry.id in keymap else entry.keys


def keys_by_id(keymap: Mapping[str, str]) -> dict[str, str]:
    """Each entry's effective keys as the operator reads them ("v", "?"), by id."""
    return {entry.id: key_label(effective_keys(entry, keymap)) for entry in REGISTRY}


def keymap_clash(keymap: Mapping[str, str]) -> tuple[str, str, str] | None:
    """The first clash the overrides make, as (binding id, key, what already has it, in words),
    or None:
    two entries of one screen on a key, or an entry on a key the dashboard reserves."""
    for screen in dict.fromkeys(entry.screen for entry in REGISTRY):  # main, panels, timeline, jobs
        owner: dict[str, str] = {}
        # A table's keys are pressed on the main screen: one namespace with it.
        entries = [entry for entry in REGISTRY if entry.screen == screen or (screen == MAIN and entry.screen == TABLE)]
        # The overridden entries last: the clash is reported on the key the operator chose.
        for entry in sorted(entries, key=lambda e: e.id in keymap):
            for key in effective_keys(entry, keymap).split(","):
                if not key:
                    continue
                if key in RESERVED_KEYS and entry.id in keymap:
                    return entry.id, key, f"the dashboard's {RESERVED_KEYS[key]!r}"
                if key in owner and owner[key] != entry.id:
                    clashing = entry.id if entry.id in keymap else owner[key]
                    other = owner[key] if clashing == entry.id else entry.id
                    return clashing, key, repr(other)
                owner[key] = entry.id
    return None


def refusal(entry: ActionSpec, read_only: bool, selection: Selection) -> str | None:
    """The only decision on whether an action may run: None, or why not (it is then shown
    disabled, and its key and palette entry say this reason)."""
    if entry.mutating and read_only:
        return READ_ONLY_REFUSAL
    if selection.remote_host is not None:
        if entry.local_files:
            return remote_files_refusal(entry, selection.remote_host)
        if entry.mutating and selection.remote_refusal is not None:
            return selection.remote_refusal
    return entry.unavailable(selection) if entry.unavailable is not None else None


def remote_files_refusal(entry: ActionSpec, host: str) -> str:
    """Why an action that reads the project's files itself is not offered on a remote project."""
    return (
        f"{entry.label} reads the project's files; this project is on {host}: run nexus-tui there "
        "(or nexus-tui serve, through an ssh tunnel)."
    )


def gate(entry: ActionSpec, read_only: bool, selection: Selection) -> bool | None:
    """:func:`refusal` as Textual's ``check_action`` answers: True, or None (shown disabled)."""
    return None if refusal(entry, read_only, selection) else True


def refused_words(reason: str) -> str:
    """A refusal as the operator reads it, the same in the key's notification and the palette
    (terminal-safe: a reason can quote a task id)."""
    return terminal_safe(f"Unavailable: {reason}", one_line=True)


def notify_refusal(node: App[Any] | Widget, entry: ActionSpec, reason: str | None) -> None:
    """The key of a refused action was pressed: say why (nothing when it is not refused)."""
    if reason:
        node.notify(refused_words(reason), title=entry.label, severity="warning", timeout=4, markup=False)


def key_label(keys: str) -> str:
    names = {
        "question_mark": "?",
        "slash": "/",
        "right_square_bracket": "]",
        "left_square_bracket": "[",
        "escape": "Esc",
        "enter": "Enter",
        "tab": "Tab",
        "colon": ":",
        "home": "Home",
        "end": "End",
    }
    return ", ".join(
        names.get(k, k.upper() if k.startswith("f") and k[1:].isdigit() else k) for k in keys.split(",") if k
    )
