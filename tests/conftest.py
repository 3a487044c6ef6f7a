from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from nexus_core import timeutil

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(autouse=True)
def _real_clock() -> Iterator[None]:
    """A test that freezes the clock never leaks it into the next one."""
    yield
    timeutil.set_clock(None)


def run_cli(
    *args: str, cwd: str | Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the real `nexus` CLI as a subprocess (the same entry point as the console script)."""
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    return subprocess.run(
        [sys.executable, "-m", "nexus_core.cli", *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def nexus_cli() -> Callable[..., subprocess.CompletedProcess[str]]:
    return run_cli
