"""logic/jobs.py without widgets: a job's output is split into lines as it arrives and bounded
(lines kept, characters per line), a view that asks "since n" after old lines went gets what is
left; the jobs list forgets old finished jobs; a stop's cost is said in the core's terms."""

from __future__ import annotations

from pathlib import Path

from dialog_kit import completed, finished_job
from tui_actions_support import make_project, process_task_plan

from nexus_tui.job_flow import target_of
from nexus_tui.logic import jobs as jobs_module
from nexus_tui.logic import operations
from nexus_tui.logic.jobs import NEXUS, JobOutput, Jobs, JobTarget, OutputLine, stop_cost


def test_output_is_split_into_lines_as_it_arrives() -> None:
    output = JobOutput()
    output.add("stdout", "first li")
    assert output.count == 0  # an unfinished line waits for its end
    output.add("stdout", "ne\r\nsecond\nthi")
    output.add("stderr", "oops\n")
    assert list(output.lines) == [
        OutputLine("stdout", "first line"),
        OutputLine("stdout", "second"),
        OutputLine("stderr", "oops"),
    ]
    output.note("── check ended")  # the stream's end: its unfinished line is a line
    assert list(output.lines)[-2:] == [OutputLine("stdout", "thi"), OutputLine(NEXUS, "── check ended")]


def test_output_is_bounded_and_since_skips_what_went() -> None:
    output = JobOutput(max_lines=3, max_chars=10)
    output.add("stdout", "".join(f"{n}\n" for n in range(5)))
    assert [line.text for line in output.lines] == ["2", "3", "4"] and output.dropped == 2
    lines, after = output.since(1)  # line 1 went: what is left
    assert [line.text for line in lines] == ["2", "3", "4"] and after == 5
    assert output.since(4) == ([OutputLine("stdout", "4")], 5)
    output.add("stdout", "x" * 25)  # a line that never ends is still shown, in pieces
    assert [line.text for line in output.lines] == ["4", "x" * 10, "x" * 10]
    output.add("stdout", "\n" + "y" * 12 + "\n")
    assert list(output.lines)[-1].text == "y" * 10 + "… (2 more characters)"


def test_old_finished_jobs_are_forgotten(tmp_path: Path) -> None:
    target = JobTarget("verify", str(tmp_path), "demo", "a", "Verify a", {})
    jobs = Jobs(clock=lambda: 0.0)
    kept = jobs_module.FINISHED_JOBS_KEPT
    running = jobs.add(target)
    for _ in range(kept + 3):
        jobs.add(target).finish(None, "refused", "")
    newest = jobs.add(target)
    assert running in jobs.all() and newest in jobs.all()  # running work is never forgotten
    assert len([job for job in jobs.all() if job.finished]) == kept
    assert jobs.running_on(str(tmp_path), "demo", "a") is running


def test_a_finished_jobs_words_and_state(tmp_path: Path) -> None:
    job = finished_job(completed(tmp_path))
    assert job.finished and job.succeeded and job.state() == "passed"
    assert job.events() == ["✓ result-ok: exit code 0"]
    assert job.running_words().endswith("ended after 0.0 s")
    assert job.words.endswith("verification=passed; acceptance=pending")


def test_what_a_stop_costs(tmp_path: Path) -> None:
    root = completed(tmp_path)
    preview = operations.preview(str(root), "verify", "demo", "a")
    words = " ".join(stop_cost(target_of(preview)))
    assert "SIGTERM, then SIGKILL after 1 s" in words and "acceptance becomes 'rejected'" in words
    assert "round 1 of 2" in words and "1 round left" in words
    last_round = {**preview.seen.facts, "verificationRounds": 1}
    words = " ".join(stop_cost(JobTarget("verify", str(root), "demo", "a", "", last_round)))
    assert "round 2 of 2" in words and "none is left" in words and "retry" in words
    process_root = make_project(tmp_path / "process", [process_task_plan("p")])
    launch = operations.preview(str(process_root), "launch", "demo", "p")
    words = " ".join(stop_cost(target_of(launch)))
    assert "launched process's group" in words and "supervisor-interrupted" in words
    assert "attempt 1 of 2" in words
