"""The host backend's actions: start and retry an attempt, record the worker's report, reconcile
what the operator observed, request cancellation."""

from __future__ import annotations

from typing import Any, ClassVar

from nexus_core.shapes import Run

from .base import (
    BackendIdentity,
    Choice,
    Field,
    Line,
    Preview,
    TaskContext,
    TaskOperation,
    Tick,
    bound_to_attempt,
    current_attempt,
    host_backend,
    need_text,
    operator_identity,
    process_identity,
    short,
)

RECORD_OUTCOMES = ("completed", "failed", "blocked", "ambiguous")
RECONCILE_OUTCOMES = ("completed", "failed", "cancelled")


class _HostAttempt(TaskOperation):
    """start and retry: a new host attempt owned by the (editable) identity shown."""

    fields: ClassVar[tuple[Field, ...]] = (BackendIdentity(),)
    verb: ClassVar[str]

    def describe_task(self, preview: Preview, context: TaskContext) -> None:
        preview.backend = operator_identity()
        preview.backend_editable = True
        number = len(context.task["attempts"]) + 1
        definition = context.definition
        preview.title = f"{self.verb} {context.task['id']}"
        preview.changes = [
            f"Creates attempt {number} of {definition['maxAttempts']} for {context.where}, owned by the host "
            "identity below, with execution 'running'.",
            f"Its deadline is {definition['deadlineMs'] // 1000} s from now. Acceptance becomes 'pending'.",
            "The baseline snapshots the write scope, the artifacts and the protected resources.",
        ]
        if context.attempt is not None:
            preview.changes.append(f"The previous attempt {context.short_attempt} stays on record as its parent.")
        preview.cautions = ["Nothing is launched: the worker runs outside Nexus and reports with record."]

    def build_input(self, preview: Preview, values: dict[str, Any], run: Run | None) -> dict[str, Any]:
        return {"backend": host_backend(values)}


class Start(_HostAttempt):
    name = "start"
    keys = "b"  # "n"/"N" go to the next/previous task that needs attention
    label = "Start"
    help = "Start a host attempt for the selected task (the worker runs outside Nexus)."
    footer = True
    confirm_label = "Start"
    verb = "Start"


class Retry(_HostAttempt):
    name = "retry"
    keys = "B"
    label = "Retry"
    help = "Start a new host attempt after a failed/cancelled attempt or a failed verification."
    confirm_label = "Retry"
    verb = "Retry"


class Record(TaskOperation):
    name = "record"
    keys = "O"  # "o" goes to the oldest need (the inbox's first entry); "R" is the recovery guide
    label = "Record"
    help = "Record the host worker's report: outcome, summary, exit code."
    footer = True
    confirm_label = "Record"
    fields = (
        Choice("outcome", "Outcome reported by the worker", RECORD_OUTCOMES, "completed"),
        Line("summary", "Summary (what the worker reported)", "e.g. tests written, build green"),
        Line("exit_code", "Exit code (optional)", "e.g. 0"),
        BackendIdentity(),
    )

    def describe_task(self, preview: Preview, context: TaskContext) -> None:
        attempt = context.attempt
        assert attempt is not None
        backend = attempt["backend"]
        preview.backend = {"kind": "host", "id": backend.get("id"), "sessionId": backend.get("sessionId")}
        preview.backend_editable = True
        preview.title = f"Record a worker report for {context.task['id']}"
        preview.defaults = {"outcome": "completed", "summary": "", "exit_code": ""}
        preview.changes = [
            f"Adds a host report to attempt {context.short_attempt} of {context.where} and sets its execution "
            f"from '{attempt['execution']}' to the outcome chosen below.",
            "completed or failed also records the end time and a snapshot of the write scope "
            "(the result that verify will check).",
            "blocked records the summary as the blocked request.",
        ]
        preview.cautions = ["This is the worker's word, not verified evidence."]

    def check_values(self, preview: Preview, values: dict[str, Any], errors: dict[str, str]) -> None:
        if values.get("outcome") not in RECORD_OUTCOMES:
            errors["outcome"] = "Choose an outcome."
        need_text(values, errors, "summary", "Summary")
        raw = str(values.get("exit_code") or "").strip()
        if raw:
            try:
                code = int(raw)
            except ValueError:
                errors["exit_code"] = "Exit code must be an integer (or empty)."
            else:
                if values.get("outcome") == "completed" and code != 0:
                    errors["exit_code"] = "A nonzero exit code cannot be a completed outcome."

    def build_input(self, preview: Preview, values: dict[str, Any], run: Run | None) -> dict[str, Any]:
        options = {**bound_to_attempt(preview, values, run), "outcome": values["outcome"], "summary": values["summary"]}
        raw = str(values.get("exit_code") or "").strip()
        if raw:
            options["exitCode"] = int(raw)
        return options


class Reconcile(TaskOperation):
    name = "reconcile"
    keys = "e"
    label = "Reconcile"
    help = "Record what you observed (completed, failed, cancelled) once the owner has stopped."
    footer = True
    confirm_label = "Reconcile"
    destructive = True
    also_compared = ("execution", "verification", "cancellation")  # the statement names them
    compared = ("verification_id",)
    fields = (
        # No default: the outcome is the operator's observation, never a guess of the dashboard's.
        Choice("outcome", "What actually happened (your observation)", RECONCILE_OUTCOMES, None),
        Line("summary", "Observation (what you checked)", "e.g. worker pid 123 gone, no output"),
        Tick("owner_stopped", "I checked: the owner (worker/verifier) has stopped"),
        Tick("retry_safe", "Retry-safe: redoing this work is harmless"),
        BackendIdentity(),
    )

    def describe_task(self, preview: Preview, context: TaskContext) -> None:
        attempt = context.attempt
        assert attempt is not None
        backend = attempt["backend"]
        if backend.get("kind") == "process":
            preview.backend = process_identity(backend)
        else:
            preview.backend = {"kind": "host", "id": backend.get("id"), "sessionId": backend.get("sessionId")}
            preview.backend_editable = True
        preview.title = f"Reconcile {context.task['id']}"
        preview.defaults = {"summary": "", "owner_stopped": False, "retry_safe": False}
        verification = attempt["verification"]
        preview.changes = [
            f"Records your observation on attempt {context.short_attempt} of {context.where}: its execution goes "
            f"from '{attempt['execution']}' to the outcome chosen below and it ends now.",
            "The current write-scope snapshot is stored as the observed result.",
        ]
        if verification["status"] in ("running", "ambiguous"):
            preview.changes.append(
                f"The {verification['status']} verification {short(verification.get('id'))} moves to the "
                "history; the attempt can be verified again."
            )
        if attempt["cancellation"].get("status") == "requested":
            preview.changes.append("The requested cancellation is marked reconciled.")
        preview.cautions = [
            "Tick 'owner stopped' only after checking yourself that the worker (and any verifier) "
            "has really stopped: it is your declaration, never inferred.",
            "Retry-safe allows a retry of a non-idempotent task: tick it only if redoing the work is harmless.",
        ]
        if context.task["integration"] == "rejected":
            preview.cautions.append("Acceptance stays 'rejected' until a new attempt.")

    def check_values(self, preview: Preview, values: dict[str, Any], errors: dict[str, str]) -> None:
        if values.get("outcome") not in RECONCILE_OUTCOMES:
            errors["outcome"] = "Choose what actually happened: completed, failed or cancelled (none is preselected)."
        need_text(values, errors, "summary", "Observation")
        if values.get("owner_stopped") is not True:
            errors["owner_stopped"] = "Tick 'owner stopped' after checking that the worker has stopped."

    def build_input(self, preview: Preview, values: dict[str, Any], run: Run | None) -> dict[str, Any]:
        return {
            **bound_to_attempt(preview, values, run),
            "outcome": values["outcome"],
            "ownerStopped": values.get("owner_stopped") is True,
            "summary": values["summary"],
            "retrySafe": values.get("retry_safe") is True,
        }


class Cancel(TaskOperation):
    name = "cancel"
    keys = "x"
    label = "Cancel attempt"
    help = "Request cancellation of the latest attempt (type the task id to confirm)."
    confirm_label = "Request cancellation"
    destructive = True
    also_compared = ("execution", "verification")  # what ``withheld`` reads
    fields = (
        Line("reason", "Reason", "why this attempt must stop"),
        Line("typed", "Type the task id ({confirm}) to confirm"),
        BackendIdentity(),
    )

    def withheld(self, context: TaskContext) -> str | None:
        # The core also cancels an ended attempt (SPEC 5.11: it becomes active again, stale and
        # overdue, until reconciled), which stops nothing: offered only while something runs.
        attempt = context.attempt
        assert attempt is not None
        execution = attempt["execution"]
        if execution in ("running", "blocked") or attempt["verification"]["status"] == "running":
            return None
        if execution == "ambiguous":
            return "Nothing runs to cancel: the outcome is ambiguous; reconcile it with what you observed."
        return (
            f"The attempt has ended (execution '{execution}'): there is nothing to cancel. "
            "To record another outcome, reconcile it."
        )

    def describe_task(self, preview: Preview, context: TaskContext) -> None:
        attempt = context.attempt
        assert attempt is not None
        task_id = context.task["id"]
        preview.title = f"Cancel {task_id}"
        preview.confirm_text = task_id
        preview.defaults = {"reason": ""}
        is_process = attempt["backend"].get("kind") == "process"
        if is_process:
            preview.backend = process_identity(attempt["backend"])
        change = f"Records a cancellation request on attempt {context.short_attempt} of {context.where}."
        working = attempt["execution"] in ("running", "blocked")
        if working:
            change += f" Its execution goes from '{attempt['execution']}' to 'ambiguous'."
        preview.changes = [change, "The attempt stays active until you reconcile it."]
        preview.cautions = []
        if working:
            preview.cautions.append(
                "The original supervisor sees the request at its next poll and sends SIGTERM to its child."
                if is_process
                else "Nothing is signalled: stop the host worker yourself, then reconcile."
            )
        if attempt["verification"]["status"] == "running":
            preview.cautions.append(
                "The running verification stops before its next check (the current one is not killed) "
                "and its result becomes 'ambiguous'."
            )

    def check_values(self, preview: Preview, values: dict[str, Any], errors: dict[str, str]) -> None:
        need_text(values, errors, "reason", "Reason")
        if values.get("typed") != preview.confirm_text:
            errors["typed"] = f"Type the task id ({preview.confirm_text}) to confirm."

    def build_input(self, preview: Preview, values: dict[str, Any], run: Run | None) -> dict[str, Any]:
        if current_attempt(run, preview.task_id)["backend"].get("kind") == "process":
            return {**bound_to_attempt(preview, values, run), "reason": values["reason"]}
        return {"reason": values["reason"]}
