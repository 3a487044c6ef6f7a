"""Unsafe files (DESIGN 3): a run file or lock that is a symlink, not a regular file, not owned
by the current user, or group/world-writable is reported as unsafe and never used for a
mutation; nothing is chmodded or rewritten; everything the registry creates is 0600 (0700 for
directories). The tests run as root: files are handed to another uid with chown, and the
current user is monkeypatched where root would otherwise own everything.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from reliability_support import (
    HOST_BACKEND,
    add_work,
    make_project,
    plan_for,
    run_cli_json,
    tree_bytes,
    write_json,
)

from nexus_core import engine, observe
from nexus_core.errors import NexusError
from nexus_core.state import store

OTHER_UID = 4242
RUNS = ".bmad-plus/nexus/runs"


@pytest.fixture
def project(tmp_path: Path) -> tuple[Path, Path]:
    root = make_project(tmp_path / "project")
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    for scope in ("work/a", "work/b", "work/c"):
        add_work(root, scope)
    engine.create_run(str(root), plan_for("r", ["work/a", "work/b"]))
    engine.create_run(str(root), plan_for("other", ["work/c"]))
    engine.start_task(str(root), "r", "t0", {"backend": HOST_BACKEND})
    return root, inputs


def record_input(root: Path, inputs: Path) -> Path:
    attempt = store.load_run(str(root), "r")["tasks"][0]["attempts"][-1]
    observation = {"attemptId": attempt["id"], "backend": HOST_BACKEND, "outcome": "completed", "summary": "Done."}
    return write_json(inputs / "record.json", observation)


def symlinked(path: Path) -> None:
    """The run file moves next to the project and a symlink takes its place."""
    moved = path.parent.parent.parent.parent / f"moved-{path.name}"
    path.rename(moved)
    os.symlink(moved, path)


def fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path, 0o600)


def directory(path: Path) -> None:
    path.unlink()
    path.mkdir(0o700)


def foreign_owner(path: Path) -> None:
    os.chown(path, OTHER_UID, OTHER_UID)


def group_writable(path: Path) -> None:
    path.chmod(0o620)


def world_writable(path: Path) -> None:
    path.chmod(0o602)


UNSAFE: dict[str, tuple[Callable[[Path], None], str]] = {
    "symlink": (symlinked, "symlink"),
    "fifo": (fifo, "not a regular file"),
    "directory": (directory, "not a regular file"),
    "foreign-owner": (foreign_owner, f"owned by uid {OTHER_UID}"),
    "group-writable": (group_writable, "group- or world-writable"),
    "world-writable": (world_writable, "group- or world-writable"),
}


def outside_bytes(root: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in root.parent.glob("moved-*")}


@pytest.mark.parametrize("case", sorted(UNSAFE))
def test_unsafe_run_file_is_reported_and_never_used(project: tuple[Path, Path], case: str) -> None:
    root, inputs = project
    make_unsafe, reason = UNSAFE[case]
    record = record_input(root, inputs)
    make_unsafe(root / RUNS / "r.json")
    before, before_outside = tree_bytes(root), outside_bytes(root)

    # Every mutation of that run, and a start elsewhere (capacity loads every run), refuses.
    for args, input_file in (
        (("record", "r", "t0"), record),
        (("cancel", "r", "t0"), write_json(inputs / "cancel.json", {"reason": "Stop."})),
        (("verify", "r", "t1"), None),
        (("start", "other", "t0"), write_json(inputs / "start.json", {"backend": HOST_BACKEND})),
    ):
        code, out, err = run_cli_json(root, *args, input_file=input_file)
        assert code == 1 and out["status"] == "error" and not err, (args, out, err)
        assert reason in out["error"], out["error"]
    # inspect reports it: per run as the error, in the inventory as an unreadable run.
    code, out, _ = run_cli_json(root, "inspect", "r")
    assert code == 1 and reason in out["error"]
    code, inventory, _ = run_cli_json(root, "inspect")
    assert code == 0
    assert [entry["runId"] for entry in inventory["unreadableRuns"]] == ["r"]
    assert reason in inventory["unreadableRuns"][0]["error"]
    # Nothing was chmodded, chowned, followed or rewritten.
    assert tree_bytes(root) == before
    assert outside_bytes(root) == before_outside


@pytest.mark.parametrize("case", ["symlink", "fifo", "foreign-owner", "world-writable"])
def test_unsafe_writer_lock_is_reported_and_never_trusted(project: tuple[Path, Path], case: str) -> None:
    root, inputs = project
    lock = root / ".bmad-plus/nexus/writer.lock"
    # A lock a dead process would leave: recover-lock would remove it if it were safe.
    lock.write_text('{"token":"t","pid":999999,"hostname":"elsewhere","createdAt":"2026-01-01T00:00:00.000Z"}')
    lock.chmod(0o600)
    if case == "symlink":
        moved = root.parent / "moved-writer.lock"
        lock.rename(moved)
        os.symlink(moved, lock)
    else:
        {"fifo": fifo, "foreign-owner": foreign_owner, "world-writable": world_writable}[case](lock)
    before, before_outside = tree_bytes(root), outside_bytes(root)

    code, inventory, err = run_cli_json(root, "inspect")  # must not block on a FIFO
    assert code == 0, (inventory, err)
    snapshot = inventory["lock"]
    assert snapshot["unsafe"], snapshot
    code, run, _ = run_cli_json(root, "inspect", "r")
    assert code == 0 and run["lock"]["unsafe"] == snapshot["unsafe"]

    observation = {"ownerStopped": True, "note": "Owner is gone.", "expectedHash": snapshot["hash"]}
    code, out, _ = run_cli_json(root, "recover-lock", input_file=write_json(inputs / "recover.json", observation))
    assert code == 1 and "unsafe" in out["error"], out
    code, out, _ = run_cli_json(root, "record", "r", "t0", input_file=record_input(root, inputs))
    assert code == 1 and out["status"] == "error"

    after = tree_bytes(root)
    receipts = [name for name in after if name.startswith(".bmad-plus/nexus/lock-recovery/")]
    assert receipts == [], "no recovery receipt for a refused recovery"
    assert after == before
    assert outside_bytes(root) == before_outside


def test_leftover_recovery_lock_blocks_every_mutation(project: tuple[Path, Path]) -> None:
    root, inputs = project
    (root / ".bmad-plus/nexus/recovery.lock").write_text("{}")
    before = tree_bytes(root)
    code, out, _ = run_cli_json(root, "record", "r", "t0", input_file=record_input(root, inputs))
    assert code == 1 and "Lock recovery is active or interrupted" in out["error"]
    assert tree_bytes(root) == before


def test_run_file_of_another_user_is_refused_even_when_root_could_read_it(
    project: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """As root every file is readable: pretend to be uid 1000 so root's own files are foreign."""
    root, _ = project
    before = tree_bytes(root)
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(NexusError, match="owned by uid 0, not by the current user"):
        store.load_run(str(root), "r")
    with pytest.raises(NexusError, match="owned by uid 0"):
        engine.cancel_task(str(root), "r", "t0", {"reason": "Stop."})
    inventory = observe.inspect_inventory(str(root))
    assert {entry["runId"] for entry in inventory["unreadableRuns"]} == {"r", "other"}
    monkeypatch.undo()
    assert tree_bytes(root) == before


def lifecycle_under_umask_zero(root: Path, inputs: Path) -> None:
    """create ... accept and a lock recovery, each a CLI process started with umask 0."""
    wrapper = "import os, sys; os.umask(0); from nexus_core.cli.main import main; sys.argv[0] = 'nexus'; main()"

    def nexus(*args: str, input_value: dict[str, Any] | None = None, plan: Path | None = None) -> dict[str, Any]:
        command = [sys.executable, "-c", wrapper, *args, "--json", "-d", str(root)]
        if input_value is not None:
            command += ["--input", str(write_json(inputs / f"{args[0]}.json", input_value))]
        if plan is not None:
            command += ["--plan", str(plan)]
        done = subprocess.run(command, capture_output=True, timeout=60, text=True)
        assert done.returncode == 0, (args, done.stdout, done.stderr)
        result: dict[str, Any] = __import__("json").loads(done.stdout)
        return result

    nexus("create", plan=write_json(inputs / "plan.json", plan_for("u", ["work/a"])))
    nexus("start", "u", "t0", input_value={"backend": HOST_BACKEND})
    attempt = store.load_run(str(root), "u")["tasks"][0]["attempts"][-1]
    bound = {"attemptId": attempt["id"], "backend": HOST_BACKEND}
    nexus("record", "u", "t0", input_value={**bound, "outcome": "completed", "summary": "Done."})
    nexus("verify", "u", "t0")
    nexus("accept", "u", "t0")
    lock = root / ".bmad-plus/nexus/writer.lock"
    lock.write_text('{"token":"t","pid":999999,"hostname":"elsewhere","createdAt":"2026-01-01T00:00:00.000Z"}')
    lock.chmod(0o600)
    lock_hash = nexus("inspect")["lock"]["hash"]
    nexus("recover-lock", input_value={"ownerStopped": True, "note": "Gone.", "expectedHash": lock_hash})


def test_everything_the_registry_creates_is_private(tmp_path: Path) -> None:
    root = make_project(tmp_path / "project")
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    add_work(root, "work/a")
    lifecycle_under_umask_zero(root, inputs)
    entries = tree_bytes(root)
    assert any(name.startswith(".bmad-plus/nexus/lock-recovery/") for name in entries)
    assert ".bmad-plus/nexus/runs/u.json" in entries
    for name, (mode, uid, _) in entries.items():
        assert uid == os.geteuid()
        if stat.S_ISDIR(mode):
            assert stat.S_IMODE(mode) == 0o700, name
        else:
            assert stat.S_ISREG(mode) and stat.S_IMODE(mode) == 0o600, name
    assert stat.S_IMODE(os.stat(root / ".bmad-plus").st_mode) == 0o700


CORRUPT = "Nexus: Nexus: Corrupt run state; original bytes were preserved."
FOREIGN = "Nexus: Nexus: Corrupt or foreign run state; original bytes were preserved."


def truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def flip_checksum(path: Path) -> None:
    path.write_bytes(path.read_bytes().replace(b'"sequence": 2', b'"sequence": 9'))


@pytest.mark.parametrize(("damage", "message"), [(truncate, CORRUPT), (flip_checksum, FOREIGN)])
def test_corrupt_run_is_refused_with_the_way_out_and_the_way_out_works(
    project: tuple[Path, Path], damage: Callable[[Path], None], message: str
) -> None:
    root, inputs = project
    run_file = root / RUNS / "r.json"
    damage(run_file)
    before = tree_bytes(root)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "nexus_core.cli",
            "record",
            "r",
            "t0",
            "--input",
            str(record_input_raw(inputs)),
            "-d",
            str(root),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    # The SPEC's message is the first line exactly (interface compatibility), the way out after it.
    first, *guidance = done.stderr.splitlines()
    assert done.returncode == 1 and first == message, done.stderr
    assert "fresh run from the same plan under a new, unused id" in guidance[0]
    assert "Inspect earlier workspace changes" in guidance[0] and "may redo work" in guidance[0]
    code, inventory, _ = run_cli_json(root, "inspect")
    assert code == 0 and inventory["unreadableRuns"][0]["runId"] == "r"
    assert inventory["unreadableRuns"][0]["error"] == message.removeprefix("Nexus: ")
    assert "new, unused id" in inventory["unreadableRuns"][0]["hint"]
    assert tree_bytes(root) == before

    # Following the advice: keep the file as evidence outside runs/, same plan, new id.
    evidence = root.parent / "evidence-r.json"
    run_file.rename(evidence)
    plan = plan_for("r-fresh", ["work/a", "work/b"])
    code, out, err = run_cli_json(root, "create", plan=write_json(inputs / "fresh.json", plan))
    assert code == 0, (out, err)
    code, out, err = run_cli_json(
        root, "start", "r-fresh", "t0", input_file=write_json(inputs / "s.json", {"backend": HOST_BACKEND})
    )
    assert code == 0, (out, err)


def test_project_copied_elsewhere_makes_its_runs_foreign(project: tuple[Path, Path], tmp_path: Path) -> None:
    root, _ = project
    copy = tmp_path / "copied"
    subprocess.run(["cp", "-a", str(root), str(copy)], check=True)
    before = tree_bytes(copy)
    code, out, _ = run_cli_json(copy, "inspect", "r")
    assert code == 1 and out["error"] == FOREIGN[len("Nexus: ") :], out
    assert "new, unused id" in out["hint"]
    assert tree_bytes(copy) == before


def record_input_raw(inputs: Path) -> Path:
    return write_json(
        inputs / "record-any.json",
        {"attemptId": "x", "backend": HOST_BACKEND, "outcome": "completed", "summary": "Done."},
    )
