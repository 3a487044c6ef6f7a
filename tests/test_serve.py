"""``nexus-tui serve``: a real server on loopback, driven over HTTP and websockets, and in a real
headless browser (Debian's chromium + chromium-driver through selenium).

Every server here is the real command (``python -m nexus_tui serve --port 0``) in its own
process group; its stdout says the URL and each session's pid, which the tests use to check
that stopping the server (SIGINT, as Ctrl+C sends) leaves no session process behind.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import aiohttp
import pytest

from nexus_tui.logic.demo import build_demo

REPO = Path(__file__).resolve().parent.parent
DEADLINE_SECONDS = 30.0
# Names that only the demo project's pages carry: none may appear in a refusal.
PROJECT_WORDS = ("docs-site", "hotfix", "release", "writer.lock", "demo")


@pytest.fixture(scope="module")
def demo_project(tmp_path_factory: pytest.TempPathFactory) -> str:
    return build_demo(str(tmp_path_factory.mktemp("serve") / "demo")).directory


def wait_for(condition: Callable[[], object], what: str, deadline: float = DEADLINE_SECONDS) -> object:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


class Served:
    """One ``nexus-tui serve`` process; its output is collected by a reader thread."""

    def __init__(self, *arguments: str, preexec_fn: Callable[[], None] | None = None) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "nexus_tui", "serve", "--port", "0", *arguments],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
            preexec_fn=preexec_fn,  # the tests set the server's resource limits
        )
        self.lines: list[str] = []
        self.errors: list[str] = []
        self._readers = [
            threading.Thread(target=self._read, args=(self.process.stdout, self.lines), daemon=True),
            threading.Thread(target=self._read, args=(self.process.stderr, self.errors), daemon=True),
        ]
        for reader in self._readers:
            reader.start()
        self.url = str(wait_for(self._url, "the server's URL"))
        parts = urlsplit(self.url)
        self.base = f"{parts.scheme}://{parts.netloc}"
        self.token = parts.query.removeprefix("token=")
        self.port = parts.port

    @staticmethod
    def _read(stream: object, into: list[str]) -> None:
        for line in stream:  # type: ignore[attr-defined]
            into.append(line)

    def _url(self) -> str | None:
        if self.process.poll() is not None:
            raise AssertionError(f"server exited early: {''.join(self.lines + self.errors)}")
        for line in self.lines:
            match = re.search(r"http://\S+\?token=\S+", line)
            if match:
                return match.group(0)
        return None

    @property
    def cookie(self) -> dict[str, str]:
        return {f"nexus_serve_token_{self.port}": self.token}

    def session_pids(self) -> list[int]:
        opened = (re.search(r"session opened .*\(pid (\d+),", line) for line in list(self.lines))
        return [int(match.group(1)) for match in opened if match]

    def wait_sessions(self, count: int) -> list[int]:
        wait_for(lambda: len(self.session_pids()) >= count, f"{count} session(s) to open")
        return self.session_pids()

    def stop(self) -> int:
        """Ctrl+C, as a terminal sends it; the exit status."""
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGINT)
        status = self.process.wait(timeout=DEADLINE_SECONDS)
        for reader in self._readers:
            reader.join(timeout=DEADLINE_SECONDS)
        return status

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=DEADLINE_SECONDS)


@contextlib.contextmanager
def served(*arguments: str, preexec_fn: Callable[[], None] | None = None) -> Iterator[Served]:
    server = Served(*arguments, preexec_fn=preexec_fn)
    try:
        yield server
    finally:
        pids = server.session_pids()
        if server.process.poll() is None:
            server.kill()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def command_line(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")


def children_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                stat = (entry / "stat").read_text()
                if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(entry.name))
    return found


def assert_refusal(status: int, body: str) -> None:
    assert status == 403
    assert "Access token required" in body
    for word in PROJECT_WORDS:
        assert word not in body


# ----------------------------------------------------------------- HTTP level


async def test_page_assets_and_websocket_refuse_a_missing_or_wrong_token(demo_project: str) -> None:
    with served("-d", demo_project) as server:
        async with aiohttp.ClientSession() as client:
            for path in ("/", "/?token=", "/?token=wrong", f"/?token={server.token}x", "/static/js/textual.js", "/ws"):
                async with client.get(server.base + path) as response:
                    assert_refusal(response.status, await response.text())
                    assert "Set-Cookie" not in response.headers
            wrong_cookie = {f"nexus_serve_token_{server.port}": "x"}
            async with client.get(server.base + "/static/css/xterm.css", cookies=wrong_cookie) as bad:
                assert_refusal(bad.status, await bad.text())
            with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
                await client.ws_connect(server.base + "/ws?width=80&height=24")
            assert refused.value.status == 403
        assert server.session_pids() == []
        assert server.stop() == 0


async def test_good_token_serves_the_page_with_only_local_assets(demo_project: str) -> None:
    with served("-d", demo_project) as server:
        async with aiohttp.ClientSession() as client, client.get(server.url) as response:
            page = await response.text()
            assert response.status == 200
            assert response.cookies[f"nexus_serve_token_{server.port}"].value == server.token
            assert response.cookies[f"nexus_serve_token_{server.port}"]["httponly"]
            assert "connect-src 'self'" in response.headers["Content-Security-Policy"]
        assert "read-only" in page
        # Nothing from outside the host: every asset the page names is one of ours.
        assert "://" not in page.replace('"wss://"', "").replace('"ws://"', "")
        assets = re.findall(r'(?:src|href)="([^"]+)"', page) + re.findall(r'url\("([^"]+)"\)', page)
        assert assets and all(asset.startswith("/static/") for asset in assets)
        async with aiohttp.ClientSession(cookies=server.cookie) as client:
            for asset in assets:
                async with client.get(server.base + asset) as fetched:
                    assert fetched.status == 200, asset
                    assert len(await fetched.read()) > 100
            async with client.get(server.base + "/static/images/background.png") as unlisted:
                assert unlisted.status == 404
        assert server.stop() == 0


async def test_websocket_from_another_origin_is_refused(demo_project: str) -> None:
    with served("-d", demo_project) as server:
        async with aiohttp.ClientSession(cookies=server.cookie) as client:
            with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
                await client.ws_connect(server.base + "/ws", headers={"Origin": "http://evil.example"})
            assert refused.value.status == 403
        assert server.session_pids() == []
        assert server.stop() == 0


async def test_sessions_are_read_only_unless_allow_actions(demo_project: str) -> None:
    for arguments, read_only in ((("-d", demo_project), True), (("-d", demo_project, "--allow-actions"), False)):
        with served(*arguments) as server:
            async with aiohttp.ClientSession(cookies=server.cookie) as client:
                async with client.get(server.url) as response:
                    assert ("read-only" in await response.text()) is read_only
                async with client.ws_connect(server.base + "/ws?width=100&height=30") as socket:
                    [pid] = server.wait_sessions(1)
                    assert ("--read-only" in command_line(pid)) is read_only
                    assert demo_project in command_line(pid)
                    await socket.receive(timeout=DEADLINE_SECONDS)  # the app's first bytes
            assert server.stop() == 0


async def test_serve_discover_passes_the_root_to_every_session(demo_project: str) -> None:
    root = str(Path(demo_project).parent)
    with served("--discover", root, "--discover-depth", "2") as server:
        async with (
            aiohttp.ClientSession(cookies=server.cookie) as client,
            client.ws_connect(server.base + "/ws") as socket,
        ):
            [pid] = server.wait_sessions(1)
            arguments = command_line(pid)
            assert arguments[arguments.index("--discover") :][:4] == ["--discover", root, "--discover-depth", "2"]
            assert "-d" not in arguments  # no fallback to the current directory
            received = b""
            end = time.monotonic() + DEADLINE_SECONDS
            while b"All projects" not in received and time.monotonic() < end:
                message = await socket.receive(timeout=DEADLINE_SECONDS)
                received += message.data if isinstance(message.data, bytes) else b""
            assert b"All projects" in received  # the session runs the --discover dashboard
        assert server.stop() == 0


async def test_max_sessions_gives_the_next_browser_a_page_not_a_process(demo_project: str) -> None:
    with served("-d", demo_project, "--max-sessions", "1") as server:
        async with aiohttp.ClientSession(cookies=server.cookie) as client:
            async with client.ws_connect(server.base + "/ws") as first:
                [pid] = server.wait_sessions(1)
                await first.receive(timeout=DEADLINE_SECONDS)
                async with client.get(server.url) as busy:
                    text = await busy.text()
                    assert busy.status == 503
                    assert "All dashboard sessions are in use" in text
                    assert "--max-sessions" in text
                with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
                    await client.ws_connect(server.base + "/ws")
                assert refused.value.status == 503
                assert children_of(server.process.pid) == [pid]
            # The slot comes back once the first session ends.
            wait_for(lambda: not group_alive(pid), "the first session to end")
            async with client.get(server.url) as again:
                assert again.status == 200
        assert server.stop() == 0


async def test_quitting_the_app_ends_its_session(demo_project: str) -> None:
    with served("-d", demo_project) as server:
        async with aiohttp.ClientSession(cookies=server.cookie) as client:
            socket = await client.ws_connect(server.base + "/ws?width=120&height=40")
            [pid] = server.wait_sessions(1)
            await socket.receive(timeout=DEADLINE_SECONDS)
            await socket.send_json(["stdin", "q"])  # the dashboard's Quit key
            wait_for(lambda: f"session closed (pid {pid})" in "".join(server.lines), "the session to close")
            assert not group_alive(pid)
            await socket.close()
        assert server.stop() == 0


async def test_stopping_the_server_ends_every_session_process(demo_project: str) -> None:
    with served("-d", demo_project) as server:
        async with aiohttp.ClientSession(cookies=server.cookie) as client:
            sockets = [await client.ws_connect(server.base + "/ws") for _ in range(2)]
            pids = server.wait_sessions(2)
            for socket in sockets:
                await socket.receive(timeout=DEADLINE_SECONDS)
            assert all(group_alive(pid) for pid in pids)
            assert server.stop() == 0
            for socket in sockets:
                await socket.close()
        assert not any(group_alive(pid) for pid in pids)
        assert "every session has ended" in "".join(server.lines)


def test_non_loopback_host_warns_what_anyone_can_see(demo_project: str) -> None:
    with served("-d", demo_project, "--host", "0.0.0.0") as server:
        assert server.stop() == 0
    warning = "".join(server.errors)
    assert "not on loopback" in warning
    assert "every run, task, attempt" in warning
    assert "ACT on them" not in warning
    with served("-d", demo_project, "--host", "0.0.0.0", "--allow-actions") as acting:
        assert acting.stop() == 0
    assert "ACT on them" in "".join(acting.errors)
    with served("-d", demo_project) as quiet:
        assert quiet.stop() == 0
    assert "warning" not in "".join(quiet.errors)


def test_a_port_in_use_is_refused_without_a_traceback(demo_project: str) -> None:
    with served("-d", demo_project) as server:
        command = [sys.executable, "-m", "nexus_tui", "serve", "-d", demo_project, "--port", str(server.port)]
        done = subprocess.run(command, capture_output=True, text=True, timeout=DEADLINE_SECONDS, check=False)
        assert done.returncode == 1
        assert f"Nexus: cannot listen on 127.0.0.1:{server.port}" in done.stderr
        assert "Traceback" not in done.stderr
        assert server.stop() == 0


def test_bad_arguments_are_refused_without_a_traceback(tmp_path: Path) -> None:
    for arguments, message in (
        (["serve", "-d", str(tmp_path / "missing")], "Nexus: not a directory"),
        (["--read-only", "serve", "--allow-actions"], "cannot be used together"),
        (["serve", "--max-sessions", "0"], "--max-sessions"),
        (["serve", "--discover", str(tmp_path / "missing")], "Nexus: not a directory"),
        (["--discover", str(tmp_path / "missing")], "Nexus: not a directory"),
    ):
        command = [sys.executable, "-m", "nexus_tui", *arguments]
        done = subprocess.run(command, capture_output=True, text=True, timeout=DEADLINE_SECONDS, check=False)
        assert done.returncode == 1
        assert message in done.stderr
        assert "Traceback" not in done.stderr


# ----------------------------------------------------------------- in a real browser

CHROMIUM = shutil.which("chromium")
CHROMEDRIVER = shutil.which("chromedriver")

# Keeps a copy of what the app sends to the terminal: the text is drawn on a canvas, so the page's
# DOM holds none of it. Installed before any page script runs (DevTools protocol).
RECORD_TERMINAL = """
window.nexusReceived = [];
const NativeWebSocket = window.WebSocket;
window.WebSocket = function (url, protocols) {
  const socket = protocols === undefined ? new NativeWebSocket(url) : new NativeWebSocket(url, protocols);
  socket.addEventListener("message", (event) => {
    if (typeof event.data !== "string") {
      window.nexusReceived.push(new TextDecoder().decode(new Uint8Array(event.data)));
    }
  });
  return socket;
};
window.WebSocket.prototype = NativeWebSocket.prototype;
"""
ESCAPES = re.compile(r"\x1b(?:\[[0-9;?$]*[A-Za-z]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[()][A-Z0-9]|[=>])")


def _browser_or_skip() -> object:
    if not (CHROMIUM and CHROMEDRIVER):
        if os.environ.get("CI") == "true":
            pytest.fail("chromium and chromium-driver are required under CI (.ci/run installs them)")
        pytest.skip("needs chromium and chromium-driver (apt-get install chromium chromium-driver)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in (
        "--headless=new",
        "--no-sandbox",  # root in a container has no user namespace for chromium's sandbox
        "--disable-dev-shm-usage",
        "--enable-unsafe-swiftshader",  # software WebGL for xterm.js's renderer
        "--window-size=1600,1000",
    ):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": RECORD_TERMINAL})
    return driver


def _screen_text(driver: object) -> str:
    raw = driver.execute_script("return (window.nexusReceived || []).join('')")  # type: ignore[attr-defined]
    return ESCAPES.sub("", str(raw))


def _wait_screen(driver: object, *texts: str) -> None:
    try:
        wait_for(lambda: all(text in _screen_text(driver) for text in texts), f"the page to show {texts}")
    except AssertionError as error:
        received = _screen_text(driver)[-3000:]
        raise AssertionError(f"{error}; the terminal received (last 3000 characters):\n{received}") from None


def _press(driver: object, keys: str) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    terminal = driver.find_element(By.CSS_SELECTOR, ".xterm-helper-textarea")  # type: ignore[attr-defined]
    ActionChains(driver).send_keys_to_element(terminal, keys).perform()  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def machine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three projects under one root: the demo, one with a torn run file, one with no run yet."""
    root = tmp_path_factory.mktemp("machine")
    build_demo(str(root / "team-a" / "release"))
    broken = build_demo(str(root / "team-b" / "api")).directory
    state = Path(broken, ".bmad-plus/nexus/runs/hotfix.json")
    state.write_bytes(state.read_bytes()[:100])
    (root / "team-b" / "new" / ".bmad-plus" / "nexus").mkdir(parents=True)
    return root


def test_discover_in_a_real_browser(machine: Path, tmp_path: Path) -> None:
    driver = _browser_or_skip()
    try:
        with served("--discover", str(machine)) as server:
            driver.get(server.url)  # type: ignore[attr-defined]
            _wait_screen(driver, "All projects", "team-a/release", "team-b/api", "team-b/new", "1 unreadable")
            shot = tmp_path / "browser-discover.png"
            driver.save_screenshot(str(shot))  # type: ignore[attr-defined]
            if os.environ.get("NEXUS_UPDATE_SCREENSHOTS") == "1":
                shutil.copyfile(shot, REPO / "screenshots" / "browser-discover.png")
            [pid] = server.wait_sessions(1)
            assert server.stop() == 0
            assert not group_alive(pid)
    finally:
        driver.quit()  # type: ignore[attr-defined]


def test_in_a_real_browser(demo_project: str, tmp_path: Path) -> None:
    driver = _browser_or_skip()
    lock = Path(demo_project, ".bmad-plus/nexus/writer.lock")
    lock_before = lock.read_bytes()
    try:
        with served("-d", demo_project) as server:
            for refused in (server.base + "/", server.base + "/?token=wrong"):
                driver.get(refused)  # type: ignore[attr-defined]
                source = driver.page_source  # type: ignore[attr-defined]
                assert "Access token required" in source
                assert not any(word in source for word in PROJECT_WORDS)
            assert server.session_pids() == []

            driver.get(server.url)  # type: ignore[attr-defined]
            _wait_screen(driver, "Runs (3)", "docs-site", "hotfix", "release", "read-only: watching writes nothing")
            [pid] = server.wait_sessions(1)
            # Nothing was fetched from anywhere but this server.
            origins = driver.execute_script(  # type: ignore[attr-defined]
                "return performance.getEntriesByType('resource').map(e => new URL(e.name).host)"
            )
            assert set(origins) <= {urlsplit(server.base).netloc}
            shot = tmp_path / "browser.png"
            driver.save_screenshot(str(shot))  # type: ignore[attr-defined]
            assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
            if os.environ.get("NEXUS_UPDATE_SCREENSHOTS") == "1":
                shutil.copyfile(shot, REPO / "screenshots" / "browser.png")

            # Read-only: "L" (recover the demo's dead writer.lock) does nothing; "?" after it
            # proves the keys reached the app, in order.
            _press(driver, "L?")
            _wait_screen(driver, "Leave the dashboard (nothing is written)")
            assert "Recover writer.lock" not in _screen_text(driver)
            assert lock.read_bytes() == lock_before

            assert server.stop() == 0
            assert not group_alive(pid)

        # The same keystroke with --allow-actions opens the recover-lock dialog (and is left unconfirmed).
        with served("-d", demo_project, "--allow-actions") as acting:
            driver.get(acting.url)  # type: ignore[attr-defined]
            _wait_screen(driver, "Runs (3)", "actions enabled (each asks first)")
            _press(driver, "L")
            _wait_screen(driver, "Recover writer.lock")
            [acting_pid] = acting.wait_sessions(1)
            assert acting.stop() == 0
            assert not group_alive(acting_pid)
        assert lock.read_bytes() == lock_before
    finally:
        driver.quit()  # type: ignore[attr-defined]


def test_the_page_title_counts_the_needs_as_they_change(tmp_path: Path) -> None:
    """The browser tab's title is the dashboard's, needs count included, and follows a real
    change on disk (the demo's dead writer.lock removed: one need fewer); the inbox opens."""
    driver = _browser_or_skip()
    project = build_demo(str(tmp_path / "demo")).directory
    try:
        with served("-d", project) as server:
            driver.get(server.url)  # type: ignore[attr-defined]

            def title() -> str:
                return str(driver.title)  # type: ignore[attr-defined]

            try:
                wait_for(lambda: title() == "nexus (5 needs you) \u00b7 read-only", "the title with 5 needs")
                Path(project, ".bmad-plus/nexus/writer.lock").unlink()
                wait_for(lambda: title() == "nexus (4 needs you) \u00b7 read-only", "the title with 4 needs")
            except AssertionError as error:
                raise AssertionError(f"{error}; the page's title: {title()!r}") from None
            _press(driver, "i")  # the inbox works in the browser too
            _wait_screen(driver, "Needs you: 4 in 1 project, oldest first")
            [pid] = server.wait_sessions(1)
            assert server.stop() == 0
            assert not group_alive(pid)
    finally:
        driver.quit()  # type: ignore[attr-defined]


def test_serve_with_ssh_shows_a_remote_project_in_the_browser(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``nexus-tui serve --ssh HOST:PATH``: each browser session reaches the host (a real sshd on
    127.0.0.1, tests/ssh_kit.py) and shows its project, its needs in the page's title."""
    from ssh_kit import HOST, REMOTE_NEXUS, running_sshd

    driver = _browser_or_skip()
    project = build_demo(str(tmp_path / "far")).directory
    try:
        with running_sshd(tmp_path / "sshd") as sshd:
            monkeypatch.setenv("NEXUS_SSH_COMMAND", sshd.ssh_command)
            with served("--ssh", f"{HOST}:{project}", "--remote-nexus", REMOTE_NEXUS) as server:
                driver.get(server.url)  # type: ignore[attr-defined]
                _wait_screen(driver, "connected to testhost", "docs-site", "hotfix", "release")
                wait_for(
                    lambda: driver.title == "nexus (5 needs you) \u00b7 read-only",  # type: ignore[attr-defined]
                    "the remote project's needs in the title",
                )
                [pid] = server.wait_sessions(1)
                assert server.stop() == 0
                assert not group_alive(pid)
                # No ssh of the session is left behind (its multiplexed master included).
                wait_for(lambda: not _ssh_clients_of(sshd.client_config), "the session's ssh processes to end")
    finally:
        driver.quit()  # type: ignore[attr-defined]


def _ssh_clients_of(client_config: Path) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                words = command_line(int(entry.name))
                if words[0].endswith("ssh") and str(client_config) in words:
                    found.append(int(entry.name))
    return found
