"""Running one verification check (SPEC 5.12a) with the minimal environment (SPEC 5.0.3)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from . import canonical
from .paths import directory_at
from .shapes import CheckDefinition, CheckReceipt, JsonObject
from .timeutil import now_iso

if TYPE_CHECKING:
    import subprocess

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


def run_check(
    root: str,
    check: CheckDefinition,
    attempt_id: str,
    environment: JsonObject,
    on_spawn: Callable[[subprocess.Popen[bytes] | None], None] | None = None,
) -> CheckReceipt:
    """Run one check without a shell; never raises for the child's own failures.

    ``on_spawn`` is told the child (and ``None`` once it has been reaped), so an operator's
    interrupt can stop exactly this child."""
    import selectors
    import subprocess

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
            )
        except OSError as spawn_error:
            error = f"spawn {check['command']} {spawn_error.strerror or spawn_error}"
        else:
            if on_spawn is not None:
                on_spawn(child)
            budget = OUTPUT_BUDGET
            deadline = time.monotonic() + check["timeoutMs"] / 1000
            selector = selectors.DefaultSelector()
            assert child.stdout is not None and child.stderr is not None
            selector.register(child.stdout, selectors.EVENT_READ, out_parts)
            selector.register(child.stderr, selectors.EVENT_READ, err_parts)
            open_streams = 2
            while open_streams:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    timed_out = True
                    break
                for key, _ in selector.select(timeout=remaining):
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
                        key.data.append(kept.decode("utf-8", "replace"))
            selector.close()
            if not timed_out:
                try:
                    wait_exited(child, max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    timed_out = True
            if timed_out:
                child.kill()
                child.wait()
                exit_code, signal_text = None, "SIGKILL"
            elif child.returncode < 0:
                signal_text = signal_name(-child.returncode)
            else:
                exit_code = child.returncode
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
        "termination": "owned-direct-child-only; descendant effects require inspection" if timed_out else None,
    }
