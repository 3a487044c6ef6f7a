"""``nexus-tui --demo``'s progress line: what the demo build is doing while the dashboard is
already on screen (the build runs in a child process; its steps arrive as messages)."""

from __future__ import annotations

from textual.message import Message
from textual.widgets import Static

from .plain import plain

STARTING = "starting the builder process"


class DemoProgress(Static):
    DEFAULT_CSS = """
    DemoProgress { dock: top; height: auto; padding: 0 1; background: $boost; color: $warning; }
    DemoProgress.failed { color: $error; }
    """

    class Step(Message):
        """One step of the build began (posted by the worker thread)."""

        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

    class Built(Message):
        """The build ended: ``error`` is None on success; ``notes`` say what could not be built."""

        def __init__(self, notes: list[str], error: str | None) -> None:
            super().__init__()
            self.notes = notes
            self.error = error

    def __init__(self) -> None:
        super().__init__(id="demo-progress")
        self.steps: list[str] = []  # every step shown, in order
        self.show_step(STARTING)

    def show_step(self, text: str) -> None:
        self.steps.append(text)
        self.update(plain(f"Building the demo project with the real core (step {len(self.steps)}): {text}…"))

    def show_failure(self, error: str) -> None:
        self.add_class("failed")
        self.update(plain(f"The demo could not be built: {error}"))
