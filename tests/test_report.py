"""``nexus report RUN --format markdown|junit|html [-o FILE]``: each format read back by a real
consumer (markdown-it renders the Markdown, xmlschema and junitparser read the JUnit XML,
html.parser and headless Chromium read the HTML), hostile worker text inert in each, the same
state giving the same bytes, nothing written under the project, and -o never over a file.
"""

from __future__ import annotations

import html.parser
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from project_kit import HOST, Project, plan, task_def

from nexus_core import engine
from nexus_core.timeline import MARKS

REPO = Path(__file__).resolve().parent.parent
SCHEMA = REPO / "tests" / "fixtures" / "junit" / "junit-ci.xsd"
# What a hostile worker writes in its summaries, reasons and check output.
HOSTILE = (
    "</testcase><script>alert(1)</script> [x](javascript:alert(1)) ](javascript:alert(2)) | cell | "
    "``tick`` <img src=x onerror=alert(3)> ]]> &amp; \x1b]52;c;AAAA\x07 \x9b31m https://evil.example/x "
    "<!-- c --> **bold** # head"
)
NOISY_CHECK = r"""printf '%s\n' 'line one' '</failure><script>alert(4)</script>' ']]>' '```' 'ESC:'
printf '\033]0;pwned\007 [y](javascript:alert(5)) | pipe\n'
printf 'to stderr <b>x</b>\n' >&2
exit 3
"""


def nexus(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "nexus_core.cli", *args], capture_output=True, cwd=cwd)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Project:
    """A run in every report-relevant state, its worker text hostile."""
    root = tmp_path_factory.mktemp("report") / "project"
    project = Project(root)
    (root / "checks" / "noisy.sh").write_text(NOISY_CHECK)
    noisy = {"id": "noisy", "command": "/bin/sh", "args": ["checks/noisy.sh"], "cwd": ".", "timeoutMs": 30000}
    tasks = [
        task_def("good"),
        task_def("bad", checks=[task_def("bad")["checks"][0], noisy], resources=["checks/check.sh", "checks/noisy.sh"]),
        task_def("stuck"),
        task_def("halted"),
        task_def("stale"),
        task_def("todo", dependsOn=["good"]),
        task_def("unverified"),
    ]
    project.create(plan("hostile", *tasks, max_parallel=8))
    attempt = project.start("hostile", "good")
    project.write_result("good")
    project.record("hostile", "good", attempt, summary=HOSTILE)
    engine.verify_task(project.dir, "hostile", "good")
    engine.accept_task(project.dir, "hostile", "good")
    attempt = project.start("hostile", "bad")
    project.write_result("bad")  # content passes; noisy fails (exit 3)
    project.record("hostile", "bad", attempt, summary=HOSTILE)
    engine.verify_task(project.dir, "hostile", "bad")
    attempt = project.start("hostile", "stuck")
    project.record("hostile", "stuck", attempt, outcome="blocked", summary=HOSTILE, blockedRequest=HOSTILE)
    project.start("hostile", "halted")
    engine.cancel_task(project.dir, "hostile", "halted", {"reason": HOSTILE})
    project.accepted("hostile", "stale")
    project.write_result("stale", "ok, edited after acceptance\n")
    project.completed("hostile", "unverified")
    return project


def report(project: Project, form: str) -> bytes:
    done = nexus("report", "hostile", "--format", form, "-d", project.dir)
    assert done.returncode == 0, done.stderr.decode()
    assert done.stderr == b""
    return done.stdout


def assert_terminal_safe(data: bytes) -> None:
    text = data.decode("utf-8")
    controls = [c for c in text if (ord(c) < 32 and c not in "\n\t") or 0x7F <= ord(c) <= 0x9F]
    assert controls == [], controls


# ----------------------------------------------------------------- Markdown


def test_markdown_renders_with_no_link_or_html_from_worker_text(hostile: Project) -> None:
    from markdown_it import MarkdownIt

    data = report(hostile, "markdown")
    assert_terminal_safe(data)
    source = data.decode()
    parser = MarkdownIt("commonmark").enable("table")
    tokens = parser.parse(source)
    kinds = set()

    def walk(items: list) -> None:  # type: ignore[type-arg]
        for token in items:
            kinds.add(token.type)
            walk(token.children or [])

    walk(tokens)
    assert not kinds & {"link_open", "image", "html_inline", "html_block", "autolink"}, kinds
    rendered = parser.render(source)
    collected = Collector.of(rendered)
    assert collected.tags <= {"h2", "h3", "p", "strong", "em", "table", "thead", "tbody", "tr", "th", "td", "code"} | {
        "pre",
        "ul",
        "li",
    }, collected.tags
    # No href, src or on*: the only attribute is the fenced blocks' language, ours.
    assert set(collected.attributes) <= {("code", "class", "language-text")}, collected.attributes
    # The table kept its shape: one row per task, seven cells each (a worker's | split nothing).
    rows = [line for line in source.splitlines() if line.startswith("| **")]
    assert len(rows) == 7
    assert rendered.count("<tr>") == 8
    assert all(row.count("</td>") == 7 for row in rendered.split("<tr>")[2:])
    # The worker's words are there, as text.
    assert "](javascript:alert(2))" in collected.text
    assert "<script>alert(1)</script>" in collected.text
    assert "\\x1b]52;c;AAAA\\x07" in collected.text  # the control bytes shown, not sent
    # Counts, table, failed checks with their tails, needs.
    assert "2 of 7 tasks accepted" in collected.text  # good, and stale (accepted, evidence changed)
    assert "check noisy: exit 3" in collected.text.replace("**", "")
    assert "</failure><script>alert(4)</script>" in collected.text
    assert "Needs a person" in collected.text
    for task in ("bad", "stuck", "halted", "stale"):
        assert f"{task}:" in collected.text, task


class Collector(html.parser.HTMLParser):
    """Tags, attributes and text of an HTML document (a real parser, not a regex)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: set[str] = set()
        self.attributes: list[tuple[str, str, str | None]] = []
        self.text = ""

    @classmethod
    def of(cls, document: str) -> Collector:
        collector = cls()
        collector.feed(document)
        collector.close()
        return collector

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        self.attributes.extend((tag, name, value) for name, value in attrs)

    def handle_data(self, data: str) -> None:
        self.text += data


# ----------------------------------------------------------------- JUnit


def test_junit_is_valid_for_ci_readers_and_says_what_each_task_is(hostile: Project, tmp_path: Path) -> None:
    import junitparser
    import xmlschema

    data = report(hostile, "junit")
    assert_terminal_safe(data)
    path = tmp_path / "report.xml"
    path.write_bytes(data)
    xmlschema.XMLSchema(str(SCHEMA)).validate(str(path))
    suites = list(junitparser.JUnitXml.fromfile(str(path)))
    assert [s.name for s in suites] == ["hostile"]
    suite = suites[0]
    cases = {case.name: case for case in suite}
    assert list(cases) == ["good", "bad", "stuck", "halted", "stale", "todo", "unverified"]  # plan order
    assert (suite.tests, suite.failures, suite.errors, suite.skipped) == (7, 1, 3, 2)
    assert cases["good"].is_passed
    [failure] = cases["bad"].result
    assert isinstance(failure, junitparser.Failure)
    assert failure.type == "verification-failed"
    assert failure.message == "check noisy failed: exit 3"  # content passed: only noisy is named
    assert "</failure><script>alert(4)</script>" in failure.text  # the output's tail, as text
    assert "to stderr <b>x</b>" in failure.text
    assert "\\x1b]0;pwned\\x07" in failure.text
    for name, state in (("stuck", "blocked"), ("halted", "cancellation-requested"), ("stale", "stale-evidence")):
        [error] = cases[name].result
        assert isinstance(error, junitparser.Error), name
        assert error.type == state
    [blocked] = cases["stuck"].result
    assert "</testcase><script>alert(1)</script>" in blocked.message
    for name in ("todo", "unverified"):
        [skipped] = cases[name].result
        assert isinstance(skipped, junitparser.Skipped), name
    assert "completed, not verified yet" in cases["unverified"].result[0].message
    assert HOSTILE.split("\x1b")[0] in cases["good"].system_out


# ----------------------------------------------------------------- HTML


def test_html_is_self_contained_and_every_string_escaped(hostile: Project) -> None:
    data = report(hostile, "html")
    assert_terminal_safe(data)
    document = data.decode()
    collected = Collector.of(document)
    assert "script" not in collected.tags and "img" not in collected.tags and "iframe" not in collected.tags
    assert "a" not in collected.tags and "link" not in collected.tags
    for tag, name, value in collected.attributes:
        assert not name.startswith("on"), (tag, name)
        assert name not in ("href", "src", "xlink:href", "srcset", "action"), (tag, name, value)
        assert "://" not in (value or ""), (tag, name, value)
        if value and "url(" in value:
            assert value.startswith("url(#"), value  # only the SVG's own patterns
    assert "://" not in document.split("<body>")[1].replace("https://evil.example/x", "")
    assert "<svg" in document and "</svg>" in document
    assert "<script>alert(1)</script>" in collected.text
    assert "</failure><script>alert(4)</script>" in collected.text
    assert "\\x1b]52;c;AAAA\\x07" in collected.text
    for mark in ("accepted", "verify-failed", "cancel-requested"):
        assert MARKS[mark].glyph in collected.text, mark
    for task in ("good", "bad", "stuck", "halted", "stale", "todo", "unverified"):
        assert task in collected.text


def test_the_html_report_in_a_real_browser(tmp_path: Path) -> None:
    """Headless Chromium loads the demo's report: it draws the timeline, runs no script, loads
    nothing. The screenshot is the README's (NEXUS_UPDATE_SCREENSHOTS=1 refreshes it)."""
    chromium, driver_path = shutil.which("chromium"), shutil.which("chromedriver")
    if not (chromium and driver_path):
        if os.environ.get("CI") == "true":
            pytest.fail("chromium and chromium-driver are required under CI (.ci/run installs them)")
        pytest.skip("needs chromium and chromium-driver (apt-get install chromium chromium-driver)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    from nexus_tui.logic.demo import FIXED_START, build_demo

    demo = build_demo(str(tmp_path / "demo"), start=FIXED_START, seed=2026, identity=(4242, "demo-host"))
    page = tmp_path / "report.html"
    done = nexus("report", "release", "--format", "html", "-o", str(page), "-d", demo.directory)
    assert done.returncode == 0, done.stderr.decode()
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1040,1180"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    try:
        driver.get(page.as_uri())
        assert driver.find_element(By.TAG_NAME, "h1").text == "Nexus run release: needs a person"
        lanes = driver.find_elements(By.CSS_SELECTOR, "svg rect")
        assert len(lanes) >= 9
        svg = driver.find_element(By.TAG_NAME, "svg")
        assert svg.size["width"] > 900 and svg.size["height"] > 200
        assert driver.execute_script("return document.scripts.length") == 0
        resources = driver.execute_script("return performance.getEntriesByType('resource').length")
        assert resources == 0  # nothing fetched: no font, no stylesheet, no image
        shot = tmp_path / "report.png"
        driver.save_screenshot(str(shot))
        if os.environ.get("NEXUS_UPDATE_SCREENSHOTS") == "1":
            shutil.copyfile(shot, REPO / "screenshots" / "report.png")
    finally:
        driver.quit()


# ----------------------------------------------------------------- every format


@pytest.mark.parametrize("form", ["markdown", "junit", "html"])
def test_the_same_state_gives_the_same_bytes_and_nothing_is_written(hostile: Project, form: str) -> None:
    from supervise_kit import tree_digest

    before = tree_digest(hostile.root)
    first, second = report(hostile, form), report(hostile, form)
    assert first == second
    assert tree_digest(hostile.root) == before  # no lock, no temporary file, nothing under .bmad-plus


def test_a_new_output_file_gets_the_report_and_an_existing_one_is_refused(hostile: Project, tmp_path: Path) -> None:
    target = tmp_path / "report.md"
    done = nexus("report", "hostile", "-o", str(target), "-d", hostile.dir)
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout == b""
    assert target.read_bytes() == report(hostile, "markdown")
    assert (target.stat().st_mode & 0o777) == 0o600
    again = nexus("report", "hostile", "--format", "html", "-o", str(target), "-d", hostile.dir)
    assert again.returncode == 1
    assert again.stderr.decode().splitlines()[0] == (
        f"Nexus: -o {target} already exists; a report never overwrites a file. Name a new file."
    )
    assert target.read_bytes() == report(hostile, "markdown")  # untouched


def test_output_never_follows_a_symlink(hostile: Project, tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    link = tmp_path / "link.md"
    link.symlink_to(victim)
    dangling = tmp_path / "dangling.md"
    dangling.symlink_to(tmp_path / "created-through-the-link.md")
    for path in (link, dangling):
        done = nexus("report", "hostile", "-o", str(path), "-d", hostile.dir)
        assert done.returncode == 1
        assert "already exists; a report never overwrites a file" in done.stderr.decode()
    assert victim.read_text() == "keep me\n"
    assert not (tmp_path / "created-through-the-link.md").exists()


def test_output_is_never_written_under_the_state_directory(hostile: Project) -> None:
    target = Path(hostile.dir) / ".bmad-plus" / "nexus" / "report.md"
    done = nexus("report", "hostile", "-o", str(target), "-d", hostile.dir)
    assert done.returncode == 1
    assert "inside .bmad-plus: a report never writes there" in done.stderr.decode()
    assert not target.exists()


@pytest.mark.parametrize("run_id", ["nope", "Bad!Id"])
def test_refusals_use_inspects_words(hostile: Project, run_id: str) -> None:
    refused = nexus("report", run_id, "-d", hostile.dir)
    inspected = nexus("inspect", run_id, "-d", hostile.dir)
    assert refused.returncode == inspected.returncode == 1
    assert refused.stderr == inspected.stderr
    assert refused.stdout == b""


def test_an_accepted_run_passes_whole(tmp_path: Path) -> None:
    import junitparser

    project = Project(tmp_path / "p")
    project.create(plan("clean", task_def("a"), task_def("b", dependsOn=["a"])))
    project.accepted("clean", "a")
    project.accepted("clean", "b")
    data = nexus("report", "clean", "--format", "junit", "-d", project.dir).stdout
    path = tmp_path / "r.xml"
    path.write_bytes(data)
    [suite] = list(junitparser.JUnitXml.fromfile(str(path)))
    assert (suite.tests, suite.failures, suite.errors, suite.skipped) == (2, 0, 0, 0)
    markdown = nexus("report", "clean", "-d", project.dir).stdout.decode()
    assert markdown.startswith("## Nexus run clean: every task accepted\n")
    assert "Nothing: no task waits for a decision." in markdown
    assert HOST["id"] not in markdown  # identities are not part of the report
