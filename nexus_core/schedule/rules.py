"""When a schedule fires: its rule (interval, daily, weekly, cron or one-off) in an IANA zone.

Every rule answers one question, ``next_after(ms)``: the first occurrence strictly after a moment
(epoch milliseconds), or None when there is none left. Wall-clock rules go through cronsim, whose
daylight-saving handling is the one the README states: a local time that does not exist (02:30 on
the night clocks go forward) fires once at the first valid time after the gap; a local time that
happens twice (01:30 on the night clocks go back) fires once, in its first pass. An expression
whose hour field is a wildcard or a step follows elapsed time and fires in both passes.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from ..errors import NexusError
from ..supervise.loop import parse_duration

KINDS = ("every", "daily", "weekly", "cron", "at")
EVERY_MIN_SECONDS = 30
EVERY_MAX_SECONDS = 24 * 3600
MAX_DURATION_MIN_SECONDS = 1
MAX_DURATION_MAX_SECONDS = 72 * 3600
_CRON_SEARCH_LIMIT = 200_000  # candidates examined for one answer (a rule that never fires ends here)

_TIME = re.compile(r"([01][0-9]|2[0-3]):([0-5][0-9])\Z", re.ASCII)
_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_AT = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}(:[0-9]{2})?(Z|[+-][0-9]{2}:[0-9]{2})?\Z", re.ASCII)


def zone_of(name: str) -> ZoneInfo:
    """An IANA zone by name; anything else (a path, an abbreviation such as CEST) is refused."""
    if not name or name.startswith(("/", ".")) or ".." in name or "\x00" in name:
        raise NexusError(f"--tz {name!r} is not an IANA time zone name (for example Europe/Paris or UTC).")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise NexusError(f"--tz {name!r} is not an IANA time zone name (for example Europe/Paris or UTC).") from None


def local_zone_name() -> str:
    """This host's zone as an IANA name ($TZ, then /etc/localtime's target), else UTC."""
    candidates = [os.environ.get("TZ", "").removeprefix(":")]
    try:
        target = os.readlink("/etc/localtime")
    except OSError:
        target = ""
    if "zoneinfo/" in target:
        candidates.append(target.split("zoneinfo/", 1)[1])
    for name in candidates:
        try:
            zone_of(name)
        except NexusError:
            continue
        return name
    return "UTC"


@dataclass(frozen=True)
class Rule:
    """``kind`` with the operator's ``text`` (``1h``, ``09:00``, ``mon,fri@09:00``, a cron
    expression, an ISO time) and ``zone``; ``anchor_ms`` is where an interval counts from."""

    kind: str
    text: str
    zone: str
    anchor_ms: int = 0

    @property
    def cron(self) -> str | None:
        """The 5-field expression a daily, weekly or cron rule stands for."""
        if self.kind == "daily":
            hour, minute = self.text.split(":")
            return f"{int(minute)} {int(hour)} * * *"
        if self.kind == "weekly":
            days, time = self.text.split("@")
            hour, minute = time.split(":")
            numbers = ",".join(str(_DAYS.index(day)) for day in days.split(","))
            return f"{int(minute)} {int(hour)} * * {numbers}"
        if self.kind == "cron":
            return self.text
        return None

    def describe(self) -> str:
        zone = "" if self.kind == "every" else f" ({self.zone})"
        words = {"every": "every ", "daily": "daily at ", "weekly": "weekly ", "cron": "cron ", "at": "once at "}
        return words[self.kind] + self.text + zone

    def next_after(self, after_ms: int) -> int | None:
        if self.kind == "every":
            step = parse_duration(self.text, "--every", EVERY_MIN_SECONDS, EVERY_MAX_SECONDS) * 1000
            if after_ms < self.anchor_ms + step:
                return self.anchor_ms + step
            return self.anchor_ms + ((after_ms - self.anchor_ms) // step + 1) * step
        if self.kind == "at":
            moment = at_ms(self.text, self.zone)
            return moment if moment > after_ms else None
        expression = self.cron
        assert expression is not None
        start = datetime.fromtimestamp(after_ms / 1000, tz=zone_of(self.zone)).replace(microsecond=0)
        # cronsim may answer a first-pass time when started inside the second pass of a repeated
        # hour: only answers after the moment count, so an ambiguous time still fires once.
        for count, candidate in enumerate(CronSim(expression, start)):
            moment = int(candidate.timestamp() * 1000)
            if moment > after_ms:
                return moment
            if count >= _CRON_SEARCH_LIMIT:
                break
        return None

    def occurrences_between(self, after_ms: int, until_ms: int, limit: int) -> tuple[list[int], bool]:
        """Occurrences in (after_ms, until_ms], at most ``limit`` of them (True when cut short)."""
        found: list[int] = []
        moment = self.next_after(after_ms)
        while moment is not None and moment <= until_ms:
            if len(found) >= limit:
                return found, True
            found.append(moment)
            moment = self.next_after(moment)
        return found, False


def at_ms(text: str, zone: str) -> int:
    """An ISO time (``2026-12-02T14:30``, with seconds, ``Z`` or an offset) in epoch ms; a
    local time inside a daylight-saving gap moves to the first valid time after it."""
    if not _AT.match(text):
        raise NexusError(
            f"--at takes an ISO date and time such as 2026-12-02T14:30 (optionally with seconds, Z or "
            f"an offset like +01:00); got {text!r}."
        )
    try:
        moment = datetime.fromisoformat(text.replace(" ", "T").replace("Z", "+00:00"))
    except ValueError:
        raise NexusError(f"--at {text!r} is not a valid date and time.") from None
    if moment.tzinfo is not None:
        return int(moment.timestamp() * 1000)
    local = moment.replace(tzinfo=zone_of(zone))
    # A wall time in a gap does not survive a round trip through UTC: then take the first valid
    # minute after it, as the cron rules do.
    back = datetime.fromtimestamp(local.timestamp(), tz=local.tzinfo).replace(tzinfo=None)
    if back != moment:
        probe = local
        while datetime.fromtimestamp(probe.timestamp(), tz=local.tzinfo).replace(tzinfo=None) != probe.replace(
            tzinfo=None
        ):
            probe = (probe.replace(tzinfo=None) + timedelta(minutes=1)).replace(second=0, tzinfo=local.tzinfo)
        return int(probe.timestamp() * 1000)
    return int(local.timestamp() * 1000)


def parse_rule(kind: str, text: str, zone: str, now_ms: int) -> Rule:
    """A rule from the command line, refused with a clear message when malformed."""
    zone_of(zone)
    if kind == "every":
        parse_duration(text, "--every", EVERY_MIN_SECONDS, EVERY_MAX_SECONDS)
        return Rule(kind, text, zone, now_ms)
    if kind == "daily":
        if not _TIME.match(text):
            raise NexusError(f"--daily takes a time of day as HH:MM (24-hour, for example 09:00); got {text!r}.")
    elif kind == "weekly":
        days, _, time = text.partition("@")
        names = days.lower().split(",") if days else []
        if not names or any(day not in _DAYS for day in names) or not _TIME.match(time):
            raise NexusError(
                f"--weekly takes days and a time as DAY[,DAY...]@HH:MM, days from {','.join(_DAYS)} "
                f"(for example mon,fri@09:00); got {text!r}."
            )
        text = ",".join(names) + "@" + time
    elif kind == "cron":
        fields = text.split()
        if len(fields) != 5:
            raise NexusError(
                f"--cron takes a 5-field expression (minute hour day-of-month month day-of-week, for "
                f"example '0 9 * * 1-5'); got {text!r} ({len(fields)} fields)."
            )
        text = " ".join(fields)
        try:
            CronSim(text, datetime.now(UTC))
        except CronSimError as error:
            raise NexusError(f"--cron {text!r} is not a valid cron expression: {error}.") from None
    elif kind == "at":
        at_ms(text, zone)
    else:
        raise NexusError(f"Unknown schedule kind {kind!r}.")
    rule = Rule(kind, text, zone, now_ms)
    if rule.next_after(now_ms) is None:
        if kind == "at":
            raise NexusError(f"--at {text} is in the past; a one-off schedule must name a future time.")
        raise NexusError(f"--cron {text!r} never fires; nothing was scheduled.")
    return rule


def parse_max_duration(text: str) -> int:
    """``--max-duration`` in milliseconds: 1s to 72h as Ns, Nm or Nh."""
    return parse_duration(text, "--max-duration", MAX_DURATION_MIN_SECONDS, MAX_DURATION_MAX_SECONDS) * 1000


def duration_text(ms: int) -> str:
    seconds = ms // 1000
    for unit, size in (("h", 3600), ("m", 60)):
        if seconds % size == 0 and seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
