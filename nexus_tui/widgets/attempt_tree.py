"""An attempt as a tree of lines (the detail pane's attempts, the timeline's selected attempt):
one function per branch: backend, times, observations, reconciliations, cancellation, blocked
request, process, verification history, an earlier attempt's verification."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field

from rich.text import Text

from nexus_core.shapes import Attempt, JsonObject
from nexus_core.words import json_word

from .detail_text import when_text
from .plain import plain
from .styles import Styles, value_cell

WRAP = 56
WRAPPED_LINES = 12


@dataclass
class Node:
    label: Text
    children: list[Node] = field(default_factory=list)
    expand: bool = False

    def add(self, label: Text, expand: bool = False) -> Node:
        node = Node(label, expand=expand)
        self.children.append(node)
        return node


def attempt_node(attempt: Attempt, index: int, count: int, now: int, styles: Styles) -> Node:
    """Attempt ``index`` of ``count``; the latest's verification is the pane's own text."""
    node = Node(attempt_label(attempt, index, styles), expand=True)
    node.add(Text("backend ", style="bold dim") + backend_text(attempt))
    # An id on a line of its own under its label: never cut, even in the 120-column detail pane.
    node.add(Text("attempt id", style="bold dim"), expand=True).add(plain(attempt.get("id")))
    if attempt.get("parentAttemptId"):
        node.add(Text("retry of", style="bold dim"), expand=True).add(plain(attempt["parentAttemptId"]))
    add_times(node, attempt, now)
    add_observations(node, attempt.get("observations") or [], styles)
    add_reconciliations(node, attempt.get("reconciliations") or [], styles)
    add_cancellation(node, attempt, styles)
    if attempt.get("blockedRequest"):
        node.add(Text("blocked request ", style=styles.themed("bold $error")) + plain(attempt["blockedRequest"]))
    process = attempt.get("process")
    if isinstance(process, dict):
        add_process(node, process, now, styles)
    add_verification_history(node, attempt, styles)
    if index != count - 1:
        add_verification(node, attempt, styles)
    node.add(Text("verification rounds ", style="bold dim") + plain(attempt.get("verificationRounds")))
    return node


def attempt_label(attempt: Attempt, index: int, styles: Styles) -> Text:
    label = Text(f"#{index + 1} ", style="bold")
    label.append(plain(str(attempt.get("id"))[:8], "bold"))
    label.append(" ")
    label.append(value_cell(str(attempt.get("execution")), styles))
    label.append(" · verification ")
    label.append(value_cell(str((attempt.get("verification") or {}).get("status")), styles))
    return label


def backend_text(attempt: Attempt) -> Text:
    backend = attempt.get("backend") or {}
    text = plain(f"{backend.get('kind')} {backend.get('id')} / {backend.get('sessionId')}")
    if backend.get("kind") == "process":
        text.append(plain(f"  supervisor pid {backend.get('ownerPid')}@{backend.get('hostname')}", "dim"))
    return text


def add_times(node: Node, attempt: Attempt, now: int) -> None:
    times = node.add(Text("times", style="bold dim"))
    for key in ("startedAt", "observedAt", "endedAt", "deadline"):
        times.add(Text(f"{key:<11}", style="dim") + when_text(attempt.get(key), now))


def add_observations(node: Node, observations: list[JsonObject], styles: Styles) -> None:
    branch = node.add(Text(f"observations ({len(observations)})", style="bold dim"), expand=True)
    for entry in observations:
        line = plain(entry.get("at"), "dim")
        line.append(" ")
        line.append(value_cell(str(entry.get("outcome")), styles))
        if entry.get("exitCode") is not None:
            line.append(plain(f" exit {entry['exitCode']}"))
        line.append(" · ")
        line.append(plain(entry.get("evidenceClass"), "dim"))
        add_wrapped(branch.add(line, expand=True), entry.get("summary"))


def add_reconciliations(node: Node, reconciliations: list[JsonObject], styles: Styles) -> None:
    if not reconciliations:
        return
    branch = node.add(Text(f"reconciliations ({len(reconciliations)})", style="bold dim"), expand=True)
    for entry in reconciliations:
        line = plain(entry.get("at"), "dim")
        line.append(" ")
        line.append(value_cell(str(entry.get("outcome")), styles))
        stopped, retry_safe = json_word(entry.get("ownerStopped")), json_word(entry.get("retrySafe"))
        line.append(plain(f" · ownerStopped {stopped} · retrySafe {retry_safe}"))
        add_wrapped(branch.add(line, expand=True), entry.get("summary"))


def add_cancellation(node: Node, attempt: Attempt, styles: Styles) -> None:
    cancellation = attempt.get("cancellation") or {}
    if cancellation.get("status") in (None, "none"):
        return
    label = Text("cancellation ", style="bold dim")
    label.append(plain(cancellation.get("status"), styles.themed("$accent")))
    branch = node.add(label, expand=True)
    for key in ("requestedAt", "reason", "termination", "reconciledAt", "resolvedOutcome"):
        if key in cancellation:
            add_wrapped(branch.add(Text(key, style="dim"), expand=True), cancellation.get(key))


def add_process(node: Node, process: JsonObject, now: int, styles: Styles) -> None:
    label = Text("process ", style="bold dim")
    label.append(plain(process.get("status")))
    branch = node.add(label, expand=True)
    branch.add(Text("heartbeat   ", style="dim") + when_text(process.get("heartbeatAt"), now))
    branch.add(Text("child pid   ", style="dim") + plain(process.get("childPid")))
    branch.add(Text("collected   ", style="dim") + when_text(process.get("collectedAt"), now))
    receipt = process.get("receipt")
    if isinstance(receipt, dict):
        line = Text("receipt     ", style="dim")
        line.append(value_cell(str(receipt.get("outcome")), styles))
        line.append(
            plain(
                f" exit {json_word(receipt.get('exitCode'))} signal {json_word(receipt.get('signal'))}"
                f" reason {json_word(receipt.get('reason'))}"
            )
        )
        branch.add(line)


def add_verification_history(node: Node, attempt: Attempt, styles: Styles) -> None:
    history = attempt.get("verificationHistory") or []
    if not history:
        return
    branch = node.add(Text(f"verification history ({len(history)})", style="bold dim"), expand=True)
    for past in history:
        line = value_cell(str(past.get("status")), styles)
        line.append(plain(f"  {past.get('startedAt')} → {past.get('endedAt') or '—'}", "dim"))
        line.append(plain(f"  {len(past.get('checks') or [])} check(s)", "dim"))
        branch.add(line)


def add_verification(node: Node, attempt: Attempt, styles: Styles) -> None:
    """An earlier attempt's verification: each check's exit and the first line it said."""
    verification = attempt.get("verification") or {}
    label = Text("verification ", style="bold dim")
    label.append(value_cell(str(verification.get("status")), styles))
    branch = node.add(label, expand=True)
    for receipt in verification.get("checks") or []:
        line = plain(receipt.get("id"), "bold")
        line.append(plain(f" exit {json_word(receipt.get('exitCode'))}"))
        if receipt.get("timedOut"):
            line.append(" TIMED OUT", style=styles.themed("bold $error"))
        check = branch.add(line, expand=True)
        first = next((s for s in (receipt.get("error"), receipt.get("stderr"), receipt.get("stdout")) if s), None)
        if isinstance(first, str):
            add_wrapped(check, first.strip().split("\n")[0])
    if verification.get("problem"):
        add_wrapped(branch, verification["problem"], styles.themed("$error"))


def add_wrapped(parent: Node, value: object, style: str = "") -> None:
    """Untrusted text as leaves of at most WRAP columns (tree labels do not wrap)."""
    text = "" if value is None else str(value)
    lines = [piece for raw in text.split("\n") for piece in (textwrap.wrap(raw, WRAP) or [""])]
    for line in lines[:WRAPPED_LINES]:
        parent.add(plain(line, style))
    if len(lines) > WRAPPED_LINES:
        parent.add(Text(f"… {len(lines) - WRAPPED_LINES} more line(s)", style="dim"))
