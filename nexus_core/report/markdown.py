"""The report as Markdown, for a pull request comment or a CI step summary (GitHub's
``$GITHUB_STEP_SUMMARY``): the counts, a task table, the failed checks with their output's
tail, what needs a person.

Every string from the state is inert here: ids and our own words get every ASCII punctuation
character backslash-escaped (no emphasis, link, heading or HTML can start), worker text (a
summary, a stale reason, a blocked request) goes in a code span, check output in a fenced
block whose fence is longer than any run of backticks inside it. Nothing of it can become a
link, an image or HTML, autolinks included (code is never linked). All of it is terminal-safe.
"""

from __future__ import annotations

import re

from ..terminal import terminal_safe
from . import GENERATOR, FailedCheck, Need, Report, TaskLine

_PUNCTUATION = re.compile(r"""([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~])""")
_BACKTICKS = re.compile(r"`+")
HEADLINE = {
    "accepted": "every task accepted",
    "needs-operator": "needs a person",
    "budget-spent": "an attempt budget is spent",
    "unfinished": "settled, not finished",
    "in-progress": "in progress",
}


def text(value: object) -> str:
    """One line of plain text: terminal-safe, every Markdown punctuation escaped."""
    return _PUNCTUATION.sub(r"\\\1", terminal_safe(value, one_line=True))


def code(value: object, in_table: bool = False) -> str:
    """Worker text as one inline code span (one line, terminal-safe). In a table a ``|`` is
    escaped (GFM reads ``\\|`` inside a code span in a cell as ``|``)."""
    safe = terminal_safe(value, one_line=True)
    if not safe.strip():
        return "—"
    if in_table:
        safe = safe.replace("|", "\\|")
    fence = "`" * (max((len(run) for run in _BACKTICKS.findall(safe)), default=0) + 1)
    return f"{fence} {safe} {fence}"


def block(value: str) -> str:
    """Multi-line worker output as a fenced block (terminal-safe; the fence outruns its content)."""
    safe = terminal_safe(value)
    fence = "`" * max(3, max((len(run) for run in _BACKTICKS.findall(safe)), default=0) + 1)
    return f"{fence}text\n{safe}\n{fence}"


def _task_row(line: TaskLine) -> str:
    note = line.detail if line.detail else line.summary
    cells = [
        f"**{text(line.task_id)}**",
        text(line.state),
        f"{line.attempts_used}/{line.max_attempts}",
        text(line.execution),
        text(line.verification),
        text(line.acceptance),
        code(note, in_table=True) if note else "",
    ]
    return "| " + " | ".join(cells) + " |"


def _failed(check: FailedCheck) -> list[str]:
    lines = [
        f"**{text(check.task_id)}**, attempt {check.attempt} of {check.attempts}, "
        f"check **{text(check.check_id)}**: {code(check.words())}",
        "",
    ]
    parts = [f"$ {check.command}"] if check.command else []
    for name, output in (("stdout", check.stdout_tail), ("stderr", check.stderr_tail)):
        if output:
            parts.extend((f"--- {name} (tail)", output))
    if not check.stdout_tail and not check.stderr_tail:
        parts.append("(no output)")
    lines.extend((block("\n".join(parts)), ""))
    return lines


def _need(need: Need) -> str:
    who = f"**{text(need.task_id)}**" if need.task_id is not None else "**the run's locks**"
    detail = f": {code(need.detail)}" if need.detail else ""
    return f"- {who}: {text(need.state)}{detail}"


def render_markdown(report: Report) -> str:
    total = len(report.tasks)
    out = [
        f"## Nexus run {text(report.run_id)}: {HEADLINE.get(report.outcome, text(report.outcome))}",
        "",
        f"**{report.accepted} of {total} tasks accepted** · {len(report.needs)} need a person · "
        f"{len(report.failed)} failed check{'s' if len(report.failed) != 1 else ''} · "
        f"sequence {report.sequence} · last update {text(report.updated_at)}",
        "",
        "States: " + " · ".join(f"{text(state)} {count}" for state, count in report.counts),
        "",
        "| Task | State | Tries | Execution | Verification | Acceptance | Detail |",
        "| --- | --- | --- | --- | --- | --- | --- |",
        *(_task_row(line) for line in report.tasks),
        "",
    ]
    if report.failed:
        out.extend(("### Failed checks", ""))
        for check in report.failed:
            out.extend(_failed(check))
    out.extend(("### Needs a person", ""))
    out.extend([_need(need) for need in report.needs] or ["Nothing: no task waits for a decision."])
    out.extend(("", f"*{text(GENERATOR)}, from the run state; read-only.*", ""))
    return "\n".join(out)
