"""Rich text for cells, the detail pane and the status bar.

Every value that comes from a run file (notes, summaries, check output, ids) goes into a
``Text`` through :func:`plain` (``widgets/plain.py``), never through markup: ``[red]`` in a
summary shows as ``[red]``.
"""

from __future__ import annotations

import functools
import os
import textwrap
from dataclasses import dataclass, field
from typing import Any

from rich.text import Text
from textual.theme import BUILTIN_THEMES

from nexus_core import needs
from nexus_core.shapes import Attempt, Observation, TaskDefinition
from nexus_core.timeutil import age_text, duration_text, parse_iso_ms
from nexus_core.words import json_word

from ..logic.model import ATTENTION, NOT_STARTED, LockView, ProjectSnapshot, RunView, TaskRow
from .plain import plain as plain  # untrusted text (widgets/plain.py), re-exported: render.plain

# Colours are theme variables ("$success", "$error", ...): themed() resolves them with the
# variables of the app's current theme, so the theme picker (T) recolours every state.
_PALETTE: dict[str, str] = BUILTIN_THEMES["textual-dark"].to_color_system().generate()


def use_theme_variables(variables: dict[str, str]) -> None:
    """Resolve colours with these CSS variables from now on (the app calls it on a theme change)."""
    global _PALETTE
    _PALETTE = dict(variables)
    _themed.cache_clear()


@functools.lru_cache(maxsize=256)
def _themed(spec: str) -> str:
    return " ".join(_PALETTE.get(word[1:], "") if word.startswith("$") else word for word in spec.split())


def themed(spec: str) -> str:
    """A Rich style with its "$variable" colours taken from the current theme."""
    return _themed(spec) if "$" in spec else spec


def state_style(state: str, default: str = "") -> str:
    return themed(STATE_STYLE.get(state, default))


def value_style(value: str, default: str = "") -> str:
    return themed(VALUE_STYLE.get(value, default))


STATE_STYLE = {
    "accepted": "bold $success",
    "to accept": "$primary-lighten-2",
    "to verify": "$primary",
    "verifying": "$warning",
    "running": "$warning",
    "cancelling": "$accent",
    "blocked": "bold $error",
    "ambiguous": "bold $accent",
    "failed": "$error",
    "cancelled": "$error",
    "rejected": "bold $error",
    NOT_STARTED: "dim",
}
VALUE_STYLE = {
    "passed": "$success",
    "completed": "$success",
    "accepted": "bold $success",
    "failed": "$error",
    "rejected": "bold $error",
    "ambiguous": "$accent",
    "running": "$warning",
    "blocked": "bold $error",
    "cancelled": "$error",
    "pending": "dim",
    NOT_STARTED: "dim",
}
GLYPH = {
    "accepted": "✔",
    "to accept": "◆",
    "to verify": "◇",
    "verifying": "⟳",
    "running": "▶",
    "cancelling": "⊘",
    "blocked": "■",
    "ambiguous": "?",
    "failed": "✗",
    "cancelled": "⊗",
    "rejected": "✗",
    NOT_STARTED: "·",
}
# A row whose running work lost its owner (a verifier, a launch supervisor that died): the
# classifier's need (nexus_core.needs), shown in the row itself, as k9s reddens a crashing pod.
OWNER_GONE_GLYPH = "†"
OWNER_GONE_STYLE = "bold $error"
OWNER_GONE_WORDS = {needs.VERIFIER_GONE: "verifier gone", needs.SUPERVISOR_GONE: "supervisor gone"}
EXCERPT_LINES = 6
EXCERPT_CHARS = 600


def command_label(path: str) -> str:
    """The executable's name; its full path and hash are in the plan (inspect --json)."""
    return os.path.basename(path)


def value_cell(value: str) -> Text:
    return plain(value, value_style(value, ""))


def flag_cell(on: bool, word: str) -> Text:
    return Text(word, style=themed("bold $error")) if on else Text("—", style="dim")


def accepted_cells(accepted: int, total: int, width: int) -> int:
    """How many of ``width`` cells the "Accepted" bar fills: none at 0, all only when every task
    is accepted, and at least one for any accepted task (so 1/200 is not drawn as 0/200)."""
    if total <= 0 or accepted <= 0:
        return 0
    if accepted >= total:
        return width
    return min(width - 1, max(1, accepted * width // total))


def progress_cell(view: RunView, width: int = 8) -> Text:
    """The "Accepted" column: a bar of the accepted share and ``accepted/total`` (the States
    column has the other states)."""
    total = view.total
    if view.loading:
        return Text("loading…", style="dim italic")
    if total == 0:
        return Text("no tasks" if view.error is None else "unreadable", style="dim")
    accepted = view.count("accepted")
    filled = accepted_cells(accepted, total, width)
    bar = Text()
    bar.append("█" * filled, style=state_style("accepted", ""))
    bar.append("░" * (width - filled), style=themed("$panel"))
    bar.append(f" {accepted}/{total}")
    return bar


def compact_progress_cell(view: RunView) -> Text:
    """The count alone (the bar takes 8 more columns). Never wider than the count: a column only
    grows, so a wide "loading…" would keep the column wide after it (whenever it was drawn)."""
    if view.loading:
        return Text("…", style="dim italic")
    return Text(f"{view.count('accepted')}/{view.total}") if view.total else progress_cell(view)


def states_cell(view: RunView) -> Text:
    text = Text()
    for state, count in view.counts:
        if text:
            text.append(" ")
        text.append(f"{GLYPH.get(state, '')}{count}", style=state_style(state, ""))
    gone = sum(1 for row in view.rows if row.owner_gone)
    if gone:
        text.append(f" {OWNER_GONE_GLYPH}{gone}", style=themed(OWNER_GONE_STYLE))
    return text


def lock_badge(snapshot: ProjectSnapshot) -> Text:
    if snapshot.recovery_lock.present:
        return Text("recovery", style=themed("bold $accent"))
    lock = snapshot.writer_lock
    if not lock.present:
        return Text("—", style="dim")
    if lock.alive is False:
        return Text("dead", style=themed("bold $error"))
    return Text("held", style=themed("$warning"))


def run_cells(view: RunView, snapshot: ProjectSnapshot, now: int, compact: bool = False) -> dict[str, Text]:
    run_label = plain(view.run_id, "bold")
    return {
        "run": run_label,
        "progress": compact_progress_cell(view) if compact else progress_cell(view),
        "states": states_cell(view),
        "stale": Text(str(view.stale), style=themed("bold $error")) if view.stale else Text("0", style="dim"),
        "overdue": Text(str(view.overdue), style=themed("bold $error")) if view.overdue else Text("0", style="dim"),
        "lock": lock_badge(snapshot),
        "load": plain("⚠ " + view.error, themed("bold $error"), one_line=True)
        if view.error
        else Text("ok", style=themed("$success")),
        "updated": Text(age_text(view.updated_at, now).removesuffix(" ago"), style="dim"),
    }


RUN_COLUMNS = (
    ("run", "Run"),
    ("progress", "Accepted"),
    ("states", "States"),
    ("stale", "Stale"),
    ("overdue", "Overdue"),
    ("lock", "Lock"),
    ("load", "File"),
    ("updated", "Updated"),
)

TASK_COLUMNS = (
    ("task", "Task"),
    ("depends", "Depends on"),
    ("execution", "Execution"),
    ("verification", "Verify"),
    ("acceptance", "Accept"),
    ("attempts", "Tries"),
    ("stale", "Stale"),
    ("overdue", "Overdue"),
    ("observed", "Observed"),
)


# Under NARROW_COLUMNS the detail pane goes below the tables. Tables narrower than
# FULL_COLUMNS_WIDTH take their compact columns: those that decide what to do first (the task's
# state, Accept, Tries, Stale, Overdue), values as glyphs, the rest after; no "Depends on" (the
# detail pane and the timeline show it), so that the table fits its pane at 120 columns.
NARROW_COLUMNS = 120
FULL_COLUMNS_WIDTH = 96
COMPACT_TASK_COLUMNS = (
    ("task", "Task"),
    ("acceptance", "Acc"),
    ("attempts", "Tries"),
    ("stale", "Stale"),
    ("overdue", "Overdue"),
    ("execution", "Exe"),
    ("verification", "Ver"),
    ("observed", "Observed"),
)
COMPACT_RUN_COLUMNS = (
    ("run", "Run"),
    ("progress", "Acc"),
    ("stale", "Stale"),
    ("overdue", "Overdue"),
    ("lock", "Lock"),
    ("states", "States"),
    ("load", "File"),
    ("updated", "Updated"),
)
# A value's glyph in the compact forms (the help's legend lists the task states' glyphs).
VALUE_GLYPH = {
    "completed": "✔",
    "passed": "✔",
    "accepted": "✔",
    "failed": "✗",
    "rejected": "✗",
    "running": "▶",
    "pending": "·",
    "ambiguous": "?",
    "cancelled": "⊗",
    "blocked": "■",
    NOT_STARTED: "·",
}


def task_columns(compact: bool) -> tuple[tuple[str, str], ...]:
    return COMPACT_TASK_COLUMNS if compact else TASK_COLUMNS


def run_columns(compact: bool) -> tuple[tuple[str, str], ...]:
    return COMPACT_RUN_COLUMNS if compact else RUN_COLUMNS


def glyph_cell(value: str) -> Text:
    return Text(VALUE_GLYPH.get(value, value[:3]), style=value_style(value, ""))


def owner_gone_cell(compact: bool) -> Text:
    """The Exe or Ver cell of work whose owner is gone: it runs no more, whatever it says."""
    return Text(OWNER_GONE_GLYPH if compact else f"{OWNER_GONE_GLYPH} gone", style=themed(OWNER_GONE_STYLE))


def task_cells(row: TaskRow, now: int, compact: bool = False) -> dict[str, Text]:
    gone = row.owner_gone
    if gone:
        task = Text(OWNER_GONE_GLYPH + " ", style=themed(OWNER_GONE_STYLE))
    else:
        task = Text(GLYPH.get(row.state, " ") + " ", style=state_style(row.state, ""))
    task.append(plain(row.task_id, "bold" if row.state not in (NOT_STARTED,) else ""))
    value = glyph_cell if compact else value_cell
    execution = value(row.execution)
    verification = value(row.verification)
    if row.need == needs.SUPERVISOR_GONE:
        execution = owner_gone_cell(compact)
    elif row.need == needs.VERIFIER_GONE:
        verification = owner_gone_cell(compact)
    spent = row.max_attempts and row.attempts_used >= row.max_attempts
    return {
        "task": task,
        "depends": plain(", ".join(row.depends_on) if row.depends_on else "—", "" if row.depends_on else "dim"),
        "execution": execution,
        "verification": verification,
        "acceptance": value(row.acceptance),
        "attempts": Text(
            f"{row.attempts_used}/{row.max_attempts}",
            style=themed("bold $error") if spent or gone else "",
        ),
        "stale": flag_cell(row.stale, "STALE"),
        "overdue": flag_cell(row.overdue, "OVERDUE"),
        "observed": Text(age_text(row.last_observed, now).removesuffix(" ago"), style="dim"),
    }


def task_sort_value(row: TaskRow, column: str, plan_index: int) -> Any:
    values: dict[str, Any] = {
        "task": row.task_id,
        "depends": (len(row.depends_on), row.depends_on),
        "execution": row.execution,
        "verification": row.verification,
        "acceptance": row.acceptance,
        "attempts": (row.attempts_used, row.max_attempts),
        "stale": not row.stale,
        "overdue": not row.overdue,
        "observed": -(parse_iso_ms(row.last_observed) or 0),
    }
    return (values.get(column, plan_index), plan_index)


def run_sort_value(view: RunView, column: str, index: int) -> Any:
    values: dict[str, Any] = {
        "run": view.run_id,
        "progress": -(view.count("accepted") / view.total if view.total else 0),
        "states": view.counts,
        "stale": -view.stale,
        "overdue": -view.overdue,
        "attention": -sum(c for s, c in view.counts if s in ATTENTION),
        "lock": 0,
        "load": view.error is None,
        "updated": -(parse_iso_ms(view.updated_at) or 0),
    }
    return (values.get(column, index), index)


# ----------------------------------------------------------------- detail pane


def _line(text: Text, label: str, value: Text | str, style: str = "") -> None:
    text.append(f"{label:<14}", style="bold dim")
    text.append(value if isinstance(value, Text) else plain(value, style))
    text.append("\n")


def _when(iso: object, now: int) -> Text:
    if not isinstance(iso, str):
        return Text("—", style="dim")
    text = plain(iso)
    text.append(f"  ({age_text(iso, now)})", style="dim")
    return text


def run_header(view: RunView, snapshot: ProjectSnapshot, now: int, display: Any = None) -> Text:
    text = Text()
    text.append("Run ", style="bold")
    text.append(plain(view.run_id, "bold"))
    text.append("\n")
    if view.error:
        text.append("⚠ state file failed to load: ", style=themed("bold $error"))
        text.append(plain(view.error, themed("$error")))
        text.append(
            "\n  showing the last good view; nothing was repaired.\n" if view.inspection else "\n",
            style=themed("$error"),
        )
    if view.loading or (view.inspection is None and not view.error):
        text.append("loading…\n", style="dim italic")
    if view.inspection:
        _line(text, "sequence", str(view.sequence))
        _line(text, "updated", _when(view.updated_at, now))
        _line(text, "tasks", states_cell(view))
    root = snapshot.root or snapshot.directory
    _line(text, "state file", (display or str)(f"{root}/{view.state_path}"))
    return text


@dataclass
class Node:
    label: Text
    children: list[Node] = field(default_factory=list)
    expand: bool = False

    def add(self, label: Text, expand: bool = False) -> Node:
        node = Node(label, expand=expand)
        self.children.append(node)
        return node


def task_detail(view: RunView, task_id: str, now: int) -> tuple[Text, list[Node], Text] | None:
    """(header, attempt nodes, verification text) for one task, from the core's inspection."""
    inspection = view.inspection
    if not inspection:
        return None
    task = next((t for t in inspection["tasks"] if t["id"] == task_id), None)
    if task is None:
        return None
    definition: TaskDefinition = next(
        (d for d in inspection["plan"]["tasks"] if d.get("id") == task_id), TaskDefinition()
    )
    observation: Observation = next(
        (o for o in inspection.get("observations") or [] if o["taskId"] == task_id), Observation()
    )
    row = next((r for r in view.rows if r.task_id == task_id), None)
    header = Text()
    state = row.state if row else "?"
    need = row.need if row else None
    if need in OWNER_GONE_WORDS:
        header.append(f"{OWNER_GONE_GLYPH} ", style=themed(OWNER_GONE_STYLE))
        header.append(plain(task_id, "bold"))
        header.append(f"  {state}: {OWNER_GONE_WORDS[need or '']}", style=themed(OWNER_GONE_STYLE))
    else:
        header.append(f"{GLYPH.get(state, '')} ", style=state_style(state, ""))
        header.append(plain(task_id, "bold"))
        header.append(f"  {state}", style=state_style(state, ""))
    header.append("\n")
    if view.error:
        header.append("⚠ state file failed to load: ", style=themed("bold $error"))
        header.append(plain(view.error, themed("$error")))
        header.append("\n  (last good view shown)\n", style=themed("$error"))
    header.append(plain(definition.get("objective", ""), "italic"))
    header.append("\n")
    _line(header, "depends on", ", ".join(definition.get("dependsOn") or []) or "—")
    _line(header, "scope", ", ".join(definition.get("scope") or []) or "—")
    _line(header, "artifacts", ", ".join(definition.get("artifacts") or []) or "—")
    if definition.get("execution"):
        execution = definition["execution"]
        command = command_label(str(execution.get("command", "")))
        _line(header, "worker", f"{execution.get('adapter')}: {' '.join([command, *execution.get('args', [])])}")
    _line(header, "acceptance", value_cell(task["integration"]))
    if task.get("acceptedAt"):
        _line(header, "accepted at", _when(task["acceptedAt"], now))
    if observation.get("stale"):
        header.append("STALE ", style=themed("bold $error"))
        header.append(plain(observation.get("staleReason"), themed("$error")))
        header.append("\n")
    if observation.get("overdue"):
        header.append("OVERDUE ", style=themed("bold $error"))
        attempt = task["attempts"][-1] if task["attempts"] else {}
        header.append(
            plain(f"deadline {attempt.get('deadline')} ({age_text(attempt.get('deadline'), now)})", themed("$error"))
        )
        header.append("\n")
    if observation and not observation.get("resourcesCurrent", True):
        header.append("resources changed since create\n", style=themed("$error"))
    process = observation.get("process")
    if process:
        beat = Text()
        beat.append(plain(process.get("status")))
        beat.append(" · heartbeat ")
        beat.append(_when(process.get("lastHeartbeat"), now))
        latest = task["attempts"][-1] if task["attempts"] else {}
        if need == needs.SUPERVISOR_GONE:
            beat.append(" STALE: supervisor gone", style=themed("bold $error"))
        elif process.get("status") != "finished" and latest.get("execution") not in ("running", "ambiguous"):
            # Reconciled after its supervisor stopped: the process record is history now.
            beat.append(f" (superseded: the attempt was reconciled {latest.get('execution')})", style="dim")
        elif process.get("heartbeatStale") and process.get("status") != "finished":
            beat.append(" stale, supervisor alive", style=themed("$warning"))
        if process.get("childPid") is not None:
            beat.append(plain(f" · child pid {process['childPid']}"))
        if process.get("receiptReady"):
            beat.append(" · receipt ready to collect", style=themed("bold $primary-lighten-2"))
        _line(header, "process", beat)
    header.append("hint ", style=themed("bold $primary-lighten-2"))
    header.append(plain(observation.get("hint", ""), themed("$primary-lighten-2")))
    header.append("\n")
    running = observation.get("runningVerification")
    if isinstance(running, dict) and running.get("hint"):
        # The core's words: who owns the verification left running, since when, what ends it.
        alive = running.get("ownerAlive")
        header.append(
            "verification left running " if alive is not True else "verification running ",
            style=themed("bold $warning"),
        )
        header.append(plain(running["hint"], themed("$warning")))
        header.append("\n")

    nodes = [attempt_node(attempt, index, len(task["attempts"]), now) for index, attempt in enumerate(task["attempts"])]
    verification = Text()
    if task["attempts"]:
        verification = verification_text(task["attempts"][-1], now)
    return header, nodes, verification


def attempt_node(attempt: Attempt, index: int, count: int, now: int) -> Node:
    label = Text(f"#{index + 1} ", style="bold")
    label.append(plain(str(attempt.get("id"))[:8], "bold"))
    label.append(" ")
    label.append(value_cell(str(attempt.get("execution"))))
    label.append(" · verification ")
    label.append(value_cell(str((attempt.get("verification") or {}).get("status"))))
    node = Node(label, expand=True)
    latest = index == count - 1
    backend = attempt.get("backend") or {}
    backend_text = plain(f"{backend.get('kind')} {backend.get('id')} / {backend.get('sessionId')}")
    if backend.get("kind") == "process":
        backend_text.append(plain(f"  supervisor pid {backend.get('ownerPid')}@{backend.get('hostname')}", "dim"))
    node.add(Text("backend ", style="bold dim") + backend_text)
    # An id on a line of its own under its label: never cut, even in the 120-column detail pane.
    node.add(Text("attempt id", style="bold dim"), expand=True).add(plain(attempt.get("id")))
    if attempt.get("parentAttemptId"):
        node.add(Text("retry of", style="bold dim"), expand=True).add(plain(attempt["parentAttemptId"]))
    times = node.add(Text("times", style="bold dim"))
    for key in ("startedAt", "observedAt", "endedAt", "deadline"):
        times.add(Text(f"{key:<11}", style="dim") + _when(attempt.get(key), now))
    observations = attempt.get("observations") or []
    obs_node = node.add(Text(f"observations ({len(observations)})", style="bold dim"), expand=True)
    for entry in observations:
        line = plain(entry.get("at"), "dim")
        line.append(" ")
        line.append(value_cell(str(entry.get("outcome"))))
        if entry.get("exitCode") is not None:
            line.append(plain(f" exit {entry['exitCode']}"))
        line.append(" · ")
        line.append(plain(entry.get("evidenceClass"), "dim"))
        child = obs_node.add(line, expand=True)
        _wrapped(child, entry.get("summary"))
    reconciliations = attempt.get("reconciliations") or []
    if reconciliations:
        rec_node = node.add(Text(f"reconciliations ({len(reconciliations)})", style="bold dim"), expand=True)
        for entry in reconciliations:
            line = plain(entry.get("at"), "dim")
            line.append(" ")
            line.append(value_cell(str(entry.get("outcome"))))
            stopped, retry_safe = json_word(entry.get("ownerStopped")), json_word(entry.get("retrySafe"))
            line.append(plain(f" · ownerStopped {stopped} · retrySafe {retry_safe}"))
            child = rec_node.add(line, expand=True)
            _wrapped(child, entry.get("summary"))
    cancellation = attempt.get("cancellation") or {}
    if cancellation.get("status") not in (None, "none"):
        label_text = Text("cancellation ", style="bold dim")
        label_text.append(plain(cancellation.get("status"), themed("$accent")))
        cancel_node = node.add(label_text, expand=True)
        for key in ("requestedAt", "reason", "termination", "reconciledAt", "resolvedOutcome"):
            if key in cancellation:
                field_node = cancel_node.add(Text(key, style="dim"), expand=True)
                _wrapped(field_node, cancellation.get(key))
    if attempt.get("blockedRequest"):
        node.add(Text("blocked request ", style=themed("bold $error")) + plain(attempt["blockedRequest"]))
    process = attempt.get("process")
    if isinstance(process, dict):
        proc_label = Text("process ", style="bold dim")
        proc_label.append(plain(process.get("status")))
        proc = node.add(proc_label, expand=True)
        proc.add(Text("heartbeat   ", style="dim") + _when(process.get("heartbeatAt"), now))
        proc.add(Text("child pid   ", style="dim") + plain(process.get("childPid")))
        proc.add(Text("collected   ", style="dim") + _when(process.get("collectedAt"), now))
        receipt = process.get("receipt")
        if isinstance(receipt, dict):
            line = Text("receipt     ", style="dim")
            line.append(value_cell(str(receipt.get("outcome"))))
            line.append(
                plain(
                    f" exit {json_word(receipt.get('exitCode'))} signal {json_word(receipt.get('signal'))}"
                    f" reason {json_word(receipt.get('reason'))}"
                )
            )
            proc.add(line)
    history = attempt.get("verificationHistory") or []
    if history:
        hist = node.add(Text(f"verification history ({len(history)})", style="bold dim"), expand=True)
        for past in history:
            line = value_cell(str(past.get("status")))
            line.append(plain(f"  {past.get('startedAt')} → {past.get('endedAt') or '—'}", "dim"))
            line.append(plain(f"  {len(past.get('checks') or [])} check(s)", "dim"))
            hist.add(line)
    if not latest:
        verification = attempt.get("verification") or {}
        ver_label = Text("verification ", style="bold dim")
        ver_label.append(value_cell(str(verification.get("status"))))
        ver = node.add(ver_label, expand=True)
        for receipt in verification.get("checks") or []:
            line = plain(receipt.get("id"), "bold")
            line.append(plain(f" exit {json_word(receipt.get('exitCode'))}"))
            if receipt.get("timedOut"):
                line.append(" TIMED OUT", style=themed("bold $error"))
            check = ver.add(line, expand=True)
            first = next((s for s in (receipt.get("error"), receipt.get("stderr"), receipt.get("stdout")) if s), None)
            if isinstance(first, str):
                _wrapped(check, first.strip().split("\n")[0])
        if verification.get("problem"):
            _wrapped(ver, verification["problem"], themed("$error"))
    node.add(Text("verification rounds ", style="bold dim") + plain(attempt.get("verificationRounds")))
    return node


WRAP = 56


def _wrapped(parent: Node, value: object, style: str = "") -> None:
    """Untrusted text as leaves of at most WRAP columns (tree labels do not wrap)."""
    text = "" if value is None else str(value)
    lines = [piece for raw in text.split("\n") for piece in (textwrap.wrap(raw, WRAP) or [""])]
    for line in lines[:12]:
        parent.add(plain(line, style))
    if len(lines) > 12:
        parent.add(Text(f"… {len(lines) - 12} more line(s)", style="dim"))


def _excerpt(output: object) -> Text:
    if not isinstance(output, str) or not output.strip():
        return Text("")
    lines = output.rstrip("\n").split("\n")
    shown = "\n".join(lines[-EXCERPT_LINES:])
    if len(shown) > EXCERPT_CHARS:
        shown = "…" + shown[-EXCERPT_CHARS:]
    elif len(lines) > EXCERPT_LINES:
        shown = "…\n" + shown
    return plain(shown)


def verification_text(attempt: Attempt, now: int) -> Text:
    verification = attempt.get("verification") or {}
    text = Text("Latest verification  ", style="bold")
    text.append(value_cell(str(verification.get("status"))))
    if verification.get("startedAt"):
        text.append(plain(f"  round {attempt.get('verificationRounds')}", "dim"))
    text.append("\n")
    if verification.get("startedAt"):
        _line(text, "started", _when(verification.get("startedAt"), now))
        _line(text, "ended", _when(verification.get("endedAt"), now))
        owner = verification.get("owner") or {}
        _line(text, "verifier", f"pid {owner.get('pid')}@{owner.get('hostname')}")
    if verification.get("problem"):
        text.append("problem ", style=themed("bold $error"))
        text.append(plain(verification["problem"], themed("$error")))
        text.append("\n")
    checks = verification.get("checks") or []
    if not checks:
        text.append("no check receipts\n", style="dim")
    for receipt in checks:
        text.append(
            "● ",
            style=themed("$success") if receipt.get("exitCode") == 0 and not receipt.get("error") else themed("$error"),
        )
        text.append(plain(receipt.get("id"), "bold"))
        text.append(plain(f"  exit {json_word(receipt.get('exitCode'))}"))
        if receipt.get("timedOut"):
            text.append("  TIMED OUT", style=themed("bold $error"))
        else:
            text.append("  timed out: no", style="dim")
        started, ended = parse_iso_ms(receipt.get("startedAt")), parse_iso_ms(receipt.get("endedAt"))
        if started is not None and ended is not None:
            text.append(f"  {_ms(ended - started)}", style="dim")
        if receipt.get("signal"):
            text.append(plain(f"  signal {receipt['signal']}", themed("$error")))
        text.append("  ")
        text.append(plain(receipt.get("evidenceClass"), "dim"))
        text.append("\n")
        if receipt.get("command"):
            text.append("  $ ", style="dim")
            command = command_label(str(receipt["command"]))
            text.append(plain(" ".join([command, *map(str, receipt.get("args") or [])]), "dim"))
            text.append("\n")
        if receipt.get("error"):
            text.append("  error ", style=themed("$error"))
            text.append(plain(receipt["error"], themed("$error")))
            text.append("\n")
        for stream in ("stdout", "stderr"):
            excerpt = _excerpt(receipt.get(stream))
            if excerpt.plain:
                text.append(f"  {stream}:\n", style="dim")
                for piece in excerpt.split("\n"):
                    text.append("    ")
                    text.append(piece)
                    text.append("\n")
        if receipt.get("outputTruncated"):
            text.append("  (output truncated at 64 KiB)\n", style="dim")
    return text


def _ms(ms: int) -> str:
    if ms < 1000:
        return f"{ms} ms"
    return f"{ms / 1000:.1f} s" if ms < 60_000 else duration_text(ms)


# ----------------------------------------------------------------- status bar


def lock_text(lock: LockView, now: int, narrow: bool = False) -> Text:
    """``narrow``: without the owner's pid, host and age (the detail and the guide show them)."""
    text = Text(f"{lock.name} ", style="bold")
    if not lock.present:
        text.append("free", style=themed("$success"))
        return text
    text.append("HELD", style=themed("bold $warning") if lock.alive is not False else themed("bold $error"))
    if lock.fingerprint:
        text.append(plain(f" {lock.fingerprint[: 8 if narrow else 12]}", themed("$primary-lighten-2")))
    if lock.unreadable:
        text.append(" (owner unreadable)", style=themed("$error"))
    else:
        if not narrow:
            text.append(plain(f" pid {lock.pid}@{lock.host}"))
            text.append(f" {age_text(lock.created_at, now)}", style="dim")
        if lock.alive is True:
            text.append(" owner alive", style=themed("$warning"))
        elif lock.alive is False:
            # What to do comes from the core when it says (recovery.lock: recoveryLockHint).
            text.append(
                " owner DEAD on this host" + ("" if lock.hint else ": recover-lock"), style=themed("bold $error")
            )
        else:
            text.append(" owner on another host (liveness unknown)", style=themed("$accent"))
    if lock.unsafe:
        text.append(plain(f" UNSAFE: {lock.unsafe}", themed("bold $error")))
    return text


def status_text(
    snapshot: ProjectSnapshot | None,
    now: int,
    following: bool,
    read_only: bool,
    project_label: str,
    pending: bool = False,
    narrow: bool = False,
    connection: tuple[str, bool] | None = None,
) -> Text:
    """Two lines: the project and its locks, then freshness, follow and mode. ``narrow`` (80
    columns): the locks first, each on its own line, then the project with the rest, in short words.
    ``connection``: a remote project's connection (its words, whether it is up), on a line first."""
    text = Text()
    if connection is not None:
        words, up = connection
        text.append("⇄ " if up else "⚠ ", style=themed("$success" if up else "bold $error"))
        text.append(plain(words, "dim" if up else themed("$error")))
        text.append("\n")
    if not narrow:
        text.append(plain(project_label, "bold"))
    if snapshot is None:
        text.append(plain(project_label, "bold") if narrow else "")
        text.append("  loading…", style="dim")
        return text
    if snapshot.error:
        text.append("⚠ " if narrow else "  ⚠ ", style=themed("bold $error"))
        text.append(plain(snapshot.error, themed("$error")))
        text.append("\n" if narrow else "")
    separator = "\n" if narrow else "  │  "
    if not narrow:
        text.append(separator)
    text.append(lock_text(snapshot.writer_lock, now, narrow))
    text.append(separator)
    text.append(lock_text(snapshot.recovery_lock, now, narrow))
    if snapshot.stray_temp_files:
        text.append(f"  │  {snapshot.stray_temp_files} stray temp file(s)", style=themed("$warning"))
    text.append("\n")
    if snapshot.recovery_lock.hint:
        text.append(plain(snapshot.recovery_lock.hint, themed("$warning")))
        text.append("\n")
    for warning in snapshot.unsafe_directories:
        text.append(plain(f"⚠ {warning}", themed("$warning")))
        text.append("\n")
    if narrow:
        text.append(plain(project_label, "bold"))
        text.append("  │  ")
    seconds = max(0, now - snapshot.scanned_at_ms) // 1000
    text.append(f"updated {seconds} s ago", style="dim")
    text.append("  │  ")
    if following:
        text.append("● following", style=themed("$success"))
    else:
        text.append("❚❚ paused", style=themed("bold $warning"))
        if pending:
            text.append(" (changes waiting)", style=themed("$warning"))
    text.append("  │  ")
    if narrow:
        text.append("read-only" if read_only else "actions on", style="dim")
    else:
        text.append(
            "read-only: watching writes nothing" if read_only else "actions enabled (each asks first)", style="dim"
        )
    return text
