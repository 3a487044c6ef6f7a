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
        moment = datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    except ValueError:
        return None
    return round(moment.timestamp() * 1000)


def duration_text(ms: int) -> str:
    """A compact duration for people: 42s, 3m07s, 5h02m, 3d04h."""
    seconds = ms // 1000
    if seconds < 60:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 60:
        return f"{minutes}m{seconds % 60:02d}s"
    hours = minutes // 60
    if hours < 48:
        return f"{hours}h{minutes % 60:02d}m"
    return f"{hours // 24}d{hours % 24:02d}h"


@functools.lru_cache(maxsize=65536)
def _parse_cached(text: str) -> int | None:
    return parse_iso_ms(text)  # a dashboard retimes every age cell each second


def age_text(iso: object, now: int) -> str:
    """How long before ``now`` (ms) the ISO time ``iso`` was, e.g. "3m07s ago"; "—" if none."""
    moment = _parse_cached(iso) if isinstance(iso, str) else None
    if moment is None:
        return "—"
    return duration_text(max(0, now - moment)) + " ago"
