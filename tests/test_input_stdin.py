"""``--input -``: a mutation's JSON on standard input, under exactly the checks of an input file
(size cap, UTF-8, NUL, lone surrogates, BOM, an object), so the dashboard can hand a remote host
its input without a file on either side. ``--input FILE`` is unchanged (SPEC 8.2)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from reliability_support import HOST_BACKEND, add_work, make_project, plan_for, tree_bytes, write_json

from nexus_core import engine
from nexus_core.cli import inputs


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = make_project(tmp_path / "project")
    add_work(root, "work/a")
    engine.create_run(str(root), plan_for("r", ["work/a"]))
    return root


def nexus(root: Path, *args: str, stdin: bytes = b"", cwd: Path | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "nexus_core.cli", *args, "-d", str(root)],
        input=stdin,
        capture_output=True,
        timeout=60,
        cwd=cwd,
    )


def test_start_reads_its_input_from_stdin(project: Path) -> None:
    done = nexus(
        project, "start", "r", "t0", "--input", "-", "--json", stdin=json.dumps({"backend": HOST_BACKEND}).encode()
    )
    assert done.returncode == 0, done
    saved = json.loads(done.stdout)
    attempt = saved["tasks"][0]["attempts"][-1]
    assert attempt["execution"] == "running"
    assert {key: attempt["backend"][key] for key in HOST_BACKEND} == HOST_BACKEND


def test_the_same_input_from_a_file_and_from_stdin_gives_the_same_state(project: Path, tmp_path: Path) -> None:
    other = make_project(tmp_path / "other")
    add_work(other, "work/a")
    engine.create_run(str(other), plan_for("r", ["work/a"]))
    body = json.dumps({"backend": HOST_BACKEND}).encode()
    path = tmp_path / "host.json"
    path.write_bytes(body)
    path.chmod(0o600)
    from_file = nexus(project, "start", "r", "t0", "--input", str(path))
    from_stdin = nexus(other, "start", "r", "t0", "--input", "-", stdin=body)
    assert (from_file.returncode, from_stdin.returncode) == (0, 0)

    def attempt_id(out: bytes) -> bytes:
        return out.split(b"Attempt: ")[1].split(b";")[0]

    assert from_file.stdout.replace(attempt_id(from_file.stdout), b"ID") == from_stdin.stdout.replace(
        attempt_id(from_stdin.stdout), b"ID"
    )


BAD_INPUTS = [
    (b"", "--input file is empty: standard input"),
    (b"   \n", "--input file is empty: standard input"),
    (
        b'{"a": 1}' + b" " * inputs.INPUT_LIMIT,
        "--input - must be a JSON object no larger than 1 MiB on standard input.",
    ),
    (b'{"a": "\xff"}', "--input file is not valid UTF-8 (byte offset 7): standard input"),
    (b'{"a": "\x00"}', "--input file contains a NUL byte at offset 7: standard input"),
    (b'{"a": "\\u0000"}', "--input file contains an escaped NUL character (\\u0000): standard input"),
    (b'{"a": "\\ud800"}', "--input file contains a lone UTF-16 surrogate escape: standard input"),
    (b'\xef\xbb\xbf{"a": 1}', "--input file starts with a byte order mark, which JSON does not allow: standard input"),
    (b"[1, 2]", "--input must contain a JSON object."),
    (b'{"a": ', "--input file is not valid JSON (Expecting value at line 1 column 7): standard input"),
]


@pytest.mark.parametrize(("raw", "message"), BAD_INPUTS, ids=[m for _, m in BAD_INPUTS])
def test_bad_stdin_is_refused_like_a_bad_file_and_changes_nothing(project: Path, raw: bytes, message: str) -> None:
    before = tree_bytes(project)
    done = nexus(project, "record", "r", "t0", "--input", "-", "--json", stdin=raw)
    assert done.returncode == 1
    assert json.loads(done.stdout) == {"schemaVersion": 1, "status": "error", "error": message}
    human = nexus(project, "record", "r", "t0", "--input", "-", stdin=raw)
    assert (human.returncode, human.stdout) == (1, b"")
    assert human.stderr.decode().splitlines()[0] == f"Nexus: {message}"
    assert tree_bytes(project) == before


def test_stdin_is_read_no_further_than_the_limit(project: Path) -> None:
    """A producer that never stops is refused once the limit is passed, not read to its end."""
    producer = subprocess.Popen(["yes", "x" * 1000], stdout=subprocess.PIPE)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "nexus_core.cli", "record", "r", "t0", "--input", "-", "--json", "-d", str(project)],
            stdin=producer.stdout,
            capture_output=True,
            timeout=60,
        )
    finally:
        producer.kill()
        producer.wait()
    assert done.returncode == 1
    assert json.loads(done.stdout)["error"] == "--input - must be a JSON object no larger than 1 MiB on standard input."


def test_input_file_is_unchanged_and_dash_is_stdin_only_for_input(project: Path, tmp_path: Path) -> None:
    """SPEC 8.2's --input FILE: a path, resolved against the current directory, its messages naming
    the absolute path. A file named '-' is still a file for --plan (only --input reads stdin)."""
    missing = nexus(project, "record", "r", "t0", "--input", "nowhere.json", "--json", cwd=tmp_path)
    assert json.loads(missing.stdout)["error"] == f"--input file not found: {tmp_path / 'nowhere.json'}"
    empty = tmp_path / "empty.json"
    empty.write_bytes(b"")
    empty.chmod(0o600)
    refused = nexus(project, "record", "r", "t0", "--input", str(empty), "--json")
    assert json.loads(refused.stdout)["error"] == f"--input file is empty: {empty}"
    dash = write_json(tmp_path / "-", plan_for("from-dash", ["work/a"]))
    dash.chmod(0o600)
    created = nexus(project, "create", "--plan", "-", "--json", cwd=tmp_path, stdin=b"{}")
    assert created.returncode == 0, created
    assert json.loads(created.stdout)["id"] == "from-dash"
