"""The settings file (``$XDG_CONFIG_HOME/nexus/config.toml`` or ``nexus-tui --config PATH``): a bad
file is one clear line naming the file, the line and the key (never a traceback, the dashboard
does not start); a missing default file means the defaults; key overrides by binding id move the
key everywhere (bindings, the refusal's twin, footer, help, palette); the theme and the default
sort apply."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from dashboard_kit import eventually, loaded, quiet_app
from textual.widgets import Footer
from textual.widgets._footer import FooterKey
from tui_actions_support import make_project, task_plan

from nexus_tui import actions
from nexus_tui.logic.settings import Settings, default_path, load, parse
from nexus_tui.screens.help import help_text
from nexus_tui.screens.inbox import InboxScreen
from nexus_tui.widgets.styles import DEFAULT_STYLES

SIZE = (160, 45)


def run_tui(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "nexus_tui.cli", *args], capture_output=True, text=True, timeout=60, env=env
    )


BAD = [
    ('theme = "nord\n', ": not valid TOML: Illegal character '\\n' (at line 1, column 14)"),
    ("colour = 1\n", "line 1, colour: unknown setting 'colour' (known: theme, [notifications], [keys], [sort])"),
    (
        '\n[notifications]\nmode = "loud"\n',
        "line 3, notifications.mode: must be one of 'off', 'bell', 'desktop', 'both', not 'loud'",
    ),
    ("[notifications]\nstartup = 1\n", "line 2, notifications.startup: must be true or false"),
    ('[keys]\nverifyy = "V"\n', "line 2, keys.verifyy: no binding has the id 'verifyy' (see the README's list)"),
    ('[keys]\nverify = "e"\n', "line 2, keys.verify: the key 'e' is already the key of 'reconcile'"),
    (
        '[keys]\n"verify" = "tab"\n',
        "line 2, keys.verify: the key 'tab' is already the key of the dashboard's 'next pane'",
    ),
    (
        '[keys]\nverify = "ctrl+"\n',
        "line 2, keys.verify: 'ctrl+' is not a key name (e.g. 'x', 'X', 'f5', 'ctrl+r', 'question_mark')",
    ),
    (
        '[sort]\ntasks = "colour"\n',
        "line 2, sort.tasks: must be one of task, depends, execution, verification, "
        "acceptance, attempts, stale, overdue, observed (a leading '-' sorts descending)",
    ),
    ('theme = "nope"\n', "line 1, theme: unknown theme 'nope' (one of: "),
    # The timeline's and the jobs view's keys are checked on their own screens too.
    (
        '[keys]\ntimeline_zoom_in = "minus"\n',
        "line 2, keys.timeline_zoom_in: the key 'minus' is already the key of 'timeline_zoom_out'",
    ),
    ('[keys]\njobs_stop = "f"\n', "line 2, keys.jobs_stop: the key 'f' is already the key of 'jobs_find'"),
]


@pytest.mark.parametrize("text, words", BAD, ids=[str(n) for n in range(len(BAD))])
def test_a_bad_file_is_one_clear_line_and_no_dashboard(tmp_path: Path, text: str, words: str) -> None:
    root = make_project(tmp_path)
    config = tmp_path / "config.toml"
    config.write_text(text)
    done = run_tui("-d", str(root), "--config", str(config))
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith(f"Nexus: {config}{words if words.startswith(':') else ', ' + words}")
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


def test_missing_and_undecodable_files(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    missing = run_tui("-d", str(root), "--config", str(tmp_path / "nope.toml"))
    assert (missing.returncode, missing.stderr) == (1, f"Nexus: {tmp_path / 'nope.toml'}: no such settings file\n")
    binary = tmp_path / "binary.toml"
    binary.write_bytes(b'theme = "nord"\n\xff\n')
    refused = run_tui("-d", str(root), "--config", str(binary))
    assert (refused.returncode, refused.stderr) == (1, f"Nexus: {binary}, line 2: not valid UTF-8\n")
    # The default file: XDG_CONFIG_HOME (else ~/.config); missing means the defaults.
    assert default_path({"XDG_CONFIG_HOME": str(tmp_path), "HOME": "/h"}) == str(tmp_path / "nexus/config.toml")
    assert default_path({"HOME": "/h"}) == "/h/.config/nexus/config.toml"
    assert load(str(tmp_path / "absent.toml")) == Settings()


def test_every_setting_read(tmp_path: Path) -> None:
    settings = parse(
        'theme = "nord"\n[notifications]\nmode = "both"\nwhen = "always"\ndesktop = "osc777"\nstartup = true\n'
        '[keys]\ninbox = "ctrl+b"\nrecord = "O, f6"\n[sort]\nruns = "-updated"\ntasks = "attempts"\n'
    )
    assert (settings.theme, settings.notifications, settings.when, settings.desktop, settings.startup) == (
        "nord",
        "both",
        "always",
        "osc777",
        True,
    )
    assert dict(settings.keys) == {"inbox": "ctrl+b", "record": "O,f6"}
    assert (settings.run_sort, settings.task_sort) == (("updated", True), ("attempts", False))


async def test_key_overrides_theme_and_sort_apply_everywhere(tmp_path: Path) -> None:
    root = make_project(tmp_path, [task_plan("a"), task_plan("b")])
    settings = parse(
        'theme = "nord"\n[keys]\ninbox = "ctrl+b"\nverify = "V"\n[sort]\ntasks = "-task"\n', str(tmp_path / "c.toml")
    )
    app = quiet_app([str(root)], settings=settings)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, pilot)
        assert app.theme == "nord"
        assert app.pane.session.task_sort == ("task", True)
        assert [app.pane.tasks.coordinate_to_cell_key((i, 0))[0].value for i in range(2)] == ["b", "a"]  # type: ignore[arg-type]

        def footer() -> dict[str, str]:
            return {key.description: key.key_display for key in app.query_one(Footer).query(FooterKey)}

        await eventually(pilot, lambda: "Inbox" in footer())  # composed after a refresh
        assert footer().get("Inbox") == "^b" and footer().get("Verify") == "V"
        await pilot.press("i")  # no longer the inbox's key
        await pilot.pause()
        assert not isinstance(app.screen, InboxScreen)
        await pilot.press("ctrl+b")
        await eventually(pilot, lambda: isinstance(app.screen, InboxScreen))
        await pilot.press("escape")
        # The refused action's twin moved too: V on a task with nothing to verify says why.
        await pilot.press("V")
        await eventually(pilot, lambda: any("Unavailable" in str(n.message) for n in app._notifications))
        help_words = help_text(160, settings.keys, DEFAULT_STYLES).plain
        assert "ctrl+b" in help_words and "  i  " not in help_words
        palette = {command.title: command.help for command in app.get_system_commands(app.screen)}
        assert palette["Inbox"].endswith("Key: ctrl+b.")


def test_the_readme_names_every_binding_id_a_key_override_takes() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text("utf-8")
    listed = readme[readme.index("Binding ids are the registry's") : readme.index("show the effective keys")]
    overridable = [entry.id for entry in actions.REGISTRY if entry.keys]
    assert [binding_id for binding_id in overridable if f"`{binding_id}`" not in listed] == []
