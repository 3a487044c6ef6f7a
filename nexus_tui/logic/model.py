"""The dashboard's project model: it lives in the core (:mod:`nexus_core.view.model`), where
``nexus observe`` builds the same snapshots for a remote dashboard. This module re-exports it
under the name the dashboard's modules import."""

from nexus_core.view.model import (
    ACTIVE_STATES,
    ATTENTION,
    NOT_STARTED,
    RECOVERY_LOCK,
    STATE_ORDER,
    WRITER_LOCK,
    LockView,
    ProjectScanner,
    ProjectSnapshot,
    RunView,
    ScopeIndex,
    TaskRow,
    build_view,
    task_state,
)

__all__ = [
    "ACTIVE_STATES",
    "ATTENTION",
    "NOT_STARTED",
    "RECOVERY_LOCK",
    "STATE_ORDER",
    "WRITER_LOCK",
    "LockView",
    "ProjectScanner",
    "ProjectSnapshot",
    "RunView",
    "ScopeIndex",
    "TaskRow",
    "build_view",
    "task_state",
]
