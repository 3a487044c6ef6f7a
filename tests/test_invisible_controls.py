"""Invisible text never reaches a terminal raw (issue 22, item 6): every Unicode bidi control
(the marks U+061C, U+200E, U+200F too, not only the embeddings, overrides and isolates) and the
line and paragraph separators U+2028, U+2029.

``terminal_safe`` shows them as ``\\uNNNN``; ``terminal_safe_json`` writes them as JSON escapes
(the same values). The real CLI: ``wait``'s and ``loop``'s lines, and every JSON output of our own
``schedule`` subcommands (``list`` wrote them raw), while the reference's actions keep the
reference's exact bytes."""

from __future__ import annotations

import json
import re
import subprocess
import unicodedata
from pathlib import Path

import pytest
from supervise_kit import Project, nexus_command, task_def

from nexus_core.state import canonical
from nexus_core.supervise import run_loop
from nexus_core.terminal import is_terminal_safe, terminal_safe, terminal_safe_json

# Unicode's Bidi_Control property (PropList.txt), then its Zl and Zp characters.
BIDI_CONTROLS = ["\u061c", "\u200e", "\u200f", *map(chr, range(0x202A, 0x202F)), *map(chr, range(0x2066, 0x206A))]
SEPARATORS = ["\u2028", "\u2029"]
INVISIBLE = BIDI_CONTROLS + SEPARATORS
# What the issue saw pass through raw, with a C1 control (NEL) that was already escaped.
SLIPPED = "ok\u200e\u200f\u061c\u2028next\u2029\u0085end"
SLIPPED_SHOWN = r"ok\u200e\u200f\u061c\u2028next\u2029\u0085end"
# UTF-8 of C1 (C2 80-9F), of U+061C (D8 9C), of U+200E/F, U+2028-202E (E2 80 8E-8F, A8-AE),
# and of U+2066-2069 (E2 81 A6-A9): none may appear in a terminal's bytes.
_RAW_INVISIBLE = re.compile(b"\xc2[\x80-\x9f]|\xd8\x9c|\xe2\x80[\x8e\x8f\xa8-\xae]|\xe2\x81[\xa6-\xa9]|[\x1b\x07]")


def assert_inert(data: bytes) -> None:
    found = _RAW_INVISIBLE.search(data)
    assert found is None, f"raw {found.group()!r} at {found.start()} in {data[:400]!r}"


@pytest.mark.parametrize("character", INVISIBLE, ids=lambda c: f"U+{ord(c):04X}")
def test_every_bidi_control_and_separator_is_shown(character: str) -> None:
    shown = f"a\\u{ord(character):04x}b"
    assert terminal_safe(f"a{character}b") == shown
    assert terminal_safe(f"a{character}b", one_line=True) == shown
    assert not is_terminal_safe(f"a{character}b")


def test_no_character_of_those_classes_is_left_out() -> None:
    """Swept over every code point: Zl, Zp, C0/C1, surrogates and the explicit bidi classes."""
    explicit = {"LRE", "RLE", "LRO", "RLO", "PDF", "LRI", "RLI", "FSI", "PDI"}
    for code in range(0x110000):
        character = chr(code)
        category = unicodedata.category(character)
        if (
            category in ("Zl", "Zp", "Cs")
            or (category == "Cc" and character not in "\t\n")
            or unicodedata.bidirectional(character) in explicit
            or character in BIDI_CONTROLS
        ):
            assert not is_terminal_safe(character), f"U+{code:04X} ({category}) passes raw"


def test_printable_neighbours_stay_as_they_are() -> None:
    # Arabic letters, a zero-width joiner (emoji sequences) and a no-break space are text.
    for text in ("\u0627\u0644\u0639\u0631\u0628\u064a\u0629", "\U0001f469\u200d\U0001f4bb", "a\u00a0b"):
        assert terminal_safe(text, one_line=True) == text


def test_json_for_a_terminal_escapes_them_and_keeps_the_values() -> None:
    value = {"title": SLIPPED, "list": INVISIBLE}
    text = terminal_safe_json(canonical.pretty(value))
    assert json.loads(text) == value
    assert_inert(text.encode())
    assert r"ok\u200e\u200f\u061c\u2028next\u2029\u0085end" in text


# ----------------------------------------------------------------- the CLI


def _raw(project: Project, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(nexus_command(*args, "-d", str(project.root)), capture_output=True, timeout=60, check=False)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Project:
    """Task a blocked with a summary that carries every slipping character; one schedule titled
    with them."""
    project = Project(tmp_path_factory.mktemp("invisible"))
    project.create(task_def("a"))
    project.start("a")
    project.record("a", outcome="blocked", summary=SLIPPED)
    return project


def test_schedule_json_escapes_them_like_wait_and_keeps_the_title(project: Project) -> None:
    added = _raw(project, "schedule", "add", "demo", "--every", "1h", "--title", SLIPPED, "--json")
    assert added.returncode == 0, added.stderr
    schedule_id = json.loads(added.stdout)["id"]
    for command in (("list",), ("show", schedule_id), ("runs", schedule_id), ("pause", schedule_id)):
        done = _raw(project, "schedule", *command, "--json")
        assert done.returncode == 0, (command, done.stderr)
        assert_inert(done.stdout)
    listed = _raw(project, "schedule", "list", "--json")
    assert json.loads(listed.stdout)["schedules"][0]["title"] == SLIPPED  # the same value
    assert SLIPPED_SHOWN.encode() in listed.stdout  # as JSON escapes
    assert_inert(added.stdout)
    # The human form shows them too.
    human = _raw(project, "schedule", "list")
    assert_inert(human.stdout)
    assert SLIPPED_SHOWN.encode() in human.stdout


def test_schedule_json_errors_are_escaped_and_exact(project: Project) -> None:
    missing = project.root / f"gone{SLIPPED}"
    done = subprocess.run(
        nexus_command("schedule", "list", "--json", "-d", str(missing)), capture_output=True, timeout=60, check=False
    )
    assert done.returncode == 1
    assert_inert(done.stdout + done.stderr)
    assert SLIPPED in json.loads(done.stdout)["error"]


def test_wait_lines_escape_them(project: Project, tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    arguments = ("--settle-grace", "0", "--idle-timeout", "30", "--json", "--event-log", str(log))
    done = _raw(project, "wait", "demo", *arguments)
    assert done.returncode == 3, done.stderr
    assert_inert(done.stdout + done.stderr + log.read_bytes())
    assert SLIPPED_SHOWN.encode() in done.stderr
    assert f"a: blocked ({SLIPPED})" in json.loads(done.stdout.splitlines()[-1])["message"]


def test_the_reference_actions_json_keeps_the_exact_bytes(project: Project) -> None:
    """Byte compatibility: inspect --json writes the stored text as the reference does (raw)."""
    done = _raw(project, "inspect", "demo", "--json")
    assert done.returncode == 0, done.stderr
    assert json.dumps(SLIPPED, ensure_ascii=False)[1:-1].encode() in done.stdout
    assert_inert(_raw(project, "inspect", "demo").stdout)  # the human form is escaped


def test_loop_lines_escape_them(tmp_path: Path) -> None:
    project = Project(tmp_path)
    project.create(task_def("a"))
    project.start("a")
    emitted: list[str] = []
    clock = [0.0]

    def record_between_ticks(seconds: float) -> None:  # the only sleep: between tick 1 and 2
        project.record("a", outcome="blocked", summary=SLIPPED)
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
    assert f"summary={SLIPPED_SHOWN}".encode() in output
