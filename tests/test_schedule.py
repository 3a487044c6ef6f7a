"""`nexus schedule` and `nexus scheduler`: commands, refusals, rules and daylight saving,
catch-up, busy runs, --max-duration, dead runners, and databases that are not ours.

Time is driven through the scheduler's documented test hook (NEXUS_SCHEDULER_TEST_CLOCK) or
the core API's ``now`` parameter: nothing waits for a real day to pass."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import stat
import subprocess
import uuid
from pathlib import Path

import pytest
from schedule_kit import ScheduledProject, epoch_ms, finished_events, stop_scheduler
from supervise_kit import events_in, nexus_command, task_def, tree_digest, until

from nexus_core.schedule.db import APPLICATION_ID, SCHEMA_VERSION
from nexus_core.schedule.rules import Rule, parse_rule
from nexus_core.timeutil import iso_from_ms

T0 = epoch_ms("2026-06-01T00:00")


@pytest.fixture
def project(tmp_path: Path) -> ScheduledProject:
    project = ScheduledProject(tmp_path)
    project.create(task_def("a"))
    return project


# ----------------------------------------------------------------- commands


def test_add_list_show_pause_resume_delete(project: ScheduledProject) -> None:
    added = project.add("--daily", "09:00", "--tz", "Europe/Paris", "--verify", "--title", "morning", clock=T0)
    assert list(added)[:3] == ["schemaVersion", "id", "run"]
    assert added["next"] == "2026-06-01T07:00:00.000Z"  # 09:00 CEST
    assert (added["kind"], added["rule"], added["zone"], added["verify"], added["catchUp"]) == (
        "daily",
        "09:00",
        "Europe/Paris",
        True,
        "run-once",
    )
    words = project.schedule("add", "demo", "--every", "1h", "--max-duration", "90m", clock=T0).stdout
    assert "added for run demo: every 1h." in words and "Next occurrence: 2026-06-01T01:00:00.000Z" in words
    listed = json.loads(project.schedule("list", "--json").stdout)["schedules"]
    assert listed[0]["id"] == added["id"] and listed[1]["maxDuration"] == "90m"
    text = project.schedule("list").stdout
    assert added["id"] in text and "daily at 09:00 (Europe/Paris)" in text and "morning" in text
    shown = json.loads(project.schedule("show", added["id"], "--json").stdout)
    assert shown["occurrences"] == [] and shown["title"] == "morning"
    assert "Latest occurrences:" in project.schedule("show", added["id"]).stdout
    paused = json.loads(project.schedule("pause", added["id"], "--json").stdout)
    assert paused["paused"] is True and paused["next"] is None
    resumed = json.loads(project.schedule("resume", added["id"], "--json", clock=T0 + 8 * 3600_000).stdout)
    assert resumed["next"] == "2026-06-02T07:00:00.000Z"  # counted from the resume, nothing caught up
    deleted = json.loads(project.schedule("delete", added["id"], "--json").stdout)
    assert deleted["deleted"] is True
    assert [s["id"] for s in json.loads(project.schedule("list", "--json").stdout)["schedules"]] == [listed[1]["id"]]
    assert stat.S_IMODE(project.db.stat().st_mode) == 0o600
    assert stat.S_IMODE(project.db.parent.stat().st_mode) == 0o700
    assert sorted(os.listdir(project.db.parent)) == ["runs", "schedules.sqlite3"]  # no journal, no temporary


def test_database_carries_its_schema_version_and_migrations(project: ScheduledProject) -> None:
    project.add("--every", "1h")
    connection = sqlite3.connect(f"file:{project.db}?mode=ro", uri=True)
    try:
        assert connection.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
        assert connection.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 1
        assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
        assert [row[0] for row in connection.execute("SELECT version FROM migrations")] == [1]
    finally:
        connection.close()


BAD_ADDS = [
    (["--every", "1h", "--tz", "Mars/Olympus"], "--tz 'Mars/Olympus' is not an IANA time zone name"),
    (["--daily", "09:00", "--tz", "../../etc/passwd"], "is not an IANA time zone name"),
    (["--cron", "61 * * * *"], "--cron '61 * * * *' is not a valid cron expression"),
    (["--cron", "0 9 * *"], "--cron takes a 5-field expression"),
    (["--cron", "0 0 31 2 *"], "is not a valid cron expression"),
    (["--every", "29s"], "--every must be between 30s and 24h; got 29s."),
    (["--every", "25h"], "--every must be between 30s and 24h; got 25h."),
    (["--every", "1.5h"], "--every takes a whole number"),
    (["--daily", "24:00"], "--daily takes a time of day as HH:MM"),
    (["--weekly", "funday@09:00"], "--weekly takes days and a time"),
    (["--at", "tomorrow"], "--at takes an ISO date and time"),
    (["--at", "2026-02-30T10:00"], "--at '2026-02-30T10:00' is not a valid date and time."),
    (["--at", "2026-05-31T10:00"], "--at 2026-05-31T10:00 is in the past"),
    (["--every", "1h", "--max-duration", "0s"], "--max-duration must be between 1s and 72h; got 0s."),
    (["--every", "1h", "--max-duration", "73h"], "--max-duration must be between 1s and 72h; got 73h."),
    (["--every", "1h", "--catch-up", "always"], "--catch-up is run-once or skip"),
    (["--every", "1h", "--daily", "09:00"], "Give exactly one of --every, --daily, --weekly, --cron or --at."),
    ([], "Give exactly one of"),
]


@pytest.mark.parametrize(("args", "message"), BAD_ADDS)
def test_bad_input_is_refused_and_creates_nothing(project: ScheduledProject, args: list[str], message: str) -> None:
    before = tree_digest(project.root)
    done = project.schedule("add", "demo", *args, clock=T0, ok=False)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.startswith("Nexus: ") and message in done.stderr, done.stderr
    as_json = project.schedule("add", "demo", *args, "--json", clock=T0, ok=False)
    assert as_json.returncode == 1
    error = json.loads(as_json.stdout)
    assert error["status"] == "error" and message in error["error"]
    assert tree_digest(project.root) == before and not project.db.exists()


def test_unknown_run_and_unknown_schedule_are_refused(project: ScheduledProject) -> None:
    done = project.schedule("add", "nope", "--every", "1h", ok=False)
    assert done.returncode == 1 and done.stderr.startswith("Nexus: Unknown run: nope")
    for command in ("show", "runs", "pause", "resume", "delete", "run"):
        done = project.schedule(command, "deadbeef", ok=False)
        assert (done.returncode, done.stderr.splitlines()[0][:27]) == (1, "Nexus: Unknown schedule: de")
    assert not project.db.exists()  # no command about a schedule creates the database
    project.add("--every", "1h")
    before = project.db.read_bytes()
    assert project.schedule("pause", "deadbeef", ok=False).returncode == 1
    assert project.db.read_bytes() == before


def test_inspect_inventory_gains_a_schedules_summary_only_when_there_are_schedules(
    project: ScheduledProject,
) -> None:
    inventory = json.loads(project.nexus("inspect", "--json").stdout)
    assert "schedules" not in inventory and not project.db.exists()
    project.add("--every", "1h", clock=T0)
    inventory = json.loads(project.nexus("inspect", "--json").stdout)
    assert list(inventory)[-1] == "schedules"
    assert inventory["schedules"]["total"] == 1 and inventory["schedules"]["next"] == "2026-06-01T01:00:00.000Z"
    before = tree_digest(project.root)
    project.nexus("inspect", "--json")
    project.schedule("list")
    project.schedule("list", "--json")
    assert tree_digest(project.root) == before  # reading writes nothing, the database included


# ----------------------------------------------------------------- rules and daylight saving


def _local(ms: int | None, zone: str) -> str:
    from datetime import datetime
    from zoneinfo import ZoneInfo

    assert ms is not None
    return datetime.fromtimestamp(ms / 1000, tz=ZoneInfo(zone)).isoformat()


@pytest.mark.parametrize(
    ("zone", "rule", "start", "expected"),
    [
        # Clocks go forward: 02:30 does not exist that night; it fires once, at the first valid time.
        ("Europe/Paris", "02:30", "2026-03-28T12:00", ["2026-03-29T03:00:00+02:00", "2026-03-30T02:30:00+02:00"]),
        ("America/New_York", "02:30", "2026-03-07T12:00", ["2026-03-08T03:00:00-04:00", "2026-03-09T02:30:00-04:00"]),
        # Clocks go back: 02:30 (Paris) and 01:30 (New York) happen twice; each fires once.
        ("Europe/Paris", "02:30", "2026-10-24T12:00", ["2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00"]),
        ("America/New_York", "01:30", "2026-10-31T12:00", ["2026-11-01T01:30:00-04:00", "2026-11-02T01:30:00-05:00"]),
    ],
)
def test_daily_times_across_daylight_saving_fire_once(zone: str, rule: str, start: str, expected: list[str]) -> None:
    daily = parse_rule("daily", rule, zone, epoch_ms(start))
    first = daily.next_after(epoch_ms(start))
    second = daily.next_after(first) if first is not None else None
    assert [_local(first, zone), _local(second, zone)] == expected
    found, cut = daily.occurrences_between(epoch_ms(start), epoch_ms(start) + 4 * 86400_000, 100)
    assert not cut and len(found) == 4 and len({_local(m, zone)[:10] for m in found}) == 4  # one per day


def test_an_ambiguous_time_fires_once_even_when_asked_from_inside_the_repeated_hour() -> None:
    rule = Rule("daily", "01:30", "America/New_York")
    # 05:40Z = 01:40 EDT (first pass, after the 01:30 that already fired); 06:20Z = 01:20 EST (second pass).
    for moment in ("2026-11-01T05:40", "2026-11-01T06:20"):
        assert _local(rule.next_after(epoch_ms(moment)), "America/New_York") == "2026-11-02T01:30:00-05:00"


def test_cron_weekly_and_one_off_rules() -> None:
    weekdays = parse_rule("cron", "0 9 * * 1-5", "Europe/Paris", epoch_ms("2026-06-05T12:00"))  # a Friday
    assert _local(weekdays.next_after(epoch_ms("2026-06-05T12:00")), "Europe/Paris") == "2026-06-08T09:00:00+02:00"
    weekly = parse_rule("weekly", "mon,FRI@18:15", "UTC", T0)
    assert weekly.text == "mon,fri@18:15"
    assert iso_from_ms(weekly.next_after(T0) or 0) == "2026-06-01T18:15:00.000Z"  # 1 June 2026 is a Monday
    once = parse_rule("at", "2026-03-29T02:30", "Europe/Paris", epoch_ms("2026-03-01T00:00"))
    assert _local(once.next_after(epoch_ms("2026-03-01T00:00")), "Europe/Paris") == "2026-03-29T03:00:00+02:00"
    assert once.next_after(epoch_ms("2026-03-30T00:00")) is None
    every = parse_rule("every", "30s", "UTC", T0)
    assert every.next_after(T0) == T0 + 30_000 and every.next_after(T0 + 45_000) == T0 + 60_000


def test_cli_shows_the_next_valid_time_after_a_gap(project: ScheduledProject) -> None:
    added = project.add("--daily", "02:30", "--tz", "Europe/Paris", clock=epoch_ms("2026-03-28T12:00"))
    assert added["next"] == "2026-03-29T01:00:00.000Z"  # 03:00 CEST, the first valid time
    assert "Sun 29 Mar 03:00 CEST" in project.schedule("list").stdout


# ----------------------------------------------------------------- the runner


def test_scheduler_fires_records_and_emits_wait_events(project: ScheduledProject, tmp_path: Path) -> None:
    project.start("a")
    schedule = project.add("--every", "1h", clock=T0)
    log = tmp_path / "events.jsonl"
    runner = project.scheduler(log, f"{T0 + 3600_000}@0")
    until(lambda: finished_events(log), what="the occurrence")
    project.write("a")
    project.record("a")  # a change between two ticks: the next tick reports it as wait would
    project.schedule("run", schedule["id"])
    until(lambda: len(finished_events(log)) == 2, what="the manual occurrence (woken by the change)")
    out, err = stop_scheduler(runner)
    assert out.splitlines() == log.read_text().splitlines()  # stdout and --event-log carry the same lines
    events = events_in(log)
    kinds = [e["type"] for e in events]
    assert kinds[0] == "scheduler-started" and kinds[-1] == "scheduler-stopped"
    assert "outcome-recorded" in kinds  # the same event nexus wait emits for the record
    recorded = next(e for e in events if e["type"] == "outcome-recorded")
    assert (recorded["run"], recorded["task"], recorded["outcome"]) == ("demo", "a", "completed")
    runs = project.runs(schedule["id"])
    assert [(o["trigger"], o["status"]) for o in runs] == [("schedule", "fired"), ("manual", "fired")]
    assert runs[0]["due"] == "2026-06-01T01:00:00.000Z" and "sequence" in runs[0]["reason"]
    assert "nexus scheduler: stopped; 2 fired, 0 skipped, 0 failed." in err
    assert "Traceback" not in err


def test_a_busy_run_is_recorded_as_skipped_with_the_reason(project: ScheduledProject, tmp_path: Path) -> None:
    schedule = project.add("--every", "1h", clock=T0)
    project.hand_lock(os.getpid())  # a live writer holds the lock
    log = tmp_path / "events.jsonl"
    runner = project.scheduler(log, f"{T0 + 3600_000}@0")
    until(lambda: finished_events(log), what="the occurrence")
    stop_scheduler(runner)
    [occurrence] = project.runs(schedule["id"])
    assert occurrence["status"] == "skipped"
    assert occurrence["reason"].startswith(f"run busy (writer.lock held by pid {os.getpid()} on ")


@pytest.mark.parametrize("policy", ["run-once", "skip"])
def test_catch_up_after_a_three_day_stop(project: ScheduledProject, tmp_path: Path, policy: str) -> None:
    schedule = project.add("--every", "1h", "--catch-up", policy, clock=T0)
    daily = project.add("--daily", "09:00", "--tz", "Europe/Paris", "--catch-up", policy, clock=T0)
    back = T0 + 3 * 86400_000 + 30 * 60_000  # three days and half an hour later: every occurrence is late
    log = tmp_path / "events.jsonl"
    runner = project.scheduler(log, f"{back}@0")
    until(lambda: len(finished_events(log)) == 2, what="both schedules to catch up")
    stop_scheduler(runner)
    hourly, mornings = project.runs(schedule["id"]), project.runs(daily["id"])
    if policy == "run-once":
        assert [(o["status"], o["missed"], o["due"]) for o in hourly] == [("fired", 71, "2026-06-04T00:00:00.000Z")]
        assert [(o["status"], o["missed"]) for o in mornings] == [("fired", 2)]  # 1, 2 and 3 June at 09:00
    else:
        assert [(o["status"], o["missed"]) for o in hourly] == [("skipped", 72)]
        assert hourly[0]["reason"] == (
            "72 missed occurrence(s) from 2026-06-01T01:00:00.000Z skipped (catch-up policy skip)"
        )
        assert [(o["status"], o["missed"]) for o in mornings] == [("skipped", 3)]
    shown = json.loads(project.schedule("show", schedule["id"], "--json").stdout)
    assert shown["next"] == "2026-06-04T01:00:00.000Z"  # advanced past the stop, once
    assert shown["lastOutcome"]["status"] == ("fired" if policy == "run-once" else "skipped")


def test_paused_schedules_do_not_fire(project: ScheduledProject, tmp_path: Path) -> None:
    schedule = project.add("--every", "1h", clock=T0)
    other = project.add("--every", "2h", clock=T0)
    project.schedule("pause", schedule["id"])
    log = tmp_path / "events.jsonl"
    runner = project.scheduler(log, f"{T0 + 2 * 3600_000}@0")
    until(lambda: finished_events(log), what="the active schedule")
    stop_scheduler(runner)
    assert project.runs(schedule["id"]) == [] and len(project.runs(other["id"])) == 1


def _awaiting_a_slow_verification(project: ScheduledProject) -> str:
    """A completed attempt whose check sleeps about 300 s; returns the check's unique argument."""
    marker = f"299.{uuid.uuid4().int % 10**9}"
    slow = task_def("a", checks=[{"id": "slow", "command": "/bin/sleep", "args": [marker], "timeoutMs": 300000}])
    project.run_id = "slow"
    project.create(slow)
    project.start("a")
    project.write("a")
    project.record("a")
    return marker


def _sleepers(marker: str) -> list[int]:
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as handle:
                    if handle.read().endswith(f"sleep\x00{marker}\x00".encode()):  # command is resolved
                        found.append(int(pid))
            except OSError:
                continue
    return found


def test_max_duration_stops_a_long_verification_and_records_failed(project: ScheduledProject, tmp_path: Path) -> None:
    marker = _awaiting_a_slow_verification(project)
    schedule = project.add("--every", "24h", "--verify", "--max-duration", "2s")
    log = tmp_path / "events.jsonl"
    runner = project.scheduler(log)
    project.schedule("run", schedule["id"])
    # The check sleeps 300 s: the occurrence can only finish this soon if the deadline stopped it.
    until(lambda: finished_events(log), timeout=90, what="the verification to be stopped")
    stop_scheduler(runner)
    [occurrence] = project.runs(schedule["id"])
    assert occurrence["status"] == "failed"
    assert occurrence["reason"] == "maximum duration 2s exceeded: the verification of a was stopped"
    verification = project.state()["tasks"][0]["attempts"][-1]["verification"]
    assert verification["status"] == "ambiguous"  # verify recorded a verdict; never left running
    until(lambda: not _sleepers(marker), what="the check process to be gone")


def test_a_claim_of_a_killed_runner_is_recorded_failed_by_the_next_scan(
    project: ScheduledProject, tmp_path: Path
) -> None:
    marker = _awaiting_a_slow_verification(project)
    schedule = project.add("--every", "24h", "--verify")
    log = tmp_path / "first.jsonl"
    first = project.scheduler(log)
    project.schedule("run", schedule["id"])
    until(lambda: bool(_sleepers(marker)), what="the check to run")
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=30)
    assert [o["status"] for o in project.runs(schedule["id"])] == ["claimed"]
    for pid in _sleepers(marker):
        os.kill(pid, signal.SIGKILL)  # the orphaned verification, killed too (a host crash)
    second_log = tmp_path / "second.jsonl"
    second = project.scheduler(second_log)
    until(lambda: finished_events(second_log), what="the dead claim to be recorded")
    stop_scheduler(second)
    [occurrence] = project.runs(schedule["id"])
    assert occurrence["status"] == "failed" and occurrence["reason"].startswith("runner died (pid ")
    assert occurrence["runner"]["pid"] == first.pid


def test_ctrl_c_stops_the_scheduler_cleanly_and_an_existing_event_log_is_refused(
    project: ScheduledProject, tmp_path: Path
) -> None:
    log = tmp_path / "events.jsonl"
    runner = project.scheduler(log)  # no database yet: it waits for one, creating nothing
    assert not project.db.exists()
    _out, err = stop_scheduler(runner, signal.SIGINT)
    assert "nexus scheduler: stopped; 0 fired, 0 skipped, 0 failed." in err
    assert not project.db.exists()
    done = subprocess.run(
        nexus_command("scheduler", "-d", str(project.root), "--event-log", str(log)), capture_output=True, text=True
    )
    assert done.returncode == 1 and "already exists; an event log is never overwritten" in done.stderr


# ----------------------------------------------------------------- databases that are not ours


def _foreign_sqlite(path: Path) -> None:
    connection = sqlite3.connect(path)
    connection.execute("CREATE TABLE notes (body TEXT)")
    connection.execute("INSERT INTO notes VALUES ('precious')")
    connection.commit()
    connection.close()


def _ours_without_schema(path: Path) -> None:
    connection = sqlite3.connect(path)
    connection.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    connection.execute("PRAGMA user_version = 1")
    connection.execute("CREATE TABLE other (x)")
    connection.commit()
    connection.close()


def _newer(path: Path) -> None:
    connection = sqlite3.connect(path)
    connection.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    connection.execute("PRAGMA user_version = 99")
    connection.execute("CREATE TABLE t (x)")
    connection.commit()
    connection.close()


def _corrupt_pages(path: Path, project: ScheduledProject) -> None:
    """Ours, with every b-tree page after the first given an invalid page type."""
    project.add("--every", "1h")
    data = bytearray(path.read_bytes())
    for offset in range(4096, len(data), 4096):
        data[offset] = 0x42
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    ("maker", "message"),
    [
        (lambda path, _p: path.write_bytes(b"hello, not a database\n" * 10), "is not an SQLite database"),
        (lambda path, _p: path.write_bytes(b"SQLite format 3\x00" + os.urandom(4000)), "nexus did not create"),
        (lambda path, _p: _foreign_sqlite(path), "is an SQLite database that nexus did not create"),
        (lambda path, _p: _ours_without_schema(path), "does not have the nexus schedules schema"),
        (lambda path, _p: _newer(path), "has schema version 99, newer than this nexus knows (1)"),
        (_corrupt_pages, "is corrupt"),
    ],
)
def test_a_database_that_is_not_ours_is_refused_and_never_rewritten(
    project: ScheduledProject, tmp_path: Path, maker: object, message: str
) -> None:
    project.db.parent.mkdir(parents=True, exist_ok=True)
    maker(project.db, project)  # type: ignore[operator]
    os.chmod(project.db, 0o600)
    before = tree_digest(project.root)
    for args in (["list"], ["add", "demo", "--every", "1h"], ["show", "deadbeef"], ["run", "deadbeef"]):
        done = project.schedule(*args, ok=False)
        assert done.returncode == 1 and message in done.stderr and "it was not used or changed" in done.stderr, (
            args,
            done.stderr,
        )
        assert "Traceback" not in done.stderr
    done = subprocess.run(
        nexus_command("scheduler", "-d", str(project.root), "--event-log", str(tmp_path / "e.jsonl")),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1 and message in done.stderr and "Traceback" not in done.stderr
    inventory = json.loads(project.nexus("inspect", "--json").stdout)
    assert message in inventory["schedules"]["error"]
    (tmp_path / "e.jsonl").unlink(missing_ok=True)
    assert tree_digest(project.root) == before  # bytes unchanged, nothing added beside it


def test_a_symlinked_or_shared_database_is_refused(project: ScheduledProject, tmp_path: Path) -> None:
    project.add("--every", "1h")
    real = tmp_path / "elsewhere.sqlite3"
    project.db.rename(real)
    project.db.symlink_to(real)
    done = project.schedule("list", ok=False)
    assert done.returncode == 1 and "is a symlink" in done.stderr
    project.db.unlink()
    real.rename(project.db)
    os.chmod(project.db, 0o666)
    done = project.schedule("list", ok=False)
    assert done.returncode == 1 and "is unsafe (group- or world-writable)" in done.stderr


# ----------------------------------------------------------------- the systemd example


def test_the_systemd_unit_runs_the_scheduler_and_the_readme_shows_it(tmp_path: Path) -> None:
    import configparser
    import shlex
    import sys

    root = Path(__file__).resolve().parent.parent
    text = (root / "examples" / "nexus-scheduler.service").read_text()
    unit = configparser.ConfigParser(interpolation=None, strict=False)
    unit.optionxform = str  # type: ignore[assignment,method-assign]
    unit.read_string(text)
    service = unit["Service"]
    assert (service["KillMode"], service["KillSignal"]) == ("mixed", "SIGTERM")
    words = shlex.split(service["ExecStart"].replace("%h", str(tmp_path)))
    assert Path(words[0]).name == "nexus" and words[1] == "scheduler"
    (tmp_path / "projects" / "app").mkdir(parents=True)
    log = tmp_path / "events.jsonl"
    process = subprocess.Popen(
        [sys.executable, "-m", "nexus_core.cli", *words[1:], "--event-log", str(log)],
        cwd=service["WorkingDirectory"].replace("%h", str(tmp_path)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    until(lambda: "scheduler-started" in (log.read_text() if log.exists() else ""), what="the unit's scheduler")
    process.send_signal(signal.SIGTERM)  # what systemctl stop sends
    assert process.wait(timeout=60) == 0
    assert events_in(log)[0]["projects"] == [str(tmp_path / "projects" / "app")]
    assert "examples/nexus-scheduler.service" in (root / "README.md").read_text()


def test_a_foreign_file_that_appears_while_running_is_reported_once_and_left_alone(
    project: ScheduledProject, tmp_path: Path
) -> None:
    log = tmp_path / "events.jsonl"
    runner = project.scheduler(log)
    # It appears whole (renamed into place): written in place, the runner could see it empty,
    # then full, and rightly report two different files.
    foreign = project.db.with_name("foreign.tmp")
    foreign.write_bytes(b"not ours\n" * 20)
    os.chmod(foreign, 0o600)
    foreign.rename(project.db)
    err = Path(f"{log}.err")
    until(lambda: "is not an SQLite database" in err.read_text(), what="the refusal")
    assert project.db.read_bytes() == b"not ours\n" * 20
    project.db.unlink()
    schedule = project.add("--every", "1h")
    project.schedule("run", schedule["id"])  # many wake-ups later, the runner still works
    until(lambda: finished_events(log), what="the occurrence once the file is ours")
    _out, text = stop_scheduler(runner)
    assert text.count("is not an SQLite database") == 1


def test_a_malformed_test_clock_is_refused_cleanly(project: ScheduledProject) -> None:
    env = {**os.environ, "NEXUS_SCHEDULER_TEST_CLOCK": "yesterday"}
    for args in (["scheduler"], ["schedule", "add", "demo", "--every", "1h"]):
        done = subprocess.run(
            nexus_command(*args, "-d", str(project.root)), capture_output=True, text=True, env=env, timeout=60
        )
        assert done.returncode == 1 and "NEXUS_SCHEDULER_TEST_CLOCK must be EPOCH_MS or EPOCH_MS@RATE" in done.stderr
        assert "Traceback" not in done.stderr
    assert not project.db.exists()


def test_help_and_usage_errors(project: ScheduledProject) -> None:
    bare = subprocess.run(nexus_command("schedule"), capture_output=True, text=True, timeout=60)
    assert bare.returncode == 0 and bare.stdout.startswith("Usage: nexus schedule") and "pause" in bare.stdout
    helped = subprocess.run(nexus_command("scheduler", "--help"), capture_output=True, text=True, timeout=60)
    assert helped.returncode == 0 and "NEXUS_SCHEDULER_TEST_CLOCK" in helped.stdout
    for args, message in (
        (["schedule", "bogus"], "error: No such command 'bogus'\n"),
        (["schedule", "show"], "error: missing required argument 'id'\n"),
        (["schedule", "add", "demo", "--every", "1h", "--bogus"], "error: unknown option '--bogus'\n"),
    ):
        done = subprocess.run(nexus_command(*args), capture_output=True, text=True, timeout=60)
        assert (done.returncode, done.stderr) == (1, message)


def test_runs_numbers_the_occurrences_of_each_schedule(project: ScheduledProject) -> None:
    """`schedule runs` numbers a schedule's occurrences #1, #2... (the ids count every
    schedule's together); in JSON, ``number`` comes after the existing keys."""
    first = project.add("--every", "1h")["id"]
    second = project.add("--every", "2h")["id"]
    for schedule_id in (first, second, first):
        project.schedule("run", schedule_id)
    runs = project.runs(first)
    assert [(o["id"], o["number"]) for o in runs] == [(1, 1), (3, 2)]
    assert [(o["id"], o["number"]) for o in project.runs(second)] == [(2, 1)]
    assert list(runs[0])[-1] == "number" and list(runs[0])[:-1] == [
        "id",
        "schedule",
        "trigger",
        "due",
        "missed",
        "status",
        "reason",
        "requestedAt",
        "claimedAt",
        "finishedAt",
        "runner",
    ]
    lines = project.schedule("runs", first).stdout.splitlines()
    assert [line.split("  ")[0] for line in lines] == ["#1 (occurrence 1)", "#2 (occurrence 3)"]
    shown = json.loads(project.schedule("show", first, "--json").stdout)["occurrences"]
    assert [(o["id"], o["number"]) for o in shown] == [(3, 2), (1, 1)]  # newest first
