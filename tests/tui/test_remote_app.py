"""Remote projects in the dashboard (nexus-tui --ssh HOST:PATH), against a real sshd on
127.0.0.1 (tests/ssh_kit.py) whose "remote" nexus is this venv's: a remote run shows, a change
made on the remote side appears, a record through the dialog lands in the remote state, a
killed sshd shows the disconnected state (the last snapshot kept, actions refused with that
reason) and a restarted one reconnects; hostile remotes and ssh failures are clear messages on
their tab, memory stays bounded and the other tabs keep working."""

from __future__ import annotations

import asyncio
import resource
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dashboard_kit import HOST as HOST_BACKEND
from dashboard_kit import eventually, finish, loaded, select, small_project, status_text
from ssh_kit import HOST, REFUSED_KEY_HOST, REMOTE_NEXUS, UNKNOWN_KEY_HOST, SshServer, shared_ssh_server, ssh_server
from test_actions_app import _fill, _open
from textual.pilot import Pilot
from textual.widgets import TabbedContent

from nexus_core import engine
from nexus_core.state.store import load_run
from nexus_tui import actions
from nexus_tui.app import NexusApp
from nexus_tui.logic import remote
from nexus_tui.logic.ssh import parse_remote
from nexus_tui.screens.dialogs import ActionDialog
from nexus_tui.widgets.project_pane import ProjectPane

__all__ = ["shared_ssh_server", "ssh_server"]  # the fixtures, for pytest

SIZE = (140, 42)
RECORD_KEY = next(entry.first_key for entry in actions.REGISTRY if entry.id == "record")


@pytest.fixture
def via(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Fast reconnects and a short hello wait for the tests (the constants are named)."""
    monkeypatch.setattr(remote, "RECONNECT_FIRST_SECONDS", 0.3)
    monkeypatch.setattr(remote, "RECONNECT_MAX_SECONDS", 2.0)
    monkeypatch.setattr(remote, "HELLO_TIMEOUT_SECONDS", 5.0)
    yield


def remote_app(server: SshServer, monkeypatch: pytest.MonkeyPatch, *specs: str, **options: Any) -> NexusApp:
    monkeypatch.setenv("NEXUS_SSH_COMMAND", server.ssh_command)
    settings: dict[str, Any] = {"watch": False, "rescan_seconds": 0, "tick": False, "remote_nexus": REMOTE_NEXUS}
    settings.update(options)
    directories = settings.pop("directories", [])
    return NexusApp(directories, remote=[parse_remote(spec) for spec in specs], **settings)


def remote_pane_ready(app: NexusApp, run_id: str) -> bool:
    pane = app.pane
    return pane.session.snapshot is not None and run_id in [view.run_id for view in pane.session.snapshot.runs]


async def shown(pilot: Pilot[None], predicate: Any, timeout: float = 60) -> None:
    await eventually(pilot, predicate, timeout=timeout)


def row_of(app: NexusApp, task_id: str) -> Any:
    view = app.pane.current_view()
    assert view is not None
    return next(row for row in view.rows if row.task_id == task_id)


def accepted(app: NexusApp) -> bool:
    view = app.pane.current_view()
    return view is not None and view.count("accepted") == 1


async def test_a_remote_run_shows_and_follows_remote_changes(
    shared_ssh_server: SshServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, via: None
) -> None:
    root = small_project(tmp_path / "remote project $(touch PWNED) 'q'")
    app = remote_app(shared_ssh_server, monkeypatch, f"{HOST}:{root}")
    async with app.run_test(size=SIZE) as pilot:
        await shown(pilot, lambda: remote_pane_ready(app, "live"))
        tab = app.query_one("#projects", TabbedContent).active_pane
        assert tab is not None
        assert str(tab.query_one(ProjectPane).session.label) == f"{HOST}:{root}"
        await shown(pilot, lambda: "connected to testhost" in status_text(app))
        await select(pilot, "live", "t1")
        assert row_of(app, "t1").state == "running"
        finish(root, "live", "t1", summary="done over there")  # the remote side changes
        await shown(pilot, lambda: accepted(app))
    assert not list(tmp_path.rglob("PWNED"))


async def test_a_record_through_the_dialog_lands_in_the_remote_state(
    shared_ssh_server: SshServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, via: None
) -> None:
    root = small_project(tmp_path / "p")
    (Path(root) / "out" / "t1").mkdir(parents=True)
    (Path(root) / "out" / "t1" / "r.txt").write_text("ok\n")
    app = remote_app(shared_ssh_server, monkeypatch, f"{HOST}:{root}")
    async with app.run_test(size=SIZE) as pilot:
        await shown(pilot, lambda: remote_pane_ready(app, "live"))
        await shown(pilot, lambda: app.refusal_of("record") is None or "Select" in (app.refusal_of("record") or ""))
        await select(pilot, "live", "t1")
        dialog = await _open(app, pilot, RECORD_KEY)
        assert isinstance(dialog, ActionDialog)
        _fill(app, summary="recorded from afar")
        await pilot.click("#confirm")
        await shown(pilot, lambda: load_run(root, "live")["tasks"][0]["attempts"][-1]["execution"] == "completed")
        await shown(pilot, lambda: (view := app.pane.current_view()) is not None and view.count("to verify") == 1)
        assert [entry.action for entry in app.flow.log.entries] == ["record"]
        assert app.flow.log.entries[0].ok
    observation = load_run(root, "live")["tasks"][0]["attempts"][-1]["observations"][-1]
    assert observation["summary"] == "recorded from afar"


async def test_the_confirm_recheck_reads_the_remote_state_afresh(
    shared_ssh_server: SshServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, via: None
) -> None:
    """The dialog states the remote snapshot; at confirm the host is asked for a fresh read: a
    report another client recorded meanwhile refuses the action and nothing more is written."""
    root = small_project(tmp_path / "p")
    app = remote_app(shared_ssh_server, monkeypatch, f"{HOST}:{root}")
    async with app.run_test(size=SIZE) as pilot:
        await shown(pilot, lambda: remote_pane_ready(app, "live"))
        await select(pilot, "live", "t1")
        await _open(app, pilot, RECORD_KEY)
        _fill(app, summary="late report")
        attempt = load_run(root, "live")["tasks"][0]["attempts"][-1]
        engine.record_attempt(
            root, "live", "t1",
            {"attemptId": attempt["id"], "backend": HOST_BACKEND, "outcome": "failed", "summary": "another client"},
        )  # fmt: skip
        before = load_run(root, "live")
        link = app.pane.session.remote
        assert link is not None
        stream = link.host.stream
        sent: list[dict[str, Any]] = []
        real_send = stream.send
        monkeypatch.setattr(stream, "send", lambda message: sent.append(message) or real_send(message))
        await pilot.click("#confirm")
        await shown(pilot, lambda: any("changed while the dialog was open" in n.message for n in app._notifications))
        assert app.is_running
        fresh = [m for m in sent if m.get("rescan") and m.get("runs") == ["live"] and m.get("token")]
        assert fresh, sent  # the re-check asked the host to read again before comparing
    assert load_run(root, "live") == before


async def test_a_dropped_connection_keeps_the_view_refuses_actions_and_reconnects(
    ssh_server: SshServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, via: None
) -> None:
    root = small_project(tmp_path / "p")
    local = small_project(tmp_path / "local")
    app = remote_app(ssh_server, monkeypatch, f"{HOST}:{root}", directories=[local], watch=True)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, pilot)
        await pilot.press("]")  # the remote tab
        await shown(pilot, lambda: remote_pane_ready(app, "live"))
        await select(pilot, "live", "t1")
        ssh_server.stop()  # sshd and its connections: the multiplexed master's peer is gone
        await shown(pilot, lambda: "disconnected since" in status_text(app))
        assert "retrying in" in status_text(app)
        assert remote_pane_ready(app, "live")  # the last snapshot is kept
        reason = app.refusal_of("record")
        assert reason is not None and "disconnected since" in reason
        assert app.refusal_of("recovery_guide") is not None
        # The local tab is untouched: it still follows its files.
        finish(local, "live", "t1")
        await pilot.press("[")
        await shown(pilot, lambda: accepted(app))
        await pilot.press("]")
        ssh_server.start()
        await shown(pilot, lambda: "connected to testhost" in status_text(app), timeout=90)
        finish(root, "live", "t1")
        await shown(pilot, lambda: accepted(app))
        await shown(pilot, lambda: app.refusal_of("record") != reason)


HOSTILE = {
    "garbage": ("printf 'Welcome!\\033]52;c;AAAA\\007\\n'; sleep 60\n", "not a nexus observer"),
    "other-protocol": (
        'printf \'{"type":"hello","protocol":9,"nexus":"9.9.9"}\\n\'; sleep 60\n',
        "the remote nexus 9.9.9 speaks observe protocol 9; this dashboard speaks protocol 1",
    ),
    "silent": ("exec sleep 600\n", "no answer from the remote nexus within 5 s"),
    "huge-line": (
        'printf \'{"type":"hello","protocol":1,"nexus":"x"}\\n\'; head -c 50000000 /dev/zero | tr \'\\\\0\' x; echo\n',
        "a line longer than 32 MiB",
    ),
}


def rss_mib() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@pytest.mark.parametrize("name", list(HOSTILE))
async def test_a_hostile_remote_is_a_clear_message_with_bounded_memory(
    shared_ssh_server: SshServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, via: None, name: str
) -> None:
    script, expected = HOSTILE[name]
    fake = tmp_path / "fake-nexus"
    fake.write_text("#!/bin/sh\n" + script)
    fake.chmod(0o755)
    local = small_project(tmp_path / "local")
    app = remote_app(shared_ssh_server, monkeypatch, f"{HOST}:/srv/p", directories=[local], remote_nexus=str(fake))
    before = rss_mib()
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, pilot)  # the local tab loads whatever the remote does
        await pilot.press("]")
        await shown(pilot, lambda: expected in status_text(app), timeout=90)
        text = status_text(app)
        assert "\x1b" not in text and "\x07" not in text
        assert app.refusal_of("record") is not None
        await shown(pilot, lambda: app.remote_tabs.fleet.hosts[(HOST, str(fake))].stream.sessions >= 2, timeout=90)
        assert rss_mib() - before < 150  # a 50 MB line is refused, never held
        await pilot.press("[")
        assert app.pane.session.remote is None and app.pane.current_view() is not None


@pytest.mark.parametrize(
    ("spec_host", "remote_nexus", "expected"),
    [
        (UNKNOWN_KEY_HOST, REMOTE_NEXUS, "Host key verification failed."),
        (REFUSED_KEY_HOST, REMOTE_NEXUS, "Permission denied (publickey)."),
        (HOST, "no-such-nexus", "the remote nexus was not found on testhost"),
    ],
)
async def test_ssh_failures_are_clear_on_the_tab(
    shared_ssh_server: SshServer,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    via: None,
    spec_host: str,
    remote_nexus: str,
    expected: str,
) -> None:
    app = remote_app(shared_ssh_server, monkeypatch, f"{spec_host}:/srv/p", remote_nexus=remote_nexus)
    async with app.run_test(size=SIZE) as pilot:
        await shown(pilot, lambda: expected in status_text(app))
        assert "disconnected since" in status_text(app)
        await asyncio.sleep(0)


async def test_discover_and_ssh_together(
    shared_ssh_server: SshServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, via: None
) -> None:
    """--discover's overview lists the remote project beside the discovered ones, and [ ] go
    through every tab, the remote one included."""
    from nexus_tui.discover_app import DiscoverApp

    small_project(tmp_path / "root" / "here")
    far = small_project(tmp_path / "far")
    monkeypatch.setenv("NEXUS_SSH_COMMAND", shared_ssh_server.ssh_command)
    app = DiscoverApp(
        str(tmp_path / "root"),
        remote=[parse_remote(f"{HOST}:{far}")],
        remote_nexus=REMOTE_NEXUS,
        watch=False,
        tick=False,
        rescan_seconds=0,
    )
    async with app.run_test(size=SIZE) as pilot:
        await shown(pilot, lambda: all(session.snapshot is not None for session in app.sessions))
        await shown(
            pilot, lambda: len(app.overview.summaries) == 2 and all(s.loaded for s in app.overview.summaries.values())
        )
        labels = [session.label for session in app.sessions]
        assert labels == ["here", f"{HOST}:{far}"]
        await pilot.press("]", "]")
        assert app.pane.session.remote is not None and remote_pane_ready(app, "live")
        await pilot.press("]")
        assert app.selection().project is None or app.selection().project == app.sessions[0].directory


async def test_the_oldest_need_of_a_remote_project_opens_its_dialog_from_the_host(
    shared_ssh_server: SshServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, via: None
) -> None:
    """The inbox counts a remote project's needs (the host's classifier, sent with the snapshot)
    and its jump opens the guided action's dialog, read from the host's snapshot."""
    root = small_project(tmp_path / "p")
    attempt = load_run(root, "live")["tasks"][0]["attempts"][-1]
    engine.record_attempt(
        root, "live", "t1",
        {"attemptId": attempt["id"], "backend": HOST_BACKEND, "outcome": "blocked", "summary": "needs a key"},
    )  # fmt: skip
    app = remote_app(shared_ssh_server, monkeypatch, f"{HOST}:{root}")
    async with app.run_test(size=SIZE) as pilot:
        await shown(pilot, lambda: bool(app.inbox_entries()))
        app.action_oldest_need()
        await shown(pilot, lambda: isinstance(app.screen, ActionDialog))
        dialog = app.screen
        assert isinstance(dialog, ActionDialog)
        assert dialog.preview.task_id == "t1" and dialog.preview.place is not None
        assert dialog.preview.place.link is app.sessions[0].remote  # type: ignore[attr-defined]
