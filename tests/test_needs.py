"""nexus_core.needs: the needs of locks and runs as the core reads them; since when (a time from
the state, never the clock), stable ids, text made of our words only. States come from the
real core or from files laid out as a crashed process leaves them."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tui_actions_support import HOST, latest, make_project, start, task_plan, write_dead_writer_lock

from nexus_core import engine, needs
from nexus_core.attention import Looker
from nexus_core.observe import inspect_loaded
from nexus_core.state.locks import RECOVERY_LOCK, WRITER_LOCK, lock_snapshot
from nexus_core.state.store import load_run
from nexus_core.terminal import is_terminal_safe
from nexus_core.timeutil import now_ms


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
