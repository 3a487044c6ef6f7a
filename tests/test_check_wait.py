"""checks.wait_exited: what Popen.wait(timeout) gives (exit status, TimeoutExpired), without
its polling; a child already reaped (an interrupt's poll()) is never waited on by pid."""

from __future__ import annotations

import subprocess
import sys

import pytest

from nexus_core.backend.checks import wait_exited


def spawn(code: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.DEVNULL)


def test_exit_status_is_what_wait_gives() -> None:
    child = spawn("import sys; sys.exit(7)")
    wait_exited(child, 30)
    assert child.returncode == 7


def test_signal_death_is_what_wait_gives() -> None:
    child = spawn("import os, signal; os.kill(os.getpid(), signal.SIGTERM)")
    wait_exited(child, 30)
    assert child.returncode == -15


def test_a_child_still_running_at_the_timeout_raises_and_keeps_running() -> None:
    child = spawn("import time; time.sleep(60)")
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            wait_exited(child, 0.05)
        assert child.poll() is None
    finally:
        child.kill()
        child.wait()
    assert child.returncode == -9


def test_an_already_reaped_child_returns_at_once() -> None:
    child = spawn("pass")
    child.wait()
    wait_exited(child, 0)  # no TimeoutExpired although the timeout is zero: nothing to wait for
    assert child.returncode == 0
