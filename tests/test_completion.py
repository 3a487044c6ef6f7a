"""Shell completion through click's protocol, in a subprocess as the shell runs it: actions,
run ids, task ids (for an action, only the ones its state checks accept: issue 24), files,
directories and option names; a corrupt run file and a project without state offer what can be
read; nothing on disk changes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_cli
from process_support import command_task, create, make_project
from project_kit import Project, plan, task_def

from nexus_core import actions
from nexus_core.backend import process

SHELLS = ("bash", "zsh", "fish")


def complete(
    line: str, cwd: Path, shell: str = "bash", program: str = "nexus_core.cli"
) -> subprocess.CompletedProcess[str]:
    """What the shell's completion function receives for ``line`` (the cursor at its end)."""
    words = line.split(" ")
    env = dict(os.environ, COMP_WORDS=line)
    variable = "_NEXUS_TUI_COMPLETE" if program == "nexus_tui.cli" else "_NEXUS_COMPLETE"
    env[variable] = f"{shell}_complete"
    # bash and zsh pass the index of the word being completed; fish passes that word itself.
    env["COMP_CWORD"] = words[-1] if shell == "fish" else str(len(words) - 1)
    done = subprocess.run(
        [sys.executable, "-m", program], cwd=cwd, env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    return done


def values(line: str, cwd: Path, shell: str = "bash", program: str = "nexus_core.cli") -> list[str]:
    """The offered values, in order, whatever the shell's format."""
    out = complete(line, cwd, shell, program).stdout
    if shell == "zsh":  # type, value, help: three lines per item
        return out.splitlines()[1::3]
    return [entry.split(",", 1)[1].split("\t")[0] for entry in out.splitlines() if entry]


def kinds(line: str, cwd: Path) -> list[str]:
    return [entry.split(",", 1)[0] for entry in complete(line, cwd).stdout.splitlines() if entry]


@pytest.fixture
def project(tmp_path: Path) -> Project:
    """Run r1: a verified (accept it next), b completed (verify it next), c not started (start
    it next); run r2 beside it."""
    kit = Project(tmp_path / "project")
    kit.create(plan("r1", task_def("a"), task_def("b"), task_def("c")))
    kit.create(plan("r2", task_def("x")))
    kit.verified("r1", "a")
    kit.completed("r1", "b")
    return kit


@pytest.mark.parametrize("shell", SHELLS)
def test_actions_and_separate_commands_are_offered(project: Project, shell: str) -> None:
    offered = values("nexus ", project.root, shell)
    for name in ("create", "inspect", "recover-lock", "start", "verify", "accept", "collect", "wait", "loop"):
        assert name in offered
    assert values("nexus ins", project.root, shell) == ["inspect"]
    assert values("nexus re", project.root, shell) == ["recover-lock", "record", "reconcile", "retry", "report"]


def test_zsh_and_fish_show_each_actions_help(project: Project) -> None:
    zsh = complete("nexus ins", project.root, "zsh").stdout.splitlines()
    assert zsh[:2] == ["plain", "inspect"] and "inventory" in zsh[2]
    fish = complete("nexus wai", project.root, "fish").stdout
    assert fish.startswith("plain,wait\t") and "settles" in fish


@pytest.mark.parametrize("shell", SHELLS)
def test_run_ids_come_from_the_inventory(project: Project, shell: str, tmp_path: Path) -> None:
    assert values("nexus inspect ", project.root, shell) == ["r1", "r2"]
    assert values("nexus verify r", project.root, shell) == ["r1", "r2"]
    assert values("nexus wait r2", project.root, shell) == ["r2"]
    # -d names the project, before or after the action; the shell may sit anywhere.
    assert values(f"nexus -d {project.root} cancel ", tmp_path, shell) == ["r1", "r2"]
    assert values(f"nexus loop --directory {project.root} ", tmp_path, shell) == ["r1", "r2"]
    assert values("nexus create ", project.root, shell) == []  # create takes no run


@pytest.mark.parametrize("shell", SHELLS)
def test_task_ids_are_only_the_ones_the_action_takes(project: Project, shell: str) -> None:
    assert values("nexus verify r1 ", project.root, shell) == ["b"]
    assert values("nexus accept r1 ", project.root, shell) == ["a"]
    assert values("nexus start r1 ", project.root, shell) == ["c"]
    assert values("nexus accept r1 b", project.root, shell) == []
    assert values("nexus record r1 ", project.root, shell) == []  # nothing runs
    assert values("nexus wait r1 --task ", project.root, shell) == ["a", "b", "c"]  # not an action: all
    assert values("nexus inspect r1 ", project.root, shell) == []  # inspect takes no task


def test_start_is_not_offered_for_a_task_whose_dependency_is_not_accepted(tmp_path: Path) -> None:
    """Issue 24 item 6: completion offers what the action's checks accept (the core's table)."""
    kit = Project(tmp_path / "project")
    kit.create(plan("r1", task_def("base"), task_def("next", dependsOn=["base"])))
    assert values("nexus start r1 ", kit.root) == ["base"]
    kit.accepted("r1", "base")
    assert values("nexus start r1 ", kit.root) == ["next"]


def test_zsh_shows_each_tasks_state(project: Project) -> None:
    lines = complete("nexus verify r1 ", project.root, "zsh").stdout.splitlines()
    assert lines[:3] == ["plain", "b", "completed; verification=pending; acceptance=pending"]
    lines = complete("nexus start r1 ", project.root, "zsh").stdout.splitlines()
    assert lines[:3] == ["plain", "c", "not started; acceptance=pending"]


def test_files_directories_and_option_names(project: Project) -> None:
    assert kinds("nexus create --plan ", project.root) == ["file"]
    assert kinds("nexus record r1 a --input ", project.root) == ["file"]
    assert kinds("nexus wait r1 --event-log ", project.root) == ["file"]
    assert kinds("nexus inspect -d ", project.root) == ["dir"]
    assert kinds("nexus wait r1 -d ", project.root) == ["dir"]
    verify_options = values("nexus verify r1 a --", project.root)
    assert {"--json", "--directory", "--help"} <= set(verify_options)
    assert "--input" not in verify_options and "--plan" not in verify_options  # verify refuses both
    assert "--input" in values("nexus record r1 a --", project.root)
    assert values("nexus loop r1 --ev", project.root) == ["--every"]


def test_a_corrupt_run_file_offers_what_can_be_read(project: Project) -> None:
    state = project.root / ".bmad-plus/nexus/runs/r1.json"
    state.write_text(state.read_text().replace('"sha256": "', '"sha256": "0', 1))
    # The core refuses the run (checksum), so no task is one an action would take; wait's
    # --task still offers what the file names.
    assert values("nexus verify r1 ", project.root) == []
    assert values("nexus wait r1 --task ", project.root) == ["a", "b", "c"]
    state.write_text(state.read_text()[:200])  # truncated: not JSON any more
    assert values("nexus verify r1 ", project.root) == []
    assert values("nexus wait r1 --task ", project.root) == []
    assert values("nexus inspect ", project.root) == ["r1", "r2"]
    state.write_bytes(b"\xff\xfe\x00")
    assert values("nexus accept r1 ", project.root) == []


def test_a_project_without_state_offers_nothing_quietly(tmp_path: Path) -> None:
    assert values("nexus inspect ", tmp_path) == []
    assert values("nexus verify r1 ", tmp_path) == []
    (tmp_path / ".bmad-plus").write_text("not a directory")
    assert values("nexus inspect ", tmp_path) == []
    assert values("nexus verify r1 ", tmp_path) == []
    assert values("nexus ", tmp_path)[:2] == ["create", "inspect"]


def test_completion_changes_nothing_on_disk(project: Project) -> None:
    # A live writer's state would be visible here: completion takes no lock and writes nothing.
    before = project.state_tree()
    listing = sorted(str(p) for p in project.root.rglob("*"))
    for line in ("nexus ", "nexus inspect ", "nexus verify r1 ", "nexus accept r1 ", "nexus wait r1 --task "):
        for shell in SHELLS:
            complete(line, project.root, shell)
    assert project.state_tree() == before
    assert sorted(str(p) for p in project.root.rglob("*")) == listing


def test_the_source_scripts_are_printed_for_every_shell(tmp_path: Path) -> None:
    for shell in SHELLS:
        env = dict(os.environ, _NEXUS_COMPLETE=f"{shell}_source")
        done = subprocess.run(
            [sys.executable, "-m", "nexus_core.cli"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0 and "_NEXUS_COMPLETE" in done.stdout and done.stderr == ""
        if shell == "fish":  # fish would sort the candidates, and lose "valid tasks first"
            assert "complete --keep-order --no-files --command nexus" in done.stdout


def test_nexus_tui_completes_its_options_and_directories(tmp_path: Path) -> None:
    offered = values("nexus-tui --", tmp_path, program="nexus_tui.cli")
    expected = {"--directory", "--poll", "--read-only", "--demo", "--keep-demo", "--version", "--help", "--ssh"}
    expected.add("--remote-nexus")
    assert expected <= set(offered)
    assert complete("nexus-tui -d ", tmp_path, program="nexus_tui.cli").stdout.splitlines() == ["dir,"]
    assert values("nexus-tui -d . --rea", tmp_path, "zsh", program="nexus_tui.cli") == ["--read-only"]


def test_launch_and_collect_offer_the_process_task_only_when_it_fits(tmp_path: Path) -> None:
    """launch and collect read the process shape of the run file; start never offers a process task."""
    root = make_project(tmp_path / "proc")
    create(root, "r", [task_def("h"), command_task("p", "ok")])
    assert values("nexus launch r ", root) == ["p"]
    assert values("nexus start r ", root) == ["h"]
    assert values("nexus collect r ", root) == []  # nothing to collect yet
    process.launch_task(str(root), "r", "p", {})  # finished; the receipt awaits collect
    assert values("nexus collect r ", root) == ["p"]
    assert values("nexus launch r ", root) == []


@pytest.mark.parametrize("name", list(actions.SEPARATE_COMMANDS))
def test_every_separate_command_runs_and_completes_its_own_options(name: str, tmp_path: Path) -> None:
    """Each entry of the table names a loadable command and runner (a new command is one entry)."""
    offered = values(f"nexus {name} --", tmp_path) + values(f"nexus {name} ", tmp_path)  # a group: subcommands
    assert "--help" in offered and len(offered) > 1, offered
    shown = run_cli(name, "--help", cwd=tmp_path)
    assert shown.returncode == 0 and f"nexus {name}" in shown.stdout, shown.stderr


@pytest.mark.parametrize("program", ["nexus_core.cli", "nexus_tui.cli"])
def test_a_malformed_request_gets_no_traceback(program: str, tmp_path: Path) -> None:
    variable = "_NEXUS_TUI_COMPLETE" if program == "nexus_tui.cli" else "_NEXUS_COMPLETE"
    env = {k: v for k, v in os.environ.items() if k not in ("COMP_WORDS", "COMP_CWORD")}
    for instruction in ("bash_complete", "zsh_complete", "nosuchshell_complete"):
        done = subprocess.run(
            [sys.executable, "-m", program],
            cwd=tmp_path,
            env={**env, variable: instruction},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert (done.returncode, done.stdout, done.stderr) == (1, "", "")
