"""The lifecycle of tasks and attempts (SPEC 5): create, start, retry, record, reconcile,
cancel, verify and accept, each as a short locked mutation of one run file."""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, cast

from . import __version__
from .backend.checks import CheckStop, check_environment, run_check
from .errors import NexusError, fail, message_of
from .hostinfo import hostname, owner_liveness, pid
from .paths import overlap, root_of, safe_target
from .preconditions import (
    ACCEPT_UNACCEPTED,
    CANCEL,
    DEPENDENCIES,
    EVIDENCE,
    RECONCILE,
    RECORD,
    RETRY,
    RETRY_CONTRACT,
    START,
    START_CONTRACT,
    VERIFY,
    Check,
    by_id,
    require,
    task_facts,
)
from .running_verification import end_running_verification, running_verification, verification_name
from .shapes import Attempt, Backend, CheckReceipt, JsonObject, Run, Task, TaskDefinition
from .snapshots import file_hash, files_snapshot, protected_snapshot, scope_snapshot
from .state import canonical
from .state.locks import (
    RECOVERY_ACTIVE,
    WRITER_BUSY,
    WRITER_LOCK,
    lock_snapshot,
    release_writer,
    try_acquire_writer,
    writer_lock,
)
from .state.store import (
    RUNS,
    StateNotWritten,
    check_state_file,
    forget_own_save,
    load_run,
    remove_dead_temp_files,
    run_path,
    save_run,
)
from .timeutil import iso_from_ms, now_iso, now_ms
from .validate import ident, is_integer, text

if TYPE_CHECKING:
    import subprocess

# subprocess, signal, threading, random and the plan validator are imported where they are
# used: record and accept need none of them (start-up time of every mutation).

Progress = Callable[[JsonObject], None]  # one progress event of a long action

UNCHECKED_SCOPE = (
    "External effects, undeclared dependencies and files outside the declared scope are not "
    "sandboxed or independently observed."
)
HOST_CAPABILITIES = {"launch": False, "terminate": False, "inspect": "host-observation"}
PROCESS_CAPABILITIES = {"launch": True, "terminate": "owner-direct-child", "inspect": "durable-process-observation"}
ACTIVE_EXECUTIONS = ("running", "blocked", "ambiguous")
PATIENT_LOCK_SECONDS = 5.0
# A verification that has begun waits this long per save rather than being left `running`.
VERIFY_SAVE_PATIENCE_SECONDS = 30.0


# ----------------------------------------------------------------- runtime facts


@functools.cache
def runtime_hash() -> str:
    """sha256 of this engine module, the counterpart of the reference's nexus.js hash."""
    with open(__file__, "rb") as handle:
        return canonical.sha256_bytes(handle.read())


def node_arch() -> str:
    machine = os.uname().machine.lower()  # what platform.machine() reads, without importing it
    return {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "i686": "ia32", "i386": "ia32"}.get(machine, machine)


def node_platform() -> str:
    return {"linux": "linux", "darwin": "darwin", "win32": "win32"}.get(sys.platform, sys.platform)


def _git_may_find_a_repository(root: str) -> bool:
    """False only when git's discovery provably finds nothing from ``root``: no directory from
    it up to / holds a ``.git`` entry (a work tree's, a linked worktree's file) or a ``HEAD``
    (a git directory itself, which core.worktree may point at ``root``). rev-parse then fails,
    so no git process is spawned (milliseconds on every start and verify outside git)."""
    directory = root
    while True:
        for name in (".git", "HEAD"):
            try:
                os.lstat(os.path.join(directory, name))
            except (FileNotFoundError, NotADirectoryError):
                continue
            except OSError:
                return True  # cannot tell: let git decide
            return True
        parent = os.path.dirname(directory)
        if parent == directory:
            return False
        directory = parent


def revision(root: str) -> str | None:
    if not _git_may_find_a_repository(root):
        return None
    import subprocess

    env = check_environment()["values"]
    try:
        # One git process for both answers (the top level, then HEAD's commit, one per line): it
        # fails as a whole where either would (not a work tree, or no commit yet).
        done = subprocess.run(
            ["git", "-C", root, "rev-parse", "--show-toplevel", "HEAD"],
            env=env,
            capture_output=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    top, _, head = done.stdout.rstrip(b"\n").rpartition(b"\n")  # a path may hold a newline, a hash not
    if done.returncode != 0 or os.path.realpath(top[:4096].decode("utf-8", "replace").strip()) != root:
        return None
    value = head[:4096].decode("utf-8", "replace").strip()
    if 40 <= len(value) <= 64 and all(c in "0123456789abcdef" for c in value):
        return value
    return None


# ----------------------------------------------------------------- lookups


def definition_of(run: Run, task_id: str) -> TaskDefinition:
    definition = by_id(run["plan"]["tasks"]).get(task_id)
    if definition is None:
        raise fail(f"Unknown task: {task_id}")
    return cast(TaskDefinition, definition)


def task_of(run: Run, task_id: object) -> Task:
    ident(task_id, "Task ID")
    task = by_id(run["tasks"]).get(task_id)
    if task is None:
        raise fail(f"Unknown task: {task_id}")
    return cast(Task, task)


def latest(task: Task) -> Attempt | None:
    attempts = task["attempts"]
    return attempts[-1] if attempts else None


def is_active(task: Task) -> bool:
    attempt = latest(task)
    if attempt is None:
        return False
    return (
        attempt["execution"] in ACTIVE_EXECUTIONS
        or attempt["verification"]["status"] in ("running", "ambiguous")
        or attempt.get("cancellation", {}).get("status") == "requested"
    )


def backend_identity(value: Any) -> Backend:
    if isinstance(value, dict) and value.get("kind") == "process":
        owner_pid = value.get("ownerPid")
        if not isinstance(owner_pid, int | float) or not is_integer(owner_pid) or owner_pid < 1:
            raise fail("Process backend needs its actual supervisor PID.")
        return {
            "kind": "process",
            "id": text(value.get("id"), "Process owner handle", 200),
            "sessionId": text(value.get("sessionId"), "Process session", 200),
            "hostname": text(value.get("hostname"), "Process host", 200),
            "ownerPid": int(owner_pid),
            "capabilities": dict(PROCESS_CAPABILITIES),
        }
    if not isinstance(value, dict) or value.get("kind") != "host":
        raise fail("Only host and process backends are implemented.")
    return {
        "kind": "host",
        "id": text(value.get("id"), "Backend handle", 200),
        "sessionId": text(value.get("sessionId"), "Backend session", 200),
        "capabilities": dict(HOST_CAPABILITIES),
    }


def bound_attempt(task: Task, options: JsonObject) -> Attempt:
    attempt = latest(task)
    if attempt is None or options.get("attemptId") != attempt["id"]:
        raise fail("Stale or missing attempt identity.")
    if not canonical.same(backend_identity(options.get("backend")), attempt["backend"]):
        raise fail("Backend handle/session does not own this attempt.")
    return attempt


# ----------------------------------------------------------------- mutation


class WriterBusy(NexusError):
    """writer.lock stayed taken for the whole patience window of an in-operation save."""


def _owner_is_dead(root: str) -> bool:
    """True when writer.lock names a process of this host that has exited: it will never be
    released, so waiting for it is pointless (it needs recover-lock)."""
    try:
        snapshot = lock_snapshot(root, WRITER_LOCK)
    except (NexusError, OSError):
        return False
    owner = snapshot.get("owner") if snapshot else None
    # "unknown" (another host, no usable pid) is not dead: the lock may still be released.
    return isinstance(owner, dict) and owner_liveness(owner.get("hostname"), owner.get("pid")) == "dead"


def _acquire_patiently(root: str, seconds: float) -> str:
    """Take writer.lock for a save inside an operation that already began: retry with a short
    jittered backoff (and through a brief recover-lock) for up to ``seconds``."""
    deadline = time.monotonic() + seconds
    delay = 0.002
    dead_owner_seen = 0
    while True:
        busy = fail(WRITER_BUSY).message
        try:
            token = try_acquire_writer(root)
        except NexusError as error:
            if error.message != fail(RECOVERY_ACTIVE).message:
                raise
            token, busy = None, error.message
        if token is not None:
            return token
        if time.monotonic() >= deadline:
            raise WriterBusy(busy)
        # Seen twice in a row (not a release racing our read): a dead owner never lets go.
        dead_owner_seen = dead_owner_seen + 1 if _owner_is_dead(root) else 0
        if dead_owner_seen >= 2:
            raise WriterBusy(fail(WRITER_BUSY).message)
        import random  # only when the lock is taken: its import costs some 3 ms on every verify

        time.sleep(delay * (0.5 + random.random()))
        delay = min(delay * 2, 0.05)


def mutate(
    directory: str,
    run_id: str,
    op: Callable[[str, Run], Any],
    patient: bool = False,
    patience: float | None = None,
    reuse: Run | None = None,
    keep: bool = False,
) -> Run:
    """Lock, load, change, save. ``patient`` (saves inside an operation that already began)
    retries the lock for ``patience`` seconds (default PATIENT_LOCK_SECONDS) instead of failing
    at once; ``op`` runs on the freshly loaded run, so it re-checks ownership and applies only
    its own change. ``reuse`` and ``keep``: see ``store.load_run``'s ``saved`` and
    ``store.save_run``'s ``keep`` (an operation of several saves loads its own last save
    without parsing it again while nobody else has written the file)."""
    root = root_of(directory)
    # An unknown run (or a bad run id) is refused before the lock would create
    # .bmad-plus/nexus: a refused command leaves the disk as it was.
    check_state_file(root, run_id)
    if not patient:
        with writer_lock(root):
            return _change(root, run_id, op, reuse, keep)
    token = _acquire_patiently(root, PATIENT_LOCK_SECONDS if patience is None else patience)
    try:
        remove_dead_temp_files(root)
        return _change(root, run_id, op, reuse, keep)
    finally:
        release_writer(root, token)


def _change(root: str, run_id: str, op: Callable[[str, Run], Any], reuse: Run | None, keep: bool) -> Run:
    """Load, change, save, under writer.lock."""
    run = load_run(root, run_id, saved=reuse)
    forget_own_save()  # ``op`` may change the kept run and then fail: only a save keeps it again
    op(root, run)
    return save_run(root, run, keep=keep)


# ----------------------------------------------------------------- evidence


def evidence_current(root: str, run: Run, task: Task, verified: set[str], ancestors: set[str]) -> None:
    task_id = task["id"]
    if task_id in ancestors:
        raise fail(f"Dependency cycle at {task_id}")
    if task_id in verified:
        return
    definition = definition_of(run, task_id)
    facts = task_facts(run, task)
    require(EVIDENCE, facts)
    attempt = latest(task)
    assert attempt is not None
    verification = attempt["verification"]
    env = verification.get("environment")
    if (
        not isinstance(env, dict)
        or env.get("policy") != "minimal-local-v1"
        or env.get("sha256") != canonical.sha256_json(env.get("values"))
    ):
        raise fail("Verification environment is missing or obsolete; fresh evidence is required.")
    protected_snapshot(root, definition)
    if not canonical.same(scope_snapshot(root, definition["scope"]), verification.get("scopeHashes")) or (
        not canonical.same(files_snapshot(root, definition["artifacts"], True), verification.get("artifactHashes"))
    ):
        raise fail("Stale evidence: checked artifacts or write scope changed.")
    receipts = verification.get("checks", [])
    if [r.get("id") for r in receipts] != [c["id"] for c in definition["checks"]] or not all(
        r.get("exitCode") == 0
        and not isinstance(r.get("exitCode"), bool)
        and not r.get("error")
        and not r.get("signal")
        and r.get("attemptId") == attempt["id"]
        and canonical.same(r.get("environment"), env)
        for r in receipts
    ):
        raise fail("Verification receipt is incomplete.")
    dependencies_current(root, run, definition, facts, verified, ancestors | {task_id})
    verified.add(task_id)


def dependencies_current(
    root: str, run: Run, definition: TaskDefinition, facts: Any, verified: set[str], ancestors: set[str]
) -> None:
    """Each dependency in plan order: accepted (the DEPENDENCIES check, whose fact names the
    first one that is not), then its evidence current (SPEC 5.6 step 5, 5.0.8's last step)."""
    for dep in definition["dependsOn"]:
        dependency = task_of(run, dep)
        if dep == facts["unacceptedDependency"]:
            raise DEPENDENCIES.refusal(facts)
        evidence_current(root, run, dependency, verified, ancestors)


# ----------------------------------------------------------------- begin


def assert_capacity(root: str, run: Run, definition: TaskDefinition) -> None:
    active = sum(1 for t in run["tasks"] if is_active(t))
    if active >= run["plan"]["maxParallel"]:
        raise fail("Run capacity is occupied until active work is reconciled.")
    from .paths import directory_at

    runs_dir = directory_at(root, RUNS)
    for name in os.listdir(runs_dir):
        if not name.endswith(".json"):
            continue
        # This run's own file was loaded under the same writer lock and is not changed yet:
        # reading it again (SPEC 5.0.7 step 3) would give exactly ``run``.
        other = run if name[:-5] == run["id"] else load_run(root, name[:-5])
        for other_task in other["tasks"]:
            if not is_active(other_task):
                continue
            other_def = definition_of(other, other_task["id"])
            if any(overlap(a, b) for a in other_def["scope"] for b in definition["scope"]):
                raise fail(f"Write scope is owned by active attempt: {other['id']}/{other_task['id']}")


def begin(root: str, run: Run, task: Task, backend_value: Any, retry: bool, checks: tuple[Check, ...]) -> Attempt:
    """SPEC 5.6: the action's state checks (``checks``: its contract's, then begin's), each
    dependency accepted and current, capacity, the protected resources, the identity last."""
    definition = definition_of(run, task["id"])
    previous = latest(task)
    facts = {**task_facts(run, task), "retry": retry}
    require(checks, facts)
    dependencies_current(root, run, definition, facts, set(), set())
    assert_capacity(root, run, definition)
    resources = protected_snapshot(root, definition)
    backend = backend_identity(backend_value)
    task["integration"] = "pending"
    started = now_ms()
    started_iso = iso_from_ms(started)
    manifest = "_bmad/.bmad-plus-install.json"
    attempt: Attempt = {
        "id": str(uuid.uuid4()),
        "runId": run["id"],
        "taskId": task["id"],
        "parentAttemptId": previous["id"] if previous else None,
        "backend": backend,
        "execution": "running",
        "verification": {"status": "pending", "checks": []},
        "verificationRounds": 0,
        "verificationHistory": [],
        "reconciliations": [],
        "cancellation": {"status": "none"},
        "startedAt": started_iso,
        "observedAt": started_iso,
        "endedAt": None,
        "deadline": iso_from_ms(started + definition["deadlineMs"]),
        "baseline": {
            "repository": root,
            "revision": revision(root),
            "framework": {
                "version": __version__,
                "runtimeHash": runtime_hash(),
                "installManifestHash": file_hash(root, manifest, False),
                "nodeVersion": None,
                "platform": node_platform(),
                "arch": node_arch(),
            },
            "scopeHashes": scope_snapshot(root, definition["scope"]),
            "artifactHashes": files_snapshot(root, definition["artifacts"], False),
            "resourceHashes": resources,
            "config": canonical.copy(run["plan"]["config"]),
        },
        "authorizations": list(definition["authorizations"]),
        "observations": [],
        "uncheckedScope": UNCHECKED_SCOPE,
    }
    task["attempts"].append(attempt)
    return attempt


# ----------------------------------------------------------------- actions


def create_run(directory: str, plan: Any) -> Run:
    from .plan import normalize_plan

    root = root_of(directory)
    normalized = normalize_plan(root, plan)
    with writer_lock(root):
        path = safe_target(root, run_path(normalized["id"]))
        if os.path.exists(path):
            raise fail("Run already exists; inspect it instead.")
        now = now_iso()
        run: Run = {
            "schemaVersion": 1,
            "id": normalized["id"],
            "project": root,
            "frameworkVersion": __version__,
            "createdAt": now,
            "updatedAt": now,
            "sequence": 0,
            "planHash": canonical.sha256_json(normalized),
            "plan": normalized,
            "tasks": [{"id": t["id"], "integration": "pending", "attempts": []} for t in normalized["tasks"]],
        }
        return save_run(root, run)


def _options(options: Any) -> JsonObject:
    return options if isinstance(options, dict) else {}


def start_task(directory: str, run_id: str, task_id: str, options: Any) -> Run:
    options = _options(options)

    def op(root: str, run: Run) -> None:
        task = task_of(run, task_id)
        backend = options.get("backend")
        if not isinstance(backend, dict) or backend.get("kind") != "host":
            raise START_CONTRACT.refusal({})  # SPEC 5.4 step 1: the plan's contract, or this identity
        begin(root, run, task, backend, False, START)

    return mutate(directory, run_id, op)


def retry_task(directory: str, run_id: str, task_id: str, options: Any) -> Run:
    options = _options(options)

    def op(root: str, run: Run) -> None:
        task = task_of(run, task_id)
        backend = options.get("backend")
        if not isinstance(backend, dict) or backend.get("kind") != "host":
            raise RETRY_CONTRACT.refusal({})  # SPEC 5.5 step 1: the plan's contract, or this identity
        begin(root, run, task, backend, True, RETRY)

    return mutate(directory, run_id, op)


def record_attempt(directory: str, run_id: str, task_id: str, options: Any) -> Run:
    options = _options(options)

    def op(root: str, run: Run) -> None:
        task = task_of(run, task_id)
        attempt = bound_attempt(task, options)
        require(RECORD, task_facts(run, task))
        outcome = options.get("outcome")
        if outcome not in ("completed", "failed", "blocked", "ambiguous"):
            raise fail("Unsupported worker outcome.")
        has_exit = "exitCode" in options
        exit_code = options.get("exitCode")
        if has_exit and not is_integer(exit_code):
            raise fail("exitCode must be an integer.")
        if outcome == "completed" and has_exit and exit_code != 0:
            raise fail("Nonzero exit cannot be a completed outcome.")
        summary = text(options.get("summary"), "Worker observation")
        at = now_iso()
        attempt["observations"].append(
            {
                "at": at,
                "outcome": outcome,
                "summary": summary,
                "exitCode": int(exit_code) if has_exit else None,
                "evidenceClass": "host-report",
                "independentlyVerified": False,
            }
        )
        attempt["execution"] = outcome
        attempt["observedAt"] = at
        if outcome in ("completed", "failed"):
            attempt["endedAt"] = at
            attempt["resultHashes"] = scope_snapshot(root, definition_of(run, task_id)["scope"])
        if outcome == "blocked":
            attempt["blockedRequest"] = summary

    return mutate(directory, run_id, op)


def _probe_same_host(host: object, process_id: object) -> bool:
    return owner_liveness(host, process_id) == "alive"


def reconcile_attempt(directory: str, run_id: str, task_id: str, options: Any) -> Run:
    options = _options(options)

    def op(root: str, run: Run) -> None:
        task = task_of(run, task_id)
        attempt = bound_attempt(task, options)
        require(RECONCILE, task_facts(run, task))
        outcome = options.get("outcome")
        if outcome not in ("completed", "failed", "cancelled"):
            raise fail("Reconciliation must establish completed, failed or cancelled work.")
        if options.get("ownerStopped") is not True:
            raise fail("Reconciliation requires an explicit ownerStopped observation; timeouts alone are insufficient.")
        backend = attempt["backend"]
        process = attempt.get("process") or {}
        if backend["kind"] == "process":
            if process.get("status") != "finished" and _probe_same_host(
                backend.get("hostname"), backend.get("ownerPid")
            ):
                raise fail(
                    "Process supervisor may still be alive; request cancellation and inspect its actual operation."
                )
            receipt = process.get("receipt") or {}
            if receipt.get("directChildExited") is not True and _probe_same_host(
                backend.get("hostname"), process.get("childPid")
            ):
                raise fail(
                    "The original child may still be alive; inspect its effects before stopped-owner reconciliation."
                )
        verification = attempt["verification"]
        owner = verification.get("owner") or {}
        if verification["status"] == "running" and _probe_same_host(owner.get("hostname"), owner.get("pid")):
            raise fail("Verification process is still alive; request cancellation and wait for it to stop.")
        definition = definition_of(run, task_id)
        observed = scope_snapshot(root, definition["scope"])
        if outcome == "completed" and verification["status"] == "failed":
            raise fail("Failed verification requires a new attempt; reconciliation cannot reset it.")
        if (
            outcome == "completed"
            and "resultHashes" in attempt
            and not canonical.same(observed, attempt["resultHashes"])
        ):
            raise fail("Recorded result changed; reconcile failure and retry with a new attempt.")
        summary = text(options.get("summary"), "Reconciliation observation")
        at = now_iso()
        reconciliation = {
            "at": at,
            "summary": summary,
            "outcome": outcome,
            "ownerStopped": True,
            "retrySafe": options.get("retrySafe") is True,
            "observedHashes": observed,
            "evidenceClass": "operator-observation",
            "independentlyVerified": False,
        }
        attempt["reconciliation"] = reconciliation
        attempt["reconciliations"].append(canonical.copy(reconciliation))
        attempt["execution"] = outcome
        attempt["observedAt"] = at
        attempt["endedAt"] = at
        if verification["status"] in ("running", "ambiguous"):
            verification["status"] = "ambiguous"
            attempt["verificationHistory"].append(canonical.copy(verification))
            attempt["verification"] = {"status": "pending", "checks": []}
        cancellation = attempt["cancellation"]
        if cancellation.get("status") == "requested" or outcome == "cancelled":
            reconciled = cancellation.copy()
            reconciled["status"] = "reconciled"
            reconciled["reconciledAt"] = at
            reconciled["resolvedOutcome"] = outcome
            attempt["cancellation"] = reconciled
        if "resultHashes" not in attempt:
            attempt["resultHashes"] = observed

    return mutate(directory, run_id, op)


def cancel_task(directory: str, run_id: str, task_id: str, options: Any) -> Run:
    options = _options(options)

    def op(root: str, run: Run) -> None:
        task = task_of(run, task_id)
        require(CANCEL, task_facts(run, task))
        attempt = latest(task)
        assert attempt is not None
        is_process = attempt["backend"]["kind"] == "process"
        if is_process:
            bound_attempt(task, options)
        reason = text(options.get("reason"), "Cancellation reason")
        attempt["cancellation"] = {
            "status": "requested",
            "requestedAt": now_iso(),
            "reason": reason,
            "termination": "requested-from-original-owner" if is_process else "unresolved-host-owned",
            "processesSignalled": [],
        }
        if attempt["execution"] in ("running", "blocked"):
            attempt["execution"] = "ambiguous"
        attempt["observedAt"] = now_iso()

    return mutate(directory, run_id, op)


def accept_task(directory: str, run_id: str, task_id: str) -> Run:
    def op(root: str, run: Run) -> None:
        task = task_of(run, task_id)
        require((ACCEPT_UNACCEPTED,), task_facts(run, task))
        evidence_current(root, run, task, set(), set())
        attempt = latest(task)
        assert attempt is not None
        task["integration"] = "accepted"
        task["acceptedAt"] = now_iso()
        task["integrationReceipt"] = {
            "attemptId": attempt["id"],
            "artifactHashes": canonical.copy(attempt["verification"]["artifactHashes"]),
            "action": "accept-current-workspace",
            "gitOperation": None,
        }

    return mutate(directory, run_id, op)


# ----------------------------------------------------------------- verify


def _owns_verification(run: Run, task_id: str, attempt_id: str, verification_id: str) -> bool:
    attempt = latest(task_of(run, task_id))
    return (
        attempt is not None
        and attempt["id"] == attempt_id
        and attempt["verification"].get("id") == verification_id
        and attempt["verification"].get("status") == "running"
    )


def _preflight(check_id: str, attempt_id: str, message: str, started: str) -> CheckReceipt:
    return {
        "id": check_id,
        "attemptId": attempt_id,
        "exitCode": None,
        "error": message,
        "evidenceClass": "runtime-preflight",
        "startedAt": started,
        "endedAt": now_iso(),
    }


class _OperatorInterrupt:
    """Ctrl+C during `verify` stops the running check and ends the verification as ambiguous
    (never failed, never left `running` with a dead owner). A second Ctrl+C kills the check's
    process group and forces the exit.

    The check leads its own process group (``checks.run_check``): a stop, by Ctrl+C or by
    ``should_stop``, sends SIGTERM to the whole group, then SIGKILL after the grace, so a check
    whose children ignore SIGTERM (a shell's ``sleep``, a test runner's workers) stops too."""

    def __init__(self) -> None:
        self.requested = False
        self.stop_requested = False  # through ``should_stop`` (a worker thread's Stop)
        self.check = CheckStop()

    def request_stop(self) -> None:
        """``should_stop`` turned true: the running check's group is stopped and the verification
        ends as ambiguous (never passed), as after Ctrl+C; no further check starts."""
        self.stop_requested = True
        self.check.request()

    @contextlib.contextmanager
    def watching(self, should_stop: Callable[[], bool] | None) -> Iterator[None]:
        """Poll ``should_stop`` while the checks run, so a stop does not wait for the running check."""
        if should_stop is None:
            yield
            return
        import threading

        done = threading.Event()

        def watch() -> None:
            while not done.wait(STOP_POLL_SECONDS):
                if should_stop():
                    self.request_stop()
                    return

        watcher = threading.Thread(target=watch, name="nexus-verify-stop", daemon=True)
        watcher.start()
        try:
            yield
        finally:
            done.set()
            watcher.join()

    def _handle(self, _signum: int, _frame: object) -> None:
        if self.requested:
            self.check.force()
            raise KeyboardInterrupt
        self.requested = True
        self.check.request()

    def stopped_words(self) -> str | None:
        """The receipt's ``error`` for a check this interrupt stopped: who asked, and what the
        check's process group received; None when no signal reached it."""
        if self.requested:
            cause = "Interrupted by the operator (SIGINT)"
        elif self.stop_requested:
            cause = "Stopped on the operator's request"
        else:
            return None
        group = self.check.group
        if group is None or not group.sent:
            return None  # it ended by itself before the stop reached it
        return f"{cause}: the check's process group {group.pgid} got {group.words()}."

    @contextlib.contextmanager
    def armed(self) -> Iterator[None]:
        import signal
        import threading

        if threading.current_thread() is not threading.main_thread():
            yield  # only the main thread receives signals; workers use should_stop
            return
        previous = signal.signal(signal.SIGINT, self._handle)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)


INTERRUPTED_CHECK = "Interrupted by the operator (SIGINT)"  # how a check stopped by Ctrl+C's error starts
STOPPED_CHECK = "Stopped on the operator's request"  # ... and one stopped through should_stop
STOP_POLL_SECONDS = 0.1


def _run_checks(
    directory: str,
    root: str,
    run_id: str,
    task_id: str,
    definition: TaskDefinition,
    attempt_id: str,
    verification_id: str,
    environment: JsonObject,
    progress: Progress | None,
    should_stop: Callable[[], bool] | None,
    interrupt: _OperatorInterrupt,
    saved: Run,
) -> tuple[bool, Run]:
    """Run the checks in order, saving each receipt: (True when stopped before the end, the
    run as last saved). ``saved`` is the run as verify_task saved it (kept, see ``mutate``)."""
    checks = definition["checks"]
    stopped = False
    for index, check in enumerate(checks):
        before = load_run(root, run_id, saved=saved)
        if not _owns_verification(before, task_id, attempt_id, verification_id):
            raise fail("Verification ownership changed; no further command was launched.")
        current = latest(task_of(before, task_id))
        assert current is not None
        if current["cancellation"]["status"] == "requested":
            break
        if interrupt.requested or (should_stop is not None and should_stop()):
            stopped = True
            break
        if progress:
            progress(
                {
                    "event": "check-started",
                    "index": index,
                    "total": len(checks),
                    "check": check["id"],
                    "command": [check["command"], *check["args"]],
                }
            )
        started = now_iso()
        verification = current["verification"]
        try:
            protected_snapshot(root, definition)
            if not canonical.same(scope_snapshot(root, definition["scope"]), verification["scopeHashes"]):
                raise fail("Checked files changed before the next verification command.")

            def spawned(child: subprocess.Popen[bytes] | None, index: int = index, check_id: str = check["id"]) -> None:
                if child is not None and progress:
                    progress(
                        {
                            "event": "check-spawned",
                            "index": index,
                            "total": len(checks),
                            "check": check_id,
                            "pid": child.pid,
                        }
                    )

            def output(stream: str, text: str, index: int = index, check_id: str = check["id"]) -> None:
                if progress:
                    progress(
                        {"event": "check-output", "index": index, "check": check_id, "stream": stream, "text": text}
                    )

            interrupt.check.group = None
            receipt = run_check(
                root, check, attempt_id, environment, on_spawn=spawned, stop=interrupt.check, on_output=output
            )
            stopped_words = interrupt.stopped_words()
            if stopped_words is not None:
                receipt["error"] = stopped_words
            receipt["artifactHashes"] = canonical.copy(verification["artifactHashes"])
            receipt["scopeSnapshotHash"] = canonical.sha256_json(verification["scopeHashes"])
        except Exception as error:
            receipt = _preflight(check["id"], attempt_id, message_of(error), started)

        def save_receipt(_root: str, run: Run, receipt: CheckReceipt = receipt) -> None:
            if not _owns_verification(run, task_id, attempt_id, verification_id):
                raise fail("Stale verification result was rejected.")
            attempt = latest(task_of(run, task_id))
            assert attempt is not None
            attempt["verification"]["checks"].append(receipt)

        saved = mutate(
            directory,
            run_id,
            save_receipt,
            patient=True,
            patience=VERIFY_SAVE_PATIENCE_SECONDS,
            reuse=saved,
            keep=True,
        )
        if progress:
            progress(
                {
                    "event": "check-finished",
                    "index": index,
                    "total": len(checks),
                    "check": check["id"],
                    "exitCode": receipt.get("exitCode"),
                    "timedOut": receipt.get("timedOut", False),
                    "error": receipt.get("error"),
                }
            )
        saved_attempt = latest(task_of(saved, task_id))
        assert saved_attempt is not None
        if (
            receipt.get("exitCode") != 0
            or receipt.get("error")
            or receipt.get("signal")
            or saved_attempt["cancellation"]["status"] == "requested"
        ):
            break
    return stopped or interrupt.requested or interrupt.stop_requested, saved


def verify_task(
    directory: str,
    run_id: str,
    task_id: str,
    progress: Progress | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> Run:
    """Run the task's checks (outside the lock) and record the verdict.

    ``progress`` receives ``{"event": "check-started"|"check-spawned"|"check-output"|
    "check-finished", "index", ...}`` (``check-spawned`` carries the check's ``pid``,
    ``check-output`` a captured piece of its ``stream`` as ``text``, as the receipt stores it);
    ``should_stop`` is polled while the checks run: a stop request stops the running check's
    process group (SIGTERM, then SIGKILL after the grace), records what ran and ends the
    verification as ambiguous, never passed.
    """
    verification_id = str(uuid.uuid4())
    environment = check_environment()
    ids: dict[str, str] = {}
    interrupt = _OperatorInterrupt()

    def prepare(root: str, run: Run) -> None:
        task = task_of(run, task_id)
        attempt = latest(task)
        try:
            require(VERIFY, task_facts(run, task))
        except NexusError as refusal:
            raise _verification_exists(refusal, root, run["id"], task_id, attempt) from None
        assert attempt is not None
        definition = definition_of(run, task_id)
        protected_snapshot(root, definition)
        scope_hashes = scope_snapshot(root, definition["scope"])
        if not canonical.same(scope_hashes, attempt.get("resultHashes")):
            raise fail("Artifacts changed after the worker result; reconcile the current result first.")
        attempt["verificationRounds"] += 1
        attempt["verification"] = {
            "id": verification_id,
            "attemptId": attempt["id"],
            "status": "running",
            "startedAt": now_iso(),
            "frameworkVersion": __version__,
            "environment": canonical.copy(environment),
            "owner": {"pid": pid(), "hostname": hostname()},
            "revision": revision(root),
            "scopeHashes": scope_hashes,
            "artifactHashes": files_snapshot(root, definition["artifacts"], True),
            "resourceHashes": canonical.copy(definition["resourceHashes"]),
            "checks": [],
        }
        ids["attempt"] = attempt["id"]

    # Each save of this verification is kept, so the next step (the pre-check of the next command,
    # the receipt's save, the finalisation) loads it back without a parse while nobody else has
    # written the file; nothing below changes a loaded run outside a mutate.
    prepared = mutate(directory, run_id, prepare, keep=True)
    attempt_id = ids["attempt"]
    try:
        root = prepared["project"]
        definition = definition_of(prepared, task_id)
        with interrupt.armed(), interrupt.watching(should_stop):
            stopped, last_saved = _run_checks(
                directory,
                root,
                run_id,
                task_id,
                definition,
                attempt_id,
                verification_id,
                environment,
                progress,
                should_stop,
                interrupt,
                prepared,
            )

        def finalize(root: str, run: Run) -> None:
            if not _owns_verification(run, task_id, attempt_id, verification_id):
                raise fail("Stale verification finalization was rejected.")
            task = task_of(run, task_id)
            attempt = latest(task)
            assert attempt is not None
            verification = attempt["verification"]
            problem: str | None = None
            try:
                protected_snapshot(root, definition)
                if not canonical.same(scope_snapshot(root, definition["scope"]), verification["scopeHashes"]) or not (
                    canonical.same(files_snapshot(root, definition["artifacts"], True), verification["artifactHashes"])
                ):
                    problem = "Checked files changed during verification."
            except Exception as error:
                problem = message_of(error)
            receipts = verification["checks"]
            uncertain = (
                stopped or attempt["cancellation"]["status"] == "requested" or any(r.get("timedOut") for r in receipts)
            )
            passed = (
                problem is None
                and not uncertain
                and len(receipts) == len(definition["checks"])
                and all(r.get("exitCode") == 0 and not r.get("error") and not r.get("signal") for r in receipts)
            )
            verification["status"] = "ambiguous" if uncertain else ("passed" if passed else "failed")
            verification["problem"] = problem
            verification["endedAt"] = now_iso()
            if not passed:
                task["integration"] = "rejected"

        return mutate(
            directory, run_id, finalize, patient=True, patience=VERIFY_SAVE_PATIENCE_SECONDS, reuse=last_saved
        )
    except StateNotWritten as failure:
        raise _left_running(prepared["project"], run_id, task_id, failure) from None
    finally:
        forget_own_save()


VERIFICATION_EXISTS = "Verification already exists; inspect/reconcile or retry before executing again."


def _verification_exists(
    refusal: NexusError, root: str, run_id: str, task_id: str, attempt: Attempt | None
) -> NexusError:
    """SPEC 5.12's refusal as it is; for a verification stored ``running``, our hint: what is on
    disk, whether its process lives, and the exact way out (inspect's runningVerification hint)."""
    if refusal.message != fail(VERIFICATION_EXISTS).message or attempt is None:
        return refusal
    if attempt["verification"]["status"] != "running":
        return refusal
    return NexusError(refusal.message, running_verification(root, run_id, task_id, attempt)["hint"])


def _left_running(root: str, run_id: str, task_id: str, failure: StateNotWritten) -> NexusError:
    """A save after verify's prepare failed (a full disk): our refusal says which file, that the
    verification stays ``running`` as last saved, and the exact way out once the cause is fixed."""
    try:
        run = load_run(root, run_id)
        attempt = latest(task_of(run, task_id))
        total = len(definition_of(run, task_id)["checks"])
    except (NexusError, OSError):
        attempt = None
    if attempt is None or attempt["verification"].get("status") != "running":
        return NexusError(f"Could not write {failure.path} ({failure.reason}).", failure.fix)
    saved = len(attempt["verification"].get("checks") or [])
    return NexusError(
        f"Could not write {failure.path} ({failure.reason}): the verification's result was not saved.",
        f"{verification_name(run_id, task_id, attempt)} stays running in the run file as last saved ({saved} of "
        f"{total} check receipts), and nothing will finish it. First free space on that disk (or fix the cause). "
        f"{end_running_verification(run_id, task_id, attempt)}",
    )
