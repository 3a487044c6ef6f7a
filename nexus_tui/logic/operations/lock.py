"""recover-lock: remove a writer.lock left by a dead process, after the operator's checks."""

from __future__ import annotations

from typing import Any

from nexus_core.actions import Result
from nexus_core.shapes import LockSnapshot, Run
from nexus_core.state.locks import RECOVERY_LOCK, WRITER_LOCK

from .base import (
    FINGERPRINT_CHARS,
    Line,
    Operation,
    Preview,
    Seen,
    Target,
    TargetChanged,
    Tick,
    differences,
    need_text,
    owner_words,
    short,
)
from .place import Place


class RecoverLock(Operation):
    name = "recover-lock"
    keys = "L"
    label = "Recover lock"
    help = "Remove a writer.lock left by a dead process (type its fingerprint to confirm)."
    confirm_label = "Remove writer.lock"
    destructive = True
    compared = ("lock_hash", "recovery_lock_hash")  # what the core's recover_lock reads first
    per_task = False
    fields = (
        Line("note", "Note (what you checked)", "e.g. pid 4242 is gone after a reboot"),
        Tick("owner_stopped", "I checked: the lock owner process has stopped"),
        Line("typed", f"Type the first {FINGERPRINT_CHARS} characters of the fingerprint ({{confirm}}) to confirm"),
    )

    def unavailable(self, target: Target) -> str | None:
        return None if target.lock else "There is no writer.lock to recover."

    def describe(self, place: Place, run_id: str | None, task_id: str | None) -> Preview:
        root = place.root()
        lock = place.lock(WRITER_LOCK)
        result = Preview(
            action=self.name,
            root=root,
            run_id=None,
            task_id=None,
            seen=_seen_locks(place, lock),
            title="Recover writer.lock",
            changes=[],
            unavailable=self.unavailable(Target(root, None, None, lock)),
            place=place,
        )
        if lock is None:
            result.changes = ["There is no writer.lock: nothing to recover."]
            return result
        result.confirm_text = lock["hash"][:FINGERPRINT_CHARS]
        result.defaults = {"note": "", "owner_stopped": False}
        result.changes = [
            f"Removes writer.lock (fingerprint {lock['hash'][:12]}), held by {owner_words(lock.get('owner'))}.",
            "First writes a recovery receipt under .bmad-plus/nexus/lock-recovery/ with your note.",
            "The core refuses if the lock changed, if its owner is alive on this host, or if recovery.lock exists.",
        ]
        result.cautions = [
            "Recover only after checking that the owner process has really stopped: a live writer could "
            "lose its update. 'Owner stopped' is your declaration."
        ]
        if lock.get("unsafe"):
            result.cautions.append(f"writer.lock is unsafe ({lock['unsafe']}): the core will not remove it.")
        return result

    def check_values(self, preview: Preview, values: dict[str, Any], errors: dict[str, str]) -> None:
        need_text(values, errors, "note", "Note")
        if values.get("owner_stopped") is not True:
            errors["owner_stopped"] = "Tick 'owner stopped' after checking that the lock owner has stopped."
        if values.get("typed") != preview.confirm_text:
            errors["typed"] = f"Type the first {FINGERPRINT_CHARS} characters of the fingerprint to confirm."

    def recheck(self, preview: Preview) -> Run | None:
        place = preview.where
        place.refresh(None)
        changed = differences(self, preview.seen, _seen_locks(place, place.lock(WRITER_LOCK)))
        if changed:
            raise TargetChanged(
                "The locks changed while the dialog was open (" + "; ".join(changed) + "). "
                "Nothing was removed; review the new owner and try again."
            )
        return None

    def build_input(self, preview: Preview, values: dict[str, Any], run: Run | None) -> dict[str, Any]:
        return {"expectedHash": preview.seen.lock_hash, "ownerStopped": True, "note": values["note"]}

    def target_words(self, preview: Preview) -> str:
        return f"writer.lock {short(preview.seen.lock_hash)}"

    def result_words(self, preview: Preview, result: Result) -> str:
        return f"writer.lock removed; receipt recorded at {result.get('recoveredAt')}"


def _seen_locks(place: Place, writer: LockSnapshot | None) -> Seen:
    """``writer``: the writer.lock snapshot the dialog states (read once, so they agree)."""
    recovery = place.lock(RECOVERY_LOCK)
    return Seen(lock_hash=writer["hash"] if writer else None, recovery_lock_hash=recovery["hash"] if recovery else None)
