"""create (from guided recovery): a fresh run from an old run's recovered plan, under a new id."""

from __future__ import annotations

import os
from typing import Any

from nexus_core.actions import Result
from nexus_core.paths import root_of
from nexus_core.shapes import Run
from nexus_core.state.store import run_path

from .base import Operation, Preview, Seen, Target, TargetChanged


class Create(Operation):
    name = "create"
    label = "Create fresh run"
    confirm_label = "Create fresh run"
    in_registry = False  # offered by the recovery screen, never by a key
    per_task = False

    def unavailable(self, target: Target) -> str | None:
        return None

    def describe_fresh_run(
        self, directory: str, old_run_id: str, new_run_id: str, plan: dict[str, Any], problem: str | None = None
    ) -> Preview:
        root = root_of(directory)
        tasks = plan.get("tasks") or []
        return Preview(
            action=self.name,
            root=root,
            run_id=new_run_id,
            task_id=None,
            seen=Seen(run_id=new_run_id),
            title=f"Create fresh run {new_run_id}",
            changes=[
                f"Creates run {new_run_id} from the plan of {old_run_id} ({len(tasks)} task(s)); every task starts "
                "again from nothing, pending.",
                "create re-validates the plan and snapshots the protected resources as they are now.",
                f"{old_run_id} is not touched: it stays as evidence.",
            ],
            cautions=[
                "A fresh run may redo work (and repeat external effects) that the old run already did. "
                "Inspect the earlier workspace changes first."
            ],
            defaults={"plan": plan},
            unavailable=problem,
        )

    def recheck(self, preview: Preview) -> Run | None:
        if os.path.lexists(os.path.join(preview.root, run_path(preview.run_id or ""))):
            raise TargetChanged(
                f"Run id {preview.run_id} was taken while the dialog was open. Nothing was created; "
                "reopen the recovery screen for a new, unused id."
            )
        return None

    def build_input(self, preview: Preview, values: dict[str, Any], run: Run | None) -> dict[str, Any]:
        return dict(preview.defaults["plan"])

    def target_words(self, preview: Preview) -> str:
        return f"run {preview.run_id}"

    def result_words(self, preview: Preview, result: Result) -> str:
        return f"run {result.get('id')} created with {len(result.get('tasks', []))} task(s)"
