"""Validation primitives shared by plans and action inputs (SPEC 4.1)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .errors import NexusError, fail
from .paths import relative, text_ok

_ID = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}\Z")


def is_ident(value: object) -> bool:
    return isinstance(value, str) and _ID.match(value) is not None


def ident(value: object, label: str = "ID") -> str:
    if not is_ident(value):
        raise fail(f"{label} must use 1-64 lowercase letters, numbers, _ or -.")
    assert isinstance(value, str)
    return value


def text(value: object, label: str, limit: int = 8000) -> str:
    if not text_ok(value, limit):
        raise fail(f"{label} must be a nonempty bounded string.")
    assert isinstance(value, str)
    return value


class Unplaced(NexusError):
    """A refusal by a rule that cannot know which field it checked (a path, a command, a
    directory): the reference's message, and where it is (``tasks[2].execution.input``) as the
    hint, which the callers fill in from the inside out."""

    def __init__(self, message: str, where: str, task: str | None = None) -> None:
        self.where = where
        self.task = task
        super().__init__(message, self._where())

    def _where(self) -> str:
        task = f" (task {self.task})" if self.task else ""
        return f"At {self.where}{task}."

    def inside(self, where: str, task: str | None = None) -> None:
        self.where = where + self.where
        self.task = self.task or task
        self.hint = self._where()


@contextmanager
def rule_at(where: str) -> Iterator[None]:
    """Around a rule whose messages name no field: its refusal says ``where``."""
    try:
        yield
    except Unplaced as error:
        error.inside(where)
        raise
    except NexusError as error:
        raise Unplaced(error.message, where) from None


@contextmanager
def within(where: str, task: str | None = None) -> Iterator[None]:
    """Around a part of a value (``tasks[2]``, ``.execution``): a refusal that says where it
    is inside the part gets the part's place before it; every other refusal passes unchanged."""
    try:
        yield
    except Unplaced as error:
        error.inside(where, task)
        raise


def string_list(value: object, label: str, paths: bool = False, empty: bool = True) -> list[str]:
    if not isinstance(value, list) or (not empty and not value) or len(value) > 1000:
        raise fail(f"{label} must be a bounded array.")
    items = []
    for index, item in enumerate(value):
        if paths:
            with rule_at(f"[{index}]"):
                items.append(relative(item))
        else:
            items.append(text(item, label))
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
