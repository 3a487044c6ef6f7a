"""The app's projects on other hosts (``--ssh HOST:PATH``): one session per remote project,
fed by its host's observer (``logic/remote.py``: one ssh connection and one ``nexus observe``
per host). A new snapshot from a host arrives as the same :class:`ProjectScanned` message a local
scan posts, so a remote tab is drawn, paused and followed exactly like a local one; a change of
the connection (connected, lost, retrying) posts :class:`RemoteStatusChanged`.

The reading threads never touch widgets: they post messages.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from textual.app import App
from textual.message import Message

from .logic.remote import RemoteFleet, RemoteLink
from .logic.session import ProjectSession
from .logic.ssh import DEFAULT_REMOTE_NEXUS, RemoteProject
from .scanning import ProjectScanned


class RemoteStatusChanged(Message):
    """The connection of project ``index`` changed (its status bar and the gate follow)."""

    def __init__(self, index: int) -> None:
        super().__init__()
        self.index = index


class RemoteTabs:
    """The remote sessions of an app, from ``first_index`` on, and their hosts."""

    def __init__(
        self,
        app: App[Any],
        projects: Sequence[RemoteProject],
        first_index: int,
        remote_nexus: str = DEFAULT_REMOTE_NEXUS,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.app = app
        self.fleet = RemoteFleet(self._changed, environ)
        self.sessions: list[ProjectSession] = []
        self._index_of: dict[int, int] = {}  # id(link) -> session index
        self._shown: dict[int, Any] = {}  # session index -> the last snapshot posted
        self._status: dict[int, Any] = {}  # session index -> the last status posted
        for offset, project in enumerate(projects):
            link = self.fleet.add(project, remote_nexus)
            index = first_index + offset
            self._index_of[id(link)] = index
            self.sessions.append(ProjectSession.open_remote(index, link))

    def start(self) -> None:
        self.fleet.start()

    def close(self) -> None:
        self.fleet.close()

    def rescan(self, index: int | None = None) -> None:
        """Ask the hosts to read again now (the refresh key, after an action)."""
        for session in self.sessions:
            if (index is None or session.index == index) and session.remote is not None:
                session.remote.host.stream.send(_rescan(session.remote))

    def _changed(self, link: RemoteLink) -> None:
        """From a host's reading thread: post what changed to the UI thread."""
        index = self._index_of[id(link)]
        snapshot = link.snapshot
        if snapshot is not None and self._shown.get(index) is not snapshot:
            self._shown[index] = snapshot
            self.app.post_message(ProjectScanned(index, snapshot, ()))
        if self._status.get(index) != link.status:  # not on every snapshot: the footer is redrawn
            self._status[index] = link.status
            self.app.post_message(RemoteStatusChanged(index))


def _rescan(link: RemoteLink) -> dict[str, Any]:
    from nexus_core import observe_protocol

    return observe_protocol.rescan(link.index, (link.focus,) if link.focus else ())
