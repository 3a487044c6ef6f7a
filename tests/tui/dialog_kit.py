"""Deterministic dialogs for the snapshot tests: a frozen clock, fixed ids and host name, real
state written by the core, and a display mapping that pins machine-specific text (project path,
interpreter, host name) so the SVGs are the same on every machine."""

from __future__ import annotations

import os
import sys
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from textual.app import App
from textual.screen import Screen
from tui_actions_support import make_project, record, start, write_result

from nexus_core import hostinfo, timeutil
from nexus_core.hostinfo import hostname
from nexus_tui.job_flow import target_of
from nexus_tui.logic import operations, recovery
from nexus_tui.logic.jobs import Job, Jobs
from nexus_tui.logic.operations import base as operations_base
from nexus_tui.screens.dialogs import dialog_for

FROZEN = 1796083200.0  # 2026-12-01T00:00:00Z
SNAPSHOT_HOST = "snapshot-host"


def make_deterministic(monkeypatch: pytest.MonkeyPatch) -> None:
    counter = iter(range(1, 1_000_000))
    # Each id gets its own 8-digit prefix (5eed0001, 5eed0002, ...), so a screen showing the
    # wrong short id differs from its snapshot.
    monkeypatch.setattr(uuid, "uuid4", lambda: uuid.UUID(int=((0x5EED0000 + next(counter)) << 96) + 0x5EED))
    timeutil.set_clock(lambda: FROZEN)
    # Lock owners embed the host name in their bytes (and so in the fingerprint): the screens
    # compare owners with a fixed host name here so the fingerprint is the same everywhere.
    for module in (operations_base, recovery, hostinfo):  # hostinfo: owner_liveness compares hosts
        monkeypatch.setattr(module, "hostname", lambda: SNAPSHOT_HOST)


def display(root: Path) -> Callable[[str], str]:
    interpreter = os.path.realpath(sys.executable)
    host = hostname()
    temp = tempfile.gettempdir()

    def show(text: str) -> str:
        text = text.replace(str(root), "/home/operator/project").replace(interpreter, "/usr/bin/python3")
        text = text.replace(temp + "/", "/tmp/")
        return text.replace(f" on {host}", " on host").replace(f"@{host}", "@host")

    return show


class ScreenHost(App[None]):
    """An app that shows one screen (the dialogs carry their own styles, NexusDialog's)."""

    def __init__(self, screen: Screen[Any]) -> None:
        super().__init__()
        self.shown = screen

    def on_mount(self) -> None:
        self.push_screen(self.shown)


def action_dialog(root: Path, action: str, task: str | None = "a") -> Screen[Any]:
    preview = operations.preview(str(root), action, "demo" if task else None, task)
    if preview.backend_editable and action in ("start", "retry"):
        preview.backend = {"kind": "host", "id": "operator", "sessionId": "nexus-tui-user@host"}
    return dialog_for(preview, display(root))


def running(tmp_path: Path) -> Path:
    root = make_project(tmp_path)
    start(root, "a")
    return root


def completed(tmp_path: Path) -> Path:
    root = running(tmp_path)
    write_result(root, "a")
    record(root, "a")
    return root


def finished_job(root: Path, action: str = "verify", task: str = "a", jobs: Jobs | None = None) -> Job:
    """A job the real core ran to its end (synchronously, its progress events fed to the job),
    on a frozen clock: what its dialog and the jobs view show once the work has ended."""
    preview = operations.preview(str(root), action, "demo", task)
    job = (jobs or Jobs(clock=lambda: 0.0)).add(target_of(preview))
    result = operations.execute(preview, {}, operations.ActionLog(), progress=job.take)
    job.finish(result, None, operations.operation(action).result_words(preview, result))
    return job
