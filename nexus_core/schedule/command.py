"""The ``nexus schedule ...`` and ``nexus scheduler`` click commands."""

from __future__ import annotations

import contextlib
import signal
import sqlite3
import sys
from collections.abc import Callable
from datetime import datetime
from types import FrameType
from typing import Any, NoReturn

import click

from ..cli.output import write
from ..cli.refusal import refuse
from ..errors import NexusError
from ..state import canonical
from ..supervise.command import run_click
from ..supervise.loop import LoopStop
from ..terminal import terminal_safe, terminal_safe_json
from ..timeutil import parse_iso_ms
from . import core, db
from .rules import local_zone_name, zone_of
from .runner import TEST_CLOCK_ENV, Clock, run_scheduler

DIRECTORY_HELP = "Project directory (default: the current one)."


def _out(text: str) -> None:
    write(sys.stdout, text)


def _err(text: str) -> None:
    write(sys.stderr, text)


def _json(value: dict[str, Any]) -> str:
    """A subcommand's --json object: C1, bidi controls and separators in a title or a reason
    written as \\u escapes (the same values), like wait's and the scheduler's JSON lines."""
    return terminal_safe_json(canonical.pretty(value)) + "\n"


def _guarded(as_json: bool, action: Callable[[], tuple[dict[str, Any], str]]) -> NoReturn:
    """Run one subcommand: its JSON object or its words, or the error line and exit 1."""
    try:
        result, words = action()
    except (NexusError, OSError) as error:
        refuse(error, as_json, ours=True)
    except sqlite3.Error as error:
        refuse(NexusError(f"{db.failure_words(error)}; nothing was changed."), as_json, ours=True)
    if as_json:
        _out(_json({"schemaVersion": 1, **result}))
    else:
        _out(words + "\n")
    sys.exit(0)


def _now() -> int:
    return Clock.from_environment().now_ms()


def _when(iso: str | None, zone: str) -> str:
    """``2026-12-02T08:00:00.000Z (09:00 CET, Tue 2 Dec)`` for people; ``never`` for None."""
    if iso is None:
        return "none"
    ms = parse_iso_ms(iso)
    if ms is None:
        return iso
    local = datetime.fromtimestamp(ms / 1000, tz=zone_of(zone))
    return f"{iso} ({local.strftime('%a %d %b %H:%M %Z')})"


def _line(schedule: dict[str, Any]) -> str:
    status = "paused" if schedule["paused"] else ("done" if schedule["next"] is None else "active")
    title = f"  {terminal_safe(schedule['title'], one_line=True)}" if schedule["title"] else ""
    last = schedule["lastOutcome"]["status"] if schedule["lastOutcome"] else "-"
    return (
        f"{schedule['id']}  {status:<6}  next {_when(schedule['next'], schedule['zone'])}  "
        f"{schedule['description']}  run {schedule['run']}  last {last}{title}"
    )


def _details(schedule: dict[str, Any]) -> str:
    lines = [
        f"Schedule {schedule['id']}"
        + (f": {terminal_safe(schedule['title'], one_line=True)}" if schedule["title"] else ""),
        f"  run:          {schedule['run']}",
        f"  rule:         {schedule['description']}",
        f"  status:       {'paused' if schedule['paused'] else 'active'}",
        f"  next:         {_when(schedule['next'], schedule['zone'])}",
        f"  verify:       {'yes' if schedule['verify'] else 'no'}",
        f"  catch-up:     {schedule['catchUp']}",
        f"  max duration: {schedule['maxDuration'] or 'none'}",
        f"  created:      {schedule['createdAt']}",
    ]
    return "\n".join(lines)


def _occurrence_line(occurrence: dict[str, Any]) -> str:
    reason = f"  {terminal_safe(occurrence['reason'], one_line=True)}" if occurrence["reason"] else ""
    missed = f" (+{occurrence['missed']} missed)" if occurrence["missed"] else ""
    # Numbered per schedule (#1 its first); the occurrence id is the one `schedule run` prints.
    number = f"#{occurrence['number']} " if occurrence.get("number") is not None else ""
    where = f"{number}(occurrence {occurrence['id']})  {occurrence['due']}  {occurrence['trigger']:<8}"
    return f"{where}  {occurrence['status']:<7}{missed}{reason}"


# ----------------------------------------------------------------- nexus schedule


def _directory(function: Callable[..., Any]) -> Callable[..., Any]:
    function = click.option("--json", "as_json", is_flag=True, help="Print JSON.")(function)
    return click.option("-d", "--directory", default=".", metavar="PATH", help=DIRECTORY_HELP)(function)


SCHEDULE_HELP = """Durable scheduled re-checks of a run, kept in .bmad-plus/nexus/schedules.sqlite3
and fired by `nexus scheduler`.

\b
  nexus schedule add RUN (--every 1h | --daily 09:00 | --weekly mon,fri@09:00
        | --cron EXPR | --at 2026-12-02T14:30) [--tz ZONE] [--verify]
        [--catch-up run-once|skip] [--max-duration 30m] [--title TEXT]
  nexus schedule list | show ID | runs ID | pause ID | resume ID | delete ID | run ID
Every subcommand takes --json and -d DIR.
"""


@click.group(name="schedule", context_settings={"help_option_names": ["-h", "--help"]}, help=SCHEDULE_HELP)
def schedule_group() -> None:
    pass


@schedule_group.command(name="add", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("run")
@click.option("--every", metavar="INTERVAL", help="30s to 24h, as Ns, Nm or Nh (counted from now).")
@click.option("--daily", metavar="HH:MM", help="Every day at this local time.")
@click.option("--weekly", metavar="DAYS@HH:MM", help="On these days (mon..sun, comma-separated) at this time.")
@click.option("--cron", metavar="EXPR", help="A 5-field cron expression: minute hour day month weekday.")
@click.option("--at", "at", metavar="ISO", help="Once, at this date and time (local to --tz unless it has Z/offset).")
@click.option("--tz", "zone", metavar="ZONE", help="IANA time zone (default: this host's, else UTC).")
@click.option("--verify", is_flag=True, help="Also verify completed attempts that await verification.")
@click.option(
    "--catch-up",
    "catch_up",
    default="run-once",
    show_default=True,
    metavar="run-once|skip",
    help="After a stop: run the missed occurrences once, or skip them.",
)
@click.option("--max-duration", "max_duration", metavar="DURATION", help="1s to 72h; longer is stopped and failed.")
@click.option("--title", metavar="TEXT", help="A name for people.")
@_directory
def add_command(
    run: str,
    every: str | None,
    daily: str | None,
    weekly: str | None,
    cron: str | None,
    at: str | None,
    zone: str | None,
    verify: bool,
    catch_up: str,
    max_duration: str | None,
    title: str | None,
    directory: str,
    as_json: bool,
) -> None:
    """Add a schedule for RUN; prints its id and next occurrence."""

    def act() -> tuple[dict[str, Any], str]:
        given = [
            (k, v)
            for k, v in (("every", every), ("daily", daily), ("weekly", weekly), ("cron", cron), ("at", at))
            if v is not None
        ]
        if len(given) != 1:
            raise NexusError("Give exactly one of --every, --daily, --weekly, --cron or --at.")
        kind, text = given[0]
        new = core.NewSchedule(run, kind, text, zone or local_zone_name(), verify, catch_up, max_duration, title)
        schedule = core.add_schedule(directory, new, _now())
        words = (
            f"Schedule {schedule['id']} added for run {run}: {schedule['description']}.\n"
            f"Next occurrence: {_when(schedule['next'], schedule['zone'])}.\n"
            "It fires while a `nexus scheduler` runs for this project."
        )
        return schedule, words

    _guarded(as_json, act)


@schedule_group.command(name="list", context_settings={"help_option_names": ["-h", "--help"]})
@_directory
def list_command(directory: str, as_json: bool) -> None:
    """Every schedule: id, status, next occurrence, rule, run, last outcome, title."""

    def act() -> tuple[dict[str, Any], str]:
        schedules = core.list_schedules(directory)
        words = "\n".join(_line(s) for s in schedules) if schedules else "No schedules (nexus schedule add RUN ...)."
        return {"schedules": schedules}, words

    _guarded(as_json, act)


@schedule_group.command(name="show", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("id")
@_directory
def show_command(id: str, directory: str, as_json: bool) -> None:
    """One schedule's details and its five latest occurrences."""

    def act() -> tuple[dict[str, Any], str]:
        shown = core.show_schedule(directory, id)
        latest = [_occurrence_line(o) for o in shown["occurrences"]] or ["  none yet"]
        last = "\n  ".join(latest)
        return shown, f"{_details(shown)}\nLatest occurrences:\n  {last}"

    _guarded(as_json, act)


@schedule_group.command(name="runs", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("id")
@_directory
def runs_command(id: str, directory: str, as_json: bool) -> None:
    """A schedule's history: fired, failed, skipped, and why."""

    def act() -> tuple[dict[str, Any], str]:
        occurrences = core.schedule_runs(directory, id)
        words = "\n".join(_occurrence_line(o) for o in occurrences) or f"Schedule {id} has not fired yet."
        return {"schedule": id, "occurrences": occurrences}, words

    _guarded(as_json, act)


def _pause_or_resume(id: str, directory: str, as_json: bool, paused: bool) -> NoReturn:
    def act() -> tuple[dict[str, Any], str]:
        schedule = core.set_paused(directory, id, paused, _now())
        if paused:
            return schedule, f"Schedule {id} paused."
        return schedule, f"Schedule {id} resumed; next occurrence: {_when(schedule['next'], schedule['zone'])}."

    _guarded(as_json, act)


@schedule_group.command(name="pause", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("id")
@_directory
def pause_command(id: str, directory: str, as_json: bool) -> None:
    """Stop firing until resumed."""
    _pause_or_resume(id, directory, as_json, True)


@schedule_group.command(name="resume", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("id")
@_directory
def resume_command(id: str, directory: str, as_json: bool) -> None:
    """Fire again, counting from now (time spent paused is not caught up)."""
    _pause_or_resume(id, directory, as_json, False)


@schedule_group.command(name="delete", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("id")
@_directory
def delete_command(id: str, directory: str, as_json: bool) -> None:
    """Delete a schedule and its history."""

    def act() -> tuple[dict[str, Any], str]:
        return core.delete_schedule(directory, id), f"Schedule {id} deleted, with its history."

    _guarded(as_json, act)


@schedule_group.command(name="run", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("id")
@_directory
def run_command(id: str, directory: str, as_json: bool) -> None:
    """Fire now: a running `nexus scheduler` picks the request up within a second."""

    def act() -> tuple[dict[str, Any], str]:
        occurrence = core.request_run(directory, id, _now())
        words = f"Occurrence {occurrence['id']} of schedule {id} requested; a running nexus scheduler fires it."
        if not occurrence["runnerSeen"]:
            words += "\nNo scheduler has been seen for this project lately: start one with `nexus scheduler`."
        return occurrence, words

    _guarded(as_json, act)


# ----------------------------------------------------------------- nexus scheduler


SCHEDULER_HELP = f"""Fire the due occurrences of every schedule of the projects (-d, repeatable),
until Ctrl+C or SIGTERM (each stops it after the current step).

\b
Wakes at the next due occurrence, at least every 60 s, and within a second
when a schedule changes. Each occurrence runs as a `nexus loop` tick:
inspect, report stale and overdue work, and with --verify verify what
awaits verification (through `nexus verify`, in its own process group).
A run found busy is recorded as skipped. Several schedulers may run for
one project: each occurrence fires once. stdout: one JSON event per line
(nexus wait's events, plus occurrence-started/-finished); stderr: words.
Test hook (for the test suite only): {TEST_CLOCK_ENV}=EPOCH_MS[@RATE].
"""


@click.command(name="scheduler", context_settings={"help_option_names": ["-h", "--help"]}, help=SCHEDULER_HELP)
@click.option(
    "-d",
    "--directory",
    "directories",
    multiple=True,
    metavar="PATH",
    help="A project directory (repeatable; default: the current one).",
)
@click.option("--event-log", metavar="FILE", help="Also write the events to FILE, a new file (0600).")
def scheduler_command(directories: tuple[str, ...], event_log: str | None) -> None:
    stop = LoopStop()

    def on_signal(_number: int, _frame: FrameType | None) -> None:
        stop.request()
        if stop.requests == 1:
            _err("nexus scheduler: stopping after the current step (again leaves a running verification to finish).\n")

    previous = {number: signal.signal(number, on_signal) for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        clock = Clock.from_environment()
        result = run_scheduler(
            list(directories) or ["."], emit=_out, say=_err, event_log=event_log, clock=clock, stop=stop
        )
    except (NexusError, OSError) as error:
        refuse(error, False, ours=True)
    except sqlite3.Error as error:
        refuse(NexusError(f"{db.failure_words(error)}."), False, ours=True)
    finally:
        for number, handler in previous.items():
            with contextlib.suppress(ValueError, TypeError):
                signal.signal(number, handler)
    _err(f"nexus scheduler: stopped; {result.fired} fired, {result.skipped} skipped, {result.failed} failed.\n")
    sys.exit(0)


def schedule_main(argv: list[str]) -> NoReturn:
    """``nexus schedule ...`` and ``nexus scheduler ...``: argv starts with the command name."""
    command: click.Command = schedule_group if argv[0] == "schedule" else scheduler_command
    run_click(command, argv[1:], f"nexus {argv[0]}")
