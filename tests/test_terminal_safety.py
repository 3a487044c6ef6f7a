"""Worker-controlled text never reaches a terminal raw (issue 15, item 1).

Unit tests of ``terminal_safe``, then the real CLI: a run whose host identity, record summary,
check output and a scope file name carry terminal escapes (window title, clear screen, OSC 52
clipboard write, one-byte C1 CSI). The raw bytes of every human-facing output are searched for
ESC, BEL and C1; ``--json`` must still carry the exact text."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest
from supervise_kit import Project, nexus_command, task_def, until

from nexus_core.state import canonical
from nexus_core.supervise import run_loop
from nexus_core.terminal import is_terminal_safe, terminal_safe, terminal_safe_json

OSC_TITLE = "\x1b]0;pwned\x07"
CLEAR = "\x1b[2J\x1b[H"
OSC_52 = "\x1b]52;c;cm0gLXJmIH4K\x07"  # sets the clipboard to "rm -rf ~"
C1 = "\x9b2J\x85"  # one-byte CSI, NEL
HOSTILE = f"need creds {OSC_TITLE}{CLEAR}{OSC_52}{C1}\u202eend"
HOSTILE_SHOWN = r"need creds \x1b]0;pwned\x07\x1b[2J\x1b[H\x1b]52;c;cm0gLXJmIH4K\x07\u009b2J\u0085\u202eend"
BAD_NAME = f"x{OSC_TITLE}{CLEAR}"
BAD_NAME_SHOWN = r"x\x1b]0;pwned\x07\x1b[2J\x1b[H"
BACKEND = {"kind": "host", "id": f"ag{OSC_TITLE}", "sessionId": f"s{CLEAR}{C1}"}
_TERMINAL_ACTIVE = re.compile(b"[\x1b\x07]|\xc2[\x80-\x9f]")


def assert_inert(data: bytes) -> None:
    """No ESC, BEL or UTF-8 encoded C1 control anywhere in ``data``."""
    found = _TERMINAL_ACTIVE.search(data)
    assert found is None, f"terminal-active byte {found.group()!r} at {found.start()} in {data!r}"


# ----------------------------------------------------------------- terminal_safe


@pytest.mark.parametrize("code", [*range(0x00, 0x09), *range(0x0B, 0x20), 0x7F])
def test_c0_and_del_are_shown_as_hex(code: int) -> None:
    assert terminal_safe(f"a{chr(code)}b") == f"a\\x{code:02x}b"


@pytest.mark.parametrize("code", range(0x80, 0xA0))
def test_c1_controls_are_shown_as_code_points(code: int) -> None:
    assert terminal_safe(f"a{chr(code)}b") == f"a\\u{code:04x}b"


@pytest.mark.parametrize("surrogate", ["\ud800", "\udbff", "\udc00", "\udfff"])
def test_lone_surrogates_are_shown(surrogate: str) -> None:
    shown = terminal_safe(f"a{surrogate}b")
    assert shown == f"a\\u{ord(surrogate):04x}b"
    shown.encode("utf-8")  # strict: nothing unencodable is left


@pytest.mark.parametrize("control", ["\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067", "\u2069"])
def test_bidi_controls_are_shown(control: str) -> None:
    assert terminal_safe(f"a{control}b") == f"a\\u{ord(control):04x}b"


def test_newlines_and_tabs_kept_unless_one_line() -> None:
    assert terminal_safe("a\nb\tc") == "a\nb\tc"
    assert terminal_safe("a\nb\tc", one_line=True) == "a\\x0ab\\x09c"
    assert terminal_safe("a\r\nb") == "a\\x0d\nb"


@pytest.mark.parametrize(
    "text", ["", "plain ascii ~!@#$%^&*()", "caf\u00e9 \u00a0nbsp \u2014 \u65e5\u672c \U0001f600", "back\\slash"]
)
def test_printable_text_is_unchanged(text: str) -> None:
    assert terminal_safe(text) == text
    assert terminal_safe(text, one_line=True) == text
    assert is_terminal_safe(text, one_line=True)


def test_hostile_sample_is_shown_in_full_and_none_and_numbers_are_text() -> None:
    assert terminal_safe(HOSTILE) == HOSTILE_SHOWN
    assert not is_terminal_safe(HOSTILE)
    assert terminal_safe(None) == ""
    assert terminal_safe(42) == "42"


@pytest.mark.parametrize("text", [HOSTILE, "\x7f\x80\x9f", "\u2066x\u2069", "\\\x85", "\ud800", "plain é 😀"])
def test_json_for_a_terminal_is_the_same_value_in_inert_bytes(text: str) -> None:
    line = terminal_safe_json(canonical.compact({"k": text, "n": [text]}))
    assert json.loads(line) == {"k": text, "n": [text]}
    assert is_terminal_safe(line, one_line=True)  # no raw control of any kind is left
    if is_terminal_safe(text):
        assert line == canonical.compact({"k": text, "n": [text]})  # printable text: the same bytes


# ----------------------------------------------------------------- the CLI


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Project:
    """Task a verified by a check that prints hostile text, then made stale by a hostile file
    name; task b blocked with a hostile summary. Every identity is hostile."""
    project = Project(tmp_path_factory.mktemp("hostile"))
    noisy = "cat out/a/note.txt; cat out/a/note.txt >&2; grep -q done out/a/result.txt"
    project.create(
        task_def("a", checks=[{"id": "noisy", "command": "/bin/sh", "args": ["-c", noisy], "timeoutMs": 30000}]),
        task_def("b"),
    )
    for task_id in ("a", "b"):
        started = project.nexus("start", "demo", task_id, "--input", project.input_file({"backend": BACKEND}), "--json")
        project.attempts[task_id] = json.loads(started.stdout)["tasks"][["a", "b"].index(task_id)]["attempts"][-1]["id"]
    project.write("a")
    (project.root / "out" / "a" / "note.txt").write_text(HOSTILE)
    project.recorded = project.nexus(  # type: ignore[attr-defined]
        "record", "demo", "a", "--input", project.input_file(record_body(project, "a", "completed"))
    )
    assert project.verify("a").returncode == 0
    project.nexus("record", "demo", "b", "--input", project.input_file(record_body(project, "b", "blocked")))
    (project.root / "out" / "a" / BAD_NAME).write_text("planted\n")
    return project


def record_body(project: Project, task_id: str, outcome: str) -> dict[str, Any]:
    return {"attemptId": project.attempt_id(task_id), "backend": BACKEND, "outcome": outcome, "summary": HOSTILE}


def raw(project: Project, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(nexus_command(*args, "-d", str(project.root)), capture_output=True, timeout=60, check=False)


def test_human_inspect_shows_identities_and_stale_file_names_escaped(hostile: Project) -> None:
    done = raw(hostile, "inspect", "demo")
    assert done.returncode == 0, done.stderr
    assert_inert(done.stdout + done.stderr)
    text = done.stdout.decode()
    assert r"host: ag\x1b]0;pwned\x07/s\x1b[2J\x1b[H\u009b2J\u0085" in text
    assert f"STALE: Nexus: Unsafe relative path: out/a/{BAD_NAME_SHOWN}" in text


def test_json_inspect_keeps_the_exact_text(hostile: Project) -> None:
    state = hostile.state()
    a, b = state["tasks"]
    assert {k: a["attempts"][-1]["backend"][k] for k in BACKEND} == BACKEND
    assert a["attempts"][-1]["observations"][-1]["summary"] == HOSTILE
    check = a["attempts"][-1]["verification"]["checks"][0]
    assert (check["stdout"], check["stderr"]) == (HOSTILE, HOSTILE)
    assert b["attempts"][-1]["blockedRequest"] == HOSTILE
    assert state["observations"][0]["staleReason"] == f"Nexus: Unsafe relative path: out/a/{BAD_NAME}"


def test_a_mutations_human_summary_is_escaped(hostile: Project) -> None:
    recorded: subprocess.CompletedProcess[str] = hostile.recorded  # type: ignore[attr-defined]
    assert_inert(recorded.stdout.encode() + recorded.stderr.encode())
    assert r"host: ag\x1b]0;pwned\x07/s\x1b[2J\x1b[H\u009b2J\u0085" in recorded.stdout


def test_errors_embedding_worker_text_are_escaped_and_exact_in_json(hostile: Project) -> None:
    refused = raw(hostile, "accept", "demo", "a")
    assert refused.returncode == 1
    assert_inert(refused.stdout + refused.stderr)
    assert refused.stderr.decode() == f"Nexus: Nexus: Unsafe relative path: out/a/{BAD_NAME_SHOWN}\n"
    as_json = raw(hostile, "accept", "demo", "a", "--json")
    assert json.loads(as_json.stdout)["error"] == f"Nexus: Unsafe relative path: out/a/{BAD_NAME}"
    missing = raw(hostile, "start", "demo", "b", "--input", f"/nonexistent/{BAD_NAME}.json")
    assert_inert(missing.stderr)
    assert missing.stderr.decode() == f"Nexus: --input file not found: /nonexistent/{BAD_NAME_SHOWN}.json\n"


def test_wait_stderr_line_is_escaped_and_json_summary_exact(hostile: Project) -> None:
    done = raw(hostile, "wait", "demo", "--settle-grace", "0", "--idle-timeout", "30", "--json")
    assert done.returncode == 3, done.stderr
    assert_inert(done.stderr)
    line = done.stderr.decode()
    assert f"b: blocked ({HOSTILE_SHOWN})" in line
    assert f"a: stale-evidence (Nexus: Unsafe relative path: out/a/{BAD_NAME_SHOWN})" in line
    summary = json.loads(done.stdout.splitlines()[-1])
    assert f"b: blocked ({HOSTILE})" in summary["message"]


def test_wait_json_lines_escape_c1_and_bidi_and_keep_the_same_values(hostile: Project, tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    args = ("wait", "demo", "--settle-grace", "0", "--idle-timeout", "30", "--json", "--event-log", str(log))
    done = raw(hostile, *args)
    assert done.returncode == 3, done.stderr
    assert_inert(done.stdout)
    assert "\u202e".encode() not in done.stdout  # the bidi override, UTF-8 encoded
    assert b"\\u009b2J\\u0085\\u202eend" in done.stdout  # written as JSON escapes instead
    *events, summary = [json.loads(line) for line in done.stdout.splitlines()]
    assert f"b: blocked ({HOSTILE})" in summary["message"]  # the same value
    assert log.read_bytes() == b"".join(line + b"\n" for line in done.stdout.splitlines()[:-1])
    assert len(events) >= 1


def test_real_loop_tick_lines_are_escaped(hostile: Project) -> None:
    process = subprocess.Popen(
        nexus_command("loop", "demo", "--every", "30s", "-d", str(hostile.root)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    lines: list[bytes] = []
    assert process.stdout is not None
    reader = threading.Thread(target=lambda: lines.extend(iter(process.stdout.readline, b"")), daemon=True)  # type: ignore[union-attr]
    reader.start()
    try:
        until(lambda: any(b"stale: task a" in line for line in lines), what="the first tick's stale line")
        process.send_signal(signal.SIGINT)
        _, errors = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    reader.join(timeout=5)
    output = b"".join(lines)
    assert_inert(output + errors)
    assert f"stale: task a: Nexus: Unsafe relative path: out/a/{BAD_NAME_SHOWN}\n".encode() in output


def test_loop_event_lines_escape_the_recorded_summary(tmp_path: Path) -> None:
    project = Project(tmp_path)
    project.create(task_def("a"))
    started = project.nexus("start", "demo", "a", "--input", project.input_file({"backend": BACKEND}), "--json")
    project.attempts["a"] = json.loads(started.stdout)["tasks"][0]["attempts"][-1]["id"]
    emitted: list[str] = []
    clock = [0.0]

    def record_between_ticks(seconds: float) -> None:  # the only sleep: between tick 1 and 2
        project.nexus("record", "demo", "a", "--input", project.input_file(record_body(project, "a", "blocked")))
        clock[0] += seconds

    run_loop(
        str(project.root),
        "demo",
        60,
        emit=emitted.append,
        clock=lambda: clock[0],
        sleeper=record_between_ticks,
        tick_cap=2,
    )
    output = "".join(emitted).encode()  # what `nexus loop` writes to stdout, byte for byte
    assert_inert(output)
    assert f"summary={HOSTILE_SHOWN}".encode() in output
