"""Projects with process tasks for the launch/collect tests: real worker scripts, real plans,
driven through the `nexus` CLI (subprocesses) or the core API."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, cast

from nexus_core import engine

CLI = [sys.executable, "-m", "nexus_core.cli"]

# One worker for every `command` task; MODE picks the behaviour. Plain sh builtins and
# `exec` so that SIGTERM reaches the program that holds the pipes.
WORKER = r"""# worker.sh TASK MODE
task="$1"
mode="$2"
dir="out/$task"
case "$mode" in
  ok)
    mkdir -p "$dir"
    cat > "$dir/stdin.txt"
    printf 'ok\n' > "$dir/result.txt"
    echo "worker $task done"
    echo "worker $task note" >&2
    exit 0 ;;
  env)
    mkdir -p "$dir"
    cat > /dev/null
    printf 'ok\n' > "$dir/result.txt"
    exec env ;;
  fail)
    cat > /dev/null
    echo "worker $task failed" >&2
    exit 3 ;;
  blocked)
    cat > /dev/null
    echo "approval required" >&2
    exit 77 ;;
  slow)
    cat > /dev/null
    echo "worker $task waiting"
    exec sleep 60 ;;
  stubborn)
    cat > /dev/null
    echo "worker $task ignores SIGTERM"
    trap '' TERM
    exec sleep 60 ;;
  detach)
    cat > /dev/null
    sleep 3 &
    echo "worker $task left a descendant holding the pipes"
    exit 0 ;;
  loud)
    cat > /dev/null
    i=0
    while [ $i -lt 200 ]; do
      echo "0123456789012345678901234567890123456789"
      i=$((i + 1))
    done
    exit 0 ;;
  pause)
    cat > /dev/null
    sleep "$3"
    mkdir -p "$dir"
    printf 'ok\n' > "$dir/result.txt"
    echo "worker $task done after $3 s"
    exit 0 ;;
  flaky)
    cat > /dev/null
    mkdir -p "$dir"
    if [ -f "$dir/first-try.txt" ]; then
      printf 'ok\n' > "$dir/result.txt"
      exit 0
    fi
    printf 'failed once\n' > "$dir/first-try.txt"
    exit 3 ;;
esac
echo "unknown mode $mode" >&2
exit 2
"""

CHECK = r"""# check.sh TASK: out/TASK/result.txt must contain ok
grep -q ok "out/$1/result.txt"
"""

# A fake Codex CLI: the task packet (stdin) names the scenario; it prints Codex JSONL events.
FAKE_CODEX = r"""#!/bin/sh
packet=$(cat)
case "$packet" in
  *scenario:completed*)
    mkdir -p out/cx
    printf 'ok\n' > out/cx/result.txt
    echo '{"type":"thread.started","thread_id":"thread-1"}'
    echo '{"type":"turn.started"}'
    usage='"output_tokens":7,"input_tokens":120,"cached_input_tokens":64,"reasoning_tokens":5'
    echo "{\"type\":\"turn.completed\",\"usage\":{$usage}}"
    printf 'home=%s args=%s\n' "$HOME" "$*" >&2
    exit 0 ;;
  *scenario:approval*)
    echo '{"type":"thread.started","thread_id":"thread-2"}'
    echo '{"type":"turn.failed","error":{"code":"approval_required","message":"needs approval"}}'
    exit 1 ;;
  *scenario:turn-failed*)
    echo '{"type":"thread.started","thread_id":"thread-3"}'
    echo '{"type":"turn.failed","error":{"message":"model error"}}'
    exit 1 ;;
  *scenario:garbage*)
    echo '{"type":"thread.started","thread_id":"thread-4"}'
    echo 'not json'
    exit 0 ;;
  *scenario:array*)
    echo '[1,2]'
    exit 0 ;;
  *scenario:no-turn*)
    echo '{"type":"thread.started","thread_id":"thread-5"}'
    exit 0 ;;
  *scenario:no-thread*)
    echo '{"type":"turn.completed"}'
    exit 0 ;;
esac
exit 9
"""


def write(path: Path, text: str, mode: int | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    if mode is not None:
        os.chmod(path, mode)


def make_project(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    write(root / "workers" / "worker.sh", WORKER)
    write(root / "checks" / "check.sh", CHECK)
    write(root / "tools" / "fake-codex", FAKE_CODEX, 0o700)
    write(root / "briefs" / "common.md", "Common rules.\nStay in your scope.\n")
    return root.resolve()


def command_task(task_id: str, mode: str, *extra_args: str, **overrides: Any) -> dict[str, Any]:
    execution: dict[str, Any] = {
        "adapter": "command",
        "command": "/bin/sh",
        "args": ["workers/worker.sh", task_id, mode, *extra_args],
        "input": f"briefs/{task_id}.md",
        "resources": ["workers/worker.sh"],
    }
    execution.update(overrides.pop("execution", {}))
    definition: dict[str, Any] = {
        "id": task_id,
        "objective": f"Run the {mode} worker for {task_id}.",
        "scope": [f"out/{task_id}"],
        "artifacts": [f"out/{task_id}/result.txt"],
        "resources": ["checks/check.sh"],
        "checks": [{"id": "content", "command": "/bin/sh", "args": ["checks/check.sh", task_id], "timeoutMs": 10000}],
        "execution": execution,
    }
    definition.update(overrides)
    return definition


def codex_task(task_id: str, scenario: str, **execution: Any) -> dict[str, Any]:
    return {
        "id": task_id,
        "objective": f"Codex scenario {scenario}.",
        "scope": ["out/cx"] if scenario == "completed" else [f"out/{task_id}"],
        "artifacts": ["out/cx/result.txt"] if scenario == "completed" else [f"out/{task_id}/result.txt"],
        "resources": ["checks/check.sh"],
        "checks": [
            {
                "id": "content",
                "command": "/bin/sh",
                "args": ["checks/check.sh", "cx" if scenario == "completed" else task_id],
                "timeoutMs": 10000,
            }
        ],
        "execution": {"adapter": "codex-exec", "command": "", "input": f"briefs/{task_id}.md", **execution},
    }


def create(root: Path, run_id: str, tasks: list[dict[str, Any]], max_parallel: int = 8) -> dict[str, Any]:
    for task in tasks:
        execution = task.get("execution")
        if execution:
            brief = root / execution["input"]
            if not brief.exists():
                scenario = task["objective"].split()[-1].rstrip(".")
                write(brief, f"Task {task['id']}.\nscenario:{scenario}\n")
            if execution["adapter"] == "codex-exec" and not execution["command"]:
                execution["command"] = str(root / "tools" / "fake-codex")
    return cast(
        dict[str, Any], engine.create_run(str(root), {"id": run_id, "maxParallel": max_parallel, "tasks": tasks})
    )


def cli(root: Path, *args: str, input_value: Any = None, tmp: Path | None = None) -> tuple[int, Any, str]:
    """Run `nexus ARGS --json -d ROOT`; returns (exit code, parsed stdout, stderr)."""
    command = [*CLI, *args, "--json", "-d", str(root)]
    if input_value is not None:
        folder = tmp or root.parent
        path = folder / f"input-{time.monotonic_ns()}.json"
        path.write_text(json.dumps(input_value), encoding="utf-8")
        command += ["--input", str(path)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    try:
        parsed = json.loads(done.stdout) if done.stdout.strip() else None
    except json.JSONDecodeError:
        parsed = done.stdout
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, parsed, done.stderr


def cli_retrying(root: Path, *args: str, input_value: Any = None, seconds: float = 20.0) -> tuple[int, Any, str]:
    """A client that retries while writer.lock is briefly taken (e.g. by a heartbeat)."""
    end = time.monotonic() + seconds
    while True:
        code, result, err = cli(root, *args, input_value=input_value)
        busy = isinstance(result, dict) and "owns writer.lock" in str(result.get("error"))
        if not busy or time.monotonic() > end:
            return code, result, err
        time.sleep(0.05)


def spawn_cli(root: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*CLI, *args, "--json", "-d", str(root)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def state(root: Path, run_id: str) -> dict[str, Any]:
    raw = (root / ".bmad-plus" / "nexus" / "runs" / f"{run_id}.json").read_text(encoding="utf-8")
    return json.loads(raw)["run"]  # type: ignore[no-any-return]


def latest(root: Path, run_id: str, task_id: str) -> dict[str, Any]:
    task = next(t for t in state(root, run_id)["tasks"] if t["id"] == task_id)
    return task["attempts"][-1]  # type: ignore[no-any-return]


def wait_for(predicate: Callable[[], Any], seconds: float = 20.0, what: str = "condition") -> Any:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            value = predicate()
        except (FileNotFoundError, json.JSONDecodeError, StopIteration, IndexError, KeyError):
            value = None
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def wait_running(root: Path, run_id: str, task_id: str) -> dict[str, Any]:
    """The attempt once its child is spawned and acknowledged."""

    def spawned() -> dict[str, Any] | None:
        attempt = latest(root, run_id, task_id)
        process = attempt.get("process") or {}
        return attempt if process.get("status") == "running" and process.get("childPid") else None

    return wait_for(spawned, what=f"{run_id}/{task_id} to be running")  # type: ignore[no-any-return]


def identity(attempt: Mapping[str, Any]) -> dict[str, Any]:
    return {"attemptId": attempt["id"], "backend": attempt["backend"]}


def pid_alive(process_id: int) -> bool:
    from nexus_core.hostinfo import pid_alive as alive

    return alive(process_id)


def worker_waiting(process_id: int) -> bool:
    """Whether a "slow" worker reached its sleep, past its one line to the supervisor's stdout
    pipe: a supervisor killed before that write would take the worker with it (SIGPIPE)."""
    try:
        return Path(f"/proc/{process_id}/comm").read_text().strip() == "sleep"
    except OSError:
        return False


def kill_quietly(process_id: int | None) -> None:
    import signal

    if process_id:
        with contextlib.suppress(ProcessLookupError):
            os.kill(process_id, signal.SIGKILL)
