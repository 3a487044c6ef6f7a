"""The process backend's actions: launch the task's execution contract and supervise it (live
progress, Stop), collect the owned receipt."""

from __future__ import annotations

from typing import Any

from nexus_core.actions import Result
from nexus_core.backend.process import receipt_file_status
from nexus_core.shapes import Attempt, Run
from nexus_core.words import json_word

from .base import (
    BackendIdentity,
    Preview,
    TaskContext,
    TaskOperation,
    bound_to_attempt,
    process_identity,
)


class Launch(TaskOperation):
    name = "launch"
    keys = "l"
    label = "Launch"
    help = "Launch the task's execution contract and supervise it, with live progress and Stop."
    confirm_label = "Launch"
    long = True

    def describe_task(self, preview: Preview, context: TaskContext) -> None:
        retry = context.attempt is not None
        number = len(context.task["attempts"]) + 1
        definition = context.definition
        execution = definition.get("execution") or {}
        command = " ".join([str(execution.get("command")), *[str(a) for a in execution.get("args", [])]])
        preview.title = f"Launch {context.task['id']}"
        preview.defaults = {"retry": retry}
        preview.changes = [
            f"Creates attempt {number} of {definition['maxAttempts']} for {context.where}"
            + (f" (a retry after {context.short_attempt})" if retry else "")
            + " owned by this dashboard process, then runs its execution contract:",
            f"  {command}",
            "The process receipt is stored when it ends; collect then records its outcome.",
        ]
        preview.cautions = [
            "The worker changes files in the task's write scope. Stop (it asks first) sends SIGTERM to the "
            "process's group at the next poll, then SIGKILL after the grace; the attempt then needs a reconcile."
        ]

    def build_input(self, preview: Preview, values: dict[str, Any], run: Run | None) -> dict[str, Any]:
        return {"retry": bool(preview.defaults.get("retry"))}

    def result_words(self, preview: Preview, result: Result) -> str:
        words = super().result_words(preview, result)
        task = next((t for t in result.get("tasks", []) if t["id"] == preview.task_id), None)
        attempt = task["attempts"][-1] if task and task["attempts"] else None
        receipt = ((attempt or {}).get("process") or {}).get("receipt")
        if isinstance(receipt, dict):
            words += f"; receipt outcome={receipt.get('outcome')}"
        return words


class Collect(TaskOperation):
    name = "collect"
    keys = "C"
    label = "Collect"
    help = "Collect the owned process receipt of the latest attempt."
    confirm_label = "Collect"
    also_compared = ("execution", "cancellation", "integration")  # the statement names the outcome
    compared = ("receipt_hash",)
    fields = (BackendIdentity(),)

    def kept_receipt(self, context: TaskContext) -> bool | None:
        # A receipt kept beside the state (the launch could not store it) counts as ready.
        attempt = context.attempt
        return attempt is not None and _kept_receipt(context, attempt) is not None

    def describe_task(self, preview: Preview, context: TaskContext) -> None:
        attempt = context.attempt
        assert attempt is not None
        preview.backend = process_identity(attempt["backend"])
        receipt = (attempt.get("process") or {}).get("receipt") or {}
        kept = _kept_receipt(context, attempt)
        preview.title = f"Collect {context.task['id']}"
        preview.changes = [
            (
                f"Stores the receipt kept in {kept} and records it on attempt {context.short_attempt} of "
                f"{context.where}."
                if kept
                else f"Records the owned process receipt of attempt {context.short_attempt} of {context.where}: "
                f"its execution becomes '{receipt.get('outcome')}' (exit code {json_word(receipt.get('exitCode'))})."
            ),
            "The receipt's scope snapshot becomes the attempt's result.",
        ]
        preview.cautions = ["A completed receipt is refused if the scope changed since the process ended."]

    def build_input(self, preview: Preview, values: dict[str, Any], run: Run | None) -> dict[str, Any]:
        return bound_to_attempt(preview, values, run)


def _kept_receipt(context: TaskContext, attempt: Attempt) -> str | None:
    """The receipt file kept beside the state, if any. A dashboard selection carries the
    scanner's inspection, whose observation already names it: no file is read for the footer
    (on the UI thread); a freshly loaded run (a dialog's worker) is checked on disk."""
    observations = context.run.get("observations")
    if isinstance(observations, list):
        observation = next((o for o in observations if o.get("taskId") == context.task["id"]), None) or {}
        process = observation.get("process")
        kept = process.get("recoverableReceipt") if isinstance(process, dict) else None
        return kept if isinstance(kept, str) else None
    return receipt_file_status(context.root, context.run["id"], attempt) if context.root else None
