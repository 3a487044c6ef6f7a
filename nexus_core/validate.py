"""Validation primitives shared by plans and action inputs (SPEC 4.1)."""

from __future__ import annotations

import re
from typing import Any

from .errors import fail
from .paths import relative, text_ok

_ID = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}\Z")


def ident(value: object, label: str = "ID") -> str:
    if not isinstance(value, str) or not _ID.match(value):
        raise fail(f"{label} must use 1-64 lowercase letters, numbers, _ or -.")
    return value


def text(value: object, label: str, limit: int = 8000) -> str:
    if not text_ok(value, limit):
        raise fail(f"{label} must be a nonempty bounded string.")
    assert isinstance(value, str)
    return value


def string_list(value: object, label: str, paths: bool = False, empty: bool = True) -> list[str]:
    if not isinstance(value, list) or (not empty and not value) or len(value) > 1000:
        raise fail(f"{label} must be a bounded array.")
    items = [relative(item) if paths else text(item, label) for item in value]
    lowered = [item.lower() for item in items]
    if len(set(lowered)) != len(lowered):
        raise fail(f"Duplicate {label}.")
    return items


def is_integer(value: object) -> bool:
    """``Number.isInteger``: ints (not bools) and integral finite floats."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, float) and value.is_integer()


def integer_in(value: Any, low: int, high: int) -> int | None:
    if is_integer(value) and low <= value <= high:
        return int(value)
    return None


def unique(items: list[str]) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for item in items:
        if item not in seen:
            seen.add(item)
            out.append(item)
    return out
