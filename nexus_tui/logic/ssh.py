"""One host over OpenSSH: the ``ssh`` command line (``NEXUS_SSH_COMMAND``, split like git's
``GIT_SSH_COMMAND``, or ``ssh``), the options of one multiplexed connection per host (a
ControlMaster socket in a private 0700 directory), the remote command quoted word by word for
the remote shell, and ssh's own words when something fails.

The operator's ssh configuration (~/.ssh/config, keys, agent, known_hosts, ProxyJump) is the
engine: nothing here replaces it. What is forced on the command line (the first value ssh reads
wins) is only what the dashboard needs: no prompt (BatchMode), keep-alives, the private control
socket, and no forwarding of the agent, X11 or ports to a host that only runs ``nexus``.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import IO

from nexus_core.terminal import terminal_safe

SSH_COMMAND_VARIABLE = "NEXUS_SSH_COMMAND"
DEFAULT_REMOTE_NEXUS = "nexus"
# The master stays this long after its last session ends (a reconnect or a mutation reuses it);
# the dashboard ends it at exit (ssh -O exit).
CONTROL_PERSIST_SECONDS = 60
# ssh's own keep-alive: a silent peer is dropped after interval x count.
SERVER_ALIVE_INTERVAL_SECONDS = 5
SERVER_ALIVE_COUNT_MAX = 3
CONNECT_TIMEOUT_SECONDS = 15
# What is kept of ssh's (and the remote command's) stderr for a message: its last bytes.
ERROR_TAIL_BYTES = 4096
CLOSE_TIMEOUT_SECONDS = 10
INPUT_END = "NEXUS_INPUT_END"  # the here-document's delimiter (an input is one line of JSON: never it)
# Beyond ConnectTimeout, how long a first connection may take to authenticate and become the
# master before other commands start anyway (each then on a connection of its own).
MASTER_WAIT_EXTRA_SECONDS = 15


class RemoteSpecError(ValueError):
    """A ``--ssh HOST:PATH`` that cannot name a remote project (the message says why)."""


@dataclass(frozen=True)
class RemoteProject:
    """A project on another host: ``host`` as ssh takes it (user@host, an alias of the ssh
    configuration, an address), ``path`` there, and ``spec`` as the operator wrote it."""

    host: str
    path: str
    spec: str

    @property
    def label(self) -> str:
        """The tab's label: ``host:path`` (terminal-safe: the operator's text, yet shown)."""
        return terminal_safe(self.spec, one_line=True)

    @property
    def remote_path(self) -> str:
        """The path given to the remote nexus. A session starts in the remote home directory,
        and every word is quoted (no tilde expansion), so ``~/x`` is given as ``x``."""
        if self.path == "~":
            return "."
        if self.path.startswith("~/"):
            return self.path[2:] or "."
        return self.path


# user@[2001:db8::1]:path (an address in brackets, as scp writes it), then user@host:path.
_BRACKETED = re.compile(r"(?:(?P<user>[^@:\[\]]+)@)?\[(?P<address>[^\]]+)\]:(?P<path>.*)", re.DOTALL)
_PLAIN = re.compile(r"(?P<host>[^:\[\]]+):(?P<path>.*)", re.DOTALL)


def parse_remote(spec: str) -> RemoteProject:
    """``HOST:PATH`` (``user@host:path``, ``alias:~/path``, ``[2001:db8::1]:/srv/p``,
    ``user@[::1]:p``); RemoteSpecError when it is not one."""
    shown = f"--ssh {terminal_safe(spec, one_line=True)}"
    bracketed = _BRACKETED.fullmatch(spec)
    plain = _PLAIN.fullmatch(spec)
    if bracketed:
        user = bracketed["user"]
        host, path = (f"{user}@" if user else "") + bracketed["address"], bracketed["path"]
    elif plain:
        host, path = plain["host"], plain["path"]
    else:
        raise RemoteSpecError(f"{shown}: write HOST:PATH (an address with colons in brackets: [ADDRESS]:PATH).")
    if host.startswith("-") or host.endswith("@") or host.startswith("@"):
        raise RemoteSpecError(f"{shown}: HOST cannot start with '-' or have an empty user or host name.")
    if any(character.isspace() or not character.isprintable() for character in host):
        raise RemoteSpecError(f"{shown}: HOST cannot hold spaces or control characters.")
    if not path:
        raise RemoteSpecError(f"{shown}: PATH is empty (~ names the home directory).")
    if "\x00" in path:
        raise RemoteSpecError(f"{shown}: PATH cannot hold a NUL character (ssh cannot pass one).")
    return RemoteProject(host, path, spec)


def ssh_program(environ: Mapping[str, str] | None = None) -> list[str]:
    """The ssh command: ``NEXUS_SSH_COMMAND`` split like a shell would (e.g.
    ``ssh -F ./ssh_config``), else ``ssh``. ValueError when it cannot be split."""
    value = (os.environ if environ is None else environ).get(SSH_COMMAND_VARIABLE, "")
    if not value.strip():
        return ["ssh"]
    try:
        words = shlex.split(value)
    except ValueError as error:
        raise ValueError(f"{SSH_COMMAND_VARIABLE} cannot be split into words ({error}).") from None
    return words or ["ssh"]


class SshHost:
    """The ssh command lines for one host, sharing one multiplexed connection.

    The control socket lives in a directory made for this dashboard (``tempfile.mkdtemp``: a
    name nobody can predict, mode 0700), so no other user can reach the connection through it.
    ``close`` ends the master and removes the directory."""

    def __init__(
        self, host: str, remote_nexus: str = DEFAULT_REMOTE_NEXUS, environ: Mapping[str, str] | None = None
    ) -> None:
        self.host = host
        # The operator's command line for the remote shell (e.g. "~/.venv/bin/nexus" or
        # "python3 -m nexus_core.cli"): given as written; every word added after it is quoted.
        self.remote_nexus = remote_nexus.strip() or DEFAULT_REMOTE_NEXUS
        self.environ = dict(os.environ if environ is None else environ)
        self.program = ssh_program(self.environ)
        self.control_directory = tempfile.mkdtemp(prefix="nexus-ssh-")
        os.chmod(self.control_directory, 0o700)
        self._closed = False
        self._first_connection = threading.Lock()

    @property
    def control_path(self) -> str:
        return os.path.join(self.control_directory, "%C")  # ssh's hash of host, port, user

    def options(self) -> list[str]:
        return [
            "-o", "BatchMode=yes",
            "-o", "ControlMaster=auto",
            "-o", f"ControlPath={self.control_path}",
            "-o", f"ControlPersist={CONTROL_PERSIST_SECONDS}",
            "-o", f"ServerAliveInterval={SERVER_ALIVE_INTERVAL_SECONDS}",
            "-o", f"ServerAliveCountMax={SERVER_ALIVE_COUNT_MAX}",
            "-o", f"ConnectTimeout={CONNECT_TIMEOUT_SECONDS}",
            "-o", "ForwardAgent=no",
            "-o", "ForwardX11=no",
            "-o", "ClearAllForwardings=yes",
            "-T",
        ]  # fmt: skip

    def command_line(self, words: Sequence[str]) -> str:
        """The remote command: the remote nexus, then each word quoted for the remote shell (ssh
        joins its arguments into one line that the remote shell parses again)."""
        return " ".join([self.remote_nexus, *(shlex.quote(word) for word in words)])

    def stoppable_command_line(self, words: Sequence[str], with_input: bool) -> str:
        """The remote nexus with ``words`` under a POSIX sh that turns the end of its stdin into
        SIGINT for it (what Ctrl+C does to a local verify or launch: the check's or the child's
        process group is stopped, the core records it). ``with_input``: the first line of stdin
        is the action's JSON input (``--input -``, given on a here-document); the rest of stdin is
        only watched for its end.

        The shell becomes the remote nexus (``exec``: a foreground command, so SIGINT is not
        ignored as it is for a background one); a watcher in the background holds a copy of stdin
        (fd 3) and, at its end, sends SIGINT to that process. The watcher writes nowhere, so the
        session ends with the remote nexus."""
        read = "IFS= read -r input; " if with_input else ""
        given = f"3<&- <<{INPUT_END}\n$input\n{INPUT_END}\n" if with_input else "</dev/null 3<&-"
        script = (
            f"exec 3<&0; {read}(cat <&3 >/dev/null 2>&1; kill -INT $$ 2>/dev/null) >/dev/null 2>&1 & "
            f"exec {self.command_line(words)} {given}"
        )
        return f"sh -c {shlex.quote(script)}"

    def argv(self, words: Sequence[str], line: str | None = None) -> list[str]:
        """The local command that runs the remote nexus with ``words`` (or the remote command
        ``line``). ``--`` ends ssh's options, so no host can be read as one."""
        return [*self.program, *self.options(), "--", self.host, line or self.command_line(words)]

    def start(self, words: Sequence[str], line: str | None = None) -> subprocess.Popen[bytes]:
        """Run the remote nexus with ``words``: stdin, stdout and stderr are pipes. Its own
        session: a terminal's signals never reach it, and it never reads the terminal.

        While no master is up, one start at a time waits until the connection it opens is the
        master (its socket appears) or it ends: commands started together would each open a
        connection of their own ("ControlSocket ... already exists, disabling multiplexing")."""
        with self._first_connection:
            process = subprocess.Popen(
                self.argv(words, line),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=self.environ,
                start_new_session=True,
            )
            deadline = time.monotonic() + CONNECT_TIMEOUT_SECONDS + MASTER_WAIT_EXTRA_SECONDS
            while not self.master_socket() and process.poll() is None and time.monotonic() < deadline:
                time.sleep(0.02)
            return process

    def master_socket(self) -> bool:
        """Whether the control socket exists (a master is up, or was until it was killed)."""
        try:
            return bool(os.listdir(self.control_directory))
        except OSError:
            return False

    def close(self) -> None:
        """End the multiplexed connection (if one is up) and remove the control directory."""
        if self._closed:
            return
        self._closed = True
        if self.master_socket():
            with contextlib.suppress(OSError, subprocess.SubprocessError):
                subprocess.run(
                    [*self.program, "-o", f"ControlPath={self.control_path}", "-O", "exit", "--", self.host],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    env=self.environ,
                    timeout=CLOSE_TIMEOUT_SECONDS,
                )
        shutil.rmtree(self.control_directory, ignore_errors=True)


class ErrorTail:
    """The last ERROR_TAIL_BYTES of a stream (ssh's stderr), read by a thread to its end."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._stream = stream
        self._tail = b""
        self._thread = threading.Thread(target=self._read, name="ssh-stderr", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            while True:
                chunk = os.read(self._stream.fileno(), 65536)
                if not chunk:
                    return
                self._tail = (self._tail + chunk)[-ERROR_TAIL_BYTES:]

    def text(self, wait: float = 2.0) -> str:
        """What was read, terminal-safe and trimmed (waits up to ``wait`` s for its end)."""
        self._thread.join(wait)
        lines = self._tail.decode("utf-8", "replace").strip().splitlines()
        return terminal_safe(" ".join(line.strip() for line in lines if line.strip()), one_line=True)


def failure_words(host: str, status: int | None, stderr: str, remote_nexus: str) -> str:
    """Why a remote command ended, in ssh's own words (``stderr``, terminal-safe) and ours."""
    safe_host = terminal_safe(host, one_line=True)
    said = f": {stderr}" if stderr else ""
    if status == 255:
        return f"ssh {safe_host} failed{said or ' (exit 255)'}"
    if status == 127:
        return (
            f"the remote nexus was not found on {safe_host} ({terminal_safe(remote_nexus, one_line=True)}; "
            f"give its command with --remote-nexus){said}"
        )
    if status == 126:
        return f"the remote nexus on {safe_host} cannot be run ({terminal_safe(remote_nexus, one_line=True)}){said}"
    if status is None:
        return f"the remote nexus on {safe_host} did not end{said}"
    if status < 0:
        return f"ssh {safe_host} ended by signal {-status}{said}"
    return f"the remote nexus on {safe_host} exited with status {status}{said}"
