"""The jobs view (J) on a job holding its full output, next to the same view on an empty job.

Run by hand (prints a markdown table; nothing is asserted):

    python bench/bench_jobs_view.py [--lines 5000] [--repeat 3]

A job is fed ``--lines`` lines of check output through its real progress path (``Job.take``),
then a headless app opens ``JobsScreen`` on it; the table gives the median wall time of opening
the view (to its first settled frame), of a search that keeps a hundredth of the lines and of
clearing it, each as a ratio to the floor: opening the view on a job with no output, measured in
the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

from textual.app import App

from nexus_tui.logic.jobs import Job, Jobs, JobTarget
from nexus_tui.screens.jobs import JobLog, JobsScreen


def job_with(lines: int) -> Job:
    job = Jobs().add(JobTarget("verify", "/tmp/bench", "demo", "a", "Verify a", {}))
    job.take({"event": "check-started", "index": 0, "total": 1, "check": "c", "command": ["c"]})
    for number in range(lines):
        job.take({"event": "check-output", "stream": "stdout", "text": f"line {number} {'x' * 60}\n"})
    return job


class Host(App[None]):
    def __init__(self, job: Job) -> None:
        super().__init__()
        self.job = job
        self.jobs = Jobs()
        self.jobs._jobs.append(job)  # the bench's own list: just this job

    def on_mount(self) -> None:
        self.push_screen(JobsScreen(self.jobs, self.job.number))


async def measure(lines: int) -> dict[str, float]:
    job = job_with(lines)
    app = Host(job)
    started = time.perf_counter()
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        opened = time.perf_counter() - started
        screen = app.screen
        assert isinstance(screen, JobsScreen)
        log = screen.query_one(JobLog)
        assert log.line_count >= lines
        started = time.perf_counter()
        screen._apply_search("line 59")
        await pilot.pause()
        searched = time.perf_counter() - started
        started = time.perf_counter()
        screen._apply_search("")
        await pilot.pause()
        cleared = time.perf_counter() - started
    return {"open": opened, "search": searched, "clear": cleared}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=3)
    options = parser.parse_args()
    floors: list[float] = []
    samples: dict[str, list[float]] = {"open": [], "search": [], "clear": []}
    for _ in range(options.repeat):  # interleaved: a burst of load hits both alike
        floors.append(asyncio.run(measure(0))["open"])
        for name, value in asyncio.run(measure(options.lines)).items():
            samples[name].append(value)
    floor = statistics.median(floors)
    rows: list[Any] = [("floor: open on an empty job", floor)]
    rows += [(f"{name} ({options.lines} lines)", statistics.median(values)) for name, values in samples.items()]
    print("| step | median | ratio to floor |\n| --- | --- | --- |")
    for name, value in rows:
        print(f"| {name} | {value * 1000:.0f} ms | {value / floor:.2f}x |")


if __name__ == "__main__":
    main()
