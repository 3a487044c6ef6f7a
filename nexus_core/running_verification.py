"""A verification stored as ``running``: its name as the operator finds it in inspect, its owner,
and the exact way out (the reconcile that ends it). Inspect shows it (``runningVerification``);
the engine's refusals quote it."""

from __future__ import annotations

from .shapes import Attempt, JsonObject
from .state import canonical
from .state.locks import WRITER_LOCK, describe_owner, lock_snapshot, owner_state

# Why a verification stays ``running`` after its verify has exited: every way it can happen.
LEFT_RUNNING_CAUSES = (
    "it was killed, or a save of its results failed: the disk was full, or writer.lock stayed held past "
    "the save's bound or by a process that had died"
)


def verification_name(run_id: str, task_id: str, attempt: Attempt) -> str:
    """A stored verification as the operator finds it in inspect: id, task, start and owner."""
    verification = attempt["verification"]
    who = describe_owner(verification.get("owner"))
    return (
        f"Verification {verification.get('id')} of {run_id}/{task_id} "
        f"(started {verification.get('startedAt')}, owner {who})"
    )


def end_running_verification(run_id: str, task_id: str, attempt: Attempt) -> str:
    """The exact way out of a verification left ``running``: the reconcile that ends it."""
    backend = {k: v for k, v in (attempt.get("backend") or {}).items() if k != "capabilities"}
    reconcile = canonical.compact(
        {
            "attemptId": attempt["id"],
            "backend": backend,
            "outcome": "completed",
            "ownerStopped": True,
            "summary": "The verifying process had exited.",
        }
    )
    return (
        f"End it with nexus reconcile {run_id} {task_id} --input FILE, FILE holding {reconcile} (outcome failed "
        "instead if the scope changed since the recorded result): the verification becomes ambiguous and moves "
        f"to verificationHistory, then nexus verify {run_id} {task_id} runs the checks again."
    )


def running_verification(root: str, run_id: str, task_id: str, attempt: Attempt) -> JsonObject:
    """The owner of a verification stored as ``running`` and what to do about it (a verify
    that exited without its verdict leaves it so: ``LEFT_RUNNING_CAUSES``)."""
    verification = attempt["verification"]
    owner = verification.get("owner")
    state = owner_state(owner)
    since = verification.get("startedAt")
    name = verification_name(run_id, task_id, attempt)
    ends_it = end_running_verification(run_id, task_id, attempt)
    if state == "alive":
        hint = f"{name} is running: wait for that verify to end it; reconcile is refused while its process lives."
    elif state == "exited":
        lock = lock_snapshot(root, WRITER_LOCK)
        first = ""
        if lock is not None and owner_state(lock.get("owner")) == "exited":
            first = (
                "writer.lock is still held by a process that has exited: first recover it with nexus recover-lock "
                "--input FILE and the lock hash inspect shows. "
            )
        hint = (
            f"{name} was left running: its process has exited, so nothing will finish it ({LEFT_RUNNING_CAUSES}). "
            f"{first}{ends_it}"
        )
    else:
        hint = f"{name} cannot be probed from this host. Once that process has stopped: {ends_it}"
    return {
        "verificationId": verification.get("id"),
        "owner": owner,
        "startedAt": since,
        "ownerAlive": {"alive": True, "exited": False}.get(state),
        "hint": hint,
    }
