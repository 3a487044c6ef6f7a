"""The ssh transport, the observe protocol's reader and the remote mutation runner, against a
real sshd on 127.0.0.1 (tests/ssh_kit.py): quoting, one multiplexed connection per host, ssh's
own words on failure, reconnecting with back-off, hostile remotes (garbage, another protocol,
silence, a 50 MB line) and a mutation whose input travels on stdin."""

from __future__ import annotations

import os
import stat
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from project_kit import Project, plan, task_def
from ssh_kit import (
    HOST,
    REFUSED_KEY_HOST,
    REMOTE_NEXUS,
    UNKNOWN_KEY_HOST,
    SshServer,
    _descendants,
    shared_ssh_server,
    ssh_server,
)

from nexus_core import observe_protocol as protocol
from nexus_core.errors import NexusError
from nexus_core.state.store import load_run
from nexus_tui.logic import remote
from nexus_tui.logic.remote import Connected, Lost, ObserverStream, Received, RemoteFailure, run_remote_action
from nexus_tui.logic.ssh import SshHost, parse_remote, ssh_program

__all__ = ["shared_ssh_server", "ssh_server"]  # the fixtures, imported for pytest

HOSTILE_NAMES = [
    "with space",
    'it\'s "quoted"',
    "$(touch PWNED)",
    "`touch PWNED`",
    "semi;touch PWNED",
    "glob*?[a]",
    "-d",
    "new\nline",
    "ünïcode ✓",
]


@pytest.fixture
def host(shared_ssh_server: SshServer) -> Iterator[SshHost]:
    ssh = SshHost(HOST, REMOTE_NEXUS, shared_ssh_server.env())
    yield ssh
    ssh.close()


def test_every_word_arrives_intact_and_inert(shared_ssh_server: SshServer, tmp_path: Path) -> None:
    """ssh joins its arguments into one line the remote shell parses again: each word is quoted,
    so spaces, quotes, $(...), backticks, ; and globs arrive as they were and run nothing."""
    canary = tmp_path / "PWNED"
    ssh = SshHost(HOST, "cd " + str(tmp_path) + " && printf '%s\\0'", shared_ssh_server.env())
    try:
        process = ssh.start(HOSTILE_NAMES)
        out, err = process.communicate(timeout=60)
    finally:
        ssh.close()
    assert (process.returncode, err) == (0, b"")
    assert out.decode().split("\0")[:-1] == HOSTILE_NAMES
    assert not canary.exists()


def test_ssh_command_comes_from_nexus_ssh_command_split_like_a_shell(shared_ssh_server: SshServer) -> None:
    assert ssh_program({}) == ["ssh"]
    assert ssh_program({"NEXUS_SSH_COMMAND": "ssh -F '/a dir/ssh config' -v"}) == [
        "ssh",
        "-F",
        "/a dir/ssh config",
        "-v",
    ]
    with pytest.raises(ValueError, match="NEXUS_SSH_COMMAND cannot be split"):
        ssh_program({"NEXUS_SSH_COMMAND": "ssh -F 'unterminated"})
    ssh = SshHost(HOST, "true", shared_ssh_server.env())
    try:
        argv = ssh.argv(["observe"])
        assert argv[: len(ssh_program(shared_ssh_server.env()))] == ssh_program(shared_ssh_server.env())
        assert argv[-3:] == ["--", HOST, "true observe"]  # '--': no host is read as an option
        for option in ("BatchMode=yes", "ControlMaster=auto", "ServerAliveInterval=5", "ServerAliveCountMax=3"):
            assert option in argv
        assert f"ControlPath={ssh.control_directory}/%C" in argv
    finally:
        ssh.close()


def test_a_path_with_spaces_in_nexus_ssh_command_works(shared_ssh_server: SshServer, tmp_path: Path) -> None:
    spaced = tmp_path / "a dir"
    spaced.mkdir()
    config = spaced / "ssh config"
    config.write_bytes(shared_ssh_server.client_config.read_bytes())
    env = {**os.environ, "NEXUS_SSH_COMMAND": f"ssh -F '{config}'"}
    ssh = SshHost(HOST, "echo", env)
    try:
        out, _ = ssh.start(["reached"]).communicate(timeout=60)
    finally:
        ssh.close()
    assert out == b"reached\n"


def _connections(server: SshServer) -> int:
    """The server's connections: one 'sshd: user@notty' process each, whatever its sessions."""
    count = 0
    for pid in _descendants(server.process.pid if server.process else 0):
        try:
            if b"@notty" in Path(f"/proc/{pid}/cmdline").read_bytes():
                count += 1
        except OSError:
            pass
    return count


def _sleeping(server: SshServer) -> int:
    return sum(
        1 for pid in _descendants(server.process.pid if server.process else 0) if _command(pid) == b"sleep\x003\x00"
    )


def _command(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def test_one_multiplexed_connection_per_host_in_a_private_directory(ssh_server: SshServer) -> None:
    ssh = SshHost(HOST, "sleep", ssh_server.env())
    started: list[Any] = []
    try:
        threads = [threading.Thread(target=lambda: started.append(ssh.start(["3"]))) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        deadline = time.monotonic() + 30
        while _sleeping(ssh_server) < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _sleeping(ssh_server) == 4  # four sessions run ...
        assert _connections(ssh_server) == 1  # ... on one connection
        for process in started:
            _, err = process.communicate(timeout=60)
            # None of ssh's multiplexing complaints ("ControlSocket ... disabling multiplexing",
            # "muxclient: ...", "Control socket connect"). The remote shell's own stderr shares
            # the channel and is not ssh's: this machine's root profile runs `pyenv init`, whose
            # rehash races between four sessions started at once ("pyenv: cannot rehash").
            assert process.returncode == 0, err
            assert not any(word in err for word in (b"ControlSocket", b"multiplexing", b"mux", b"Control socket")), err
        info = os.stat(ssh.control_directory)
        assert stat.S_IMODE(info.st_mode) == 0o700 and info.st_uid == os.getuid()
        assert len(os.listdir(ssh.control_directory)) == 1
    finally:
        ssh.close()
    assert not os.path.exists(ssh.control_directory)
    deadline = time.monotonic() + 30
    while _connections(ssh_server) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _connections(ssh_server) == 0  # close() ended the master


def test_parse_remote_specs() -> None:
    assert parse_remote("ops@build-1:/srv/project").host == "ops@build-1"
    assert parse_remote("build:~/p").remote_path == "p"
    assert parse_remote("build:~").remote_path == "."
    assert parse_remote("[2001:db8::1]:/srv/p").host == "2001:db8::1"
    assert parse_remote("ops@[::1]:a:b").host == "ops@::1"
    assert parse_remote("ops@[::1]:a:b").path == "a:b"
    assert parse_remote("alias:it's $(x)").path == "it's $(x)"
    for bad in ("nocolon", "-oProxyCommand=evil:/p", "host:", "@host:p", "user@:p", "ho st:p", "h\x1b:p"):
        with pytest.raises(ValueError, match="--ssh"):
            parse_remote(bad)


# ----------------------------------------------------------------- the protocol's reader


def _pipe_reader(limit: int) -> tuple[protocol.LineReader, int]:
    read_end, write_end = os.pipe()
    return protocol.LineReader(read_end, limit), write_end


def test_line_reader_lines_end_and_timeout() -> None:
    reader, write_end = _pipe_reader(100)
    os.write(write_end, b'{"a":1}\n{"b"')
    assert reader.readline(5) == b'{"a":1}'
    with pytest.raises(TimeoutError):
        reader.readline(0.2)
    os.write(write_end, b":2}\nlast")
    os.close(write_end)
    assert reader.readline(5) == b'{"b":2}'
    assert reader.readline(5) == b"last"
    assert reader.readline(5) is None


def test_line_reader_refuses_a_long_line_without_reading_it_whole() -> None:
    """A 50 MB line against a 1 MiB limit: refused once the limit is passed; the reader held at
    most the limit and a chunk, and read no further."""
    limit = 1024 * 1024
    reader, write_end = _pipe_reader(limit)
    written = [0]

    def flood() -> None:
        block = b"x" * 65536
        try:
            while written[0] < 50_000_000:
                written[0] += os.write(write_end, block)
        except OSError:
            pass  # the reader side closed

    writer = threading.Thread(target=flood, daemon=True)
    writer.start()
    with pytest.raises(protocol.LineTooLong, match="longer than 1 MiB"):
        reader.readline(30)
    os.close(reader.fd)
    writer.join(30)
    assert written[0] < limit + 4 * 65536 + 65536 * 16  # a pipe's buffer beyond what was read


def test_hello_of_another_protocol_names_both_versions() -> None:
    assert protocol.check_hello(b'{"type":"hello","protocol":1,"nexus":"0.1.0"}') == "0.1.0"
    with pytest.raises(protocol.ProtocolError) as refused:
        protocol.check_hello(b'{"type":"hello","protocol":2,"nexus":"9.0.0"}')
    assert "protocol 2" in refused.value.message and "protocol 1" in refused.value.message
    assert "9.0.0" in refused.value.message
    with pytest.raises(protocol.ProtocolError, match="not a nexus observer"):
        protocol.check_hello(b"\x1b]52;c;AAAA\x07Welcome!")


def test_backoff_doubles_up_to_its_cap() -> None:
    backoff = remote.Backoff(1, 8)
    assert [backoff.next() for _ in range(6)] == [1, 2, 4, 8, 8, 8]
    backoff.reset()
    assert backoff.next() == 1


# ----------------------------------------------------------------- the observer stream


class Collector:
    """What a stream delivers, for a test to wait on."""

    def __init__(self) -> None:
        self.events: list[Any] = []
        self._condition = threading.Condition()

    def __call__(self, event: Any) -> None:
        with self._condition:
            self.events.append(event)
            self._condition.notify_all()

    def wait_for(self, predicate: Callable[[list[Any]], Any], timeout: float = 60) -> Any:
        deadline = time.monotonic() + timeout
        with self._condition:
            while True:
                found = predicate(self.events)
                if found:
                    return found
                left = deadline - time.monotonic()
                assert left > 0, f"not seen within {timeout} s: {self.events}"
                self._condition.wait(left)

    def lost(self) -> list[Lost]:
        return [event for event in self.events if isinstance(event, Lost)]


def first_lost(events: list[Any]) -> Lost | None:
    return next((event for event in events if isinstance(event, Lost)), None)


def fake_nexus(tmp_path: Path, name: str, script: str) -> str:
    """An executable that stands for the remote nexus (it is given our words as arguments)."""
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(0o755)
    return str(path)


@pytest.fixture
def fast_reconnect(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(remote, "RECONNECT_FIRST_SECONDS", 0.2)
    monkeypatch.setattr(remote, "RECONNECT_MAX_SECONDS", 1.0)
    monkeypatch.setattr(remote, "HELLO_TIMEOUT_SECONDS", 3.0)


def stream(server: SshServer, remote_nexus: str, collector: Collector, host: str = HOST) -> ObserverStream:
    observer = ObserverStream(SshHost(host, remote_nexus, server.env()), ["/p"], collector)
    observer.start()
    return observer


def close(observer: ObserverStream) -> None:
    observer.stop()
    observer.ssh.close()


HELLO_LINE = """printf '{"type":"hello","protocol":1,"nexus":"x"}\\n'
"""
ECHO_OBSERVER = """\
printf '{"type":"hello","protocol":1,"nexus":"0.1.0-fake"}\\n'
printf '{"type":"snapshot","project":0,"args":"%s"}\\n' "$*"
while IFS= read -r line; do printf '{"type":"rescanned","echo":%s}\\n' "$line"; done
"""


def test_the_stream_says_hello_delivers_messages_and_carries_control_lines(
    shared_ssh_server: SshServer, tmp_path: Path, fast_reconnect: None
) -> None:
    collector = Collector()
    observer = stream(shared_ssh_server, fake_nexus(tmp_path, "echo-nexus", ECHO_OBSERVER), collector)
    try:
        assert (
            collector.wait_for(lambda events: [e for e in events if isinstance(e, Connected)])[0].version
            == "0.1.0-fake"
        )
        snapshot = collector.wait_for(lambda events: [e for e in events if isinstance(e, Received)])[0]
        assert snapshot.message == {"type": "snapshot", "project": 0, "args": "observe -d /p --json-lines"}
        assert observer.send(protocol.focus("release"))
        echoed = collector.wait_for(
            lambda events: [e for e in events if isinstance(e, Received) and e.message["type"] == "rescanned"]
        )
        assert echoed[0].message["echo"] == {"focus": "release", "project": 0}
    finally:
        close(observer)


@pytest.mark.parametrize(
    ("name", "script", "expected"),
    [
        (
            "garbage",
            "printf 'Welcome to build-1!\\033[2J\\n'; sleep 60\n",
            "not a nexus observer (its first line: 'Welcome to build-1!\\x1b[2J')",
        ),
        (
            "other-protocol",
            'printf \'{"type":"hello","protocol":7,"nexus":"9.9.9"}\\n\'; sleep 60\n',
            "the remote nexus 9.9.9 speaks observe protocol 7; this dashboard speaks protocol 1",
        ),
        ("silent", "exec sleep 600\n", "no answer from the remote nexus within 3 s"),
        (
            "huge-line",
            HELLO_LINE + "head -c 50000000 /dev/zero | tr '\\\\0' x; echo\n",
            "a line longer than 32 MiB",
        ),
        (
            "not-json",
            'printf \'{"type":"hello","protocol":1,"nexus":"x"}\\n{oops\\n\'; sleep 60\n',
            "not a JSON line: '{oops'",
        ),
    ],
)
def test_a_hostile_remote_is_a_clear_reason_and_no_hang(
    shared_ssh_server: SshServer, tmp_path: Path, fast_reconnect: None, name: str, script: str, expected: str
) -> None:
    collector = Collector()
    observer = stream(shared_ssh_server, fake_nexus(tmp_path, name, script), collector)
    try:
        lost = collector.wait_for(first_lost, timeout=120)
        assert expected in lost.reason
        assert lost.retry_in == 0.2
        collector.wait_for(lambda events: len([e for e in events if isinstance(e, Lost)]) >= 2, timeout=120)
    finally:
        close(observer)


@pytest.mark.parametrize(
    ("host", "remote_nexus", "expected"),
    [
        (UNKNOWN_KEY_HOST, REMOTE_NEXUS, "Host key verification failed."),
        (REFUSED_KEY_HOST, REMOTE_NEXUS, "Permission denied (publickey)."),
        (
            HOST,
            "no-such-nexus",
            "the remote nexus was not found on testhost (no-such-nexus; give its command with --remote-nexus)",
        ),
    ],
)
def test_ssh_failures_are_reported_in_ssh_s_own_words(
    shared_ssh_server: SshServer, fast_reconnect: None, host: str, remote_nexus: str, expected: str
) -> None:
    collector = Collector()
    observer = stream(shared_ssh_server, remote_nexus, collector, host=host)
    try:
        lost = collector.wait_for(first_lost)
        assert expected in lost.reason
        if remote_nexus == "no-such-nexus":
            assert "command not found" in lost.reason  # the remote shell's own words
    finally:
        close(observer)


def test_what_the_remote_says_on_stderr_reaches_the_reason_terminal_safe(
    shared_ssh_server: SshServer, tmp_path: Path, fast_reconnect: None
) -> None:
    """A remote that fails with escape sequences on stderr (a hostile shell profile, a broken
    nexus): its words are in the reason, shown visibly, never raw."""
    collector = Collector()
    script = "printf 'nexus: broken \\033]52;c;AAAA\\007 \\033[2J here\\n' >&2; exit 3\n"
    observer = stream(shared_ssh_server, fake_nexus(tmp_path, "loud", script), collector)
    try:
        lost = collector.wait_for(first_lost)
    finally:
        close(observer)
    assert "nexus: broken \\x1b]52;c;AAAA\\x07 \\x1b[2J here" in lost.reason
    assert not any(character in lost.reason for character in "\x1b\x07\n")


def test_a_dropped_connection_is_retried_with_backoff_and_comes_back(
    ssh_server: SshServer, tmp_path: Path, fast_reconnect: None
) -> None:
    collector = Collector()
    heartbeat = fake_nexus(
        tmp_path,
        "beating",
        'printf \'{"type":"hello","protocol":1,"nexus":"x"}\\n\'\n'
        'while true; do printf \'{"type":"heartbeat"}\\n\' || exit; sleep 1; done\n',
    )
    observer = stream(ssh_server, heartbeat, collector)
    try:
        collector.wait_for(lambda events: [e for e in events if isinstance(e, Connected)])
        ssh_server.stop()  # sshd and its connections (the multiplexed master's peer) are gone
        lost = collector.wait_for(first_lost)
        assert lost.since <= time.time()
        retries = collector.wait_for(lambda events: [e for e in events if isinstance(e, Lost)][2:])
        assert "Connection refused" in retries[0].reason  # ssh's words, while sshd is down
        assert [e.since for e in collector.lost()] == [lost.since] * len(collector.lost())  # one outage
        delays = [e.retry_in for e in collector.lost()]
        assert delays[:4] == [0.2, 0.4, 0.8, 1.0][: len(delays[:4])]
        ssh_server.start()
        collector.wait_for(lambda events: [e for e in events if isinstance(e, Connected)][1:])
    finally:
        close(observer)


# ----------------------------------------------------------------- remote mutations


@pytest.fixture
def remote_project(tmp_path: Path) -> Project:
    project = Project(tmp_path / "remote project $(touch PWNED) 'q'")
    project.create(plan("r1", task_def("a")))
    return project


def test_a_remote_record_lands_in_the_remote_state(host: SshHost, remote_project: Project, tmp_path: Path) -> None:
    attempt = remote_project.start("r1", "a")
    saved = run_remote_action(
        host,
        remote_project.dir,
        "record",
        "r1",
        "a",
        {
            "attemptId": attempt,
            "backend": {"kind": "host", "id": "tester", "sessionId": "s1"},
            "outcome": "completed",
            "summary": "from far away ✓",
        },
    )
    stored = load_run(remote_project.dir, "r1")
    latest = stored["tasks"][0]["attempts"][-1]
    assert (latest["execution"], latest["observations"][-1]["summary"]) == ("completed", "from far away ✓")
    assert saved["tasks"][0]["attempts"][-1]["id"] == attempt
    assert not list(tmp_path.rglob("PWNED"))


def test_a_remote_refusal_is_the_core_s_exact_message(host: SshHost, remote_project: Project) -> None:
    with pytest.raises(NexusError) as refused:
        run_remote_action(host, remote_project.dir, "verify", "r1", "a", None)
    assert refused.value.message == "Nexus: Verification requires completed, unaccepted, reconciled work."


def test_a_remote_verify_that_fails_returns_the_saved_run(host: SshHost, remote_project: Project) -> None:
    remote_project.start("r1", "a")
    attempt = remote_project.latest(load_run(remote_project.dir, "r1"), "a")
    remote_project.write_result("a", "nope\n")
    run_remote_action(
        host, remote_project.dir, "record", "r1", "a",
        {"attemptId": attempt["id"], "backend": attempt["backend"], "outcome": "completed", "summary": "s"},
    )  # fmt: skip
    saved = run_remote_action(host, remote_project.dir, "verify", "r1", "a", None)
    assert saved["tasks"][0]["attempts"][-1]["verification"]["status"] == "failed"


def test_a_missing_remote_nexus_fails_a_remote_action_clearly(
    shared_ssh_server: SshServer, remote_project: Project
) -> None:
    ssh = SshHost(HOST, "no-such-nexus", shared_ssh_server.env())
    try:
        with pytest.raises(RemoteFailure) as failed:
            run_remote_action(ssh, remote_project.dir, "accept", "r1", "a", None)
    finally:
        ssh.close()
    assert "the remote nexus was not found on testhost" in failed.value.message
    assert "command not found" in failed.value.message


def test_a_remote_verify_is_stopped_like_ctrl_c(host: SshHost, tmp_path: Path) -> None:
    """Stop on a remote verify: its stdin closes, the remote nexus gets SIGINT (Ctrl+C): the
    running check's group is stopped at once and the verification ends ambiguous."""
    project = Project(tmp_path / "slow")
    slow = task_def(
        "a", checks=[{"id": "slow", "command": "/bin/sleep", "args": ["600"], "cwd": ".", "timeoutMs": 300000}]
    )
    project.create(plan("r1", slow))
    project.completed("r1", "a")
    asked = threading.Event()
    stopper = threading.Timer(3.0, asked.set)
    stopper.start()
    saved = run_remote_action(host, project.dir, "verify", "r1", "a", None, should_stop=asked.is_set)
    verification = saved["tasks"][0]["attempts"][-1]["verification"]
    assert verification["status"] == "ambiguous"
    # Stopped by the interrupt, not by its timeout (which would say "timed out" and SIGKILL).
    error = verification["checks"][0].get("error") or ""
    assert error.startswith("Interrupted by the operator (SIGINT): the check's process group"), error
    assert verification["checks"][0].get("timedOut") is False


def test_a_remote_launch_takes_its_input_through_the_stoppable_wrapper(host: SshHost, tmp_path: Path) -> None:
    project = Project(tmp_path / "launch")
    (project.root / "workers").mkdir()
    (project.root / "workers" / "work.sh").write_text("mkdir -p out/p && echo ok > out/p/result.txt\n")
    (project.root / "inputs").mkdir()
    (project.root / "inputs" / "task.txt").write_text("Write ok.\n")
    execution = {"adapter": "command", "command": "/bin/sh", "args": ["workers/work.sh"], "input": "inputs/task.txt"}
    project.create(plan("r1", task_def("p", execution=execution, resources=["checks/check.sh", "workers/work.sh"])))
    saved = run_remote_action(host, project.dir, "launch", "r1", "p", {}, should_stop=lambda: False)
    receipt = saved["tasks"][0]["attempts"][-1]["process"]["receipt"]
    assert receipt["outcome"] == "completed"


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (
            '{"type":"snapshot","project":0,"snapshot":{"directory":1}}',
            "the remote sent a snapshot this dashboard cannot read",
        ),
        ('{"type":"snapshot","project":7,"snapshot":{}}', "a line for a project it was not asked for"),
        ('{"type":"change","project":0,"runs":[],"snapshot":{}}', "cannot read"),
    ],
)
def test_a_snapshot_line_that_does_not_fit_the_model_drops_the_connection(
    shared_ssh_server: SshServer,
    tmp_path: Path,
    fast_reconnect: None,
    monkeypatch: pytest.MonkeyPatch,
    line: str,
    expected: str,
) -> None:
    """A hello, then a line the dashboard cannot turn into a snapshot: refused in words, the
    connection dropped and retried; no snapshot is shown from it."""
    fake = fake_nexus(tmp_path, "bad-snapshot", HELLO_LINE + f"printf '%s\\n' '{line}'; sleep 60\n")
    monkeypatch.setenv("NEXUS_SSH_COMMAND", shared_ssh_server.ssh_command)
    changed: list[Any] = []
    fleet = remote.RemoteFleet(changed.append)
    link = fleet.add(parse_remote(f"{HOST}:/srv/p"), fake)
    fleet.start()
    try:
        deadline = time.monotonic() + 60
        while link.status.state != "lost" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert link.status.state == "lost"
        assert expected in (link.status.reason or "")
        assert link.snapshot is None
        assert link.refusal() is not None and "disconnected since" in (link.refusal() or "")
    finally:
        fleet.close()
