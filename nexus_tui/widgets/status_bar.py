"""A project's status bar: the project path, writer.lock and recovery.lock (fingerprint, owner,
liveness), how fresh the view is, following or paused, and the mode; for a project on another
host, its connection first (connected, or disconnected since when and why, retrying). It renders from the
project's session; the app only says whether it follows and whether actions are enabled."""

from __future__ import annotations

from collections.abc import Callable

from rich.text import Text
from textual.widgets import Static

from ..logic.model import LockView, ProjectSnapshot
from ..logic.session import ProjectSession
from .ages import age
from .plain import plain
from .shown import update_changed
from .styles import Styles, styles_of


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
        update_changed(
            self,
            status_text(
                session.snapshot,
                now,
                styles_of(self.app),
                following,
                read_only,
                self.display_path(directory or session.directory),
                pending=session.pending is not None,
                narrow=self.narrow,
                connection=connection,
            ),
        )


def lock_text(lock: LockView, now: int, styles: Styles, narrow: bool = False) -> Text:
    """``narrow``: without the owner's pid, host and age (the detail and the guide show them)."""
    text = Text(f"{lock.name} ", style="bold")
    if not lock.present:
        text.append("free", style=styles.themed("$success"))
        return text
    text.append(
        "HELD", style=styles.themed("bold $warning") if lock.alive is not False else styles.themed("bold $error")
    )
    if lock.fingerprint:
        text.append(plain(f" {lock.fingerprint[: 8 if narrow else 12]}", styles.themed("$primary-lighten-2")))
    if lock.unreadable:
        text.append(" (owner unreadable)", style=styles.themed("$error"))
    else:
        if not narrow:
            text.append(plain(f" pid {lock.pid}@{lock.host}"))
            text.append(f" {age(lock.created_at, now)}", style="dim")
        if lock.alive is True:
            text.append(" owner alive", style=styles.themed("$warning"))
        elif lock.alive is False:
            # What to do comes from the core when it says (recovery.lock: recoveryLockHint).
            text.append(
                " owner DEAD on this host" + ("" if lock.hint else ": recover-lock"), style=styles.themed("bold $error")
            )
        else:
            text.append(" owner on another host (liveness unknown)", style=styles.themed("$accent"))
    if lock.unsafe:
        text.append(plain(f" UNSAFE: {lock.unsafe}", styles.themed("bold $error")))
    return text


def status_text(
    snapshot: ProjectSnapshot | None,
    now: int,
    styles: Styles,
    following: bool,
    read_only: bool,
    project_label: str,
    pending: bool = False,
    narrow: bool = False,
    connection: tuple[str, bool] | None = None,
) -> Text:
    """Two lines: the project and its locks, then freshness, follow and mode. ``narrow`` (80
    columns): the locks first, each on its own line, then the project with the rest, in short words.
    ``connection``: a remote project's connection (its words, whether it is up), on a line first."""
    text = Text()
    if connection is not None:
        words, up = connection
        text.append("⇄ " if up else "⚠ ", style=styles.themed("$success" if up else "bold $error"))
        text.append(plain(words, "dim" if up else styles.themed("$error")))
        text.append("\n")
    if not narrow:
        text.append(plain(project_label, "bold"))
    if snapshot is None:
        text.append(plain(project_label, "bold") if narrow else "")
        text.append("  loading…", style="dim")
        return text
    if snapshot.error:
        text.append("⚠ " if narrow else "  ⚠ ", style=styles.themed("bold $error"))
        text.append(plain(snapshot.error, styles.themed("$error")))
        text.append("\n" if narrow else "")
    separator = "\n" if narrow else "  │  "
    if not narrow:
        text.append(separator)
    text.append(lock_text(snapshot.writer_lock, now, styles, narrow))
    text.append(separator)
    text.append(lock_text(snapshot.recovery_lock, now, styles, narrow))
    if snapshot.stray_temp_files:
        text.append(f"  │  {snapshot.stray_temp_files} stray temp file(s)", style=styles.themed("$warning"))
    text.append("\n")
    if snapshot.recovery_lock.hint:
        text.append(plain(snapshot.recovery_lock.hint, styles.themed("$warning")))
        text.append("\n")
    for warning in snapshot.unsafe_directories:
        text.append(plain(f"⚠ {warning}", styles.themed("$warning")))
        text.append("\n")
    if narrow:
        text.append(plain(project_label, "bold"))
        text.append("  │  ")
    seconds = max(0, now - snapshot.scanned_at_ms) // 1000
    text.append(f"updated {seconds} s ago", style="dim")
    text.append("  │  ")
    if following:
        text.append("● following", style=styles.themed("$success"))
    else:
        text.append("❚❚ paused", style=styles.themed("bold $warning"))
        if pending:
            text.append(" (changes waiting)", style=styles.themed("$warning"))
    text.append("  │  ")
    if narrow:
        text.append("read-only" if read_only else "actions on", style="dim")
    else:
        text.append(
            "read-only: watching writes nothing" if read_only else "actions enabled (each asks first)", style="dim"
        )
    return text
