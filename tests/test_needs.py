"""nexus_core.needs: the needs of locks and runs as the core reads them; since when (a time from
the state, never the clock), stable ids, text made of our words only. States come from the
real core or from files laid out as a crashed process leaves them."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from tui_actions_support import HOST, latest, make_project, start, task_plan, write_dead_writer_lock

from nexus_core import engine, needs
from nexus_core.attention import Looker
from nexus_core.observe import inspect_loaded
from nexus_core.state.locks import RECOVERY_LOCK, WRITER_LOCK, lock_snapshot
from nexus_core.state.store import load_run
from nexus_core.terminal import is_terminal_safe
from nexus_core.timeutil import now_ms, parse_iso_ms


def _locks(root: Path) -> list[needs.Need]:
    return needs.lock_needs(str(root), lock_snapshot(str(root), WRITER_LOCK), lock_snapshot(str(root), RECOVERY_LOCK))


def test_lock_needs_dead_unreadable_unsafe_and_another_hosts(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    lock = root / ".bmad-plus/nexus/writer.lock"
    write_dead_writer_lock(root, "another-host")
    assert _locks(root) == []  # another host's owner cannot be told: not a need
    write_dead_writer_lock(root)
    [dead] = _locks(root)
    assert (dead.kind, dead.action, dead.since) == (needs.WRITER_LOCK_DEAD, "recover-lock", "2026-11-30T00:00:00.000Z")
    assert dead.text == "writer.lock left by pid 4194304, which is gone"
    lock.write_text("{not json")
    [unreadable] = _locks(root)
    assert (unreadable.kind, unreadable.text, unreadable.since) == (
        needs.WRITER_LOCK_DEAD,
        "writer.lock has no readable owner",
        None,
    )
    assert unreadable.id != dead.id  # another lock file (another hash): another need
    lock.unlink()
    os.symlink("/dev/null", lock)
    [unsafe] = _locks(root)
    assert (unsafe.kind, unsafe.action) == (needs.LOCK_UNSAFE, None)
    lock.unlink()
    (root / ".bmad-plus/nexus/recovery.lock").write_text(
        json.dumps(
            {"token": "t", "pid": 4194304, "hostname": os.uname().nodename, "createdAt": "2026-11-29T00:00:00.000Z"}
        )
    )
    os.chmod(root / ".bmad-plus/nexus/recovery.lock", 0o600)
    [left] = _locks(root)
    assert (left.kind, left.action, left.since) == (needs.RECOVERY_LOCK_LEFT, None, "2026-11-29T00:00:00.000Z")


def test_since_comes_from_the_state_and_ids_hold_across_looks(tmp_path: Path) -> None:
    root = make_project(tmp_path, [task_plan("a", deadlineMs=100)])
    start(root, "a")
    attempt = latest(root, "a")
    run = load_run(str(root), "demo")
    later, much_later = now_ms() + 10_000, now_ms() + 3_600_000
    found = [
        needs.run_needs(str(root), run, needs.observations_of(inspect_loaded(str(root), run, t)), t)
        for t in (later, much_later)
    ]
    assert [[n.kind for n in looked] for looked in found] == [[needs.OVERDUE], [needs.OVERDUE]]
    first, second = found[0][0], found[1][0]
    assert first.since == second.since == attempt["deadline"]  # the deadline, not the clock
    assert first.id == second.id and first.attempt == attempt["id"]


def test_text_is_ours_and_terminal_safe(tmp_path: Path) -> None:
    root = make_project(tmp_path / "p\x1b]0;x\x07")
    start(root, "a")
    hostile = {"kind": "host", "id": HOST["id"], "sessionId": HOST["sessionId"]}
    report = {"attemptId": latest(root, "a")["id"], "backend": hostile, "outcome": "blocked", "summary": "\x1b[2J"}
    engine.record_attempt(str(root), "demo", "a", report)
    [need] = Looker().project(str(root), now_ms())
    assert need.kind == needs.BLOCKED and need.text == "a: the worker reported it is blocked"
    assert all(is_terminal_safe(value, one_line=True) for value in (need.text, need.words))
    assert is_terminal_safe(need.command, one_line=True) is False  # the project path, as given...
    assert "\x1b" not in json.dumps(need.as_json())  # ...is escaped wherever it is printed


def test_an_unreadable_run_is_a_need_of_its_own(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    state = root / ".bmad-plus/nexus/runs/demo.json"
    state.write_bytes(state.read_bytes()[:30])
    [need] = Looker().project(str(root), now_ms())
    assert (need.kind, need.run, need.task, need.action) == (needs.RUN_UNREADABLE, "demo", None, None)
    assert need.since is not None  # the file's modification time


def _clock_facts(root: Path, run: Any, moment: int) -> list[Any]:
    """Everything about ``run`` that the clock decides at ``moment``: each observation's
    ``overdue`` and process observation, and each task's standing."""
    inspection = inspect_loaded(str(root), run, moment)
    observations = needs.observations_of(inspection)
    standings = needs.stand_run(inspection, observations, moment)
    return [(o["overdue"], o.get("process"), standings[o["taskId"]]) for o in inspection["observations"]]


def test_nothing_the_clock_decides_changes_before_clock_due(tmp_path: Path) -> None:
    """A reader may keep its answer until ``clock_due``: up to the moment before it, every
    clock-derived fact reads as it did; at it, the running task turns overdue. An owner whose
    liveness decides (a running verification) is looked at every time; a run at rest never."""
    root = make_project(tmp_path, [task_plan("a"), task_plan("b"), task_plan("c")])
    start(root, "a")
    run = load_run(str(root), "demo")
    attempt = run["tasks"][0]["attempts"][-1]
    started, deadline = parse_iso_ms(attempt["startedAt"]), parse_iso_ms(attempt["deadline"])
    assert started is not None and deadline is not None
    due = needs.clock_due(run["tasks"], started)
    assert due == deadline + 1
    before = _clock_facts(root, run, started)
    for moment in (started + 1, (started + deadline) // 2, deadline - 1, due - 1):
        assert _clock_facts(root, run, moment) == before, moment
    after = _clock_facts(root, run, due)
    assert after != before and after[0][0] is True  # overdue
    assert needs.clock_due(run["tasks"], due) is None  # past its deadline: nothing more for the clock to change

    verifying = json.loads(json.dumps(run))  # the same run with a's verification left running
    verifying["tasks"][0]["attempts"][-1]["verification"].update(status="running", owner={"pid": 1, "hostname": "h"})
    assert needs.clock_due(verifying["tasks"], started) == needs.EVERY_LOOK
    rest = json.loads(json.dumps(run))
    rest["tasks"][0]["attempts"] = []
    assert needs.clock_due(rest["tasks"], started) is None
