"""Strict reading of --plan and --input files (SPEC 8.2 and DESIGN 3).

Bytes are refused, never repaired: empty, over 1 MiB, not UTF-8, NUL, lone surrogates, a BOM
or invalid JSON each give a clear message naming the file. So is a file another user owns or
can write (not in the reference). Nothing is written.

``--input -`` reads the same JSON from standard input, under the same checks (not in the
reference, where ``-`` names a file): the dashboard hands a remote host its input this way, so
it never lies in a file on either side.
"""

from __future__ import annotations

import os
import stat
from typing import Any

from ..errors import NexusError
from ..paths import FileTooLarge, open_regular
from ..shapes import JsonObject
from ..state import canonical
from ..state.store import unsafe_reason

INPUT_LIMIT = 1048576
STDIN = "-"  # --input -: the JSON on standard input
STDIN_NAME = "standard input"


def _strings(value: Any) -> Any:
    """Yield every string (keys and values) of a parsed JSON value."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def read_input_file(file: str | None, option: str) -> JsonObject:
    if not file:
        raise NexusError(f"{option} requires a JSON file.")
    if file == STDIN and option == "--input":
        path, raw = STDIN_NAME, _read_stdin(option)
    else:
        path = os.path.abspath(file)
        raw = _read_own_file(path, option)
    value = _parse(raw, option, path)
    for item in _strings(value):
        if "\x00" in item:
            raise NexusError(f"{option} file contains an escaped NUL character (\\u0000): {path}")
        if canonical.has_lone_surrogate(item):
            raise NexusError(f"{option} file contains a lone UTF-16 surrogate escape: {path}")
    if not isinstance(value, dict):
        raise NexusError(f"{option} must contain a JSON object.")
    return value


def _read_own_file(path: str, option: str) -> bytes:
    """The bytes of a regular file of at most INPUT_LIMIT that only its reader can write."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        raise NexusError(f"{option} file not found: {path}") from None
    except OSError as error:
        raise NexusError(f"{option} file cannot be read ({error.strerror}): {path}") from None
    if not stat.S_ISREG(info.st_mode) or info.st_size > INPUT_LIMIT:
        raise NexusError(f"{option} must name a regular JSON file no larger than 1 MiB.")
    try:
        fd, opened = open_regular(path, checked=info)
    except FileTooLarge:
        raise NexusError(f"{option} must name a regular JSON file no larger than 1 MiB.") from None
    except OSError as error:
        raise NexusError(f"{option} file cannot be read ({error.strerror}): {path}") from None
    with os.fdopen(fd, "rb") as handle:
        # Checked on the file actually read: a plan's checks run as the operator and an
        # input decides a mutation in their name, so a file another user can write is refused.
        reason = unsafe_reason(opened, root_may_own=True)
        if reason is not None:
            raise NexusError(
                f"{option} file is {reason}; another user could have written it, so it was not used: {path}",
                "Use a copy only you can write.",
            )
        try:
            raw = handle.read(INPUT_LIMIT + 1)
        except OSError as error:
            raise NexusError(f"{option} file cannot be read ({error.strerror}): {path}") from None
    if len(raw) > INPUT_LIMIT:
        raise NexusError(f"{option} must name a regular JSON file no larger than 1 MiB.")
    return raw


def _read_stdin(option: str) -> bytes:
    """Standard input to its end, refused past INPUT_LIMIT (never read further than that)."""
    import sys

    stream = sys.stdin.buffer if sys.stdin is not None else None
    if stream is None:
        raise NexusError(f"{option} - needs standard input, and there is none.")
    raw = bytearray()
    try:
        while len(raw) <= INPUT_LIMIT:
            chunk = stream.read1(INPUT_LIMIT + 1 - len(raw)) if hasattr(stream, "read1") else stream.read()
            if not chunk:
                break
            raw += chunk
    except OSError as error:
        raise NexusError(f"{option} - cannot be read ({error.strerror}): {STDIN_NAME}") from None
    if len(raw) > INPUT_LIMIT:
        raise NexusError(f"{option} - must be a JSON object no larger than 1 MiB on {STDIN_NAME}.")
    return bytes(raw)


def _parse(raw: bytes, option: str, path: str) -> Any:
    """The JSON value of ``raw``: UTF-8 without a byte order mark or NUL, nothing else."""
    if not raw.strip():
        raise NexusError(f"{option} file is empty: {path}")
    nul = raw.find(b"\x00")
    if nul >= 0:
        raise NexusError(f"{option} file contains a NUL byte at offset {nul}: {path}")
    try:
        content = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise NexusError(f"{option} file is not valid UTF-8 (byte offset {error.start}): {path}") from None
    if content.startswith("\ufeff"):
        raise NexusError(f"{option} file starts with a byte order mark, which JSON does not allow: {path}")
    try:
        return canonical.parse(content)
    except RecursionError:
        raise NexusError(f"{option} file is not valid JSON (nested too deeply): {path}") from None
    except ValueError as error:
        detail = getattr(error, "msg", None)
        line, column = getattr(error, "lineno", None), getattr(error, "colno", None)
        where = f"line {line} column {column}" if line is not None else ""
        # Some parser messages end in "at" already ("Unterminated string starting at").
        reason = f"{detail.removesuffix(' at')} at {where}" if detail and where else str(error)
        raise NexusError(f"{option} file is not valid JSON ({reason}): {path}") from None
