"""A project's status bar: the project path, writer.lock and recovery.lock (fingerprint, owner,
liveness), how fresh the view is, following or paused, and the mode; for a project on another
host, its connection first (connected, or disconnected since when and why, retrying). It renders from the
project's session; the app only says whether it follows and whether actions are enabled."""

from __future__ import annotations

from collections.abc import Callable

from rich.text import Text
from textual.widgets import Static

from ..logic.session import ProjectSession
from . import render


class StatusBar(Static):
    def __init__(self, session: ProjectSession, display_path: Callable[[str], str], *, id: str | None = None) -> None:
        super().__init__(Text("loading…", style="dim"), classes="status", id=id)
        self.session = session
        self.display_path = display_path
        self.narrow = False  # the pane's compact form: shorter words, fewer lines

    def sync(self, now: int, *, following: bool, read_only: bool) -> None:
        session = self.session
        directory = session.snapshot.root if session.snapshot else None
        remote = session.remote
        connection = None
        if remote is not None:
            connection = (remote.status_words(), remote.status.state == "connected")
        self.update(
            render.status_text(
                session.snapshot,
                now,
                following,
                read_only,
                self.display_path(directory or session.directory),
                pending=session.pending is not None,
                narrow=self.narrow,
                connection=connection,
            )
        )
