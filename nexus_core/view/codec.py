"""A project snapshot on the wire: the full snapshot ``nexus observe`` sends first, the change
lines it sends after (only the runs whose view changed, with the order of every run), and the
reader on the other end that merges them back into the same :class:`ProjectSnapshot` (an exact
round trip: tests compare it with the local scanner's)."""

from __future__ import annotations

import dataclasses
from typing import Any

from ..typed_json import DecodeError, decode, encode
from .model import LockView, ProjectSnapshot, RunView

# What a change line compares besides the runs: the scan time alone changes nothing shown that
# the receiver cannot tell from the heartbeats, and ``changed`` is rebuilt on arrival.
_NOT_COMPARED = frozenset({"runs", "scanned_at_ms", "changed"})


def snapshot_message(project: int, snapshot: ProjectSnapshot) -> dict[str, Any]:
    return {"type": "snapshot", "project": project, "snapshot": encode(snapshot)}


def change_message(project: int, before: ProjectSnapshot, after: ProjectSnapshot) -> dict[str, Any] | None:
    """The change line from ``before`` (what was sent last) to ``after``; None when nothing the
    receiver shows differs. A run view the scanner kept is the same object: compared by identity."""
    old = {view.run_id: view for view in before.runs}
    changed = tuple(view for view in after.runs if old.get(view.run_id) is not view)
    order = [view.run_id for view in after.runs]
    if not changed and order == list(old) and _same_project(before, after):
        return None
    partial = dataclasses.replace(after, runs=changed)
    return {"type": "change", "project": project, "runs": order, "snapshot": encode(partial)}


def _same_project(a: ProjectSnapshot, b: ProjectSnapshot) -> bool:
    return all(
        getattr(a, field.name) == getattr(b, field.name)
        for field in dataclasses.fields(ProjectSnapshot)
        if field.name not in _NOT_COMPARED
    )


class SnapshotReader:
    """One project's snapshot as the receiver rebuilds it from snapshot and change lines."""

    def __init__(self) -> None:
        self.snapshot: ProjectSnapshot | None = None

    def apply(self, message: dict[str, Any]) -> ProjectSnapshot:
        """The snapshot after ``message`` (a "snapshot" or "change" line); DecodeError when the
        message is not one."""
        kind = message.get("type")
        decoded = decode(ProjectSnapshot, message.get("snapshot"))
        if kind == "snapshot":
            self.snapshot = dataclasses.replace(decoded, changed=frozenset(view.run_id for view in decoded.runs))
            return self.snapshot
        if kind != "change" or self.snapshot is None:
            raise DecodeError(f"a {kind!r} line before the project's snapshot")
        order = decode(list[str], message.get("runs"))
        fresh = {view.run_id: view for view in decoded.runs}
        kept = {view.run_id: view for view in self.snapshot.runs}
        runs = []
        for run_id in order:
            view = fresh.get(run_id) or kept.get(run_id)
            if view is None:
                raise DecodeError(f"run {run_id!r} is neither sent nor known")
            runs.append(view)
        gone = set(kept) - set(order)
        self.snapshot = dataclasses.replace(decoded, runs=tuple(runs), changed=frozenset(fresh) | gone)
        return self.snapshot


__all__ = ["LockView", "RunView", "SnapshotReader", "change_message", "snapshot_message"]
