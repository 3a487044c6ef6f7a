"""The mark a task's row carries while a verify or launch of this dashboard session runs on it
(in its dialog or in the background): a glyph, the action and the elapsed time after the task's
name, in the theme's accent ("⧗ verify 42s"; "⧗ 42s" in the compact columns)."""

from __future__ import annotations

from rich.text import Text

from ..logic.jobs import Job, short_elapsed
from .styles import Styles

GLYPH = "⧗"


def job_mark(job: Job | None, compact: bool) -> str | None:
    if job is None:
        return None
    elapsed = short_elapsed(job.elapsed())
    return f"{GLYPH} {elapsed}" if compact else f"{GLYPH} {job.action} {elapsed}"


def with_mark(cell: Text, mark: str, styles: Styles) -> Text:
    marked = cell.copy()
    marked.append(f" {mark}", style=styles.themed("bold $accent"))
    return marked
