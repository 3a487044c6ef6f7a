"""Ages in the tables: seconds only in an age's first minute ("42s", then "3m", "5h02m",
"3d04h"). With the seconds shown for an hour, every visible row of a table redrew each second
for an hour after the last activity: three fifths of an idle dashboard's CPU with one 200-task
run open (bench/bench_idle.py). The detail pane and the status bar keep the seconds."""

from __future__ import annotations

from nexus_core.timeutil import MINUTE_MS, age_text, age_text_changes_at


def table_age(iso: object, now: int) -> str:
    """The age of ``iso`` as a table cell shows it (no " ago": the column says it)."""
    return age_text(iso, now, seconds_under=MINUTE_MS).removesuffix(" ago")


def table_age_changes_at(iso: object, now: int) -> int | None:
    """When ``table_age(iso, ...)`` next reads differently (None: never)."""
    return age_text_changes_at(iso, now, seconds_under=MINUTE_MS)
