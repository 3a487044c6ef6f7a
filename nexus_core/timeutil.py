"""Time in the reference's ISO form, with one injectable clock for tests."""

from __future__ import annotations

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
