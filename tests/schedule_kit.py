"""A project with schedules, driven through the real `nexus schedule` / `nexus scheduler`."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from supervise_kit import Project, events_in, nexus_command, until

CLOCK_ENV = "NEXUS_SCHEDULER_TEST_CLOCK"


def epoch_ms(text: str) -> int:
    """``2026-06-01T00:00`` (UTC) as epoch milliseconds."""
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp() * 1000)


class ScheduledProject(Project):
    @property
    def db(self) -> Path:
        return self.root / ".bmad-plus" / "nexus" / "schedules.sqlite3"

    def schedule(self, *args: str, clock: int | None = None, ok: bool = True) -> subprocess.CompletedProcess[str]:
        env = dict(os.environ)
        env.pop(CLOCK_ENV, None)
        if clock is not None:
            env[CLOCK_ENV] = f"{clock}@0"
        done = subprocess.run(
            nexus_command("schedule", *args, "-d", str(self.root)),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            env=env,
        )
        if ok:
            assert done.returncode == 0, (args, done.stdout, done.stderr)
        return done

    def add(self, *args: str, clock: int | None = None) -> dict[str, Any]:
        done = self.schedule("add", self.run_id, *args, "--json", clock=clock)
        return json.loads(done.stdout)  # type: ignore[no-any-return]

    def runs(self, schedule_id: str) -> list[dict[str, Any]]:
        return json.loads(self.schedule("runs", schedule_id, "--json").stdout)["occurrences"]  # type: ignore[no-any-return]

    def scheduler(self, log: Path, clock: str | None = None, *extra: str) -> subprocess.Popen[str]:
        env = dict(os.environ)
        env.pop(CLOCK_ENV, None)
        if clock is not None:
            env[CLOCK_ENV] = clock
        # stdout and stderr to files: a pipe nobody reads would fill and block the runner.
        with open(f"{log}.out", "w") as out, open(f"{log}.err", "w") as err:
            process = subprocess.Popen(
                nexus_command("scheduler", "-d", str(self.root), "--event-log", str(log), *extra),
                stdout=out,
                stderr=err,
                text=True,
                env=env,
            )
        process.log = log  # type: ignore[attr-defined]
        until(lambda: "scheduler-started" in (log.read_text() if log.exists() else ""), what="scheduler to start")
        return process

    def rows(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        # Read-write: a killed runner's hot journal needs a writer to roll it back.
        connection = sqlite3.connect(self.db, timeout=30)
        try:
            return connection.execute(sql, params).fetchall()
        finally:
            connection.close()


def scheduler_output(process: subprocess.Popen[str]) -> tuple[str, str]:
    log = process.log  # type: ignore[attr-defined]
    return Path(f"{log}.out").read_text(), Path(f"{log}.err").read_text()


def stop_scheduler(process: subprocess.Popen[str], sig: int = signal.SIGTERM) -> tuple[str, str]:
    process.send_signal(sig)
    process.wait(timeout=60)
    out, err = scheduler_output(process)
    assert process.returncode == 0, err
    return out, err


def finished_events(log: Path) -> list[dict[str, Any]]:
    return [e for e in events_in(log) if e["type"] == "occurrence-finished"]
