"""The dashboard's mutating actions and guided recovery, as a mixin of the app.

The registry (actions.py) binds keys, footer, help and palette to these ``action_*`` methods
and its gate disables every mutating one under ``--read-only``; each method resolves its
target from the selection and hands it to ``ActionFlow``, which re-reads the core's state.
"""

from __future__ import annotations

from typing import Any

from textual.widgets import Footer

from .action_flow import ActionFlow
from .widgets.action_log import ActionLogPanel

LOG_PANEL_ID = "action-log"


class ActionsMixin:
    """Mixed into NexusApp (which provides selection(), request_scan() and read_only)."""

    _flow: ActionFlow | None = None

    @property
    def flow(self) -> ActionFlow:
        if self._flow is None:
            app: Any = self
            self._flow = ActionFlow(app, read_only=lambda: bool(app.read_only), on_done=self._after_action)
        return self._flow

    def _after_action(self) -> None:
        app: Any = self
        app.request_scan(everything=True)
        self._show_log(True)

    def _act(self, action: str) -> None:
        selection = self.selection()  # type: ignore[attr-defined]
        if action == "recover-lock":
            self.flow.open(action, selection.project)
        else:
            self.flow.open(action, selection.project, selection.run_id, selection.task_id)

    def action_start(self) -> None:
        self._act("start")

    def action_retry(self) -> None:
        self._act("retry")

    def action_launch(self) -> None:
        self._act("launch")

    def action_record(self) -> None:
        self._act("record")

    def action_collect(self) -> None:
        self._act("collect")

    def action_verify(self) -> None:
        self._act("verify")

    def action_accept(self) -> None:
        self._act("accept")

    def action_reconcile(self) -> None:
        self._act("reconcile")

    def action_cancel_attempt(self) -> None:
        self._act("cancel")

    def action_recover_lock(self) -> None:
        self._act("recover-lock")

    def action_recovery_guide(self) -> None:
        selection = self.selection()  # type: ignore[attr-defined]
        self.flow.open_recovery(selection.project)

    # -- the action log panel (mounted on first use, above the footer)
    def _log_panel(self) -> ActionLogPanel | None:
        app: Any = self
        found = app.query(f"#{LOG_PANEL_ID}")
        return found.first() if found else None

    def _show_log(self, visible: bool) -> None:
        app: Any = self
        panel = self._log_panel()
        if panel is None:
            if not visible:
                return
            app.mount(ActionLogPanel(self.flow.log, id=LOG_PANEL_ID), before=app.query_one(Footer))
            return
        panel.display = visible

    def action_toggle_action_log(self) -> None:
        panel = self._log_panel()
        self._show_log(panel is None or not panel.display)
