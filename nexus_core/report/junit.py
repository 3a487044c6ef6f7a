"""The report as JUnit XML, the test report CI systems read (Jenkins, GitLab, GitHub actions'
test reporters): one test suite per run, one test case per task, in plan order.

- accepted, its evidence current: passes;
- its latest verification failed: a ``failure`` carrying each failing check's name, exit code
  and output tail; a worker that reported ``failed``, or an attempt budget spent: a ``failure``;
- ambiguous, blocked, overdue, stale evidence, a cancellation to reconcile, any state where
  ``nexus wait`` stops for an operator: an ``error`` (no verdict, a person must look);
- anything else (not started, running, completed and not yet verified, passed and not yet
  accepted, cancelled): ``skipped``, saying why.

Shaped after the JUnit schema CI readers use (Jenkins xunit's junit-10.xsd, Surefire's): the
required attributes, ``time`` in seconds. Every string is XML-escaped (attributes included, no
CDATA, so ``]]>`` is inert) and terminal-safe, which also keeps it free of the control
characters XML 1.0 forbids.
"""

from __future__ import annotations

from typing import NamedTuple

from ..supervise.classify import BUDGET, OPERATOR
from ..terminal import terminal_safe
from . import GENERATOR, FailedCheck, Report, TaskLine

_TEXT = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
_ATTRIBUTE = {**_TEXT, '"': "&quot;", "\n": "&#10;", "\t": "&#9;", "\r": "&#13;"}


def xml_text(value: object) -> str:
    return "".join(_TEXT.get(c, c) for c in terminal_safe(value))


def xml_attribute(value: object) -> str:
    return '"' + "".join(_ATTRIBUTE.get(c, c) for c in terminal_safe(value)) + '"'


class Verdict(NamedTuple):
    kind: str  # "pass", "failure", "error", "skipped"
    type: str  # the element's type attribute (the task's state, or what failed)
    message: str
    body: str  # the element's text: the checks' output tails, the detail


def _check_body(check: FailedCheck) -> str:
    parts = [f"check {check.check_id}: {check.words()}"]
    if check.command:
        parts.append(f"$ {check.command}")
    for name, output in (("stdout", check.stdout_tail), ("stderr", check.stderr_tail)):
        if output:
            parts.extend((f"--- {name} (tail)", output))
    return "\n".join(parts)


def verdict(line: TaskLine, failed: list[FailedCheck]) -> Verdict:
    """How a task reads as a test case (see the module's list)."""
    if line.state == "accepted":
        return Verdict("pass", "", "", "")
    if failed:
        message = "; ".join(f"check {c.check_id} failed: {c.words()}" for c in failed)
        return Verdict("failure", "verification-failed", message, "\n\n".join(_check_body(c) for c in failed))
    settled_badly = line.state in ("retry-pending", "budget-spent")
    if settled_badly and line.verification == "failed":
        return Verdict("failure", "verification-failed", line.detail or "verification failed", line.detail or "")
    if settled_badly and line.execution == "failed":
        return Verdict("failure", "execution-failed", "the worker reported failure", line.summary or "")
    if line.category == BUDGET:
        return Verdict("failure", line.state, line.detail or line.state, line.detail or "")
    if line.category == OPERATOR:
        return Verdict("error", line.state, line.detail or line.state, line.detail or "")
    words = {
        "awaiting-verify": "completed, not verified yet",
        "awaiting-accept": "verification passed, not accepted yet",
        "awaiting-start": "not started; its dependencies are accepted",
        "waiting-on-dependencies": "not started; waiting on its dependencies",
        "waiting-for-capacity": "not started; waiting for a free slot",
        "awaiting-collect": "the process finished; its receipt awaits collect",
    }
    return Verdict("skipped", line.state, words.get(line.state, line.detail or line.state), "")


def _system_out(line: TaskLine) -> str:
    parts = [
        f"state: {line.state}",
        f"attempts: {line.attempts_used} of {line.max_attempts}",
        f"execution: {line.execution}; verification: {line.verification}; acceptance: {line.acceptance}",
    ]
    if line.summary:
        parts.append(f"latest report: {line.summary}")
    if line.detail:
        parts.append(f"detail: {line.detail}")
    return "\n".join(parts)


def render_junit(report: Report) -> str:
    failed: dict[str, list[FailedCheck]] = {}
    for check in report.failed:
        failed.setdefault(check.task_id, []).append(check)
    verdicts = [verdict(line, failed.get(line.task_id, [])) for line in report.tasks]
    counts = {kind: sum(1 for v in verdicts if v.kind == kind) for kind in ("failure", "error", "skipped")}
    seconds = sum(line.seconds for line in report.tasks)
    totals = (
        f"tests={xml_attribute(len(verdicts))} failures={xml_attribute(counts['failure'])} "
        f"errors={xml_attribute(counts['error'])} skipped={xml_attribute(counts['skipped'])} "
        f"time={xml_attribute(f'{seconds:.3f}')}"
    )
    classname = xml_attribute(f"nexus.{report.run_id}")
    out = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        f"<!-- {xml_text(GENERATOR).replace('--', '- -')}, from the run state; read-only. -->",
        f"<testsuites name={xml_attribute('nexus')} {totals}>",
        f"  <testsuite name={xml_attribute(report.run_id)} {totals} "
        f"timestamp={xml_attribute(report.created_at.removesuffix('Z'))}>",
        "    <properties>",
    ]
    for name, value in (
        ("nexus.run", report.run_id),
        ("nexus.sequence", report.sequence),
        ("nexus.updatedAt", report.updated_at),
        ("nexus.planHash", report.plan_hash),
        ("nexus.outcome", report.outcome),
    ):
        out.append(f"      <property name={xml_attribute(name)} value={xml_attribute(value)}/>")
    out.append("    </properties>")
    for line, result in zip(report.tasks, verdicts, strict=True):
        head = (
            f"    <testcase name={xml_attribute(line.task_id)} classname={classname} "
            f"time={xml_attribute(f'{line.seconds:.3f}')}>"
        )
        out.append(head)
        if result.kind != "pass":
            element = f"      <{result.kind} type={xml_attribute(result.type)} message={xml_attribute(result.message)}"
            out.append(f"{element}>{xml_text(result.body)}</{result.kind}>" if result.body else f"{element}/>")
        out.append(f"      <system-out>{xml_text(_system_out(line))}</system-out>")
        out.append("    </testcase>")
    out.extend(("  </testsuite>", "</testsuites>", ""))
    return "\n".join(out)
