"""Writing a command's output: text as UTF-8 straight to the stream's bytes, flushed; and a
closed pipe (``nexus inspect --json | head -c 20``) ends the command quietly.

The Unix habit: a command whose reader has gone dies of SIGPIPE, and the shell reports 141.
SIGPIPE itself stays ignored (launch writes to its child's stdin and must survive a child that
stops reading), so the write that meets the closed pipe ends the process with that status,
without a word and without a traceback.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Any, NoReturn

BROKEN_PIPE_STATUS = 141  # 128 + SIGPIPE


def write(stream: Any, text: str) -> None:
    try:
        stream.buffer.write(text.encode("utf-8", "replace"))
        stream.buffer.flush()
    except BrokenPipeError:
        broken_pipe()


def write_bytes(stream: Any, data: bytes) -> None:
    try:
        stream.buffer.write(data)
        stream.buffer.flush()
    except BrokenPipeError:
        broken_pipe()


def broken_pipe() -> NoReturn:
    """End the process quietly: nothing more can be said on a closed pipe, and the
    interpreter's final flush must not try (it would print "Exception ignored ...")."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.dup2(devnull, sys.stderr.fileno())
    os._exit(BROKEN_PIPE_STATUS)
