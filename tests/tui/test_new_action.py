"""A new mutating action is one entry in the core's table and one Operation (issue 25 item 3):
registered here as a plugin would be (nexus_core.actions.COMMANDS gets the entry with its core
function and its state check; OPERATIONS gets the Operation, and the registry its entry, both
read from it), it is found in every place ARCHITECTURE.md's "Where to change what" names: the
bindings, the footer, the help screen, the palette, the gate (refused in its check's words, and
under --read-only), its dialog and the core call behind it, the action log, completion, and the
CLI's help and dispatch."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from dashboard_kit import eventually, loaded, select
from textual.widgets import Input, Static
from textual.widgets._footer import FooterKey
from tui_actions_support import make_project, start, task_plan

from nexus_core import actions as core_actions
from nexus_core.cli import main as cli
from nexus_core.preconditions import Check, require
from nexus_core.shapes import Run
from nexus_core.state.store import load_run
from nexus_tui import actions
from nexus_tui import app as app_module
from nexus_tui.app import NexusApp
from nexus_tui.logic import operations
from nexus_tui.logic.operations.base import Field, Line, Preview, TaskContext, TaskOperation, need_text
from nexus_tui.screens.dialogs import ActionDialog
from nexus_tui.screens.help import HelpScreen

CALLS: list[tuple[str, str, str, Any]] = []
FRESH = Check(
    "fresh", ("attempts",), lambda facts: not facts["attempts"], "Frobnicate needs a fresh task.", "Too late."
)


def frobnicate_task(directory: str, run_id: str, task_id: str, options: Any, **_: Any) -> Run:
    """The core function: it raises from its entry's checks, as the engine does (a real one
    would then change the run under writer.lock)."""
    run = load_run(directory, run_id)
    task = next(t for t in run["tasks"] if t["id"] == task_id)
    require(core_actions.COMMANDS["frobnicate"].checks, core_actions.facts_for("frobnicate", run, task))
    CALLS.append((directory, run_id, task_id, options))
    return run


class Frobnicate(TaskOperation):
    name = "frobnicate"
    keys = "z"
    label = "Frobnicate"
    help = "Frobnicate the selected task (a test's action)."
    footer = True
    confirm_label = "Frobnicate"
    fields: ClassVar[tuple[Field, ...]] = (Line("note", "Note (why)", "e.g. it was time"),)

    def describe_task(self, preview: Preview, context: TaskContext) -> None:
        preview.title = f"Frobnicate {context.task['id']}"
        preview.changes = [f"Frobnicates {context.where}."]
        preview.defaults = {"note": ""}

    def check_values(self, preview: Preview, values: dict[str, Any], errors: dict[str, str]) -> None:
        need_text(values, errors, "note", "Note")

    def build_input(self, preview: Preview, values: dict[str, Any], run: Run | None) -> dict[str, Any]:
        return {"note": values["note"]}


@pytest.fixture
def frobnicate(monkeypatch: pytest.MonkeyPatch) -> Iterator[actions.ActionSpec]:
    CALLS.clear()
    entry = core_actions.Command(
        "frobnicate",
        "Frobnicate a task.",
        "RUN TASK --input FILE [--json] [-d DIR]",
        "RUN TASK",
        "mutation",
        "input",
        per_task=True,
        call=frobnicate_task,
        checks=(FRESH,),
    )
    monkeypatch.setitem(core_actions.COMMANDS, "frobnicate", entry)  # the core's table: one entry
    operation = Frobnicate()  # the dashboard: one Operation
    monkeypatch.setitem(operations.OPERATIONS, operation.name, operation)
    spec = actions.operation_entry(operation)
    actions.register(spec)
    yield spec
    actions.REGISTRY.remove(spec)


def app_class() -> type[NexusApp]:
    """NexusApp's bindings are the registry's when its class is made (at import, after every
    Operation in the source registered): a class made now has the plugin's too."""

    class WithPlugin(NexusApp):
        CSS_PATH = str(Path(app_module.__file__).parent / "nexus.tcss")  # relative to the subclass's file else
        BINDINGS: ClassVar[list[Any]] = actions.bindings([actions.spec("frobnicate")])  # type: ignore[list-item]

    return WithPlugin


async def test_a_new_mutating_action_is_one_core_entry_and_one_operation(
    frobnicate: actions.ActionSpec, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = make_project(tmp_path, [task_plan("a"), task_plan("b")])
    start(root, "b")
    assert frobnicate.mutating and frobnicate.action == "act('frobnicate')"
    assert ("z", "act('frobnicate')") in {(b.key, b.action) for b in actions.bindings()}
    app = app_class()([str(root)], watch=False, rescan_seconds=0, tick=False)
    async with app.run_test(size=(200, 44)) as pilot:
        await loaded(app, pilot)
        # The gate, in its check's words, on a task that has an attempt; the palette says the same.
        await select(pilot, "demo", "b")
        assert app.check_action("act", ("frobnicate",)) is None
        assert app.refusal_of("frobnicate") == "Too late."
        palette = {c.title: c for c in app.get_system_commands(app.screen)}
        assert palette["Frobnicate"].help == actions.refused_words("Too late.")
        # On a fresh task: offered in the footer, the palette and by its key.
        await select(pilot, "demo", "a")
        assert app.check_action("act", ("frobnicate",)) is True
        # The footer recomposes after the next refresh once the bindings changed: wait for it.
        await eventually(pilot, lambda: any(key.action == "act('frobnicate')" for key in app.query(FooterKey)))
        palette = {c.title: c for c in app.get_system_commands(app.screen)}
        assert palette["Frobnicate"].discover
        await pilot.press("z")
        await eventually(pilot, lambda: isinstance(app.screen, ActionDialog))
        dialog = app.screen
        assert dialog.query_one("#confirm").label.plain == "Frobnicate"  # type: ignore[attr-defined]
        dialog.query_one("#note", Input).value = "it was time"
        await pilot.click("#confirm")
        await eventually(pilot, lambda: bool(CALLS) and not isinstance(app.screen, ActionDialog))
        assert [(str(root), "demo", "a", {"note": "it was time"})] == CALLS
        await eventually(pilot, lambda: any(e.action == "frobnicate" and e.ok for e in app.flow.log.entries))
        # The help screen lists it with its words.
        await pilot.press("question_mark")
        await eventually(pilot, lambda: isinstance(app.screen, HelpScreen))
        shown = " ".join(str(s.render()) for s in app.screen.query(Static))
        assert "Frobnicate" in shown and frobnicate.help in shown
        await pilot.press("escape")
        # --read-only refuses it like every mutating action.
        app.read_only = True
        assert app.check_action("act", ("frobnicate",)) is None
    # The CLI: help, usage hint and dispatch (completion reads the same table: test_vocabulary).
    assert "nexus frobnicate RUN TASK --input FILE [--json] [-d DIR]" in cli.help_text()
    note = tmp_path / "note.json"
    note.write_text(json.dumps({"note": "from the shell"}))
    with pytest.raises(SystemExit) as done:
        cli.main(["frobnicate", "demo", "a", "--input", str(note), "--json", "-d", str(root)])
    assert done.value.code == 0 and json.loads(capsys.readouterr().out)["id"] == "demo"
    assert CALLS[-1] == (str(root), "demo", "a", {"note": "from the shell"})
    with pytest.raises(SystemExit):
        cli.main(["frobnicate", "demo", "b", "--input", str(note), "-d", str(root)])
    assert capsys.readouterr().err.splitlines()[0] == "Nexus: Nexus: Frobnicate needs a fresh task."
