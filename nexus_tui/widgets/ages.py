"""The dashboard's ages: seconds only in an age's first minute ("42s ago", then "3m ago",
"5h02m ago", "3d04h ago"); the detail pane shows the exact moment beside each. With the seconds
shown for an hour, every visible row of a table, the detail and the locks' ages redrew each
second for an hour after the last activity: three fifths of an idle dashboard's CPU with one
200-task run open (bench/bench_idle.py)."""

from __future__ import annotations

from nexus_core.timeutil import MINUTE_MS, age_text, age_text_changes_at


def age(iso: object, now: int) -> str:
    """How long before ``now`` (ms) the ISO time ``iso`` was, e.g. "3m ago"; "—" if none."""
    return age_text(iso, now, seconds_under=MINUTE_MS)


def table_age(iso: object, now: int) -> str:
    """The age as a table cell shows it (no " ago": the column says it)."""
    return age(iso, now).removesuffix(" ago")


def age_changes_at(iso: object, now: int) -> int | None:
    """When ``age(iso, ...)`` next reads differently (None: never)."""
    return age_text_changes_at(iso, now, seconds_under=MINUTE_MS)
