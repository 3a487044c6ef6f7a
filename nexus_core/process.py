"""Process backend placeholder: launch and collect arrive with the process backend."""

from __future__ import annotations

from typing import Any

from .errors import fail
from .store import Run


def launch_task(directory: str, run_id: str, task_id: str, options: Any) -> Run:
    raise fail("launch is not available yet: the process backend is not implemented in this version.")


def collect_task(directory: str, run_id: str, task_id: str, options: Any) -> Run:
    raise fail("collect is not available yet: the process backend is not implemented in this version.")
