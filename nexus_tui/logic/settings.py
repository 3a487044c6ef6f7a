"""The dashboard's settings file: ``$XDG_CONFIG_HOME/nexus/config.toml`` (``~/.config/nexus/``
when XDG_CONFIG_HOME is unset), or the file ``nexus-tui --config PATH`` names.

A missing file means the defaults. A file that does not parse, or holds a key or a value this
version does not know, is refused as a whole with a :class:`SettingsError` that names the file,
the line and the key: nothing of it is used. Read with the standard library's ``tomllib``.

What the registry and the theme list know (binding ids, keys already taken, theme names) is
checked by the caller that has them (``check``'s arguments), so this module imports no widgets.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

NOTIFY_MODES = ("off", "bell", "desktop", "both")
NOTIFY_WHEN = ("background", "always")
DESKTOP_PROTOCOLS = ("osc9", "osc777")
# The tables' sort keys (widgets/task_cells.py's and run_cells.py's columns); a leading "-" sorts descending.
RUN_SORT_KEYS = ("run", "progress", "states", "stale", "overdue", "lock", "load", "updated")
TASK_SORT_KEYS = (
    "task",
    "depends",
    "execution",
    "verification",
    "acceptance",
    "attempts",
    "stale",
    "overdue",
    "observed",
)
_KEY_NAME = re.compile(r"^(?:(?:ctrl|shift|alt|meta|super|hyper)\+)*(?:[a-z0-9_]+|[!-~])$")
MAX_BYTES = 256 * 1024


class SettingsError(Exception):
    """The settings file cannot be used; the message names the file, the line and the key."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True)
class Settings:
    notifications: str = "bell"  # off | bell | desktop | both
    when: str = "background"  # background | always
    desktop: str = "osc9"  # osc9 | osc777
    startup: bool = False  # notify for needs already there when the dashboard starts
    theme: str | None = None
    keys: Mapping[str, str] = field(default_factory=dict)  # binding id -> keys (comma-separated)
    run_sort: tuple[str | None, bool] = (None, False)
    task_sort: tuple[str | None, bool] = (None, False)
    path: str | None = None  # the file read, if any
    lines: Mapping[str, int] = field(default_factory=dict)  # "table.key" -> its line, for later checks

    def line_of(self, key: str) -> int | None:
        return self.lines.get(key)

    def check(
        self,
        *,
        themes: Iterable[str],
        binding_ids: Iterable[str],
        clash: Callable[[Mapping[str, str]], tuple[str, str, str] | None],
    ) -> None:
        """What only the app knows: the theme exists, every key override names a binding, and
        the keys it leads to clash nowhere (``clash`` returns (binding id, key, what already has
        the key, in words) for the first clash, or None)."""
        known_themes = sorted(themes)
        if self.theme is not None and self.theme not in known_themes:
            self.fail("theme", f"unknown theme {self.theme!r} (one of: {', '.join(known_themes)})")
        ids = set(binding_ids)
        for binding_id in self.keys:
            if binding_id not in ids:
                self.fail(f"keys.{binding_id}", f"no binding has the id {binding_id!r} (see the README's list)")
        found = clash(self.keys)
        if found is not None:
            binding_id, key, other = found
            self.fail(f"keys.{binding_id}", f"the key {key!r} is already the key of {other}")

    def fail(self, key: str, why: str) -> None:
        raise SettingsError(_where(self.path, self.line_of(key), key, why))


def default_path(environ: Mapping[str, str] | None = None) -> str:
    env = os.environ if environ is None else environ
    base = env.get("XDG_CONFIG_HOME") or os.path.join(env.get("HOME") or os.path.expanduser("~"), ".config")
    return os.path.join(base, "nexus", "config.toml")


def _where(path: str | None, line: int | None, key: str | None, why: str) -> str:
    place = path or "the settings file"
    if line is not None:
        place += f", line {line}"
    if key:
        place += f", {key}"
    return f"{place}: {why}"


def load(path: str | None = None, *, explicit: bool = False) -> Settings:
    """The settings of ``path`` (the default file when None). A missing default file gives the
    defaults; a missing file named with ``--config`` (``explicit``) is an error."""
    target = path or default_path()
    try:
        fd = os.open(target, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        if explicit:
            raise SettingsError(f"{target}: no such settings file") from None
        return Settings()
    except OSError as error:
        raise SettingsError(f"{target}: cannot be read ({error.strerror})") from None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        import stat

        if not stat.S_ISREG(info.st_mode):
            raise SettingsError(f"{target}: not a regular file")
        raw = handle.read(MAX_BYTES + 1)
    if len(raw) > MAX_BYTES:
        raise SettingsError(f"{target}: larger than {MAX_BYTES // 1024} KiB")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        line = raw[: error.start].count(b"\n") + 1
        raise SettingsError(_where(target, line, None, "not valid UTF-8")) from None
    return parse(text, target)


def parse(text: str, path: str | None = None) -> Settings:
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        # tomllib's message ends with "(at line N, column M)".
        raise SettingsError(f"{path or 'the settings file'}: not valid TOML: {error}") from None
    lines = _key_lines(text)
    values: dict[str, Any] = {"path": path, "lines": lines}

    def fail(key: str, why: str) -> None:
        raise SettingsError(_where(path, lines.get(key), key, why))

    tables = {"notifications", "keys", "sort"}
    for name, value in document.items():
        if name == "theme":
            if not isinstance(value, str) or not value:
                fail("theme", "must be a theme's name (a string)")
            values["theme"] = value
        elif name in tables:
            if not isinstance(value, dict):
                fail(name, f"must be a table ([{name}])")
        else:
            fail(name, f"unknown setting {name!r} (known: theme, [notifications], [keys], [sort])")
    notifications = document.get("notifications", {})
    for name, value in notifications.items():
        key = f"notifications.{name}"
        if name == "mode":
            _one_of(fail, key, value, NOTIFY_MODES)
            values["notifications"] = value
        elif name == "when":
            _one_of(fail, key, value, NOTIFY_WHEN)
            values["when"] = value
        elif name == "desktop":
            _one_of(fail, key, value, DESKTOP_PROTOCOLS)
            values["desktop"] = value
        elif name == "startup":
            if not isinstance(value, bool):
                fail(key, "must be true or false")
            values["startup"] = value
        else:
            fail(key, f"unknown setting {name!r} (known: mode, when, desktop, startup)")
    keys: dict[str, str] = {}
    for name, value in document.get("keys", {}).items():
        key = f"keys.{name}"
        if not isinstance(value, str) or not value.strip():
            fail(key, 'must be a key name, or several separated by commas ("ctrl+r", "f5,R")')
        parts = [part.strip() for part in value.split(",")]
        for part in parts:
            if not _KEY_NAME.match(part):
                fail(key, f"{part!r} is not a key name (e.g. 'x', 'X', 'f5', 'ctrl+r', 'question_mark')")
        keys[name] = ",".join(parts)
    values["keys"] = keys
    for name, value in document.get("sort", {}).items():
        key = f"sort.{name}"
        if name not in ("runs", "tasks"):
            fail(key, f"unknown setting {name!r} (known: runs, tasks)")
        allowed = RUN_SORT_KEYS if name == "runs" else TASK_SORT_KEYS
        if not isinstance(value, str) or value.lstrip("-") not in allowed:
            fail(key, f"must be one of {', '.join(allowed)} (a leading '-' sorts descending)")
        values["run_sort" if name == "runs" else "task_sort"] = (value.lstrip("-"), value.startswith("-"))
    return Settings(**values)


def _one_of(fail: Callable[[str, str], None], key: str, value: object, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        fail(key, f"must be one of {', '.join(repr(a) for a in allowed)}, not {value!r}")


_TABLE = re.compile(r"^\s*\[\s*([A-Za-z0-9_-]+)\s*\]\s*(?:#.*)?$")
_KEY = re.compile(r"""^\s*(?:"([^"]*)"|'([^']*)'|([A-Za-z0-9_-]+))\s*(?:\.\s*(?:"([^"]*)"|([A-Za-z0-9_-]+))\s*)?=""")


def _key_lines(text: str) -> dict[str, int]:
    """Where each "table.key" (or top-level key, or table) is written: tomllib does not say,
    and an error must name the line. Plain keys, quoted keys and one dotted level."""
    found: dict[str, int] = {}
    table = ""
    for number, line in enumerate(text.splitlines(), start=1):
        header = _TABLE.match(line)
        if header:
            table = header.group(1)
            found.setdefault(table, number)
            continue
        key = _KEY.match(line)
        if key:
            first = next(group for group in key.group(1, 2, 3) if group is not None)
            second = key.group(4) or key.group(5)
            name = f"{first}.{second}" if second else first
            found.setdefault(f"{table}.{name}" if table else name, number)
    return found
