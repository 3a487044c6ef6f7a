"""The facts with one home in nexus_core: a pid's liveness, an error's text, durations."""

from __future__ import annotations

import errno
import os
import subprocess
import sys

import pytest

from nexus_core import hostinfo
from nexus_core.errors import NexusError, message_of
from nexus_core.hostinfo import owner_liveness, pid_liveness, usable_pid
from nexus_core.timeutil import age_text, duration_text, iso_from_ms

HERE = hostinfo.hostname()


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()  # reaped: the pid names no process now
    return child.pid


@pytest.mark.parametrize("value", [0, -1, -4242, 2**31, 2**63, 10**30, True, False, 1.5, "42", None, [42]])
def test_no_usable_pid_is_ever_probed_and_its_liveness_is_unknown(
    value: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_probe(*_: object) -> None:
        raise AssertionError("os.kill must not be called")  # kill(0)/kill(-1) would signal groups

    monkeypatch.setattr(os, "kill", no_probe)
    assert usable_pid(value) is None
    assert owner_liveness(HERE, value) == "unknown"
    assert pid_liveness(value) == "unknown"


def test_this_process_is_alive_and_a_reaped_child_is_dead() -> None:
    assert owner_liveness(HERE, os.getpid()) == "alive"
    assert owner_liveness(HERE, float(os.getpid())) == "alive"  # a JSON number, as the reference reads it
    dead = _dead_pid()
    assert owner_liveness(HERE, dead) == "dead" and pid_liveness(dead) == "dead"


def test_a_pid_past_pid_max_but_within_pid_t_is_dead() -> None:
    assert owner_liveness(HERE, 2**31 - 1) == "dead"


def test_eperm_means_the_process_exists(monkeypatch: pytest.MonkeyPatch) -> None:
    def not_yours(process_id: int, signal: int) -> None:
        raise PermissionError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "kill", not_yours)
    assert owner_liveness(HERE, 4242) == "alive"


def test_another_hosts_pid_is_unknown_whatever_it_is_here() -> None:
    assert owner_liveness(HERE + "-elsewhere", os.getpid()) == "unknown"
    assert owner_liveness(None, os.getpid()) == "unknown"


def test_message_of_gives_the_exact_text() -> None:
    assert message_of(NexusError("Nexus: Unknown run.")) == "Nexus: Unknown run."
    missing = FileNotFoundError(errno.ENOENT, "No such file or directory", "/p/x")
    assert message_of(missing) == "No such file or directory: /p/x"
    assert message_of(OSError(errno.EIO, "Input/output error")) == "[Errno 5] Input/output error"
    assert message_of(ValueError("bad")) == "bad"


def test_durations_for_people() -> None:
    assert [duration_text(ms) for ms in (0, 59_999, 60_000, 3_599_000, 3_600_000, 172_800_000)] == [
        "0s",
        "59s",
        "1m00s",
        "59m59s",
        "1h00m",
        "2d00h",
    ]
    now = 1_000_000_000_000
    assert age_text(iso_from_ms(now - 61_000), now) == "1m01s ago"
    assert age_text(None, now) == "—" and age_text("not a time", now) == "—"
    assert age_text(iso_from_ms(now + 5_000), now) == "0s ago"  # a clock skew is never negative


def test_the_cli_per_task_vocabulary_is_the_mutation_table() -> None:
    """cli.PER_TASK_ACTIONS (the usage line, completion, the plain fast path) names exactly the
    per-task entries of nexus_core.actions.MUTATIONS, which says what each one calls."""
    from nexus_core import actions, cli

    assert set(cli.PER_TASK_ACTIONS) == {name for name, mutation in actions.MUTATIONS.items() if mutation.per_task}
