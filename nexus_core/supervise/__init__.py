"""Headless supervision: ``nexus wait`` and ``nexus loop``.

Both work from successive read-only snapshots of one run (``events``); ``classify`` says where
each task stands and whether the run has settled; ``wait`` watches until it has; ``loop`` ticks
on an interval (and ``nexus scheduler`` reuses its tick); ``command`` is the command line.
``wait`` never writes anything; ``loop`` writes only through ``verify`` when asked to.
"""

from __future__ import annotations

from typing import NoReturn

from ..timeutil import iso_from_ms, now_ms
from .classify import (
    EXIT_ACCEPTED,
    EXIT_BUDGET,
    EXIT_ERROR,
    EXIT_IDLE,
    EXIT_INTERRUPTED,
    EXIT_OPERATOR,
    EXIT_UNFINISHED,
    TaskState,
    Verdict,
    classify_run,
    classify_task,
    lock_problem,
    verdict_for,
)
from .events import (
    Event,
    EventLog,
    Snapshot,
    derive_events,
    fingerprint,
    heartbeat_stale,
    render_event,
    take_snapshot,
)
from .loop import LoopResult, LoopStop, busy_reason, parse_interval, run_loop, verify_candidates
from .wait import WaitResult, summary_object, wait_for_run


def supervise_main(argv: list[str]) -> NoReturn:
    """``nexus wait ...`` and ``nexus loop ...``: click is imported only when one of them runs."""
    from .command import supervise_main as main

    main(argv)


__all__ = [
    "EXIT_ACCEPTED",
    "EXIT_BUDGET",
    "EXIT_ERROR",
    "EXIT_IDLE",
    "EXIT_INTERRUPTED",
    "EXIT_OPERATOR",
    "EXIT_UNFINISHED",
    "Event",
    "EventLog",
    "LoopResult",
    "LoopStop",
    "Snapshot",
    "TaskState",
    "Verdict",
    "WaitResult",
    "busy_reason",
    "classify_run",
    "classify_task",
    "derive_events",
    "fingerprint",
    "heartbeat_stale",
    "iso_from_ms",
    "lock_problem",
    "now_ms",
    "parse_interval",
    "render_event",
    "run_loop",
    "summary_object",
    "supervise_main",
    "take_snapshot",
    "verdict_for",
    "verify_candidates",
    "wait_for_run",
]
