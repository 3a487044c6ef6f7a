"""`nexus-tui`'s command line (click, the conventions of `nexus`): options reach the dashboard,
bad arguments are refused without a traceback, and a subcommand can sit beside the bare form."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import click
import pytest

from nexus_tui import cli


def run_tui(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "nexus_tui.cli", *args], capture_output=True, text=True, timeout=60, check=False
    )


def test_version_and_both_help_flags() -> None:
    version = run_tui("--version")
    assert version.returncode == 0 and version.stdout.startswith("nexus-tui, version ")
    for flag in ("-h", "--help"):
        shown = run_tui(flag)
        assert shown.returncode == 0, shown.stderr
        for option in ("-d, --directory DIR", "--poll", "--read-only", "--demo", "--version"):
            assert option in shown.stdout


def test_every_directory_is_checked_and_the_missing_one_named(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    refused = run_tui("-d", str(tmp_path), "--directory", str(missing))
    assert (refused.returncode, refused.stdout) == (1, "")
    assert refused.stderr == f"Nexus: not a directory: {missing}\n"


def test_bad_arguments_are_usage_errors_without_traceback() -> None:
    unknown = run_tui("--bogus")
    assert (unknown.returncode, unknown.stderr) == (1, "error: unknown option '--bogus'\n")
    missing_value = run_tui("-d")
    assert missing_value.returncode == 1 and missing_value.stderr.startswith("error: ")
    assert "Traceback" not in missing_value.stderr


def test_options_reach_the_dashboard(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[cli.DashboardOptions] = []
    monkeypatch.setattr(cli, "run_dashboard", lambda options: seen.append(options) or 7)
    assert cli.main(["-d", "a", "--poll", "-d", "b", "--read-only"]) == 7
    assert seen == [cli.DashboardOptions(("a", "b"), poll=True, read_only=True, demo=False)]


def test_a_subcommand_runs_beside_the_bare_form(monkeypatch: pytest.MonkeyPatch) -> None:
    """How `nexus-tui serve` plugs in: a command on the group, given the group's options."""
    opened: list[cli.DashboardOptions] = []
    served: list[tuple[cli.DashboardOptions, int]] = []
    monkeypatch.setattr(cli, "run_dashboard", lambda options: opened.append(options) or 0)

    @click.command("serve")
    @click.option("--port", type=int, default=8000)
    @click.pass_obj
    def serve(options: cli.DashboardOptions, port: int) -> int:
        served.append((options, port))
        return 3

    monkeypatch.setitem(cli.dashboard.commands, "serve", serve)
    assert cli.main(["-d", "a", "serve", "--port", "9"]) == 3
    assert served == [(cli.DashboardOptions(("a",), poll=False, read_only=False, demo=False), 9)]
    assert opened == []
    assert cli.main(["-d", "a"]) == 0 and len(opened) == 1


def test_help_version_and_completion_never_import_textual() -> None:
    """They must stay fast: textual is imported only when the dashboard opens."""
    probe = (
        "import sys\n"
        "from nexus_tui import cli\n"
        "for words in (['--help'], ['--version']):\n"
        "    assert cli.main(words) == 0\n"
        "assert 'textual' not in sys.modules and 'rich' not in sys.modules, sorted(sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    env = {**os.environ, "_NEXUS_TUI_COMPLETE": "bash_complete", "COMP_WORDS": "nexus-tui -", "COMP_CWORD": "1"}
    completion = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "nexus_tui.cli"], capture_output=True, text=True, env=env, timeout=60
    )
    assert completion.returncode == 0 and "--poll" in completion.stdout
    assert " textual" not in completion.stderr and " rich" not in completion.stderr


def test_ssh_projects_reach_the_dashboard_and_a_bad_one_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[cli.DashboardOptions] = []
    monkeypatch.setattr(cli, "run_dashboard", lambda options: seen.append(options) or 0)
    cli.main(["--ssh", "ops@build-1:/srv/a", "--ssh", "[::1]:b", "--remote-nexus", "~/.venv/bin/nexus"])
    assert seen[0].remote == ("ops@build-1:/srv/a", "[::1]:b")
    assert seen[0].remote_nexus == "~/.venv/bin/nexus"
    for bad, why in (
        ("nocolon", "write HOST:PATH"),
        ("-oProxyCommand=touch /tmp/x:/p", "HOST cannot start with '-'"),
        ("host:", "PATH is empty"),
    ):
        refused = run_tui("--ssh", bad)
        assert (refused.returncode, refused.stdout) == (1, "")
        assert refused.stderr.startswith(f"Nexus: --ssh {bad}: ") and why in refused.stderr
    unsplittable = subprocess.run(
        [sys.executable, "-m", "nexus_tui.cli", "--ssh", "h:/p"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "NEXUS_SSH_COMMAND": "ssh -F 'unterminated"},
    )
    assert unsplittable.returncode == 1
    assert unsplittable.stderr.startswith("Nexus: NEXUS_SSH_COMMAND cannot be split into words")


def test_serve_gives_each_session_the_ssh_projects(monkeypatch: pytest.MonkeyPatch) -> None:
    from nexus_tui import serve

    configs: list[serve.ServeConfig] = []
    monkeypatch.setattr(serve, "serve", lambda config: configs.append(config) or 0)
    assert cli.main(["--ssh", "a:/p", "serve", "--ssh", "b:q", "--remote-nexus", "python3 -m nexus_core.cli"]) == 0
    command = serve.session_command(configs[0])
    assert command[3:] == [
        "--read-only",
        "--ssh",
        "a:/p",
        "--ssh",
        "b:q",
        "--remote-nexus",
        "python3 -m nexus_core.cli",
    ]  # fmt: skip  (no -d: no local project was named, none is added)
