"""Hostile input: plan files and --input files for every action.

Whatever the bytes: a result or a clean refusal (``NexusError`` through the library; exit 1 and
``Nexus: ...`` through the CLI), never a traceback or a raw runtime error text, and a refused
input leaves the ``.bmad-plus`` tree byte-identical (modes and owners included).

Most examples go through the library (``inputs.read_input_file`` and the engine functions, the
CLI's own path); a smaller set through the real CLI subprocess. ``NEXUS_LONG=1`` runs more.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reliability_support import (
    HOST_BACKEND,
    RAW_ERROR,
    add_work,
    is_run,
    latest_attempt,
    make_project,
    plan_for,
    run_cli_json,
    tree_bytes,
    write_json,
)

from nexus_core import engine
from nexus_core.backend import process
from nexus_core.cli.inputs import read_input_file
from nexus_core.errors import NexusError
from nexus_core.state import locks, store

LONG = os.environ.get("NEXUS_LONG") == "1"
LIBRARY_EXAMPLES = 400 if LONG else 40
CLI_EXAMPLES = 60 if LONG else 8
HYPOTHESIS = settings(
    max_examples=LIBRARY_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)

# ----------------------------------------------------------------- the project under attack


class Project:
    """A run with one running attempt (t0) and one untouched task (t1), restored per example."""

    def __init__(self, base: Path) -> None:
        self.root = make_project(base / "project")
        self.inputs = base / "inputs"
        self.inputs.mkdir()
        for scope in ("work/a", "work/b"):
            add_work(self.root, scope)
        evil = self.root / "evil"
        evil.mkdir()
        (evil / "plain.txt").write_text("x")
        os.symlink("/etc", evil / "link")
        os.symlink("plain.txt", evil / "file-link")
        os.mkfifo(evil / "fifo")
        self.plan = plan_for("r", ["work/a", "work/b"])
        engine.create_run(str(self.root), self.plan)
        engine.start_task(str(self.root), "r", "t0", {"backend": HOST_BACKEND})
        run = store.load_run(str(self.root), "r")
        attempt = latest_attempt(run, "t0")
        assert attempt is not None
        self.attempt_id = attempt["id"]
        self.template = base / "template"
        shutil.copytree(self.root / ".bmad-plus", self.template, symlinks=True)
        self.count = 0

    def restore(self) -> dict[str, Any]:
        shutil.rmtree(self.root / ".bmad-plus")
        shutil.copytree(self.template, self.root / ".bmad-plus", symlinks=True)
        return tree_bytes(self.root)

    def file(self, data: bytes) -> Path:
        self.count += 1
        path = self.inputs / f"input-{self.count}.json"
        path.write_bytes(data)
        return path

    def bound(self) -> dict[str, Any]:
        return {"attemptId": self.attempt_id, "backend": dict(HOST_BACKEND)}


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Project:
    return Project(tmp_path_factory.mktemp("hostile"))


def action_calls(project: Project) -> dict[str, Callable[[dict[str, Any]], Any]]:
    root = str(project.root)
    return {
        "create": lambda value: engine.create_run(root, value),
        "start": lambda value: engine.start_task(root, "r", "t1", value),
        "retry": lambda value: engine.retry_task(root, "r", "t0", value),
        "record": lambda value: engine.record_attempt(root, "r", "t0", value),
        "reconcile": lambda value: engine.reconcile_attempt(root, "r", "t0", value),
        "cancel": lambda value: engine.cancel_task(root, "r", "t0", value),
        "launch": lambda value: process.launch_task(root, "r", "t1", value),
        "collect": lambda value: process.collect_task(root, "r", "t0", value),
        "recover-lock": lambda value: locks.recover_lock(root, value),
    }


def valid_input(project: Project, action: str) -> dict[str, Any]:
    bound = project.bound()
    return {
        "create": dict(project.plan, id="fresh"),
        "start": {"backend": dict(HOST_BACKEND)},
        "retry": {"backend": dict(HOST_BACKEND)},
        "record": {**bound, "outcome": "completed", "summary": "Done.", "exitCode": 0},
        "reconcile": {**bound, "outcome": "failed", "ownerStopped": True, "summary": "Seen stopped."},
        "cancel": {**bound, "reason": "Stop."},
        "launch": {"retry": False},
        "collect": bound,
        "recover-lock": {"ownerStopped": True, "note": "Stopped.", "expectedHash": "0" * 64},
    }[action]


# ----------------------------------------------------------------- strategies

HOSTILE_PATHS = [
    "../outside",
    "/etc/passwd",
    "work/../../x",
    "./work/a",
    "work//a",
    "work/a/",
    "C:\\windows",
    "aux.c",
    "con",
    "a\x00b",
    ".bmad-plus/nexus/runs",
    ".git/config",
    "evil/link",
    "evil/link/passwd",
    "evil/file-link",
    "evil/fifo",
    "evil",
    "work/a/result.txt",
    " ",
    "trailing. ",
    "\u202egnp.exe",
    "~/x",
    "%2e%2e/x",
]
HUGE_NUMBERS = [10**400, -(10**400), 2**53 + 1, 2**63, -1, 0, 1e308, 5e-324, 1.5, 10**30]
surrogates = st.integers(0xD800, 0xDFFF).map(chr)
any_text = st.text(st.characters(blacklist_categories=[]), max_size=40) | st.builds(
    lambda parts: "".join(parts), st.lists(surrogates | st.sampled_from(["a", "\x00", "\u00e9", "\U0001f600"]))
)
long_text = st.integers(1, 300_000).map(lambda n: "x" * n)
scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.sampled_from(HUGE_NUMBERS)
    | st.floats(allow_nan=False, allow_infinity=False)
    | any_text
    | long_text
    | st.sampled_from(HOSTILE_PATHS)
)
json_values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(any_text, children, max_size=4),
    max_leaves=12,
)


def deep(depth: int, leaf: Any) -> Any:
    value = leaf
    for index in range(depth):
        value = [value] if index % 2 else {"k": value}
    return value


# Deeper nesting than json.dumps can write goes through raw bytes (raw_bytes below).
deep_values = st.builds(deep, st.integers(50, 600), scalars)


@st.composite
def mutated(draw: st.DrawFn, base: dict[str, Any]) -> Any:
    """A valid-shaped input with some fields (top level or nested) made hostile."""
    if draw(st.integers(0, 9)) == 0:
        return draw(json_values | deep_values)
    value = json.loads(json.dumps(base))
    for _ in range(draw(st.integers(1, 4))):
        target = value
        # Walk into a nested dict or list sometimes (plan tasks, checks, backend...).
        for _ in range(draw(st.integers(0, 3))):
            children = [
                k
                for k, v in (target.items() if isinstance(target, dict) else enumerate(target))
                if isinstance(v, dict | list) and v
            ]
            if not children:
                break
            target = target[draw(st.sampled_from(children))]
        replacement = draw(json_values | deep_values | st.sampled_from(HOSTILE_PATHS))
        if isinstance(target, dict):
            key = draw(st.sampled_from([*target.keys(), "unexpected"]) if target else st.just("unexpected"))
            if draw(st.booleans()) or not target:
                target[key] = replacement
            else:
                target.pop(key, None)
        elif isinstance(target, list) and target:
            target[draw(st.integers(0, len(target) - 1))] = replacement
    return value


def encode(value: Any) -> bytes:
    # ensure_ascii turns lone surrogates into \\udXXX escapes, as a hostile file would carry them.
    return json.dumps(value, ensure_ascii=True, allow_nan=False).encode("ascii")


raw_bytes = st.one_of(
    st.binary(max_size=200),
    st.sampled_from(
        [
            b"",
            b"   \n",
            b"\xef\xbb\xbf{}",
            b'{"a": "\xff\xfe"}',
            b'{"a": "\x00"}',
            b'{"a": "\\u0000"}',
            b'{"a": "\\ud800"}',
            b'{"a": "\\udc00x\\ud83d"}',
            b"[" * 100_000,
            b'{"k":' * 5000 + b"1" + b"}" * 5000,
            b"[" * 3000 + b"]" * 3000,
            b'{"a": ' + b"9" * 5000 + b"}",
            b'{"a": 1e400}',
            b'{"a": NaN}',
            b'{"a": Infinity}',
            b'{"a": 1, "a": 2}',
            b"null",
            b"[]",
            b'"text"',
            b"{" + b'"k": 1,' * 10 + b"}",
            b"{}" + b" " * (1 << 20),
        ]
    ),
)

# ----------------------------------------------------------------- library


def attempt_library(project: Project, action: str, data: bytes) -> None:
    before = project.restore()
    path = project.file(data)
    option = "--plan" if action == "create" else "--input"
    root = str(project.root)
    sequence = store.load_run(root, "r")["sequence"]
    try:
        value = read_input_file(str(path), option)
        result = action_calls(project)[action](value)
    except NexusError as error:
        assert not RAW_ERROR.search(error.message), error.message
        assert error.message.strip(), "empty refusal"
        assert tree_bytes(project.root) == before, f"refused {action} changed .bmad-plus: {error.message}"
        return
    # Accepted: one new revision, stored exactly as returned; every run still loads with its
    # checksum, and no lock or temporary file is left behind.
    assert action != "recover-lock", "recover-lock accepted although no writer.lock exists"
    assert is_run(result)
    if action == "create":
        assert result["id"] != "r" and result["sequence"] == 1
    else:
        assert result["id"] == "r" and result["sequence"] == sequence + 1
    assert store.load_run(root, result["id"]) == result
    for run_id in store.list_run_ids(root):
        store.load_run(root, run_id)
    assert store.list_temp_files(root) == []
    assert not os.path.lexists(project.root / ".bmad-plus/nexus/writer.lock")


ACTIONS = ["create", "start", "retry", "record", "reconcile", "cancel", "launch", "collect", "recover-lock"]


@pytest.mark.parametrize("action", ACTIONS)
@HYPOTHESIS
@given(data=st.data())
def test_library_refuses_hostile_values_cleanly(project: Project, action: str, data: st.DataObject) -> None:
    value = data.draw(mutated(valid_input(project, action)))
    attempt_library(project, action, encode(value))


@pytest.mark.parametrize("action", ["create", "record", "recover-lock"])
@HYPOTHESIS
@given(raw=raw_bytes)
def test_library_refuses_hostile_bytes_cleanly(project: Project, action: str, raw: bytes) -> None:
    attempt_library(project, action, raw)


def test_valid_inputs_are_accepted(project: Project) -> None:
    """The strategies start from inputs that work, so refusals are about the hostile part."""
    for action in ("create", "record", "cancel", "reconcile"):
        project.restore()
        result = action_calls(project)[action](valid_input(project, action))
        assert is_run(result)


# ----------------------------------------------------------------- CLI


def special_inputs(project: Project) -> dict[str, Path]:
    folder = project.inputs / "special"
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir()
    files = {
        "empty": b"",
        "invalid-utf8": b'{"a": "\xc3\x28"}',
        "nul": b'{"a": 1}\x00',
        "bom": b"\xef\xbb\xbf{}",
        "surrogate": b'{"summary": "\\udfff"}',
        "deep": b"[" * 200_000,
        "huge-number": b'{"exitCode": ' + b"9" * 6000 + b"}",
        "over-limit": b'{"a": "' + b"x" * (1 << 20) + b'"}',
        "not-object": b"[1, 2]",
    }
    paths = {name: folder / name for name in files}
    for name, data in files.items():
        paths[name].write_bytes(data)
    os.mkfifo(folder / "fifo")
    paths["fifo"] = folder / "fifo"
    paths["directory"] = folder
    valid = folder / "valid.json"
    valid.write_text("{}")
    os.symlink(valid, folder / "symlink")
    paths["symlink"] = folder / "symlink"
    paths["missing"] = folder / "missing.json"
    paths["device"] = Path("/dev/zero")
    paths["traversal"] = folder / ".." / ".." / ".." / ".." / ".." / ".." / ".." / "etc" / "passwd"
    return paths


def assert_clean_cli_refusal(project: Project, before: dict[str, Any], command: list[str]) -> str:
    done = subprocess.run(command, capture_output=True, timeout=60)
    stderr = done.stderr.decode("utf-8", "replace")
    assert done.returncode == 1, (command, done.stdout, stderr)
    assert "Traceback" not in stderr
    assert not done.stdout
    # One refusal line, then (issue 23) at most our guidance: a hint, never a dump.
    assert stderr.startswith("Nexus: ") and stderr.endswith("\n") and stderr.count("\n") <= 2, stderr
    assert not RAW_ERROR.search(stderr), stderr
    assert tree_bytes(project.root) == before
    return stderr


@pytest.mark.parametrize(
    "action",
    ["create", "record", "start", "reconcile", "cancel", "retry", "recover-lock", "launch", "collect"],
)
def test_cli_refuses_hostile_files_cleanly(project: Project, action: str) -> None:
    paths = special_inputs(project)
    names = sorted(paths) if action in ("create", "record") else ["fifo", "invalid-utf8", "deep", "symlink"]
    option = "--plan" if action == "create" else "--input"
    args = [action] if action in ("create", "recover-lock") else [action, "r", "t0"]
    for name in names:
        before = project.restore()
        command = [sys.executable, "-m", "nexus_core.cli", *args, option, str(paths[name]), "-d", str(project.root)]
        message = assert_clean_cli_refusal(project, before, command)
        if name in ("fifo", "directory", "device", "symlink"):
            assert "regular JSON file" in message


@settings(max_examples=CLI_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_cli_hostile_values_exit_0_or_1_without_traceback(project: Project, data: st.DataObject) -> None:
    action = data.draw(st.sampled_from(["create", "record", "reconcile", "cancel", "start"]))
    value = data.draw(mutated(valid_input(project, action)))
    before = project.restore()
    path = project.file(encode(value))
    if action == "create":
        code, out, err = run_cli_json(project.root, "create", plan=path)
    else:
        task = "t1" if action == "start" else "t0"
        code, out, err = run_cli_json(project.root, action, "r", task, input_file=path)
    assert code in (0, 1) and "Traceback" not in err and not err, (code, err)
    if code == 1:
        assert isinstance(out, dict) and out["status"] == "error", out
        assert not RAW_ERROR.search(out["error"]), out["error"]
        assert tree_bytes(project.root) == before
    else:
        assert is_run(out)


def test_cli_plan_paths_outside_the_project_are_refused(project: Project) -> None:
    for hostile in ["../outside", "/etc", "evil/link", "evil/fifo", ".bmad-plus/nexus/runs"]:
        plan = json.loads(json.dumps(project.plan))
        plan["id"] = "fresh"
        plan["tasks"][0]["scope"] = [hostile]
        plan["tasks"][0]["artifacts"] = []
        before = project.restore()
        path = write_json(project.inputs / "plan-path.json", plan)
        command = [sys.executable, "-m", "nexus_core.cli", "create", "--plan", str(path), "-d", str(project.root)]
        assert_clean_cli_refusal(project, before, command)
