"""A real sshd on 127.0.0.1 for the remote tests: its own host key, config, authorized key and
client ssh_config in a temporary directory, nothing of the machine's ssh configuration read or
touched. The client side is ``NEXUS_SSH_COMMAND="ssh -F <tmp>/ssh_config"`` (as git takes
GIT_SSH_COMMAND); the remote ``nexus`` is this venv's (``REMOTE_NEXUS``).

Host aliases of the generated ssh_config:

- ``testhost``: the good one (key authorised, host key known);
- ``unknown-key-host``: the same server, an empty known_hosts (StrictHostKeyChecking yes);
- ``refused-key-host``: the same server, a key that is not authorised.

Without ``sshd`` the tests skip, except under ``CI=true`` (``.ci/run`` installs openssh-server
and openssh-client), where it is a failure.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

SSHD = "/usr/sbin/sshd"
IN_CI = os.environ.get("CI") == "true"
HOST = "testhost"
UNKNOWN_KEY_HOST = "unknown-key-host"
REFUSED_KEY_HOST = "refused-key-host"
# The remote nexus: this venv's interpreter (tests always run with the venv's python).
REMOTE_NEXUS = f"{shlex.quote(sys.executable)} -m nexus_core.cli"


def require_sshd() -> None:
    """Skip without sshd and ssh (locally), fail under CI=true."""
    missing = [name for name in (SSHD, "ssh", "ssh-keygen") if shutil.which(name) is None]
    if missing:
        why = f"missing: {', '.join(missing)}"
        if IN_CI:
            pytest.fail(f"{why} under CI=true; .ci/run installs openssh-server and openssh-client")
        pytest.skip(why)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _keygen(path: Path, comment: str) -> str:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
        check=True,
        capture_output=True,
    )
    return path.with_suffix(".pub").read_text().strip() if path.suffix else Path(f"{path}.pub").read_text().strip()


class SshServer:
    """One sshd (``sshd -f CONFIG -D -e``) and the client configuration that reaches it."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        os.chmod(directory, 0o700)
        self.port = free_port()
        self.user = pwd.getpwuid(os.getuid()).pw_name
        self.log_path = directory / "sshd.log"
        self.process: subprocess.Popen[bytes] | None = None
        host_public = _keygen(directory / "host_ed25519", "nexus-test-host")
        client_public = _keygen(directory / "client_ed25519", "nexus-test-client")
        _keygen(directory / "stranger_ed25519", "nexus-test-stranger")
        (directory / "authorized_keys").write_text(client_public + "\n")
        key_type, key_body = host_public.split()[:2]
        (directory / "known_hosts").write_text(f"[127.0.0.1]:{self.port} {key_type} {key_body}\n")
        (directory / "empty_known_hosts").write_text("")
        self.config_path = directory / "sshd_config"
        self.config_path.write_text(
            "\n".join(
                [
                    "ListenAddress 127.0.0.1",
                    f"Port {self.port}",
                    f"HostKey {directory / 'host_ed25519'}",
                    f"AuthorizedKeysFile {directory / 'authorized_keys'}",
                    f"PidFile {directory / 'sshd.pid'}",
                    "UsePAM no",
                    "StrictModes no",
                    "PasswordAuthentication no",
                    "KbdInteractiveAuthentication no",
                    "PubkeyAuthentication yes",
                    "PermitRootLogin prohibit-password",
                    "AllowTcpForwarding no",
                    "X11Forwarding no",
                    "PrintMotd no",
                    "LogLevel ERROR",
                    "MaxSessions 64",
                    "MaxStartups 64",
                    "",
                ]
            )
        )
        self.client_config = directory / "ssh_config"
        self.client_config.write_text(
            self._host_block(HOST, "client_ed25519", "known_hosts")
            + self._host_block(UNKNOWN_KEY_HOST, "client_ed25519", "empty_known_hosts")
            + self._host_block(REFUSED_KEY_HOST, "stranger_ed25519", "known_hosts")
        )

    def _host_block(self, alias: str, identity: str, known_hosts: str) -> str:
        return "\n".join(
            [
                f"Host {alias}",
                "    HostName 127.0.0.1",
                f"    Port {self.port}",
                f"    User {self.user}",
                f"    IdentityFile {self.directory / identity}",
                "    IdentitiesOnly yes",
                "    IdentityAgent none",
                f"    UserKnownHostsFile {self.directory / known_hosts}",
                "    GlobalKnownHostsFile /dev/null",
                "    StrictHostKeyChecking yes",
                "    UpdateHostKeys no",
                "    LogLevel ERROR",
                "",
            ]
        )

    @property
    def ssh_command(self) -> str:
        """The value of NEXUS_SSH_COMMAND for this server."""
        return f"ssh -F {shlex.quote(str(self.client_config))}"

    def env(self) -> dict[str, str]:
        """os.environ with NEXUS_SSH_COMMAND pointing at this server."""
        return {**os.environ, "NEXUS_SSH_COMMAND": self.ssh_command}

    def start(self) -> None:
        if os.geteuid() == 0:
            # sshd refuses to start without its privilege separation directory.
            os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
        log = open(self.log_path, "ab")  # noqa: SIM115 (sshd writes to it for its whole life)
        try:
            # Its own session: stop() ends the listener and every connection's child with it.
            self.process = subprocess.Popen(
                [SSHD, "-f", str(self.config_path), "-D", "-e"],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
            )
        finally:
            log.close()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"sshd exited at start: {self.log_path.read_text(errors='replace')}")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
                if sock.recv(4).startswith(b"SSH-"):
                    return
            time.sleep(0.05)
        raise RuntimeError(f"sshd did not listen on port {self.port}: {self.log_path.read_text(errors='replace')}")

    def stop(self) -> None:
        """Kill sshd and every connection it serves: each connection's sshd leads a session of
        its own, so the whole tree of the listener's descendants goes, found before it dies."""
        if self.process is None:
            return
        tree = _descendants(self.process.pid)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        for pid in tree:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.process.wait(timeout=30)
        self.process = None

    def ssh(self, *remote: str, host: str = HOST, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """Run a command line on the server through the test client configuration."""
        return subprocess.run(
            [*shlex.split(self.ssh_command), "-o", "BatchMode=yes", host, *remote],
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )


def _descendants(root: int) -> list[int]:
    """Every process below ``root`` (from /proc's parent links)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        parent = int(stat.rpartition(")")[2].split()[1])
        children.setdefault(parent, []).append(int(entry))
    found: list[int] = []
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            found.append(child)
            todo.append(child)
    return found


@contextlib.contextmanager
def running_sshd(directory: Path) -> Iterator[SshServer]:
    require_sshd()
    server = SshServer(directory)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def ssh_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshServer]:
    """A fresh sshd for one test (a test may stop and restart it)."""
    with running_sshd(tmp_path_factory.mktemp("sshd")) as server:
        yield server


@pytest.fixture(scope="module")
def shared_ssh_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshServer]:
    """One sshd for a module's tests that never stop it."""
    with running_sshd(tmp_path_factory.mktemp("sshd-shared")) as server:
        yield server
