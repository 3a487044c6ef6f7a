"""The README's CI example is real: it runs and gates on `nexus wait`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "ci-gate.sh"


def test_readme_shows_the_example_verbatim() -> None:
    assert EXAMPLE.read_text().rstrip("\n") in (ROOT / "README.md").read_text()


def test_ci_gate_example_exits_0_when_every_task_is_accepted(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", "CI_JOB_ID": "42"}
    done = subprocess.run(["sh", str(EXAMPLE)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "nexus: every task accepted" in done.stdout
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert (summary["type"], summary["outcome"], summary["exitCode"]) == ("summary", "accepted", 0)
    assert [t["state"] for t in summary["tasks"]] == ["accepted", "accepted"]
    events = (tmp_path / "nexus-events-ci-42.jsonl").read_text().splitlines()
    assert any(json.loads(line)["type"] == "accepted" for line in events)
    assert (tmp_path / "nexus-events-ci-42.jsonl").stat().st_mode & 0o777 == 0o600
