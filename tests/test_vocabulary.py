"""One vocabulary of commands (issue 25 item 2, pip's commands_dict): ``nexus_core.actions.COMMANDS``
holds every action and command with its help line and usage; ``nexus --help``, the usage
refusal's hint, shell completion and dispatch are generated from it. A fake action added in that
one place is found in all of them; the README's tour shows the same synopsis."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

import click
import pytest
from click.shell_completion import BashComplete
from project_kit import Project, plan, task_def

from nexus_core import actions
from nexus_core.cli import completion
from nexus_core.cli import main as cli
from nexus_core.preconditions import Check

ROOT = Path(__file__).resolve().parent.parent
CALLS: list[tuple[Any, ...]] = []


def _frobnicate(directory: str, run_id: str, task_id: str, options: Any, **_: Any) -> dict[str, Any]:
    CALLS.append((directory, run_id, task_id, options))
    return {"frobnicated": task_id}


NOT_STARTED = Check(
    "not-started", ("attempts",), lambda facts: not facts["attempts"], "Frobnicate needs a fresh task.", "Too late."
)
FROBNICATE = actions.Command(
    "frobnicate",
    "Frobnicate a task (a test's action).",
    "RUN TASK [--json] [-d DIR]",
    "RUN TASK",
    "mutation",
    "nothing",
    per_task=True,
    call=_frobnicate,
    checks=(NOT_STARTED,),
)


@pytest.fixture
def frobnicate(monkeypatch: pytest.MonkeyPatch) -> actions.Command:
    """The fake action, added in the one place a new action goes."""
    CALLS.clear()
    monkeypatch.setitem(actions.COMMANDS, FROBNICATE.name, FROBNICATE)
    return FROBNICATE


def offered(words: str) -> list[tuple[str, str | None]]:
    """What completion offers for ``words`` (the last one being completed), as the shell asks."""
    args, incomplete = words.split()[1:], ""
    if not words.endswith(" "):
        args, incomplete = args[:-1], words.split()[-1]
    root = completion.CompletionRoot(cli.click_command())
    items = BashComplete(root, {}, "nexus", cli.COMPLETE_VAR).get_completions(args, incomplete)
    return [(item.value, item.help) for item in items]


def test_a_new_action_is_one_entry_and_every_surface_has_it(
    frobnicate: actions.Command, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Help and usage.
    assert "nexus start|launch|collect|record|reconcile|verify|retry|cancel|accept RUN TASK" in cli.help_text()
    assert "  nexus frobnicate RUN TASK [--json] [-d DIR]" in cli.help_text()
    assert "nexus frobnicate RUN TASK" in cli.usage_hint()
    assert cli.usage_error().message == cli.USAGE  # the reference's line stays the reference's
    # Completion: the name with its help line, then its task ids by its own checks.
    assert ("frobnicate", "Frobnicate a task (a test's action).") in offered("nexus fro")
    project = Project(tmp_path / "project")
    project.create(plan("r1", task_def("a"), task_def("b")))
    project.start("r1", "a")
    monkeypatch.chdir(project.root)
    assert [value for value, _ in offered("nexus frobnicate r1 ")] == ["b"]
    assert {"--json", "--directory"} <= {value for value, _ in offered("nexus frobnicate r1 b --")}
    # Dispatch: the plain fast path and click's path both reach its call.
    with pytest.raises(SystemExit) as done:
        cli.main(["frobnicate", "r1", "b", "--json", "-d", project.dir])
    assert done.value.code == 0
    assert json.loads(capsys.readouterr().out) == {"frobnicated": "b"}
    with pytest.raises(SystemExit):
        cli.main(["frobnicate", "r1", "b", "--json", "--directory=" + project.dir])
    assert [(project.dir, "r1", "b", None)] * 2 == CALLS
    # Its checks are the core's table: the dashboard and completion ask the same entry.
    run: dict[str, Any] = {"plan": {"tasks": [{"id": "a"}]}, "tasks": [{"id": "a", "attempts": [{"id": "x"}]}]}
    refusal = actions.refusal("frobnicate", run, run["tasks"][0])
    assert refusal is NOT_STARTED and refusal.refusal({}).message == "Nexus: Frobnicate needs a fresh task."


def test_without_the_entry_it_is_nowhere(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert "frobnicate" not in cli.help_text() and "frobnicate" not in cli.usage_hint()
    assert offered("nexus fro") == []
    with pytest.raises(SystemExit) as done:
        cli.main(["frobnicate", "r1", "b", "--json", "-d", str(tmp_path)])
    assert done.value.code == 1
    assert json.loads(capsys.readouterr().out)["error"] == cli.USAGE


def test_the_reference_usage_line_names_exactly_its_forms() -> None:
    """USAGE is the reference's text (SPEC 8.3); the hint names every entry it does not."""
    named = [name for name in actions.COMMANDS if re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", cli.USAGE)]
    assert named == ["create", "inspect", *[n for n in actions.per_task_actions()]]
    hinted = re.findall(r"nexus ([a-z][a-z-]*)", cli.usage_hint())
    assert hinted == [name for name in actions.COMMANDS if name not in named]


def test_the_vocabulary_is_coherent() -> None:
    for name, command in actions.COMMANDS.items():
        assert command.name == name and command.summary.endswith(".") and command.usage
        if command.kind == "mutation":
            assert command.call is not None and not command.runner, name
        if command.kind == "command":
            assert command.runner and command.command and command.call is None and not command.checks, name
            assert isinstance(actions.load(command.command), click.Command)
            assert callable(actions.load(command.runner))
        if command.per_task:
            assert command.kind == "mutation" and command.usage.startswith("RUN TASK"), name
    assert set(actions.MUTATIONS) | {"inspect"} == set(actions.ACTIONS)
    assert set(actions.ACTIONS) | set(actions.SEPARATE_COMMANDS) == set(actions.COMMANDS)


def test_the_readmes_tour_shows_the_generated_synopsis() -> None:
    readme = (ROOT / "README.md").read_text()
    tour = readme.split("## A tour of the CLI", 1)[1].split("```", 2)[1].strip("\n").splitlines()
    assert tour == cli.synopsis_lines()


def test_cli_and_completion_import_no_cycle() -> None:
    """nexus_core/cli/main.py <-> completion.py: completion reads the vocabulary, never cli."""
    tree = ast.parse((ROOT / "nexus_core" / "cli" / "completion.py").read_text())
    modules = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    names = {alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) for alias in node.names}
    assert "main" not in names and not modules & {"main", "nexus_core.cli.main"}
