"""The evidence actions: verify (run the checks, live progress, Stop) and accept (final)."""

from __future__ import annotations

from .base import Preview, TaskContext, TaskOperation, short


class Verify(TaskOperation):
    name = "verify"
    keys = "v"
    label = "Verify"
    help = "Run the task's checks on the current artifacts, with live progress and Stop."
    footer = True
    confirm_label = "Verify"
    long = True
    compared = ("verification_id",)

    def describe_task(self, preview: Preview, context: TaskContext) -> None:
        checks = context.definition["checks"]
        rounds = context.attempt["verificationRounds"] if context.attempt else 0
        limit = context.definition["maxAttempts"]
        preview.title = f"Verify {context.task['id']}"
        preview.changes = [
            f"Runs the {len(checks)} configured check(s) of {context.where} on attempt {context.short_attempt}, "
            "one by one, outside the lock, and records each receipt:",
            *[f"  {c['id']}: {' '.join([c['command'], *c['args']])}" for c in checks],
            "The verification ends passed, failed or ambiguous (stopped, or a check timed out); failed and "
            "ambiguous both make the task's acceptance 'rejected'.",
            f"This is verification round {rounds + 1} of {limit} for this attempt: every round counts toward the "
            "restart limit, a stopped one too (reconcile does not give it back).",
        ]
        preview.cautions = ["Checks run real commands in the project with a minimal environment."]


class Accept(TaskOperation):
    name = "accept"
    keys = "A"
    label = "Accept"
    help = "Accept the task on its current passed evidence (final; re-hashed first)."
    footer = True
    confirm_label = "Accept"
    destructive = True
    compared = ("verification_id",)

    def describe_task(self, preview: Preview, context: TaskContext) -> None:
        attempt = context.attempt
        assert attempt is not None
        preview.title = f"Accept {context.task['id']}"
        preview.changes = [
            f"Marks {context.where} accepted, citing attempt {context.short_attempt} and its passed verification "
            f"{short(attempt['verification'].get('id'))}.",
            "The core first re-hashes the scope, the artifacts and the protected resources: stale evidence is refused.",
        ]
        preview.cautions = ["Acceptance is final: nothing can un-accept a task. No git operation is performed."]
