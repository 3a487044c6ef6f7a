"""What every dashboard action shares: the :class:`Operation` an action module defines, the
dialog's :class:`Preview` of what will change, the :class:`Seen` identity re-checked at confirm,
the dialog field descriptions, the refusals and the session's action log. No widgets here.

To add an action: its entry in the core's table (``nexus_core.actions.COMMANDS``: what it
calls, its state checks with their refusal words), a module beside this one with an
``Operation`` subclass, and one line in ``OPERATIONS`` (``__init__.py``). Its key, label,
help, confirm label, destructiveness, dialog fields, preview, validation, input and log words
come from that class; its availability from the core's checks (``core_refusal``).
"""

from __future__ import annotations

import getpass
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from nexus_core import actions as commands
from nexus_core.actions import Result
from nexus_core.hostinfo import hostname, owner_liveness
from nexus_core.paths import text_ok
from nexus_core.preconditions import FACT_WORDS, task_facts
from nexus_core.shapes import Attempt, Backend, LockSnapshot, Run, Task, TaskDefinition
from nexus_core.state.locks import WRITER_LOCK
from nexus_core.words import json_word

from .place import LocalPlace, Place

TEXT_LIMIT = 8000
IDENTITY_LIMIT = 200
FINGERPRINT_CHARS = 8


class OperationRefused(Exception):
    """The dashboard refused before calling the core; the message says why, plainly."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class InvalidInput(OperationRefused):
    """The operator's input is incomplete or malformed (per field in ``errors``)."""

    def __init__(self, errors: dict[str, str]) -> None:
        super().__init__("; ".join(errors.values()))
        self.errors = errors


class TargetChanged(OperationRefused):
    """The state on disk is no longer the one the dialog described."""


# ----------------------------------------------------------------- what the dialog saw


@dataclass(frozen=True)
class Seen:
    """The target when the dialog opened, compared again at confirm time: the facts the core's
    state checks read (``nexus_core.preconditions.task_facts``) and the identities an action's
    input or statement names."""

    run_id: str | None = None
    task_id: str | None = None
    facts: Mapping[str, object] = field(default_factory=dict)
    verification_id: str | None = None
    receipt_hash: str | None = None
    lock_hash: str | None = None
    recovery_lock_hash: str | None = None


_SEEN_LABELS = {
    "verification_id": "verification",
    "receipt_hash": "process receipt",
    "lock_hash": "writer.lock fingerprint",
    "recovery_lock_hash": "recovery.lock",
}


def short(value: object) -> str:
    if value is None:
        return "none"
    if not isinstance(value, str):
        return json_word(value)
    return value[:8] if len(value) == 36 or len(value) == 64 else value


def seen_of(run: Run | None, task_id: str | None, lock: LockSnapshot | None) -> Seen:
    if run is None or task_id is None:
        return Seen(lock_hash=lock["hash"] if lock else None)
    task = next((t for t in run["tasks"] if t["id"] == task_id), None)
    if task is None:
        raise OperationRefused(f"Task {task_id} is not in run {run['id']}.")
    attempt = task["attempts"][-1] if task["attempts"] else None
    verification = attempt["verification"] if attempt else {}
    process = (attempt or {}).get("process") or {}
    return Seen(
        run_id=run["id"],
        task_id=task_id,
        facts=task_facts(run, task),
        verification_id=verification.get("id"),
        receipt_hash=process.get("receiptHash"),
        lock_hash=lock["hash"] if lock else None,
    )


def differences(operation: Operation, before: Seen, after: Seen) -> list[str]:
    """What changed, in words, among the facts and identities ``operation`` relies on."""
    changed = []
    for name in operation.compared_facts:
        old, new = before.facts.get(name), after.facts.get(name)
        if old != new:
            changed.append(f"{FACT_WORDS[name]}: {short(old)} -> {short(new)}")
    for name in operation.compared:
        old, new = getattr(before, name), getattr(after, name)
        if old != new:
            changed.append(f"{_SEEN_LABELS[name]}: {short(old)} -> {short(new)}")
    return changed


# ----------------------------------------------------------------- identities


def operator_identity() -> dict[str, str]:
    """The stable host identity used by start and retry; the operator may edit it."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "operator"
    return {"kind": "host", "id": "operator", "sessionId": f"nexus-tui-{user}@{hostname()}"}


def process_identity(backend: Backend) -> dict[str, Any]:
    return {key: backend.get(key) for key in ("kind", "id", "sessionId", "hostname", "ownerPid")}


# ----------------------------------------------------------------- dialog fields


@dataclass(frozen=True)
class Choice:
    """Radio buttons: one of ``choices``, ``default`` pressed (None: none is, the operator picks)."""

    key: str
    label: str
    choices: tuple[str, ...]
    default: str | None


@dataclass(frozen=True)
class Line:
    """A one-line text input. ``label`` may name ``{confirm}``: the text to type (``confirm_text``)."""

    key: str
    label: str
    placeholder: str = ""


@dataclass(frozen=True)
class Tick:
    """A checkbox the operator ticks: a declaration, never preset."""

    key: str
    label: str


@dataclass(frozen=True)
class BackendIdentity:
    """The attempt's backend identity: editable Inputs (prefilled) or a statement."""


Field = Choice | Line | Tick | BackendIdentity


# ----------------------------------------------------------------- preview


@dataclass
class Preview:
    """Everything a dialog needs: the statement of what will change and the defaults."""

    action: str
    root: str
    run_id: str | None
    task_id: str | None
    seen: Seen
    title: str
    changes: list[str]
    cautions: list[str] = field(default_factory=list)
    backend: dict[str, Any] | None = None
    backend_editable: bool = False
    defaults: dict[str, Any] = field(default_factory=dict)
    confirm_text: str | None = None
    unavailable: str | None = None
    # Where the state was read and where the action runs (None: the local project at ``root``).
    place: Place | None = None

    @property
    def where(self) -> Place:
        return self.place if self.place is not None else LocalPlace(self.root)


@dataclass(frozen=True)
class Target:
    """The selection as the core stores it now: the run, the task, its definition and latest
    attempt, writer.lock, the project root. ``run`` is None for project-level actions."""

    root: str | None
    run: Run | None
    task_id: str | None
    lock: Any = None

    def task(self) -> Task:
        assert self.run is not None and self.task_id is not None
        for task in self.run["tasks"]:
            if task["id"] == self.task_id:
                return task
        raise OperationRefused(f"Task {self.task_id} is not in run {self.run['id']}.")

    def definition(self) -> TaskDefinition:
        assert self.run is not None and self.task_id is not None
        for definition in self.run["plan"]["tasks"]:
            if definition["id"] == self.task_id:
                return definition
        raise OperationRefused(f"Task {self.task_id} is not in run {self.run['id']}.")

    def attempt(self) -> Attempt | None:
        attempts = self.task()["attempts"]
        return attempts[-1] if attempts else None


class Operation:
    """One mutating action of the dashboard. Subclasses set the class attributes and override
    the hooks they need; the registry, bindings, footer, help, palette, read-only gate, dialogs,
    recovery buttons and action log all read them."""

    name: ClassVar[str]  # the core's name (nexus_core.actions.COMMANDS) and the action id
    keys: ClassVar[str] = ""  # Textual key names, comma-separated; "" = not bound
    label: ClassVar[str]  # footer, palette, help; the recovery button adds "…"
    help: ClassVar[str] = ""
    footer: ClassVar[bool] = False
    in_registry: ClassVar[bool] = True  # False: reached only from a screen (create)
    confirm_label: ClassVar[str]
    destructive: ClassVar[bool] = False
    long: ClassVar[bool] = False  # runs in a worker with live progress and Stop
    # Re-checked at confirm: the facts the core's checks of this action read (one home: its
    # entry's checks, nexus_core.actions.reads), plus ``also_compared`` (facts its statement or
    # the dashboard's own rule rely on) and ``compared`` (Seen identities its input names).
    also_compared: ClassVar[tuple[str, ...]] = ()
    compared: ClassVar[tuple[str, ...]] = ()
    fields: ClassVar[tuple[Field, ...]] = ()
    per_task: ClassVar[bool] = True  # targets the selected task (else the project)

    @property
    def button_label(self) -> str:
        return f"{self.label}…"

    @property
    def compared_facts(self) -> tuple[str, ...]:
        """Every fact of ``Seen.facts`` compared at confirm (none for project-level actions)."""
        if not self.per_task:
            return ()
        names = ("attempt", *commands.reads(self.name), *self.also_compared)
        return tuple(dict.fromkeys(names))

    # -- availability: the core's state checks, asked (no hashing, no file read)
    def unavailable(self, target: Target) -> str | None:
        """Why the dashboard does not offer this action on ``target`` now (None: offered)."""
        raise NotImplementedError

    def core_refusal(self, target: Target) -> str | None:
        """The part of ``unavailable`` that is the core's own refusal, in the words of its check;
        the rest is ``TaskOperation.withheld``, where the core would accept but the dashboard
        does not offer."""
        return self.unavailable(target)

    # -- the dialog
    def describe(self, place: Place, run_id: str | None, task_id: str | None) -> Preview:
        raise NotImplementedError

    def validate(self, preview: Preview, values: dict[str, Any]) -> dict[str, str]:
        errors: dict[str, str] = {}
        if preview.backend_editable:
            need_text(values, errors, "backend_id", "Backend handle", IDENTITY_LIMIT)
            need_text(values, errors, "backend_session", "Backend session", IDENTITY_LIMIT)
        self.check_values(preview, values, errors)
        return errors

    def check_values(self, preview: Preview, values: dict[str, Any], errors: dict[str, str]) -> None:
        """Add this action's own field errors."""

    def recheck(self, preview: Preview) -> Run | None:
        """Re-read the core's state at confirm time; raise TargetChanged when the target changed
        under the dialog. Returns the freshly loaded run (None for project-level actions)."""
        return recheck_task(self, preview)

    def build_input(self, preview: Preview, values: dict[str, Any], run: Run | None) -> dict[str, Any]:
        """The core input, from the operator's values and the CURRENT state."""
        return {}

    # -- the action log
    def target_words(self, preview: Preview) -> str:
        return f"{preview.run_id}/{preview.task_id}"

    def result_words(self, preview: Preview, result: Result) -> str:
        task = next((t for t in result.get("tasks", []) if t["id"] == preview.task_id), None)
        if task is None:
            return "done"
        attempt = task["attempts"][-1] if task["attempts"] else None
        if attempt is None:
            return f"acceptance={task['integration']}"
        return (
            f"attempt {attempt['id'][:8]}: execution={attempt['execution']}; "
            f"verification={attempt['verification']['status']}; acceptance={task['integration']}"
        )


def need_text(values: dict[str, Any], errors: dict[str, str], key: str, label: str, limit: int = TEXT_LIMIT) -> None:
    if not text_ok(values.get(key), limit):
        errors[key] = f"{label} must be non-empty (at most {limit} characters, no NUL)."


def host_backend(values: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "host", "id": values["backend_id"], "sessionId": values["backend_session"]}


def owner_words(owner: Any) -> str:
    if not isinstance(owner, dict):
        return "an unreadable owner"
    pid = owner.get("pid")
    host = owner.get("hostname")
    state = owner_liveness(host, pid)
    alive = {"alive": ", alive", "dead": ", not running"}.get(state, "")
    if state == "unknown" and host is not None and host != hostname():
        alive = ", on another host (liveness unknown here)"
    return f"pid {pid} on {host}{alive}, since {owner.get('createdAt')}"


def summarize_input(action: str, options: dict[str, Any]) -> str:
    """A short, plain input summary for the action log (no long free text)."""
    if action == "create":
        return f"plan {options.get('id')} ({len(options.get('tasks') or [])} task(s), from the old run)"
    parts = []
    for key, value in options.items():
        if key == "backend" and isinstance(value, dict):
            parts.append(f"backend={value.get('kind')}:{value.get('id')}/{value.get('sessionId')}")
        elif key in ("attemptId", "expectedHash"):
            parts.append(f"{key}={str(value)[:8]}")
        elif isinstance(value, str) and len(value) > 40:
            parts.append(f"{key}={value[:39]}…")
        else:
            parts.append(f"{key}={json_word(value)}")
    return ", ".join(parts) if parts else "(no input)"


# ----------------------------------------------------------------- the action log


@dataclass(frozen=True)
class LogEntry:
    at: str
    action: str
    target: str
    inputs: str
    ok: bool
    result: str


class ActionLog:
    """Every core call made from this session, in order. Thread-safe: workers append too.

    ``listener`` is called after each append (from the appending thread); the app turns it
    into a message so widgets update on the UI thread."""

    def __init__(self) -> None:
        self._entries: list[LogEntry] = []
        self._lock = threading.Lock()
        self.listener: Callable[[LogEntry], None] | None = None

    def append(self, entry: LogEntry) -> None:
        with self._lock:
            self._entries.append(entry)
        if self.listener is not None:
            self.listener(entry)

    @property
    def entries(self) -> list[LogEntry]:
        with self._lock:
            return list(self._entries)


# ----------------------------------------------------------------- task-level actions


@dataclass(frozen=True)
class TaskContext:
    """One task of a loaded run, for the availability rule and the statement of an action."""

    root: str | None
    run: Run
    task: Task
    definition: TaskDefinition
    attempt: Attempt | None
    lock: Any

    @property
    def where(self) -> str:
        return f"task {self.task['id']} of run {self.run['id']}"

    @property
    def short_attempt(self) -> str:
        return self.attempt["id"][:8] if self.attempt else ""


class TaskOperation(Operation):
    """An action on one task of a run (every action but recover-lock and create)."""

    def unavailable(self, target: Target) -> str | None:
        refusal = self.core_refusal(target)
        return refusal if refusal is not None else self.withheld(_context(target))

    def core_refusal(self, target: Target) -> str | None:
        if target.run is None or target.task_id is None:
            return "Select a task first."
        try:
            context = _context(target)
        except OperationRefused as refused:
            return refused.message
        check = commands.refusal(self.name, context.run, context.task, kept_receipt=self.kept_receipt(context))
        return None if check is None else check.words

    def kept_receipt(self, context: TaskContext) -> bool | None:
        """Whether a receipt the launch could not store is kept beside the state (collect's
        check reads it); None: as the selection's inspection says."""
        return None

    def withheld(self, context: TaskContext) -> str | None:
        """Why the dashboard does not offer an action the core would accept here (it would do
        nothing useful, or harm); None by default."""
        return None

    def describe(self, place: Place, run_id: str | None, task_id: str | None) -> Preview:
        root = place.root()
        lock = place.lock(WRITER_LOCK)
        if run_id is None or task_id is None:
            raise OperationRefused("Select a task first.")
        run = place.run(run_id)
        target = Target(root, run, task_id, lock)
        context = _context(target)
        result = Preview(
            action=self.name,
            root=root,
            run_id=run_id,
            task_id=task_id,
            seen=seen_of(run, task_id, lock),
            title=f"{self.name} {task_id}",
            changes=[],
            unavailable=self.unavailable(target),
            place=place,
        )
        self.describe_task(result, context)
        if lock is not None:
            # Mutations need writer.lock: say so before the operator fills the dialog in.
            result.cautions.append(
                f"writer.lock is held ({lock['hash'][:12]}, {owner_words(lock.get('owner'))}): the core refuses "
                "every change until it is released or recovered (guided recovery, R)."
            )
        return result

    def describe_task(self, preview: Preview, context: TaskContext) -> None:
        """Fill in the title, the changes, the cautions and the defaults."""
        raise NotImplementedError


def _context(target: Target) -> TaskContext:
    assert target.run is not None
    task = target.task()
    attempts = task["attempts"]
    return TaskContext(
        target.root, target.run, task, target.definition(), attempts[-1] if attempts else None, target.lock
    )


def current_attempt(run: Run | None, task_id: str | None) -> Attempt:
    """The latest attempt as stored NOW (the input names it, not the one the dialog saw)."""
    assert run is not None and task_id is not None
    attempt = Target(None, run, task_id).attempt()
    if attempt is None:
        raise OperationRefused(f"Task {task_id} has no attempt.")
    return attempt


def bound_to_attempt(preview: Preview, values: dict[str, Any], run: Run | None) -> dict[str, Any]:
    """``attemptId`` and the backend that owns the current attempt (as the operator confirmed it)."""
    attempt = current_attempt(run, preview.task_id)
    backend_of_attempt = attempt["backend"]
    if backend_of_attempt.get("kind") == "process":
        backend: dict[str, Any] = process_identity(backend_of_attempt)
    elif preview.backend_editable:
        backend = host_backend(values)
    else:
        backend = {"kind": "host", "id": backend_of_attempt.get("id"), "sessionId": backend_of_attempt.get("sessionId")}
    return {"attemptId": attempt["id"], "backend": backend}


def recheck_task(operation: Operation, preview: Preview) -> Run:
    """Re-read the run and refuse when what the dialog stated changed meanwhile. Returns the run."""
    place = preview.where
    place.refresh(preview.run_id)
    lock = place.lock(WRITER_LOCK)
    run = place.run(preview.run_id or "")
    changed = differences(operation, preview.seen, seen_of(run, preview.task_id, lock))
    if changed:
        raise TargetChanged(
            f"The state of {preview.run_id}/{preview.task_id} changed while the dialog was open ("
            + "; ".join(changed)
            + "). Nothing was done; review the current state and try again."
        )
    return run
