"""The facts with one home in nexus_core: a pid's liveness (and who may judge an owner by it), an
error's text, durations."""

from __future__ import annotations

import errno
import json
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from supervise_kit import Project, task_def

from nexus_core import hostinfo, supervise
from nexus_core.errors import NexusError, message_of
from nexus_core.hostinfo import owner_liveness, pid_liveness, usable_pid
from nexus_core.supervise import Snapshot
from nexus_core.timeutil import HOUR_MS, MINUTE_MS, age_text, age_text_changes_at, duration_text, iso_from_ms, now_ms

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
    # A table's ages: the seconds only under a minute.
    assert [duration_text(ms, seconds_under=MINUTE_MS) for ms in (59_999, 60_000, 3_599_000, 3_600_000)] == [
        "59s",
        "1m",
        "59m",
        "1h00m",
    ]
    assert age_text(iso_from_ms(now - 61_000), now, seconds_under=MINUTE_MS) == "1m ago"


def test_an_age_s_next_change_is_the_first_moment_its_text_differs() -> None:
    now = 1_000_000_000_000
    assert age_text_changes_at(None, now) is None
    # Seconds, the hour and 48-hour turns, hours, and a skewed clock (the moment ahead of now).
    elapsed_cases = (
        0,
        999,
        59_500,
        61_000,
        3_599_400,
        3_600_000,
        7_230_000,
        48 * 3_600_000 - 1,
        50 * 3_600_000,
        -5_000,
    )
    for seconds_under in (HOUR_MS, MINUTE_MS):  # the detail's ages, a table's
        for elapsed in elapsed_cases:
            moment = iso_from_ms(now - elapsed)
            changes = age_text_changes_at(moment, now, seconds_under=seconds_under)
            assert changes is not None and changes > now
            before = age_text(moment, now, seconds_under=seconds_under)
            assert age_text(moment, changes - 1, seconds_under=seconds_under) == before
            assert age_text(moment, changes, seconds_under=seconds_under) != before
    # A table's age past its first minute changes once a minute, not every second.
    moment = iso_from_ms(now - 61_000)
    assert age_text_changes_at(moment, now, seconds_under=MINUTE_MS) == now + 59_000


# ----------------------------------------------------------------- supervise judges owners by owner_liveness


def _no_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: object) -> None:
        raise AssertionError("another host's pid (or an unusable one) must never be probed here")

    monkeypatch.setattr(os, "kill", refuse)


def _writer_lock(project: Project, owner: dict[str, object]) -> None:
    record = {"token": str(uuid.uuid4()), **owner, "createdAt": "2026-01-01T00:00:00.000Z"}
    fd = os.open(project.writer_lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, json.dumps(record, separators=(",", ":")).encode())
    os.close(fd)


@pytest.mark.parametrize(
    ("host", "pid", "code", "outcome"),
    [
        (HERE + "-elsewhere", "dead here", 0, "accepted"),
        (HERE + "-elsewhere", "alive here", 0, "accepted"),
        (HERE + "-elsewhere", 0, 0, "accepted"),
        (HERE, "dead here", 3, "needs-operator"),
        (HERE, 0, 3, "needs-operator"),  # of this host but no pid: nothing can still hold it
    ],
)
def test_wait_never_judges_a_lock_owner_of_another_host(
    tmp_path: Path, host: str, pid: object, code: int, outcome: str
) -> None:
    """`nexus wait --json` on a run that has settled but for a writer.lock left behind: another
    host's owner may still release it (whatever its pid means here), so the run's own verdict
    stands; an owner of this host that is gone (or names no pid) needs an operator."""
    project = Project(tmp_path)
    project.create(task_def("a"))
    project.finish("a")
    process_id = {"dead here": _dead_pid(), "alive here": os.getpid()}.get(pid, pid)  # type: ignore[call-overload]
    _writer_lock(project, {"pid": process_id, "hostname": host})
    done = project.wait("--json", "--settle-grace", "0", "--idle-timeout", "20")
    summary = json.loads(done.stdout.splitlines()[-1])
    assert (done.returncode, summary["outcome"]) == (code, outcome), done.stderr


def _running_verification(tmp_path: Path, owner: dict[str, object]) -> Snapshot:
    project = Project(tmp_path)
    project.create(task_def("a"))
    project.start("a")
    project.write("a")
    project.record("a")
    view = project.state()
    view["tasks"][0]["attempts"][-1]["verification"] = {"status": "running", "owner": owner, "checks": []}
    locks: dict[str, dict[str, object] | None] = {"writer": {"owner": owner}, "recovery": None}
    return Snapshot(at_ms=now_ms(), view=view, locks=locks)  # type: ignore[arg-type]


@pytest.mark.parametrize("pid", ["dead here", "alive here", 0, -1, 2**40])
def test_supervise_never_reports_another_hosts_owner_dead_or_alive(
    tmp_path: Path, pid: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The classify API (what wait and loop decide from): a verification running under another
    host's owner is still verifying and keeps loop's tick waiting; that host's lock owner is never
    'gone' nor probed here (os.kill would answer for an unrelated process of this host)."""
    process_id = {"dead here": _dead_pid(), "alive here": os.getpid()}.get(pid, pid)  # type: ignore[call-overload]
    snapshot = _running_verification(tmp_path, {"pid": process_id, "hostname": HERE + "-elsewhere"})
    assert snapshot.view is not None
    _no_probe(monkeypatch)
    [state] = supervise.classify_run(snapshot.view, "a", snapshot.at_ms)
    assert (state.state, state.category) == ("verifying", "moving")
    assert supervise.lock_problem(snapshot) is None
    reason = supervise.busy_reason(snapshot)
    assert reason == f"writer.lock held by pid {process_id} on {HERE}-elsewhere"


def test_supervise_reports_this_hosts_gone_owner_without_probing_an_unusable_pid(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    snapshot = _running_verification(tmp_path, {"pid": 0, "hostname": HERE})
    assert snapshot.view is not None
    _no_probe(monkeypatch)  # kill(0, 0) would probe our own process group and answer "alive"
    [state] = supervise.classify_run(snapshot.view, "a", snapshot.at_ms)
    assert state.state == "verifier-gone"
    assert supervise.lock_problem(snapshot) == (
        "writer.lock was left by pid 0, which is gone; inspect it, then recover-lock"
    )


def test_only_hostinfo_probes_pids() -> None:
    """Every liveness judgement goes through nexus_core.hostinfo: no other module of the core or
    the dashboard signals a pid to probe it (os.kill(pid, 0)) or calls the raw probe."""
    import nexus_core
    import nexus_tui

    offenders = []
    for package in (nexus_core, nexus_tui):
        for path in Path(package.__path__[0]).rglob("*.py"):
            if path.name == "hostinfo.py" and path.parent.name == "nexus_core":
                continue
            text = path.read_text(encoding="utf-8")
            if re.search(r"os\.kill\([^)]*,\s*0\s*\)|\bpid_alive\b", text):
                offenders.append(str(path))
    assert offenders == []


def test_inspect_survives_a_temp_file_whose_pid_is_past_pid_t(tmp_path: Path) -> None:
    """A temporary's name is worker-controlled: a pid past pid_t is not probed (os.kill would
    raise OverflowError) and the file is kept (its owner cannot be judged); a dead pid's is counted."""
    project = Project(tmp_path)
    receipts = project.root / ".bmad-plus" / "nexus" / "receipts"
    receipts.mkdir(parents=True)
    (receipts / f"x.json.9999999999.{uuid.uuid4()}.tmp").write_bytes(b"")
    (receipts / f"y.json.{_dead_pid()}.{uuid.uuid4()}.tmp").write_bytes(b"")
    done = project.nexus("inspect", "--json")
    assert json.loads(done.stdout)["strayTempFiles"] == 1
