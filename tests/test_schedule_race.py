"""Several `nexus scheduler` processes on one project: every due occurrence fires exactly once,
and a runner SIGKILLed at random points loses or doubles nothing (its claims end up failed,
"runner died", never left claimed).

Quick by default; ``NEXUS_LONG=1`` for the issue's figures (1,000 occurrences, 50 kills). The
figures are printed (run with ``-s`` to see them)."""

from __future__ import annotations

import os
import random
import signal
import time
from collections import Counter
from pathlib import Path

import pytest
from schedule_kit import ScheduledProject, epoch_ms, stop_scheduler
from supervise_kit import events_in, task_def, until

from nexus_core.schedule.core import NewSchedule, add_schedule
from nexus_core.timeutil import iso_from_ms

LONG = os.environ.get("NEXUS_LONG") == "1"
OCCURRENCES = 1000 if LONG else 120
KILLS = 50 if LONG else 6
KILL_OCCURRENCES = 1000 if LONG else 150
T0 = epoch_ms("2026-06-01T00:00")
LATER = f"{T0 + 2 * 3600_000}@0"  # every one-off below is due (and late) at this frozen moment


@pytest.fixture
def project(tmp_path: Path) -> ScheduledProject:
    project = ScheduledProject(tmp_path)
    # Forty tasks: each tick's inspect takes long enough for a kill to land inside occurrences.
    project.create(*(task_def(f"t{n}") for n in range(40)))
    return project


def _due_one_offs(project: ScheduledProject, count: int) -> set[str]:
    ids = set()
    for index in range(count):
        at = iso_from_ms(T0 + 60_000 + index * 1000).replace(".000Z", "Z")
        ids.add(add_schedule(str(project.root), NewSchedule("demo", "at", at, "UTC"), T0)["id"])
    return ids


def _finished(logs: list[Path]) -> list[int]:
    return [e["occurrence"] for log in logs for e in events_in(log) if e["type"] == "occurrence-finished"]


@pytest.mark.parametrize("runners", [2, 4])
def test_every_due_occurrence_fires_exactly_once_across_runners(
    project: ScheduledProject, tmp_path: Path, runners: int
) -> None:
    ids = _due_one_offs(project, OCCURRENCES)
    logs = [tmp_path / f"runner-{n}.jsonl" for n in range(runners)]
    processes = [project.scheduler(log, LATER) for log in logs]
    until(
        lambda: project.rows("SELECT count(*) FROM occurrences WHERE status = 'fired'")[0][0] == OCCURRENCES,
        timeout=900 if LONG else 300,
        what=f"{OCCURRENCES} occurrences",
    )
    for process in processes:
        stop_scheduler(process)
    rows = project.rows("SELECT schedule_id, status FROM occurrences")
    assert Counter(schedule for schedule, _ in rows) == Counter(dict.fromkeys(ids, 1))
    assert {status for _, status in rows} == {"fired"}
    finished = _finished(logs)
    assert len(finished) == len(set(finished)) == OCCURRENCES  # each executed once, by one runner
    started = [e for log in logs for e in events_in(log) if e["type"] == "occurrence-started"]
    assert len(started) == OCCURRENCES
    shares = [sum(1 for e in events_in(log) if e["type"] == "occurrence-finished") for log in logs]
    print(f"\n{runners} runners, {OCCURRENCES} due occurrences: fired once each; shares {shares}")


def test_a_runner_killed_at_random_points_loses_and_doubles_nothing(project: ScheduledProject, tmp_path: Path) -> None:
    ids = _due_one_offs(project, KILL_OCCURRENCES)
    rng = random.Random(int(os.environ.get("NEXUS_SEED", "14")))
    kills = 0
    for round_number in range(KILLS):
        if project.rows("SELECT count(*) FROM occurrences")[0][0] >= KILL_OCCURRENCES:
            break  # everything claimed already: no point left to kill at
        log = tmp_path / f"victim-{round_number}.jsonl"
        victim = project.scheduler(log, LATER)
        until(
            lambda log=log: (
                any(e["type"] == "occurrence-started" for e in events_in(log))
                or project.rows("SELECT count(*) FROM occurrences")[0][0] >= KILL_OCCURRENCES
            ),
            timeout=120,
            what="the victim to claim",
        )
        time.sleep(rng.uniform(0, 0.02))  # fault injection: a random point inside its work
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=30)
        kills += 1
    survivor = project.scheduler(tmp_path / "survivor.jsonl", LATER)  # finishes the rest, reaps the dead
    until(
        lambda: (
            project.rows("SELECT count(*) FROM occurrences WHERE status NOT IN ('fired', 'failed')")[0][0] == 0
            and project.rows("SELECT count(*) FROM occurrences")[0][0] == KILL_OCCURRENCES
        ),
        timeout=600 if LONG else 300,
        what="every occurrence to end fired or failed",
        diagnose=lambda: (
            project.rows("SELECT status, count(*) FROM occurrences GROUP BY status"),
            survivor.poll(),
        ),
    )
    stop_scheduler(survivor)
    rows = project.rows("SELECT schedule_id, status, reason FROM occurrences")
    assert Counter(schedule for schedule, _, _ in rows) == Counter(dict.fromkeys(ids, 1))  # none lost, none doubled
    failed = [reason for _, status, reason in rows if status == "failed"]
    assert all(reason.startswith("runner died (pid ") for reason in failed)
    assert len(failed) <= kills
    assert project.rows("SELECT count(*) FROM occurrences WHERE status = 'claimed'")[0][0] == 0
    print(f"\n{kills} SIGKILLs over {KILL_OCCURRENCES} occurrences: {len(failed)} claims recorded 'runner died'")


def test_a_stopped_runner_never_claims_after_its_stop(project: ScheduledProject, tmp_path: Path) -> None:
    """SIGTERM mid-batch: the runner finishes the occurrence it holds and claims no other."""
    _due_one_offs(project, 30)
    log = tmp_path / "runner.jsonl"
    runner = project.scheduler(log, LATER)
    until(lambda: any(e["type"] == "occurrence-finished" for e in events_in(log)), what="a first occurrence")
    stop_scheduler(runner)
    events = events_in(log)
    started = [e["occurrence"] for e in events if e["type"] == "occurrence-started"]
    assert started == [e["occurrence"] for e in events if e["type"] == "occurrence-finished"]
    assert project.rows("SELECT count(*) FROM occurrences WHERE status = 'claimed'")[0][0] == 0
