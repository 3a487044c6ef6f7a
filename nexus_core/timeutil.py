"""Time in the reference's ISO form, with one injectable clock for tests."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from datetime import UTC, datetime

_clock: Callable[[], float] = time.time


def set_clock(clock: Callable[[], float] | None) -> None:
    """Tests inject a clock (seconds since the epoch); None restores the real one."""
    global _clock
    _clock = clock or time.time


def now_ms() -> int:
    return int(_clock() * 1000)


def iso_from_ms(ms: int) -> str:
    moment = datetime.fromtimestamp(ms / 1000, tz=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def now_iso() -> str:
    return iso_from_ms(now_ms())


def parse_iso_ms(text: object) -> int | None:
    if not isinstance(text, str):
        return None
    try:
        if len(text) == 24 and text.isascii():
            # The form every stored time has (iso_from_ms): the same fields strptime would read,
            # without importing _strptime (start-up time of inspect).
            moment = _canonical_iso(text)
        else:
            moment = datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    except ValueError:
        return None
    return round(moment.timestamp() * 1000)


def _canonical_iso(text: str) -> datetime:
    """``YYYY-MM-DDTHH:MM:SS.mmmZ``; anything else goes to strptime, which decides."""
    if (
        text[4] + text[7] + text[10] + text[13] + text[16] + text[19] + text[23] != "--T::.Z"
        or not (text[:4] + text[5:7] + text[8:10] + text[11:13] + text[14:16] + text[17:19] + text[20:23]).isdigit()
    ):
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    fields = (text[:4], text[5:7], text[8:10], text[11:13], text[14:16], text[17:19])
    year, month, day, hour, minute, second = (int(field) for field in fields)
    try:
        return datetime(year, month, day, hour, minute, second, int(text[20:23]) * 1000, tzinfo=UTC)
    except ValueError:  # e.g. a leap second: strptime's own verdict
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)


MINUTE_MS = 60_000
HOUR_MS = 3_600_000


def duration_text(ms: int, *, seconds_under: int = HOUR_MS) -> str:
    """A compact duration for people: 42s, 3m07s, 5h02m, 3d04h. From ``seconds_under`` (ms) on,
    minutes come without their seconds ("3m"); under a minute it is always seconds."""
    seconds = ms // 1000
    if seconds < 60:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 60:
        return f"{minutes}m{seconds % 60:02d}s" if ms < seconds_under else f"{minutes}m"
    hours = minutes // 60
    if hours < 48:
        return f"{hours}h{minutes % 60:02d}m"
    return f"{hours // 24}d{hours % 24:02d}h"


@functools.lru_cache(maxsize=65536)
def _parse_cached(text: str) -> int | None:
    return parse_iso_ms(text)  # a dashboard retimes every age cell each second


def age_text_changes_at(iso: object, now: int, *, seconds_under: int = HOUR_MS) -> int | None:
    """The first moment (ms) after ``now`` at which ``age_text(iso, ...)`` (with the same
    ``seconds_under``) reads differently; None if it never does ("—"). A redraw is due once per
    step shown (a second, a minute, an hour), not every second."""
    moment = _parse_cached(iso) if isinstance(iso, str) else None
    if moment is None:
        return None
    elapsed = max(0, now - moment)
    if elapsed < MINUTE_MS or elapsed < min(seconds_under, HOUR_MS):
        step = 1000
    else:
        step = MINUTE_MS if elapsed < 48 * HOUR_MS else HOUR_MS
    return moment + (elapsed // step + 1) * step


def age_text(iso: object, now: int, *, seconds_under: int = HOUR_MS) -> str:
    """How long before ``now`` (ms) the ISO time ``iso`` was, e.g. "3m07s ago"; "—" if none.
    ``seconds_under``: as for duration_text."""
    moment = _parse_cached(iso) if isinstance(iso, str) else None
    if moment is None:
        return "—"
    return duration_text(max(0, now - moment), seconds_under=seconds_under) + " ago"
