"""A load of the file this process just saved hands back the saved run (store.load_run's
``saved``): only while the file is still the very one that save wrote, with the same result
as a full load; a file another writer replaced, or rewrote in place, is loaded and checked in
full."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest
from project_kit import Project, plan, task_def

from nexus_core import engine
from nexus_core.errors import NexusError
from nexus_core.shapes import Run
from nexus_core.state import canonical, store

CORRUPT = "Corrupt or foreign run state; original bytes were preserved."


@pytest.fixture(autouse=True)
def plain_path() -> None:
    # The plain (orjson) path, which large runs take, whatever ran before in this worker; only
    # a plain save is kept.
    assert canonical.plain_path(1 << 30) is not None


@pytest.fixture
def project(tmp_path: Path) -> Project:
    project = Project(tmp_path / "project")
    project.create(plan("r1", task_def("a"), task_def("b")))
    return project


def state_path(project: Project) -> Path:
    return project.root / store.run_path("r1")


def kept_save(project: Project) -> Run:
    run = store.load_run(project.dir, "r1")
    return store.save_run(project.dir, run, keep=True)


def count_parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    parsed: list[str] = []
    full_parse = store.parse_run

    def counting(root: str, run_id: str, raw: bytes) -> Run:
        parsed.append(run_id)
        return full_parse(root, run_id, raw)

    monkeypatch.setattr(store, "parse_run", counting)
    return parsed


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_verify_parses_the_run_once_and_saves_what_full_loads_give(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.completed("r1", "a")
    descriptors = open_descriptors()
    parsed = count_parses(monkeypatch)
    verified = engine.verify_task(project.dir, "r1", "a")
    # Its preparation parses the file; the pre-check of the check, the receipt's save and the
    # finalisation each reuse the run verify itself saved just before (four parses before).
    assert parsed == ["r1"]
    assert open_descriptors() == descriptors  # the kept file is closed once verify ends
    monkeypatch.undo()
    on_disk = store.load_run(project.dir, "r1")
    assert canonical.compact(on_disk) == canonical.compact(verified)
    assert project.latest(on_disk, "a")["verification"]["status"] == "passed"
    assert [r["id"] for r in project.latest(on_disk, "a")["verification"]["checks"]] == ["content"]
    assert on_disk["sequence"] == 6  # create, start, record, and verify's three saves


def test_verify_with_reuse_saves_the_same_bytes_as_without(project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    project.completed("r1", "a")
    project.completed("r1", "b")
    engine.verify_task(project.dir, "r1", "a")
    monkeypatch.setattr(store, "_is_own_save", lambda *args: False)  # every load in full
    engine.verify_task(project.dir, "r1", "b")
    run = store.load_run(project.dir, "r1")
    reused, full = (project.latest(run, task)["verification"] for task in ("a", "b"))
    assert list(reused) == list(full)
    for key in ("id", "attemptId", "startedAt", "endedAt", "scopeHashes", "artifactHashes"):
        reused.pop(key), full.pop(key)
    for receipt in reused["checks"] + full["checks"]:
        for key in ("attemptId", "args", "startedAt", "endedAt", "artifactHashes", "scopeSnapshotHash"):
            receipt.pop(key)
    assert canonical.compact(reused) == canonical.compact(full)


def test_own_unchanged_save_is_reused_and_equals_a_full_load(project: Project) -> None:
    run = kept_save(project)
    assert store.load_run(project.dir, "r1", saved=run) is run
    assert canonical.compact(store.load_run(project.dir, "r1")) == canonical.compact(run)


def test_replaced_file_with_same_size_and_mtime_is_loaded_in_full(project: Project) -> None:
    run = kept_save(project)
    path = state_path(project)
    before = os.stat(path)
    data = path.read_bytes()
    assert b'"objective": "Write' in data
    # Another writer's atomic replace (a new inode), same size, mtime set back.
    replacement = path.with_name("elsewhere.json.bak")
    replacement.write_bytes(data.replace(b'"objective": "Write', b'"objective": "write', 1))
    os.chmod(replacement, 0o600)
    os.replace(replacement, path)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(path)
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    assert after.st_ino != before.st_ino
    with pytest.raises(NexusError, match=CORRUPT):
        store.load_run(project.dir, "r1", saved=run)


def test_another_writers_valid_save_is_what_loads(project: Project) -> None:
    run = kept_save(project)
    theirs = store.load_run(project.dir, "r1")
    theirs["tasks"][1]["integration"] = "rejected"
    theirs["sequence"] += 1
    replacement = state_path(project).with_name("theirs.json.bak")
    replacement.write_bytes(store.envelope_data(theirs)[1])
    os.chmod(replacement, 0o600)
    os.replace(replacement, state_path(project))
    loaded = store.load_run(project.dir, "r1", saved=run)
    assert loaded is not run
    assert canonical.compact(loaded) == canonical.compact(theirs)


def test_same_inode_rewritten_in_place_with_mtime_restored_is_loaded_in_full(project: Project) -> None:
    run = kept_save(project)
    path = state_path(project)
    before = os.stat(path)
    offset = path.read_bytes().index(b'"objective": "Write') + len(b'"objective": "')
    # The rewrite moves ctime, which no call can set back; within one tick of the filesystem's
    # clock it may not show yet, so rewrite until it does (bounded).
    deadline = time.monotonic() + 10
    while True:
        with open(path, "r+b") as handle:
            handle.seek(offset)
            handle.write(b"w")
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
        after = os.stat(path)
        if after.st_ctime_ns != before.st_ctime_ns or time.monotonic() > deadline:
            break
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (before.st_ino, before.st_size, before.st_mtime_ns)
    assert after.st_ctime_ns != before.st_ctime_ns
    with pytest.raises(NexusError, match=CORRUPT):
        store.load_run(project.dir, "r1", saved=run)


def test_another_object_or_a_failed_change_is_not_reused(project: Project) -> None:
    run = kept_save(project)
    look_alike = canonical.copy(run)
    assert store.load_run(project.dir, "r1", saved=look_alike) is not look_alike

    def change_then_refuse(_root: str, changed: Run) -> None:
        changed["tasks"][0]["integration"] = "rejected"
        raise NexusError("Refused.")

    with pytest.raises(NexusError, match="Refused"):
        engine.mutate(project.dir, "r1", change_then_refuse, reuse=run, keep=True)
    assert run["tasks"][0]["integration"] == "rejected"  # changed in memory, never saved
    loaded = store.load_run(project.dir, "r1", saved=run)
    assert loaded is not run
    assert loaded["tasks"][0]["integration"] == "pending"


def test_reused_run_still_gets_the_checks_past_the_checksum(project: Project) -> None:
    # The caller vouches the run is unchanged; the lifecycle checks of a full load still run.
    run = kept_save(project)
    run["tasks"][0]["integration"] = "unknown"
    with pytest.raises(NexusError, match="Invalid task lifecycle record"):
        store.load_run(project.dir, "r1", saved=run)


def test_general_path_save_is_not_kept(tmp_path: Path) -> None:
    project = Project(tmp_path / "floats")
    project.create({**plan("r1", task_def("a")), "config": {"ratio": 0.5}})
    run = kept_save(project)
    assert store.load_run(project.dir, "r1", saved=run) is not run


def test_another_threads_save_or_forget_leaves_this_threads_kept_save(project: Project, tmp_path: Path) -> None:
    other = Project(tmp_path / "other")
    other.create(plan("r1", task_def("a")))
    run = kept_save(project)

    def elsewhere() -> None:
        kept_save(other)  # another thread's kept save of another project's run
        store.forget_own_save()

    worker = threading.Thread(target=elsewhere)
    worker.start()
    worker.join()
    assert store.load_run(project.dir, "r1", saved=run) is run


def test_a_save_after_a_load_scans_only_what_changed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The save of a large run whose one task changed proves that task's text (and the rest of
    the run) plain, not the whole text: the other tasks' texts are those the load proved."""
    project = Project(tmp_path / "large")
    project.create(plan("r1", *(task_def(f"t{index}") for index in range(200))))
    for index in range(40):  # attempts make the tasks most of the state, as in a grown run
        project.completed("r1", f"t{index}")
    run = store.load_run(project.dir, "r1")
    assert (project.root / store.run_path("r1")).stat().st_size > 256 << 10
    run["tasks"][7]["integration"] = "rejected"
    scanned: list[int] = []
    scan = canonical._text_is_plain

    def counting(data: bytes) -> bool:
        scanned.append(len(data))
        return scan(data)

    monkeypatch.setattr(canonical, "_text_is_plain", counting)
    store.save_run(project.dir, run)
    rest = canonical.general_compact({key: value for key, value in run.items() if key != "tasks"})
    changed = canonical.general_compact(run["tasks"][7])
    assert scanned and sum(scanned) <= len(rest) + len(changed)  # not the other 199 tasks
    _payload, text = canonical.general_envelope_texts(run)
    assert (project.root / store.run_path("r1")).read_bytes() == text.encode() + b"\n"
    assert store.load_run(project.dir, "r1")["tasks"][7]["integration"] == "rejected"
