"""Byte compatibility with state written by the reference JavaScript CLI.

The trees under tests/fixtures/reference-states were written by the reference (see their
README). Our loader must accept them, our writer must reproduce their bytes, and our `inspect`
must agree with what the reference printed on every field that depends neither on the clock
nor on this machine.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from fixture_tools import (
    FIXTURE_NAMES,
    ORIGINAL_ROOT,
    REFERENCE_STATES,
    capture_time_ms,
    recorded_output,
    relocate,
    state_files,
    substitute_root,
)
from project_kit import RunCli

from nexus_core import observe, timeutil
from nexus_core.snapshots import hash_file
from nexus_core.state import canonical, store

STATE_FILES = state_files()
OTHER_JSON = sorted(
    [
        *REFERENCE_STATES.glob("*/project/.bmad-plus/nexus/lock-recovery/*.json"),
        *REFERENCE_STATES.glob("*/outputs/inspect*.json"),
    ]
)
LOCK_FILES = sorted(REFERENCE_STATES.glob("*/project/.bmad-plus/nexus/*.lock"))


def _id(path: Path) -> str:
    return str(path.relative_to(REFERENCE_STATES))


def test_every_fixture_is_present() -> None:
    assert len(STATE_FILES) == 13
    assert len(FIXTURE_NAMES) == 10


@pytest.mark.parametrize("path", STATE_FILES, ids=_id)
def test_state_file_round_trips_byte_for_byte(path: Path) -> None:
    raw = path.read_bytes()
    envelope = canonical.parse(raw.decode("utf-8"))
    assert (canonical.pretty(envelope) + "\n").encode("utf-8") == raw
    run = envelope["run"]
    assert envelope["sha256"] == hashlib.sha256(canonical.compact(run).encode("utf-8")).hexdigest()
    assert run["planHash"] == canonical.sha256_json(run["plan"])
    # What our own save path would write for this run is exactly the reference's file.
    payload, text = store.envelope_text(run)
    assert canonical.sha256_text(payload) == envelope["sha256"]
    assert text.encode("utf-8") == raw


@pytest.mark.parametrize("path", OTHER_JSON, ids=_id)
def test_other_reference_json_round_trips(path: Path) -> None:
    raw = path.read_bytes()
    assert (canonical.pretty(canonical.parse(raw.decode("utf-8"))) + "\n").encode("utf-8") == raw


@pytest.mark.parametrize("path", LOCK_FILES, ids=_id)
def test_lock_files_round_trip_compact(path: Path) -> None:
    raw = path.read_bytes()
    assert canonical.compact(canonical.parse(raw.decode("utf-8"))).encode("utf-8") == raw


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_every_relocated_state_loads(name: str, tmp_path: Path) -> None:
    root = relocate(name, tmp_path)
    for run_id in store.list_run_ids(str(root)):
        run = store.load_run(str(root), run_id)
        assert run["id"] == run_id
        assert run["project"] == str(root)


def _machine_dependent_tasks(run: dict[str, Any]) -> set[str]:
    """Tasks whose pinned executables (checks or worker) differ or are missing on this machine."""
    dependent: set[str] = set()
    for task in run["plan"]["tasks"]:
        pinned = [(c["command"], c["commandHash"]) for c in task["checks"]]
        if task.get("execution"):
            pinned.append((task["execution"]["command"], task["execution"]["commandHash"]))
        for command, digest in pinned:
            try:
                current = hash_file(command)
            except OSError:
                current = None
            if current != digest:
                dependent.add(task["id"])
    return dependent


_MACHINE_FIELDS = ("resourcesCurrent", "evidenceEligible", "stale", "staleReason", "hint")


# Our own facts, output after the reference's keys (never stored): compared by their own tests.
ADDITIVE_OUTPUT = ("recoveryLockHint", "runningVerification")


def _without_additive(value: dict[str, Any]) -> dict[str, Any]:
    for holder in [value, *value.get("observations", [])]:
        keys = list(holder)
        ours = [key for key in keys if key in ADDITIVE_OUTPUT]
        assert keys[len(keys) - len(ours) :] == ours, f"additive keys must come last: {keys}"
        for key in ours:
            del holder[key]
    return value


def _comparable(name: str, file: str, value: Mapping[str, Any], root: Path) -> dict[str, Any]:
    value = _without_additive(canonical.copy(value))
    if file == "inspect.json":
        # The inventory names the framework that answers: ours, not the reference's 0.23.1.
        value["frameworkVersion"] = "<framework>"
        return value
    for observation in value.get("observations", []):
        if observation["taskId"] in _machine_dependent_tasks(value):
            for field in _MACHINE_FIELDS:
                observation[field] = "<machine>"
    return value


def _inspect_outputs() -> list[tuple[str, str]]:
    return [
        (name, path.name)
        for name in FIXTURE_NAMES
        for path in sorted((REFERENCE_STATES / name / "outputs").glob("inspect*.json"))
    ]


@pytest.mark.parametrize(("name", "file"), _inspect_outputs(), ids=lambda v: str(v))
def test_inspect_json_agrees_with_reference(name: str, file: str, tmp_path: Path) -> None:
    root = relocate(name, tmp_path)
    captured_at = capture_time_ms(name, file)
    timeutil.set_clock(lambda: captured_at / 1000)
    run_id = None if file == "inspect.json" else file.removeprefix("inspect-").removesuffix(".json")
    ours = observe.inspect_run(str(root), run_id)
    reference = substitute_root(canonical.parse(recorded_output(name, file)), f"{ORIGINAL_ROOT}/{name}", str(root))
    assert canonical.pretty(_comparable(name, file, ours, root)) == canonical.pretty(
        _comparable(name, file, reference, root)
    )


def _human_outputs() -> list[tuple[str, str]]:
    return [
        (name, path.name)
        for name in FIXTURE_NAMES
        for path in sorted((REFERENCE_STATES / name / "outputs").glob("inspect-*.txt"))
    ]


@pytest.mark.parametrize(("name", "file"), _human_outputs(), ids=lambda v: str(v))
def test_human_inspect_agrees_with_reference(name: str, file: str, tmp_path: Path, nexus_cli: RunCli) -> None:
    """The human form has no clock-dependent line; compare it through the real CLI."""
    root = relocate(name, tmp_path)
    run_id = file.removeprefix("inspect-").removesuffix(".txt")
    envelope = canonical.parse((root / ".bmad-plus/nexus/runs" / f"{run_id}.json").read_text("utf-8"))
    dependent = _machine_dependent_tasks(envelope["run"])
    result = nexus_cli("inspect", run_id, "-d", str(root))
    assert result.returncode == 0, result.stderr
    expected = recorded_output(name, file)
    assert _without_hints_of(result.stdout, dependent) == _without_hints_of(expected, dependent)
    if not dependent:
        assert result.stdout == expected


def _without_hints_of(text: str, tasks: set[str]) -> list[str]:
    """Drop the hint/STALE lines of tasks whose pinned executables differ on this machine."""
    kept: list[str] = []
    current = None
    for line in text.splitlines():
        if not line.startswith(" "):
            current = line.split(":", 1)[0]
        elif current in tasks and not line.startswith("  Attempt: "):
            continue
        kept.append(line)
    return kept


def test_inspect_outputs_are_pure_reads(tmp_path: Path) -> None:
    root = relocate("lifecycle-mix", tmp_path)
    before = {p: p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
    observe.inspect_run(str(root), "mix")
    observe.inspect_run(str(root))
    after = {p: p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
    assert before == after
