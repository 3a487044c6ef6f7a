"""The mutating actions of the dashboard, without widgets: one :class:`~.base.Operation` per
action, each in the module of its family (``host``, ``process``, ``evidence``, ``lock``,
``create``), listed once in :data:`OPERATIONS`. Adding an action = its entry in the core's table
(``nexus_core.actions.COMMANDS``) and one module (or class) plus one line here; the registry,
bindings, footer, help, palette, read-only gate, dialogs, recovery buttons and action log follow.

The functions below are what the rest of the dashboard calls: ``preview`` (what the dialog
states, read from the core's current state), ``validate``, ``execute`` (re-check the target,
build the core input, call ``nexus_core.actions``, log the call).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from nexus_core.engine import Progress
from nexus_core.errors import NexusError, explained
from nexus_core.paths import root_of
from nexus_core.shapes import JsonObject, LockSnapshot, Run
from nexus_core.state.locks import RECOVERY_LOCK, lock_snapshot
from nexus_core.state.store import load_run
from nexus_core.timeutil import now_iso

from .base import (
    FINGERPRINT_CHARS,
    ActionLog,
    BackendIdentity,
    Choice,
    Field,
    InvalidInput,
    Line,
    LogEntry,
    Operation,
    OperationRefused,
    Preview,
    Seen,
    Target,
    TargetChanged,
    Tick,
    differences,
    operator_identity,
    seen_of,
    summarize_input,
)
from .create import Create
from .evidence import Accept, Verify
from .host import RECONCILE_OUTCOMES, RECORD_OUTCOMES, Cancel, Reconcile, Record, Retry, Start
from .lock import RecoverLock
from .place import LocalPlace, Place, place_of
from .process import Collect, Launch

# In registry order (footer, help): each a single instance.
OPERATIONS: dict[str, Operation] = {
    operation.name: operation
    for operation in (
        Start(),
        Record(),
        Verify(),
        Accept(),
        Reconcile(),
        Retry(),
        Launch(),
        Collect(),
        Cancel(),
        RecoverLock(),
        Create(),
    )
}
ACTION_IDS = tuple(OPERATIONS)
LONG_ACTIONS = tuple(name for name, operation in OPERATIONS.items() if operation.long)

__all__ = [
    "ACTION_IDS",
    "FINGERPRINT_CHARS",
    "LONG_ACTIONS",
    "OPERATIONS",
    "RECONCILE_OUTCOMES",
    "RECORD_OUTCOMES",
    "ActionLog",
    "BackendIdentity",
    "Choice",
    "Field",
    "InvalidInput",
    "Line",
    "LocalPlace",
    "LogEntry",
    "Operation",
    "OperationRefused",
    "Place",
    "Preview",
    "Seen",
    "Target",
    "TargetChanged",
    "Tick",
    "build_input",
    "differences",
    "execute",
    "load_run",
    "operator_identity",
    "preview",
    "preview_fresh_run",
    "recheck",
    "seen_of",
    "summarize_input",
    "unavailable_reason",
    "validate",
]


def operation(action: str) -> Operation:
    found = OPERATIONS.get(action)
    if found is None:
        raise ValueError(f"unknown action {action}")
    return found


def unavailable_reason(
    action: str, run: Run | None, task_id: str | None, lock: Any = None, root: str | None = None
) -> str | None:
    """Why the core would refuse this action for this selection now, or None when it may
    accept it: the core's state checks of the action, asked (no hashing), in their words, for
    the palette and the footer; the core's call stays the authority. With ``root``, a process
    receipt kept beside the state (the launch could not store it) counts as ready to collect."""
    return operation(action).unavailable(Target(root, run, task_id, lock))


def preview(where: str | Place, action: str, run_id: str | None = None, task_id: str | None = None) -> Preview:
    """Read the current state (of a project directory, or of a place: a remote project) and
    describe exactly what ``action`` will change.

    Raises the core's NexusError when the run cannot be loaded, OperationRefused for an
    unknown task."""
    return operation(action).describe(place_of(where), run_id, task_id)


def preview_fresh_run(
    directory: str, old_run_id: str, new_run_id: str, plan: dict[str, Any], problem: str | None = None
) -> Preview:
    """The confirmation of a fresh run from a recovered plan (guided recovery)."""
    create = OPERATIONS["create"]
    assert isinstance(create, Create)
    return create.describe_fresh_run(directory, old_run_id, new_run_id, plan, problem)


def validate(preview_: Preview, values: dict[str, Any]) -> dict[str, str]:
    """Field errors for the operator's values ({} when valid)."""
    return operation(preview_.action).validate(preview_, values)


def build_input(preview_: Preview, values: dict[str, Any], run: Run | None) -> dict[str, Any]:
    """The core input for the action, from the operator's values and the CURRENT attempt."""
    return operation(preview_.action).build_input(preview_, values, run)


def recheck(preview_: Preview) -> Run | None:
    """Re-read the core's current state and refuse if the target changed under the dialog."""
    return operation(preview_.action).recheck(preview_)


def execute(
    preview_: Preview,
    values: dict[str, Any],
    log: ActionLog,
    progress: Progress | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> JsonObject:
    """Validate, re-check the target, call the core, log the call. Returns the core's result
    (the saved run, or the recovery receipt). Raises InvalidInput, TargetChanged or the core's
    NexusError; every refusal past validation is logged with its exact message."""
    action = operation(preview_.action)
    errors = action.validate(preview_, values)
    if errors:
        raise InvalidInput(errors)
    target = action.target_words(preview_)
    summary = "(not built)"
    try:
        run = action.recheck(preview_)
        options = action.build_input(preview_, values, run)
        summary = summarize_input(action.name, options)
        result = preview_.where.call(
            action.name, preview_.run_id, preview_.task_id, options, progress=progress, should_stop=should_stop
        )
    except (NexusError, OperationRefused, OSError) as error:
        log.append(LogEntry(now_iso(), action.name, target, summary, False, explained(error)))
        raise
    log.append(LogEntry(now_iso(), action.name, target, summary, True, action.result_words(preview_, result)))
    return cast(JsonObject, result)  # the screens read it as JSON


def recovery_lock_present(directory: str) -> LockSnapshot | None:
    return lock_snapshot(root_of(directory), RECOVERY_LOCK)
