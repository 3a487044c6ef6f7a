"""Guided recovery, without widgets: every situation ``inspect`` can report, classified into
what is known, what the operator must check, and the safe next step (an action id of
``operations``). Nothing here writes, except ``save_fresh_plan`` when the operator asks."""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from nexus_core import needs
from nexus_core.engine import latest
from nexus_core.errors import NexusError, explained
from nexus_core.hostinfo import hostname, owner_liveness
from nexus_core.observe import inspect_loaded
from nexus_core.paths import read_regular, root_of
from nexus_core.plan import normalize_plan
from nexus_core.shapes import (
    Attempt,
    Backend,
    Inspection,
    JsonObject,
    Observation,
    Plan,
    Task,
    TaskDefinition,
    Verification,
)
from nexus_core.snapshots import executable, files_snapshot, scope_snapshot
from nexus_core.state import canonical
from nexus_core.state.locks import (
    LOCK_RECOVERY_DIR,
    RECOVERY_LOCK,
    WRITER_LOCK,
    lock_snapshot,
    recovery_lock_hint,
    recovery_lock_removal,
)
from nexus_core.state.state_dirs import directory_problem
from nexus_core.state.store import LOAD_LIMIT, RUN_ID, RUNS, list_run_ids, list_temp_files, load_run, run_path
from nexus_core.timeutil import now_ms
from nexus_core.words import json_word

EVIDENCE_DIR = ".bmad-plus/nexus/evidence"
FRESH_PLANS_DIR = ".bmad-plus/nexus/fresh-plans"
FRESH_RUN_WARNING = (
    "A fresh run starts every task again from nothing: it may redo work (and repeat external "
    "effects) that the old run already did. The old run file stays untouched as evidence."
)
# Execution keys a plan file may carry per adapter (the rest is derived by create).
_EXECUTION_COMMON = ("adapter", "command", "input", "instructions", "resources", "cwd", "outputLimitBytes")
_EXECUTION_INPUT_KEYS = {
    "command": (*_EXECUTION_COMMON, "args", "blockedExitCodes"),
    "codex-exec": (*_EXECUTION_COMMON, "sandbox", "model"),
}


@dataclass(frozen=True)
class FileChange:
    path: str
    change: str  # "modified", "added", "removed"

    def words(self) -> str:
        return f"{self.change}: {self.path}"


@dataclass
class FreshRun:
    """How to start over from the same plan under a new, unused run id.

    There is no ``nexus create --plan`` command until the plan is saved: a command is only ever
    offered for a file this process has just written (``save_fresh_plan``)."""

    old_run_id: str
    new_run_id: str
    root: str
    plan: JsonObject | None  # a plan file's content; None when the plan could not be recovered
    plan_problem: str | None = None
    # Why create would refuse the recovered plan right now (e.g. a check argument names an
    # artifact the old run produced, which create requires to be a protected resource).
    create_problem: str | None = None
    warning: str = FRESH_RUN_WARNING

    @property
    def plan_text(self) -> str | None:
        return None if self.plan is None else canonical.pretty(self.plan) + "\n"

    @property
    def default_plan_file(self) -> str:
        """Inside the project, never in a shared directory such as /tmp."""
        return os.path.join(self.root, FRESH_PLANS_DIR, f"{self.old_run_id}-{self.new_run_id}.json")

    def create_command(self, plan_file: str) -> str:
        return f"nexus create --plan {shlex.quote(plan_file)} -d {shlex.quote(self.root)}"


class PlanFileExists(NexusError):
    """The chosen plan file already exists: it was not written here, so it is never used."""

    def __init__(self, path: str, suggestion: str) -> None:
        super().__init__(
            f"A file already exists at {path}. This dashboard did not write it, so it will not offer a "
            f"command for it (it could hold someone else's checks). Choose another name, e.g. {suggestion}."
        )
        self.path = path
        self.suggestion = suggestion


@dataclass
class Situation:
    kind: str
    title: str
    run_id: str | None
    task_id: str | None
    known: list[str]
    checks: list[str]
    next_step: str
    next_action: str | None = None
    then: list[str] = field(default_factory=list)
    command: str | None = None
    changes: list[FileChange] = field(default_factory=list)
    fresh_run: FreshRun | None = None
    lock_hash: str | None = None

    @property
    def key(self) -> str:
        return f"{self.kind}:{self.run_id or ''}:{self.task_id or ''}"


def _core_says(hint: object) -> list[str]:
    """The core's own hint (inspect's additive words), when it has one."""
    return [f"nexus inspect says: {hint}"] if isinstance(hint, str) and hint else []


# ----------------------------------------------------------------- liveness


def _liveness_words(host: object, process_id: object) -> str:
    state = owner_liveness(host, process_id)
    if state == "alive":
        return f"pid {process_id} on {host} is alive"
    if state == "dead":
        return f"pid {process_id} on {host} is not running"
    if host != hostname():
        return f"pid {process_id} on {host}: another host, liveness cannot be probed from here"
    return f"pid {process_id!r}: not a usable pid"


# ----------------------------------------------------------------- file-by-file changes


def compare_hashes(expected: Mapping[str, str | None] | None, current: Mapping[str, str | None]) -> list[FileChange]:
    expected = expected if isinstance(expected, dict) else {}
    changes: list[FileChange] = []
    for path in sorted(set(expected) | set(current)):
        before, after = expected.get(path), current.get(path)
        if before == after:
            continue
        if before is None:
            changes.append(FileChange(path, "added"))
        elif after is None:
            changes.append(FileChange(path, "removed"))
        else:
            changes.append(FileChange(path, "modified"))
    return changes


def evidence_changes(root: str, definition: TaskDefinition, attempt: Attempt) -> list[FileChange]:
    """What changed since the attempt's verification: scope files and artifacts, file by file."""
    verification = attempt.get("verification") or {}
    recorded = verification.get("scopeHashes") or attempt.get("resultHashes") or {}
    changes = compare_hashes(recorded, scope_snapshot(root, definition["scope"]))
    artifacts = verification.get("artifactHashes")
    if isinstance(artifacts, dict):
        seen = {c.path for c in changes}
        for change in compare_hashes(artifacts, files_snapshot(root, definition["artifacts"], False)):
            if change.path not in seen:
                changes.append(change)
    return changes


def resource_changes(root: str, definition: TaskDefinition) -> list[FileChange]:
    """Protected resources and executables that differ from the plan's snapshot."""
    expected = definition.get("resourceHashes") or {}
    changes = compare_hashes(expected, files_snapshot(root, list(expected), False))
    commands = [(c["command"], c["commandHash"]) for c in definition.get("checks", [])]
    execution = definition.get("execution")
    if execution:
        commands.append((execution["command"], execution["commandHash"]))
    for command, expected_hash in commands:
        try:
            current = executable(command)["commandHash"]
        except NexusError:
            changes.append(FileChange(command, "removed"))
            continue
        if current != expected_hash and all(c.path != command for c in changes):
            changes.append(FileChange(command, "modified"))
    return changes


# ----------------------------------------------------------------- fresh run


def unused_run_id(root: str, old_run_id: str) -> str:
    """A run id that no run file (or anything else at its path) uses yet."""
    taken = set(list_run_ids(root))
    base = old_run_id if RUN_ID.match(old_run_id) else "run"
    for number in range(1, 1000):
        suffix = "-fresh" if number == 1 else f"-fresh-{number}"
        candidate = base[: 64 - len(suffix)] + suffix
        if candidate not in taken and not os.path.lexists(os.path.join(root, run_path(candidate))):
            return candidate
    raise NexusError("No unused run id could be proposed.")


def plan_input(plan: Plan, new_run_id: str) -> JsonObject:
    """A plan file equivalent to a stored (normalized) plan: create re-derives the hashes."""
    tasks = []
    for definition in plan["tasks"]:
        task = {k: canonical.copy(v) for k, v in definition.items() if k not in ("resourceHashes", "execution")}
        task["checks"] = [{k: v for k, v in c.items() if k != "commandHash"} for c in definition["checks"]]
        execution = definition.get("execution")
        if isinstance(execution, dict):
            allowed = _EXECUTION_INPUT_KEYS.get(str(execution.get("adapter")), ())
            task["execution"] = {k: canonical.copy(v) for k, v in execution.items() if k in allowed}
        tasks.append(task)
    return {
        "id": new_run_id,
        "maxParallel": plan["maxParallel"],
        "config": canonical.copy(plan["config"]),
        "tasks": tasks,
    }


def _plan_from_bytes(root: str, run_id: str) -> tuple[Plan | None, str | None]:
    """The stored plan of an unreadable run file, when it can still be trusted."""
    path = os.path.join(root, run_path(run_id))
    try:
        # Never blocks: a FIFO (or anything but a regular file) at the run's name is refused.
        raw = read_regular(path, LOAD_LIMIT)
    except OSError as error:
        return None, f"the run file cannot be read ({error.strerror})"
    try:
        envelope = canonical.parse(raw.decode("utf-8", "replace"))
    except (ValueError, RecursionError):
        return None, "the run file is not valid JSON, so its plan cannot be recovered"
    run = envelope.get("run") if isinstance(envelope, dict) else None
    plan = run.get("plan") if isinstance(run, dict) else None
    if not isinstance(plan, dict) or not isinstance(plan.get("tasks"), list):
        return None, "the run file holds no plan"
    if run.get("planHash") != canonical.sha256_json(plan):  # type: ignore[union-attr]
        return None, "the stored plan does not match its planHash, so it cannot be trusted"
    if not all(isinstance(t, dict) and isinstance(t.get("checks"), list) for t in plan["tasks"]):
        return None, "the stored plan is malformed"
    return cast(Plan, plan), None  # a stored plan: its planHash matches


def fresh_run(root: str, run_id: str, plan: Plan | None = None) -> FreshRun:
    problem = None
    if plan is None:
        plan, problem = _plan_from_bytes(root, run_id)
    new_id = unused_run_id(root, run_id)
    recovered = None
    create_problem = None
    if plan is not None:
        try:
            recovered = plan_input(plan, new_id)
        except (KeyError, TypeError, AttributeError):
            problem = "the stored plan is malformed"
    if recovered is not None:
        try:
            normalize_plan(root, recovered)  # validation only: reads, never writes
        except NexusError as error:
            create_problem = explained(error)
        except OSError as error:
            create_problem = f"{error.strerror}: {error.filename}"
    return FreshRun(run_id, new_id, root, recovered, problem, create_problem)


def _next_free_name(path: str) -> str:
    stem, extension = os.path.splitext(path)
    for number in range(2, 1000):
        candidate = f"{stem}-{number}{extension}"
        if not os.path.lexists(candidate):
            return candidate
    return f"{stem}-{os.getpid()}{extension}"


def _private_directory(directory: str) -> int:
    """An fd of ``directory`` (not a symlink), refused when another user owns it or could write
    to it: a file there could be swapped or planted under the operator's feet."""
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as error:
        raise NexusError(f"The plan cannot be saved in {directory}: {error.strerror}.") from None
    problem = directory_problem(os.fstat(fd))  # the rule every state directory follows
    if problem is not None:
        os.close(fd)
        raise NexusError(
            f"The plan is not saved in {directory}: it is {problem}. "
            "Choose a directory only you can write to, such as one inside the project."
        )
    return fd


def save_fresh_plan(advice: FreshRun, path: str | None = None) -> str:
    """Write the recovered plan to a NEW file (``O_CREAT|O_EXCL|O_NOFOLLOW``, mode 0600) at
    ``path`` (default: inside the project). Returns the absolute path written; the operator may
    then run ``advice.create_command(path)``. Raises PlanFileExists when anything is there."""
    text = advice.plan_text
    if text is None:
        raise NexusError(f"The plan of {advice.old_run_id} cannot be recovered: {advice.plan_problem}.")
    target = os.path.abspath(os.path.expanduser(path or advice.default_plan_file))
    directory, name = os.path.split(target)
    if target == advice.default_plan_file:
        os.makedirs(directory, mode=0o700, exist_ok=True)
    dir_fd = _private_directory(directory)
    try:
        try:
            fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=dir_fd)
        except FileExistsError:
            raise PlanFileExists(target, _next_free_name(target)) from None
        except OSError as error:
            raise NexusError(f"The plan cannot be saved to {target}: {error.strerror}.") from None
        os.fchmod(fd, 0o600)  # whatever the umask
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
    finally:
        os.close(dir_fd)
    return target


# ----------------------------------------------------------------- project-level situations


def lock_situations(root: str) -> list[Situation]:
    found: list[Situation] = []
    writer = lock_snapshot(root, WRITER_LOCK)
    if writer is not None:
        owner: JsonObject = writer["owner"] if isinstance(writer.get("owner"), dict) else {}
        state = owner_liveness(owner.get("hostname"), owner.get("pid"))
        known = [
            f"writer.lock fingerprint {writer['hash'][:12]} (type its first 8 characters to recover).",
            f"Owner: {_liveness_words(owner.get('hostname'), owner.get('pid'))}; "
            f"created {owner.get('createdAt')}; token {str(owner.get('token'))[:8]}.",
            "While it exists every mutation of this project is refused.",
        ]
        if writer.get("unsafe"):
            found.append(
                Situation(
                    "writer-lock-unsafe",
                    "writer.lock is unsafe",
                    None,
                    None,
                    [*known, f"It is {writer['unsafe']}: the core will not trust or remove it."],
                    ["Who created this file, and why is it not a private regular file?"],
                    "Inspect it by hand; nothing can be recovered from the dashboard.",
                    command=f"ls -l {shlex.quote(os.path.join(root, WRITER_LOCK))}",
                    lock_hash=writer["hash"],
                )
            )
        elif state != "alive":
            # Its need (needs.lock_need) decides: a dead owner, or none that can be read; an owner
            # on another host cannot be told, and is shown without being a need.
            need = needs.lock_need(root, "writer", writer)
            found.append(
                Situation(
                    "writer-lock-dead" if need is not None else "writer-lock-unknown",
                    "writer.lock of an unverifiable owner"
                    if need is None
                    else "writer.lock left by a dead process"
                    if state == "dead"
                    else need.text,
                    None,
                    None,
                    known,
                    [
                        "Is the owner process really gone (on its host)? A live writer would lose its update.",
                        "Did its mutation finish? Inspect the runs it may have been writing.",
                    ],
                    "Recover the lock: a receipt is written, then writer.lock is removed.",
                    next_action="recover-lock",
                    lock_hash=writer["hash"],
                )
            )
    recovery = lock_snapshot(root, RECOVERY_LOCK)
    if recovery is not None:
        owner = recovery["owner"] if isinstance(recovery.get("owner"), dict) else {}
        state = owner_liveness(owner.get("hostname"), owner.get("pid"))
        if state != "alive":
            found.append(
                Situation(
                    "recovery-lock-left",
                    "recovery.lock left by an interrupted recovery",
                    None,
                    None,
                    [
                        f"recovery.lock fingerprint {recovery['hash'][:12]}.",
                        f"Owner: {_liveness_words(owner.get('hostname'), owner.get('pid'))}; "
                        f"created {owner.get('createdAt')}.",
                        "While it exists every mutation and every lock recovery is refused.",
                        "Nexus has no command to remove it (as in the reference).",
                        *_core_says(recovery_lock_hint(recovery, root)),
                    ],
                    [
                        "Is the recovering process really gone?",
                        f"Did it write a receipt under {LOCK_RECOVERY_DIR}/ and is writer.lock still there?",
                    ],
                    "After checking, remove recovery.lock by hand with the command below, then recover "
                    "writer.lock from the dashboard if it is still there.",
                    command=recovery_lock_removal(root),
                    lock_hash=recovery["hash"],
                )
            )
    temps = list_temp_files(root)
    if temps:
        names = [os.path.basename(t) for t in temps[:3]] + (["..."] if len(temps) > 3 else [])
        found.append(
            Situation(
                "stray-temp-files",
                "Temporary files left by killed writers",
                None,
                None,
                [f"{len(temps)} temporary run file(s) under {RUNS}/: {', '.join(names)}."],
                ["Nothing: they are never loaded."],
                "The next mutation removes them while it holds writer.lock.",
            )
        )
    return found


def unreadable_run_situation(root: str, run_id: str, error: BaseException) -> Situation:
    message = explained(error)
    advice = fresh_run(root, run_id)
    known = [f"Loading run {run_id} fails: {message}", "Nothing was repaired; the file is left exactly as it is."]
    if advice.plan is None:
        known.append(f"The plan cannot be recovered from the file: {advice.plan_problem}.")
        create = (
            f"\nnexus create --plan PLAN.json -d {shlex.quote(root)}   "
            f'(PLAN.json: your original plan file, with "id": "{advice.new_run_id}")'
        )
    else:
        # The create command comes once the plan is saved (it names the file just written).
        known.append("Its stored plan is intact (it matches planHash) and can start a fresh run.")
        create = ""
    # Every start loads every run file (capacity), so the unreadable one must leave runs/;
    # it is moved whole, never edited, and kept as evidence beside the state.
    evidence_dir = os.path.join(root, EVIDENCE_DIR)
    kept = os.path.join(evidence_dir, f"{run_id}.json")
    state = os.path.join(root, run_path(run_id))
    move = f"mkdir -p {shlex.quote(evidence_dir)} && mv -n {shlex.quote(state)} {shlex.quote(kept)}"
    return Situation(
        "run-unreadable",
        f"Run {run_id} is corrupt or unsafe",
        run_id,
        None,
        known,
        [
            "Inspect the workspace changes the old run may already have made.",
            f"Keep the old run file as evidence, unedited: while it stays in {RUNS}/ every start in this "
            f"project is refused, so move it to {EVIDENCE_DIR}/ (first command).",
        ],
        f"Create a fresh run from the same plan under the new, unused id {advice.new_run_id}. {advice.warning}",
        command=f"{move}{create}",
        fresh_run=advice,
    )


# ----------------------------------------------------------------- task-level situations


def _attempt_words(attempt: Attempt) -> str:
    backend = attempt["backend"]
    return (
        f"Attempt {attempt['id'][:8]} ({backend.get('kind')} {backend.get('id')}/{backend.get('sessionId')}), "
        f"started {attempt.get('startedAt')}, deadline {attempt.get('deadline')}, execution '{attempt['execution']}', "
        f"verification '{attempt['verification']['status']}'."
    )


def _retry_or_verify(definition: TaskDefinition) -> str:
    return (
        "Then verify it if you reconciled 'completed', or retry (a new attempt) after 'failed' or 'cancelled'"
        + (
            ""
            if definition["idempotent"]
            else "; this task is not idempotent, so tick retry-safe only if redoing is harmless"
        )
        + "."
    )


def task_situations(root: str, inspected: Inspection, now: int | None = None) -> list[Situation]:
    """Situations of every task of an inspected run (``inspect_loaded`` output): one per task
    that needs a person, chosen by the kind of its need (``nexus_core.needs``, the classifier
    that wait, the rows and ``nexus attention`` read too)."""
    moment = now_ms() if now is None else now
    observations = needs.observations_of(inspected)
    definitions = {d["id"]: d for d in inspected["plan"]["tasks"]}
    tasks = {t["id"]: t for t in inspected["tasks"]}
    found: list[Situation] = []
    for task_id, standing in needs.stand_run(inspected, observations, moment).items():
        if standing.kind is None:
            continue
        task = tasks[task_id]
        facts = _TaskFacts(
            root, inspected, task, definitions[task_id], observations.get(task_id, {}), latest(task), moment, standing
        )
        found.extend(SITUATION_OF_KIND[standing.kind](facts))
    return found


@dataclass(frozen=True)
class _TaskFacts:
    """One task of an inspected run, as the situation families below read it."""

    root: str
    run: Inspection
    task: Task
    definition: TaskDefinition
    observation: Observation
    maybe_attempt: Attempt | None
    now: int
    standing: needs.Standing

    @property
    def attempt(self) -> Attempt:
        """The latest attempt (only asked by the situations of kinds that have one)."""
        assert self.maybe_attempt is not None
        return self.maybe_attempt

    @property
    def task_id(self) -> str:
        return str(self.task["id"])

    @property
    def verification(self) -> Verification:
        return self.attempt["verification"]

    @property
    def backend(self) -> Backend:
        return self.attempt["backend"]

    @property
    def cancellation(self) -> str | None:
        return (self.attempt.get("cancellation") or {}).get("status")

    @property
    def process(self) -> JsonObject | None:
        process = self.attempt.get("process")
        return process if isinstance(process, dict) else None

    @property
    def process_observation(self) -> JsonObject:
        return self.observation.get("process", {})

    @property
    def known_attempt(self) -> str:
        return _attempt_words(self.attempt)

    def situation(
        self, kind: str, title: str, known: list[str], checks: list[str], step: str, **extra: Any
    ) -> Situation:
        """A situation of this task; its safe next step is the need's guided action (the one
        place that decides it: ``needs.stand``)."""
        extra.setdefault("next_action", self.standing.action)
        return Situation(kind, title, self.run["id"], self.task_id, known, checks, step, **extra)

    def fresh_run(self) -> FreshRun:
        return fresh_run(self.root, self.run["id"], self.run["plan"])


# Each kind of need has its situation: what is known, what to check, the safe next step (the
# need's guided action). A situation function is asked only for a task whose need is its kind.
Family = Callable[["_TaskFacts"], "list[Situation]"]


def _resource_changed(facts: _TaskFacts) -> list[Situation]:
    try:
        changes = resource_changes(facts.root, facts.definition)
    except NexusError as error:
        changes = []
        reason = explained(error)
    else:
        reason = facts.observation.get("staleReason") or ""
    return [
        facts.situation(
            "resource-changed",
            f"{facts.task_id}: a protected resource changed since create",
            [reason, *[c.words() for c in changes]],
            [
                "Was the verifier, a check script or the worker executable changed on purpose?",
                "Restoring the exact original files makes the task current again.",
            ],
            "Restore the original files; if the change is intended, create a fresh run from the same plan "
            "(create snapshots the resources again).",
            changes=changes,
            fresh_run=facts.fresh_run(),
        )
    ]


def _accepted(facts: _TaskFacts) -> list[Situation]:
    """An accepted task whose evidence went stale."""
    task, task_id = facts.task, facts.task_id
    try:
        changes = evidence_changes(facts.root, facts.definition, facts.attempt)
        problem = None
    except NexusError as error:
        changes, problem = [], explained(error)
    known = [f"{task_id} was accepted at {task.get('acceptedAt')}.", f"Now: {facts.observation.get('staleReason')}"]
    if problem:
        known.append(f"The scope cannot be snapshotted: {problem}")
    if changes:
        known += [c.words() for c in changes]
    elif not problem:
        known.append("Its own files are unchanged: the stale evidence is in a dependency.")
    known.append(
        "Nexus cannot un-accept, re-verify or retry an accepted task: it stays accepted, flagged stale, "
        "until its files match the accepted evidence again."
    )
    dependants = [d["id"] for d in facts.run["plan"]["tasks"] if task_id in d["dependsOn"]]
    if dependants:
        known.append(f"Blocked while it is stale: {', '.join(dependants)} (start is refused).")
    else:
        known.append("No task depends on it: nothing else is blocked.")
    return [
        facts.situation(
            "accepted-stale",
            f"{task_id}: evidence changed after acceptance",
            known,
            ["Are these changes intended? Accepted work is never rewritten by Nexus."],
            "Restore the files to clear the staleness, or create a fresh run from the same plan to redo "
            "and re-verify the work.",
            changes=changes,
            fresh_run=facts.fresh_run(),
        )
    ]


def _receipt_uncollected(facts: _TaskFacts) -> list[Situation]:
    process = facts.process or {}
    receipt = process.get("receipt") or {}
    kept = facts.process_observation.get("recoverableReceipt")
    return [
        facts.situation(
            "process-receipt-uncollected",
            f"{facts.task_id}: a process receipt waits to be collected",
            [
                facts.known_attempt,
                (
                    f"The launch could not store its receipt in the run state; it was kept in {kept}."
                    if kept
                    else f"The supervised process ended {receipt.get('endedAt')} with outcome "
                    f"'{receipt.get('outcome')}', exit code {json_word(receipt.get('exitCode'))}, "
                    f"reason {json_word(receipt.get('reason'))}."
                ),
            ],
            ["Nothing to check before collecting: the receipt is the owned result."],
            "Collect this exact attempt's receipt, then verify (completed) or reconcile and retry.",
            then=["verify", "reconcile"],
        )
    ]


def _verification_running(facts: _TaskFacts) -> list[Situation]:
    """A verification left running by a verifier that is gone."""
    verification = facts.verification
    owner = verification.get("owner") or {}
    return [
        facts.situation(
            "verification-orphaned",
            f"{facts.task_id}: a verification was left running",
            [
                facts.known_attempt,
                f"Verification {str(verification.get('id'))[:8]} started {verification.get('startedAt')}; "
                f"its verifier {_liveness_words(owner.get('hostname'), owner.get('pid'))}.",
                f"{len(verification.get('checks', []))} of {len(facts.definition['checks'])} check receipt(s) "
                "recorded.",
                *_core_says((facts.observation.get("runningVerification") or {}).get("hint")),
            ],
            [
                "Is the verifier process really gone (and any check it was running)?",
                "Checks may have left partial output in the project.",
            ],
            "Reconcile the attempt (outcome 'completed' if the work itself is done): the orphaned "
            "verification moves to the history, then verify again.",
            then=["verify"],
        )
    ]


def _heartbeat_stale(facts: _TaskFacts) -> list[Situation]:
    process, backend = facts.process or {}, facts.backend
    child = process.get("childPid")
    return [
        facts.situation(
            "process-heartbeat-stale",
            f"{facts.task_id}: the process supervisor stopped reporting",
            [
                facts.known_attempt,
                f"Process status '{process.get('status', 'launch-unacknowledged')}', last heartbeat "
                f"{process.get('heartbeatAt')}; supervisor "
                f"{_liveness_words(backend.get('hostname'), backend.get('ownerPid'))}.",
                f"Child: {_liveness_words(backend.get('hostname'), child) if child else 'never spawned'}.",
                "No receipt was stored: the outcome is unknown.",
            ],
            [
                "Are the supervisor and its child really stopped? A stored pid is an observation, not authority.",
                "What did the worker change in the write scope?",
            ],
            "Reconcile with what you observed (ownerStopped is your declaration). "
            + _retry_or_verify(facts.definition),
            then=["verify", "launch"],
        )
    ]


def _overdue(facts: _TaskFacts) -> list[Situation]:
    attempt = facts.attempt
    is_process = facts.backend.get("kind") == "process"
    return [
        facts.situation(
            "attempt-overdue",
            f"{facts.task_id}: the attempt is running past its deadline",
            [facts.known_attempt, f"Deadline {attempt.get('deadline')} has passed; nothing is stopped automatically."],
            [
                "Is the worker still running? Did it finish without reporting?",
                "What has it changed in the write scope so far?",
            ],
            (
                "Cancel the attempt (its supervisor stops the child), then reconcile."
                if is_process
                else "If the worker finished, record its report; if it is stopped or you stop it, reconcile "
                "with what you observed."
            ),
            then=["reconcile"] if is_process else ["record", "cancel"],
        )
    ]


def _blocked(facts: _TaskFacts) -> list[Situation]:
    if facts.process is not None:
        return [
            facts.situation(
                "attempt-blocked",
                f"{facts.task_id}: the supervised process reported it is blocked",
                [facts.known_attempt, f"Blocked request: {facts.attempt.get('blockedRequest')}"],
                ["What does the worker need? No approval is inferred by Nexus."],
                "Resolve the request outside Nexus; the process has ended, so reconcile this attempt, then "
                "launch a new one.",
                then=["launch"],
            )
        ]
    return [
        facts.situation(
            "attempt-blocked",
            f"{facts.task_id}: the worker reported it is blocked",
            [facts.known_attempt, f"Blocked request: {facts.attempt.get('blockedRequest')}"],
            ["What does the worker need? No approval is inferred by Nexus."],
            "Resolve the request outside Nexus; the worker then records its outcome, or reconcile if it stopped.",
            then=["reconcile", "cancel"],
        )
    ]


def _interrupted(facts: _TaskFacts) -> list[Situation]:
    attempt, verification, cancellation = facts.attempt, facts.verification, facts.cancellation
    why = []
    if attempt["execution"] == "ambiguous":
        why.append("the execution outcome is ambiguous")
    if cancellation == "requested":
        requested = (attempt.get("cancellation") or {}).get("reason")
        why.append(f"a cancellation was requested ({requested}) and awaits reconciliation")
    if verification["status"] == "ambiguous":
        why.append("the verification was interrupted (ambiguous)")
    checks = [
        "Has the worker really stopped? Check its process and host yourself.",
        "What is in the write scope now? Is the result complete, partial or absent?",
    ]
    if facts.process is not None:
        backend = facts.backend
        checks.insert(0, f"Supervisor: {_liveness_words(backend.get('hostname'), backend.get('ownerPid'))}.")
    definition = facts.definition
    return [
        facts.situation(
            "attempt-interrupted",
            f"{facts.task_id}: interrupted or ambiguous attempt",
            [facts.known_attempt, "Known: " + "; ".join(why) + "."],
            checks,
            "Reconcile with what you observed (completed, failed or cancelled). " + _retry_or_verify(definition),
            then=["verify", "launch" if definition.get("execution") else "retry"],
        )
    ]


def _evidence_stale(facts: _TaskFacts) -> list[Situation]:
    try:
        changes = evidence_changes(facts.root, facts.definition, facts.attempt)
    except NexusError:
        changes = []
    return [
        facts.situation(
            "evidence-stale",
            f"{facts.task_id}: the passed verification is stale",
            [facts.known_attempt, f"Now: {facts.observation.get('staleReason')}", *[c.words() for c in changes]],
            ["Who changed these files after the verification? Is the new content wanted?"],
            "Restore the verified files and accept, or reconcile 'failed' and retry with a new attempt.",
            then=["launch" if facts.definition.get("execution") else "retry"],
            changes=changes,
        )
    ]


def _verification_limit(facts: _TaskFacts) -> list[Situation]:
    attempt, definition = facts.attempt, facts.definition
    return [
        facts.situation(
            "verification-limit",
            f"{facts.task_id}: the verification restart limit is reached",
            [
                facts.known_attempt,
                f"{attempt.get('verificationRounds')} verification round(s) of {definition['maxAttempts']} are used: "
                "verify is refused for this attempt.",
            ],
            ["Why did the earlier verifications not finish (stopped, interrupted)?"],
            "Reconcile the attempt, then create a new attempt (retry).",
            then=["launch" if definition.get("execution") else "retry"],
        )
    ]


# How an ended attempt is named in the guide (its real state, never "failed" for all), and
# what the operator should settle before another attempt.
_ENDED_QUESTIONS = {
    "failed": ("Why did it fail?", "Fix the cause before the next attempt."),
    "cancelled": ("Why was it cancelled?", "Settle that before the next attempt."),
    "verification failed": (
        "Why did its verification fail?",
        "Fix the cause (in the work or in its checks) before the next attempt.",
    ),
}


def _ended(facts: _TaskFacts) -> list[Situation]:
    """An attempt that ended failed or cancelled, or whose verification failed: retry or not."""
    attempt, verification, definition, task = facts.attempt, facts.verification, facts.definition, facts.task
    execution_ended = attempt["execution"] in ("failed", "cancelled")
    state = attempt["execution"] if execution_ended else "verification failed"
    how = [f"execution {attempt['execution']}"] if execution_ended else []
    if verification["status"] == "failed":
        how.append(f"verification failed ({verification.get('problem') or 'a check did not pass'})")
    ended_words = ", ".join(how)
    why, before_next = _ENDED_QUESTIONS[state]
    retry_action = "launch" if definition.get("execution") else "retry"
    if facts.standing.kind == needs.BUDGET_SPENT:
        return [
            facts.situation(
                "budget-spent",
                f"{facts.task_id}: {state} with no attempt left",
                [
                    facts.known_attempt,
                    f"The last attempt ended: {ended_words}.",
                    f"All {definition['maxAttempts']} attempt(s) are used: no new attempt can start in this run.",
                ],
                [f"{why} Is the cause in the work or in the plan (checks, deadline, budget)?"],
                "Nothing more can run in this run; create a fresh run from the same (or a corrected) plan.",
                fresh_run=facts.fresh_run(),
            )
        ]
    if facts.standing.action == "reconcile":
        outcome = f"'{attempt['execution']}'" if execution_ended else "'failed' (the work did not pass its checks)"
        return [
            facts.situation(
                "retry-needs-reconcile",
                f"{facts.task_id}: {state}; a retry needs a retry-safe reconciliation",
                [facts.known_attempt, f"The attempt ended: {ended_words}.", "The task is not idempotent."],
                ["Is redoing this task's work harmless (no duplicated external effects)?"],
                f"Reconcile {outcome} with retry-safe ticked, then retry.",
                then=[retry_action],
            )
        ]
    return [
        facts.situation(
            "retry-ready",
            f"{facts.task_id}: {state}; a retry is possible",
            [
                facts.known_attempt,
                f"The attempt ended: {ended_words}.",
                f"{len(task['attempts'])} of {definition['maxAttempts']} attempt(s) used.",
            ],
            [f"{why} {before_next}"],
            "Retry: a new attempt starts from the current workspace.",
        )
    ]


def _blocked_by_stale_dependency(facts: _TaskFacts) -> list[Situation]:
    """A task that cannot start because an accepted dependency's evidence went stale."""
    tasks = {t["id"]: t for t in facts.run["tasks"]}
    observations = needs.observations_of(facts.run)
    stale = [
        dep
        for dep in facts.definition["dependsOn"]
        if tasks.get(dep, {}).get("integration") == "accepted" and observations.get(dep, {}).get("stale")
    ]
    return [
        facts.situation(
            "dependency-stale",
            f"{facts.task_id}: cannot start, {', '.join(stale)} is stale",
            [
                f"Start is refused while the accepted evidence of {dep} is stale: "
                f"{observations[dep].get('staleReason')}"
                for dep in stale
            ],
            [f"Open the situation of {', '.join(stale)}: are the changes intended?"],
            "Restore the dependency's files (its evidence becomes current again), or create a fresh run "
            "from the same plan where every task is redone and re-verified.",
            fresh_run=facts.fresh_run(),
        )
    ]


# The situation of each kind of task need (a test checks that every kind has one).
SITUATION_OF_KIND: dict[str, Family] = {
    needs.RESOURCE_CHANGED: _resource_changed,
    needs.ACCEPTED_STALE: _accepted,
    needs.RECEIPT: _receipt_uncollected,
    needs.VERIFIER_GONE: _verification_running,
    needs.SUPERVISOR_GONE: _heartbeat_stale,
    needs.OVERDUE: _overdue,
    needs.BLOCKED: _blocked,
    needs.CANCEL_REQUESTED: _interrupted,
    needs.EXECUTION_AMBIGUOUS: _interrupted,
    needs.VERIFICATION_AMBIGUOUS: _interrupted,
    needs.EVIDENCE_STALE: _evidence_stale,
    needs.VERIFICATION_LIMIT: _verification_limit,
    needs.ATTEMPT_FAILED: _ended,
    needs.BUDGET_SPENT: _ended,
    needs.DEPENDENCY_STALE: _blocked_by_stale_dependency,
}


# ----------------------------------------------------------------- the whole project


def classify_project(directory: str, now: int | None = None) -> list[Situation]:
    """Every recovery situation of a project: locks, unreadable runs, then each task."""
    root = root_of(directory)
    found = lock_situations(root)
    for run_id in list_run_ids(root):
        try:
            run = load_run(root, run_id)
        except NexusError as error:
            found.append(unreadable_run_situation(root, run_id, error))
            continue
        except OSError as error:
            found.append(unreadable_run_situation(root, run_id, error))
            continue
        inspected = inspect_loaded(root, run, now)
        found.extend(task_situations(root, inspected, now))
    return found


def situations_for(directory: str, run_id: str, task_id: str | None = None, now: int | None = None) -> list[Situation]:
    """The situations of one run (and optionally one task), plus the project's lock ones."""
    root = root_of(directory)
    found = lock_situations(root)
    try:
        run = load_run(root, run_id)
    except (NexusError, OSError) as error:
        return [*found, unreadable_run_situation(root, run_id, error)]
    for situation in task_situations(root, inspect_loaded(root, run, now), now):
        if task_id is None or situation.task_id == task_id:
            found.append(situation)
    return found
