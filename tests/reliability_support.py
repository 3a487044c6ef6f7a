"""Shared pieces of the reliability harnesses: a small project, CLI calls, state checks.

Used by test_crash_injection, test_concurrency, test_hostile_input and test_unsafe_files.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

from nexus_core.state import store

HOST_BACKEND = {"kind": "host", "id": "harness", "sessionId": "session-1"}
CHECK_SCRIPT = """# passes when the task's result file says done
while IFS= read -r line || [ -n "$line" ]; do
  case "$line" in *done*) exit 0 ;; esac
done < "$1/result.txt"
exit 1
"""
# Texts that only a crash of the implementation (not a refusal) would print.
RAW_ERROR = re.compile(
    r"Traceback|object has no attribute|not subscriptable|unhashable type|object is not iterable|"
    r"index out of range|KeyError|TypeError|ValueError|AttributeError|RecursionError|UnicodeDecodeError|"
    r"unsupported operand|not supported between|maximum recursion"
)


def task_plan(task_id: str, scope: str, checks: int = 1, max_attempts: int = 10) -> dict[str, Any]:
    return {
        "id": task_id,
        "objective": f"Produce {scope}/result.txt.",
        "acceptance": ["The result says done."],
        "dependsOn": [],
        "scope": [scope],
        "artifacts": [f"{scope}/result.txt"],
        "resources": ["checks/check.sh"],
        "checks": [
            {
                "id": f"check-{index}",
                "command": "/bin/sh",
                "args": ["checks/check.sh", scope],
                "cwd": ".",
                "timeoutMs": 30000,
            }
            for index in range(checks)
        ],
        "maxAttempts": max_attempts,
        "deadlineMs": 3600000,
        "idempotent": True,
        "authorizations": [f"Edit {scope}/."],
    }


def make_project(root: Path) -> Path:
    """A project with the verifier script; work files are written per task by ``add_work``."""
    (root / "checks").mkdir(parents=True, exist_ok=True)
    (root / "checks" / "check.sh").write_text(CHECK_SCRIPT)
    return root.resolve()


def add_work(root: Path, scope: str) -> None:
    (root / scope).mkdir(parents=True, exist_ok=True)
    (root / scope / "result.txt").write_text("done\n")


def plan_for(run_id: str, scopes: list[str], max_parallel: int = 32, checks: int = 1) -> dict[str, Any]:
    return {
        "id": run_id,
        "maxParallel": max_parallel,
        "config": {"language": "English"},
        "tasks": [task_plan(f"t{index}", scope, checks) for index, scope in enumerate(scopes)],
    }


def write_json(path: Path, value: Any) -> Path:
    path.write_text(json.dumps(value))
    return path


def cli_command(root: Path, *args: str, input_file: Path | None = None, plan: Path | None = None) -> list[str]:
    command = [sys.executable, "-m", "nexus_core.cli", *args, "--json", "-d", str(root)]
    if input_file is not None:
        command += ["--input", str(input_file)]
    if plan is not None:
        command += ["--plan", str(plan)]
    return command


def run_cli_json(
    root: Path, *args: str, input_file: Path | None = None, plan: Path | None = None
) -> tuple[int, Any, str]:
    """(exit code, parsed stdout, stderr) of one ``--json`` CLI call run to the end."""
    done = subprocess.run(cli_command(root, *args, input_file=input_file, plan=plan), capture_output=True, timeout=120)
    return done.returncode, parse_stdout(done.stdout), done.stderr.decode("utf-8", "replace")


def parse_stdout(raw: bytes) -> Any:
    try:
        return json.loads(raw.decode("utf-8"))
    except ValueError:
        return None


def is_run(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("sequence"), int) and "tasks" in value


def tree_bytes(root: Path) -> dict[str, tuple[int, int, bytes | str]]:
    """Every entry of ``.bmad-plus`` with its mode, owner and content (or link target)."""
    found: dict[str, tuple[int, int, bytes | str]] = {}
    base = root / ".bmad-plus"
    if not os.path.lexists(base):
        return found
    for directory, dirs, files in os.walk(base):
        for name in dirs + files:
            path = os.path.join(directory, name)
            info = os.lstat(path)
            content: bytes | str = b""
            if os.path.islink(path):
                content = os.readlink(path)
            elif os.path.isfile(path):
                content = Path(path).read_bytes()
            found[os.path.relpath(path, root)] = (info.st_mode, info.st_uid, content)
    return found


def load_all_runs(root: Path) -> dict[str, dict[str, Any]]:
    """Every run file of the project through the real loader (checksum and lifecycle checks)."""
    return {run_id: cast(dict[str, Any], store.load_run(str(root), run_id)) for run_id in store.list_run_ids(str(root))}


def latest_attempt(run: Mapping[str, Any], task_id: str) -> dict[str, Any] | None:
    task = next(t for t in run["tasks"] if t["id"] == task_id)
    return task["attempts"][-1] if task["attempts"] else None


def assert_contains(current: dict[str, Any], acknowledged: dict[str, Any]) -> None:
    """An acknowledged mutation is still in the current state: same or later history."""
    assert current["sequence"] >= acknowledged["sequence"], "sequence went backwards"
    if current["sequence"] == acknowledged["sequence"]:
        assert current == acknowledged, "same sequence, different state"
        return
    for now, then in zip(current["tasks"], acknowledged["tasks"], strict=True):
        now_ids = [a["id"] for a in now["attempts"]]
        then_ids = [a["id"] for a in then["attempts"]]
        assert now_ids[: len(then_ids)] == then_ids, f"attempt history of {now['id']} lost"
        for a_now, a_then in zip(now["attempts"], then["attempts"], strict=False):
            for key in ("verificationHistory", "reconciliations", "observations"):
                assert len(a_now[key]) >= len(a_then[key]), f"{key} of {a_now['id']} shrank"
            assert a_now["verificationRounds"] >= a_then["verificationRounds"]
        if then["integration"] == "accepted":
            assert now["integration"] == "accepted" and now["acceptedAt"] == then["acceptedAt"]
