"""Running one verification check (SPEC 5.12a) with the minimal environment (SPEC 5.0.3)."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..paths import directory_at
from ..shapes import CheckDefinition, CheckReceipt, JsonObject
from ..state import canonical
from ..timeutil import now_iso

if TYPE_CHECKING:
    import subprocess

    from .process_group import GroupStop

POLICY = "minimal-local-v1"
INHERITED = ("PATH", "SYSTEMROOT", "WINDIR", "TEMP", "TMP", "TMPDIR")
FIXED = {
    "LANG": "C",
    "LC_ALL": "C",
    "TZ": "UTC",
    "PYTHONNOUSERSITE": "1",
    "PYTHONSAFEPATH": "1",
    "PYTHONDONTWRITEBYTECODE": "1",
    "NODE_V8_COVERAGE": "",
}
OUTPUT_BUDGET = 65536
# The reference's words are "owned-direct-child-only; ...": here the timeout kills the check's
# whole process group (process_group.py); what left the group, and every effect, needs a look.
TIMEOUT_TERMINATION = "owned-process-group-killed; descendant effects require inspection"


def _lookup(environ: dict[str, str], key: str) -> str | None:
    if key in environ:
        return environ[key]
    for name in canonical.js_sorted(environ):
        if name.upper() == key:
            return environ[name]
    return None


def check_environment(environ: dict[str, str] | None = None) -> JsonObject:
    source = dict(os.environ if environ is None else environ)
    values: dict[str, str] = {}
    for key in INHERITED:
        found = _lookup(source, key)
        if found is not None:
            values[key] = found
    values.update(FIXED)
    ordered = {k: values[k] for k in canonical.js_sorted(values)}
    return {"policy": POLICY, "values": ordered, "sha256": canonical.sha256_json(ordered)}


def signal_name(number: int) -> str:
    import signal

    try:
        return signal.Signals(number).name
    except ValueError:
        return f"SIG{number}"


def wait_exited(child: subprocess.Popen[bytes], timeout: float) -> None:
    """``child.wait(timeout)`` without its polling (it sleeps 1, 2, 4... ms between looks): on a
    system with process descriptors, sleep until the child has exited or ``timeout`` passed.
    Raises ``subprocess.TimeoutExpired`` as ``wait`` does."""
    import select
    import subprocess

    if child.returncode is not None:
        return
    try:
        pidfd = os.pidfd_open(child.pid)
    except (AttributeError, OSError):
        child.wait(timeout=timeout)
        return
    try:
        # Reaped in between (an interrupt's poll()): the pid may belong to another process now,
        # so the descriptor is not waited on.
        if child.returncode is not None:
            return
        ready, _, _ = select.select([pidfd], [], [], timeout)
    finally:
        os.close(pidfd)
    if not ready:
        raise subprocess.TimeoutExpired(child.args, timeout)
    child.wait()


class CheckStop:
    """An operator's request to stop the running check (Ctrl+C on the CLI, the dashboard's Stop),
    made from a signal handler or another thread. ``run_check`` looks at it every
    STOP_POLL_SECONDS and stops the check's whole process group (``process_group``); ``group``
    is that stop, for the receipt's words."""

    def __init__(self) -> None:
        self.requested = False
        self.group: GroupStop | None = None
        self.child: subprocess.Popen[bytes] | None = None

    def request(self) -> None:
        self.requested = True

    def force(self) -> None:
        """SIGKILL the running check's group now (a second Ctrl+C, before the forced exit)."""
        child, group = self.child, self.group
        if child is not None and group is not None and child.returncode is None:
            group.kill()


STOP_POLL_SECONDS = 0.05  # how soon a running check notices a stop request
Output = Callable[[str, str], None]  # (stream: "stdout" | "stderr", text as stored)


def run_check(
    root: str,
    check: CheckDefinition,
    attempt_id: str,
    environment: JsonObject,
    on_spawn: Callable[[subprocess.Popen[bytes] | None], None] | None = None,
    stop: CheckStop | None = None,
    on_output: Output | None = None,
) -> CheckReceipt:
    """Run one check without a shell, leading its own session; never raises for the child's own
    failures.

    ``on_spawn`` is told the child (and ``None`` once it has been reaped). ``stop``: once
    requested, the check's process group gets SIGTERM, then SIGKILL after the grace. The
    timeout SIGKILLs the whole group. ``on_output`` is given each captured piece of output as it
    is read (the text the receipt stores; its failures are ignored)."""
    import selectors
    import subprocess

    from .process_group import GroupStop

    started = now_iso()
    exit_code: int | None = None
    signal_text: str | None = None
    error: str | None = None
    timed_out = False
    truncated = False
    out_parts: list[str] = []
    err_parts: list[str] = []
    try:
        cwd = directory_at(root, check["cwd"])
        try:
            child = subprocess.Popen(
                [check["command"], *check["args"]],
                cwd=cwd,
                env=environment["values"],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                close_fds=True,
                start_new_session=True,  # its descendants are its process group: stopped together
            )
        except OSError as spawn_error:
            error = f"spawn {check['command']} {spawn_error.strerror or spawn_error}"
        else:
            group = GroupStop(child.pid)
            if stop is not None:
                stop.group, stop.child = group, child
            if on_spawn is not None:
                on_spawn(child)

            def stopping(now: float) -> None:
                if stop is not None and stop.requested:
                    group.step(now)

            budget = OUTPUT_BUDGET
            deadline = time.monotonic() + check["timeoutMs"] / 1000
            selector = selectors.DefaultSelector()
            assert child.stdout is not None and child.stderr is not None
            selector.register(child.stdout, selectors.EVENT_READ, (out_parts, "stdout"))
            selector.register(child.stderr, selectors.EVENT_READ, (err_parts, "stderr"))
            open_streams = 2
            while open_streams:
                now = time.monotonic()
                stopping(now)
                if group.pipes_abandoned(now):
                    break  # killed, yet something outside its group holds the pipes
                remaining = deadline - now
                if remaining <= 0:
                    timed_out = True
                    break
                wait = remaining if stop is None else min(remaining, STOP_POLL_SECONDS)
                for key, _ in selector.select(timeout=wait):
                    chunk = os.read(key.fd, 65536)
                    if not chunk:
                        selector.unregister(key.fileobj)
                        open_streams -= 1
                        continue
                    kept = chunk[:budget]
                    if len(kept) < len(chunk):
                        truncated = True
                    budget -= len(kept)
                    if kept:
                        # Per-chunk decoding, as the reference does.
                        parts, stream = key.data
                        text = kept.decode("utf-8", "replace")
                        parts.append(text)
                        if on_output is not None:
                            with contextlib.suppress(Exception):
                                on_output(stream, text)
            selector.close()
            while not timed_out:
                now = time.monotonic()
                stopping(now)
                remaining = deadline - now
                if remaining <= 0:
                    timed_out = True
                    break
                try:
                    wait_exited(child, remaining if stop is None else min(remaining, STOP_POLL_SECONDS))
                    break
                except subprocess.TimeoutExpired:
                    continue
            if timed_out:
                group.kill()
                child.wait()
                exit_code, signal_text = None, "SIGKILL"
            elif child.returncode < 0:
                signal_text = signal_name(-child.returncode)
            else:
                exit_code = child.returncode
            # A stopped check's descendants that outlived it (TERM trapped, pipes closed).
            group.finish()
            if stop is not None:
                stop.child = None
            child.stdout.close()
            child.stderr.close()
            if on_spawn is not None:
                on_spawn(None)
    except Exception as failure:
        error = str(failure)
    stdout, stderr = "".join(out_parts), "".join(err_parts)
    return {
        "id": check["id"],
        "attemptId": attempt_id,
        "command": check["command"],
        "commandHash": check["commandHash"],
        "args": list(check["args"]),
        "cwd": check["cwd"],
        "timeoutMs": check["timeoutMs"],
        "environment": canonical.copy(environment),
        "startedAt": started,
        "endedAt": now_iso(),
        "exitCode": exit_code,
        "signal": signal_text,
        "error": error,
        "timedOut": timed_out,
        "stdout": stdout,
        "stderr": stderr,
        "outputTruncated": truncated,
        "outputHash": canonical.sha256_text(stdout + "\x00" + stderr),
        "evidenceClass": "runtime-command",
        "termination": TIMEOUT_TERMINATION if timed_out else None,
    }
