"""The documented session of the reference docs ("Lire la sortie"), replayed through our CLI.

Every line must be identical except the attempt id, which changes on every run.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from node_kit import require_node
from project_kit import RunCli

DOC = Path(__file__).parent / "fixtures" / "doc-walkthrough"
DOC_ATTEMPT = "c3bbafd1-62ef-4b8b-ac72-0d9b09932427"
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _session() -> list[tuple[list[str], list[str]]]:
    steps: list[tuple[list[str], list[str]]] = []
    for line in (DOC / "session.txt").read_text(encoding="utf-8").splitlines():
        if line.startswith("$ npx bmad-plus nexus "):
            steps.append((line.removeprefix("$ npx bmad-plus nexus ").split(), []))
        elif not line.startswith("# "):  # the doc's closing comment is prose, not output
            steps[-1][1].append(line)
    return steps


def test_documented_session_is_reproduced(tmp_path: Path, nexus_cli: RunCli) -> None:
    require_node("the documented verifier is a node script")
    project = tmp_path / "project"
    shutil.copytree(DOC / "checks", project / "checks")
    for name in ("nexus-plan.json", "host.json", "rec.json"):
        shutil.copy(DOC / name, project / name)
    steps = _session()
    assert [args[0] for args, _ in steps] == ["create", "start", "record", "verify", "accept", "inspect"]
    attempt = None
    for args, expected in steps:
        if args[0] == "record":
            # The host reports the attempt id that `start` printed, as the doc tells it to.
            (project / "work").mkdir()
            (project / "work" / "result.txt").write_text("done\n")
            record = json.loads((DOC / "rec.json").read_text())
            record["attemptId"] = attempt
            (project / "rec.json").write_text(json.dumps(record))
        result = nexus_cli(*args, cwd=project)
        assert result.returncode == 0, result.stderr
        assert result.stderr == ""
        lines = result.stdout.splitlines()
        if args[0] == "start":
            attempt = UUID.search(result.stdout).group(0)  # type: ignore[union-attr]
        assert attempt is not None or args[0] == "create"
        assert lines == [line.replace(DOC_ATTEMPT, attempt or DOC_ATTEMPT) for line in expected]


def test_verify_right_after_create_is_refused_as_documented(tmp_path: Path, nexus_cli: RunCli) -> None:
    project = tmp_path / "project"
    shutil.copytree(DOC / "checks", project / "checks")
    shutil.copy(DOC / "nexus-plan.json", project / "nexus-plan.json")
    require_node("the documented plan resolves `node`")
    assert nexus_cli("create", "--plan", "nexus-plan.json", cwd=project).returncode == 0
    before = sorted((p, p.read_bytes()) for p in (project / ".bmad-plus").rglob("*") if p.is_file())
    result = nexus_cli("verify", "example", "result", cwd=project)
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr == "Nexus: Nexus: Verification requires completed, unaccepted, reconciled work.\n"
    after = sorted((p, p.read_bytes()) for p in (project / ".bmad-plus").rglob("*") if p.is_file())
    assert before == after
