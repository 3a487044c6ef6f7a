"""The detail pane's texts: the run's header, the task's header (one function per section) and
its latest verification. The attempts' tree is ``attempt_tree.py``; the pane is ``task_detail.py``.

Every value that comes from a run file (notes, summaries, check output, ids) goes into a
``Text`` through :func:`plain` (``widgets/plain.py``), never through markup: ``[red]`` in a
summary shows as ``[red]``.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from rich.text import Text

from nexus_core import needs
from nexus_core.shapes import Attempt, CheckReceipt, JsonObject, Observation, Task, TaskDefinition
from nexus_core.timeutil import duration_text, parse_iso_ms
from nexus_core.words import json_word

from ..logic.model import ProjectSnapshot, RunView, TaskRow
from .ages import age
from .plain import plain
from .run_cells import states_cell
from .styles import GLYPH, OWNER_GONE_GLYPH, OWNER_GONE_STYLE, OWNER_GONE_WORDS, Styles, value_cell

EXCERPT_LINES = 6
EXCERPT_CHARS = 600


def command_label(path: str) -> str:
    """The executable's name; its full path and hash are in the plan (inspect --json)."""
    return os.path.basename(path)


def labelled_line(text: Text, label: str, value: Text | str, style: str = "") -> None:
    """``label`` in a column of 14, then ``value`` (a str is untrusted: shown plain)."""
    text.append(f"{label:<14}", style="bold dim")
    text.append(value if isinstance(value, Text) else plain(value, style))
    text.append("\n")


def when_text(iso: object, now: int) -> Text:
    """A timestamp and how long ago it was; "—" when there is none."""
    if not isinstance(iso, str):
        return Text("—", style="dim")
    text = plain(iso)
    text.append(f"  ({age(iso, now)})", style="dim")
    return text


def run_header(
    view: RunView, snapshot: ProjectSnapshot, now: int, styles: Styles, display: Callable[[str], str] | None = None
) -> Text:
    text = Text()
    text.append("Run ", style="bold")
    text.append(plain(view.run_id, "bold"))
    text.append("\n")
    if view.error:
        text.append("⚠ state file failed to load: ", style=styles.themed("bold $error"))
        text.append(plain(view.error, styles.themed("$error")))
        text.append(
            "\n  showing the last good view; nothing was repaired.\n" if view.inspection else "\n",
            style=styles.themed("$error"),
        )
    if view.loading or (view.inspection is None and not view.error):
        text.append("loading…\n", style="dim italic")
    if view.inspection:
        labelled_line(text, "sequence", str(view.sequence))
        labelled_line(text, "updated", when_text(view.updated_at, now))
        labelled_line(text, "tasks", states_cell(view, styles))
    root = snapshot.root or snapshot.directory
    labelled_line(text, "state file", (display or str)(f"{root}/{view.state_path}"))
    return text


# ----------------------------------------------------------------- the task's header, by section


def task_header(
    view: RunView,
    task: Task,
    definition: TaskDefinition,
    observation: Observation,
    row: TaskRow | None,
    now: int,
    styles: Styles,
) -> Text:
    """The task's header: its title, the load error, its definition, what the observation flags,
    its process and the core's hint."""
    header = Text()
    need = row.need if row else None
    title_line(header, task["id"], row.state if row else "?", need, styles)
    if view.error:
        header.append("⚠ state file failed to load: ", style=styles.themed("bold $error"))
        header.append(plain(view.error, styles.themed("$error")))
        header.append("\n  (last good view shown)\n", style=styles.themed("$error"))
    definition_lines(header, definition, task, now, styles)
    flag_lines(header, observation, task, now, styles)
    process = observation.get("process")
    if process:
        labelled_line(header, "process", process_line(process, task, need, now, styles))
    hint_lines(header, observation, styles)
    return header


def title_line(header: Text, task_id: str, state: str, need: str | None, styles: Styles) -> None:
    """Glyph, id and state; a task whose running work lost its owner says which owner."""
    if need in OWNER_GONE_WORDS:
        header.append(f"{OWNER_GONE_GLYPH} ", style=styles.themed(OWNER_GONE_STYLE))
        header.append(plain(task_id, "bold"))
        header.append(f"  {state}: {OWNER_GONE_WORDS[need or '']}", style=styles.themed(OWNER_GONE_STYLE))
    else:
        header.append(f"{GLYPH.get(state, '')} ", style=styles.state(state, ""))
        header.append(plain(task_id, "bold"))
        header.append(f"  {state}", style=styles.state(state, ""))
    header.append("\n")


def definition_lines(header: Text, definition: TaskDefinition, task: Task, now: int, styles: Styles) -> None:
    """What the plan says of the task (objective, dependencies, scope, worker) and its acceptance."""
    header.append(plain(definition.get("objective", ""), "italic"))
    header.append("\n")
    labelled_line(header, "depends on", ", ".join(definition.get("dependsOn") or []) or "—")
    labelled_line(header, "scope", ", ".join(definition.get("scope") or []) or "—")
    labelled_line(header, "artifacts", ", ".join(definition.get("artifacts") or []) or "—")
    if definition.get("execution"):
        execution = definition["execution"]
        command = command_label(str(execution.get("command", "")))
        worker = f"{execution.get('adapter')}: {' '.join([command, *execution.get('args', [])])}"
        labelled_line(header, "worker", worker)
    labelled_line(header, "acceptance", value_cell(task["integration"], styles))
    if task.get("acceptedAt"):
        labelled_line(header, "accepted at", when_text(task["acceptedAt"], now))


def flag_lines(header: Text, observation: Observation, task: Task, now: int, styles: Styles) -> None:
    """What the observation flags: stale, overdue, resources changed since create."""
    alarm, error = styles.themed("bold $error"), styles.themed("$error")
    if observation.get("stale"):
        header.append("STALE ", style=alarm)
        header.append(plain(observation.get("staleReason"), error))
        header.append("\n")
    if observation.get("overdue"):
        header.append("OVERDUE ", style=alarm)
        attempt = task["attempts"][-1] if task["attempts"] else {}
        header.append(plain(f"deadline {attempt.get('deadline')} ({age(attempt.get('deadline'), now)})", error))
        header.append("\n")
    if observation and not observation.get("resourcesCurrent", True):
        header.append("resources changed since create\n", style=error)


def process_line(process: JsonObject, task: Task, need: str | None, now: int, styles: Styles) -> Text:
    """The launched process: its status, heartbeat, whether it is history, its child, its receipt."""
    beat = Text()
    beat.append(plain(process.get("status")))
    beat.append(" · heartbeat ")
    beat.append(when_text(process.get("lastHeartbeat"), now))
    latest = task["attempts"][-1] if task["attempts"] else {}
    if need == needs.SUPERVISOR_GONE:
        beat.append(" STALE: supervisor gone", style=styles.themed("bold $error"))
    elif process.get("status") != "finished" and latest.get("execution") not in ("running", "ambiguous"):
        # Reconciled after its supervisor stopped: the process record is history now.
        beat.append(f" (superseded: the attempt was reconciled {latest.get('execution')})", style="dim")
    elif process.get("heartbeatStale") and process.get("status") != "finished":
        beat.append(" stale, supervisor alive", style=styles.themed("$warning"))
    if process.get("childPid") is not None:
        beat.append(plain(f" · child pid {process['childPid']}"))
    if process.get("receiptReady"):
        beat.append(" · receipt ready to collect", style=styles.themed("bold $primary-lighten-2"))
    return beat


def hint_lines(header: Text, observation: Observation, styles: Styles) -> None:
    """The core's hint, and who owns a verification left running (the core's words too)."""
    header.append("hint ", style=styles.themed("bold $primary-lighten-2"))
    header.append(plain(observation.get("hint", ""), styles.themed("$primary-lighten-2")))
    header.append("\n")
    running = observation.get("runningVerification")
    if isinstance(running, dict) and running.get("hint"):
        # The core's words: who owns the verification left running, since when, what ends it.
        alive = running.get("ownerAlive")
        header.append(
            "verification left running " if alive is not True else "verification running ",
            style=styles.themed("bold $warning"),
        )
        header.append(plain(running["hint"], styles.themed("$warning")))
        header.append("\n")


# ----------------------------------------------------------------- the latest verification


def verification_text(attempt: Attempt, now: int, styles: Styles) -> Text:
    verification = attempt.get("verification") or {}
    text = Text("Latest verification  ", style="bold")
    text.append(value_cell(str(verification.get("status")), styles))
    if verification.get("startedAt"):
        text.append(plain(f"  round {attempt.get('verificationRounds')}", "dim"))
    text.append("\n")
    if verification.get("startedAt"):
        labelled_line(text, "started", when_text(verification.get("startedAt"), now))
        labelled_line(text, "ended", when_text(verification.get("endedAt"), now))
        owner = verification.get("owner") or {}
        labelled_line(text, "verifier", f"pid {owner.get('pid')}@{owner.get('hostname')}")
    if verification.get("problem"):
        text.append("problem ", style=styles.themed("bold $error"))
        text.append(plain(verification["problem"], styles.themed("$error")))
        text.append("\n")
    checks = verification.get("checks") or []
    if not checks:
        text.append("no check receipts\n", style="dim")
    for receipt in checks:
        receipt_lines(text, receipt, styles)
    return text


def receipt_lines(text: Text, receipt: CheckReceipt, styles: Styles) -> None:
    """One check's receipt: its outcome line, its command, its error and output excerpts."""
    passed = receipt.get("exitCode") == 0 and not receipt.get("error")
    text.append("● ", style=styles.themed("$success") if passed else styles.themed("$error"))
    text.append(plain(receipt.get("id"), "bold"))
    text.append(plain(f"  exit {json_word(receipt.get('exitCode'))}"))
    if receipt.get("timedOut"):
        text.append("  TIMED OUT", style=styles.themed("bold $error"))
    else:
        text.append("  timed out: no", style="dim")
    started, ended = parse_iso_ms(receipt.get("startedAt")), parse_iso_ms(receipt.get("endedAt"))
    if started is not None and ended is not None:
        text.append(f"  {milliseconds_text(ended - started)}", style="dim")
    if receipt.get("signal"):
        text.append(plain(f"  signal {receipt['signal']}", styles.themed("$error")))
    text.append("  ")
    text.append(plain(receipt.get("evidenceClass"), "dim"))
    text.append("\n")
    if receipt.get("command"):
        text.append("  $ ", style="dim")
        command = command_label(str(receipt["command"]))
        text.append(plain(" ".join([command, *map(str, receipt.get("args") or [])]), "dim"))
        text.append("\n")
    if receipt.get("error"):
        text.append("  error ", style=styles.themed("$error"))
        text.append(plain(receipt["error"], styles.themed("$error")))
        text.append("\n")
    for stream in ("stdout", "stderr"):
        excerpt = output_excerpt(receipt.get(stream))
        if excerpt.plain:
            text.append(f"  {stream}:\n", style="dim")
            for piece in excerpt.split("\n"):
                text.append("    ")
                text.append(piece)
                text.append("\n")
    if receipt.get("outputTruncated"):
        text.append("  (output truncated at 64 KiB)\n", style="dim")


def output_excerpt(output: object) -> Text:
    """The last EXCERPT_LINES lines of a check's output, at most EXCERPT_CHARS characters."""
    if not isinstance(output, str) or not output.strip():
        return Text("")
    lines = output.rstrip("\n").split("\n")
    shown = "\n".join(lines[-EXCERPT_LINES:])
    if len(shown) > EXCERPT_CHARS:
        shown = "…" + shown[-EXCERPT_CHARS:]
    elif len(lines) > EXCERPT_LINES:
        shown = "…\n" + shown
    return plain(shown)


def milliseconds_text(ms: int) -> str:
    if ms < 1000:
        return f"{ms} ms"
    return f"{ms / 1000:.1f} s" if ms < 60_000 else duration_text(ms)
