"""Helpers for using the reference-written fixture trees in tests.

The reference refuses a run whose `project` is not the realpath of `-d`, so a fixture is
relocated: copied into a temporary directory, its `project`/`repository` paths rewritten and
its envelope checksum recomputed with our canonical writer (exactly as the fixtures' README
prescribes).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path
from typing import Any

from nexus_core.state import canonical

REFERENCE_STATES = Path(__file__).parent / "fixtures" / "reference-states"
FIXTURE_NAMES = sorted(p.name for p in REFERENCE_STATES.iterdir() if (p / "project").is_dir())
ORIGINAL_ROOT = "/home/operator/projects"


def state_files() -> list[Path]:
    return sorted(REFERENCE_STATES.glob("*/project/.bmad-plus/nexus/runs/*.json"))


def _copy_tree(source: Path, target: Path) -> None:
    shutil.copytree(source, target, symlinks=True)
    # A fresh clone gives files 0644/0755; the reference wrote state 0600/0700. Give our copy the
    # owner-only modes the registry expects, keeping the executable bits.
    for path in [target, *target.rglob("*")]:
        mode = path.lstat().st_mode
        if stat.S_ISLNK(mode):
            continue
        os.chmod(path, stat.S_IMODE(mode) | stat.S_IWUSR)
        os.chmod(path, stat.S_IMODE(path.lstat().st_mode) & ~0o022)


def relocate(name: str, parent: Path) -> Path:
    """Copy fixture `name`'s project under `parent` and rewrite its state for the new path."""
    target = (parent / name).resolve()
    _copy_tree(REFERENCE_STATES / name / "project", target)
    old_root = f"{ORIGINAL_ROOT}/{name}"
    new_root = str(target)
    for state in sorted((target / ".bmad-plus" / "nexus" / "runs").glob("*.json")):
        envelope = canonical.parse(state.read_bytes().decode("utf-8"))
        run = envelope["run"]
        run["project"] = new_root
        for task in run["tasks"]:
            for attempt in task["attempts"]:
                if attempt.get("baseline", {}).get("repository") == old_root:
                    attempt["baseline"]["repository"] = new_root
        envelope["sha256"] = canonical.sha256_json(run)
        state.write_bytes((canonical.pretty(envelope) + "\n").encode("utf-8"))
    return target


def recorded_output(name: str, file: str) -> str:
    return (REFERENCE_STATES / name / "outputs" / file).read_text(encoding="utf-8")


def capture_time_ms(name: str, file: str) -> int:
    from nexus_core.timeutil import parse_iso_ms

    times = json.loads(recorded_output(name, "capture-times.json"))
    started = parse_iso_ms(times[file]["startedAt"])
    assert started is not None
    return started


def substitute_root(value: Any, old: str, new: str) -> Any:
    """Replace the original project path by the relocated one where relocation rewrote it:
    the `project` and `repository` fields (plan commands keep their stored path)."""
    if isinstance(value, list):
        return [substitute_root(item, old, new) for item in value]
    if isinstance(value, dict):
        return {
            key: new if key in ("project", "repository") and item == old else substitute_root(item, old, new)
            for key, item in value.items()
        }
    return value
