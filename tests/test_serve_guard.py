"""``nexus-tui serve`` against a stranger on the same machine (issue 22, items 5 and 1).

Real servers (``python -m nexus_tui serve``), real sockets: another process holds 1,100
half-open connections and the operator still gets in; one that never finishes its request is
closed; a ``Host`` that names another site is refused (DNS rebinding); ``--secure-cookie`` marks
the cookie; the soft limit on open files is raised at start; the page drops ``?token=`` from the
address bar in headless Chromium; a ``--discover`` session survives a hostile directory made
while it runs.
"""

from __future__ import annotations

import contextlib
import re
import resource
import socket
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import pytest
from test_serve import (
    DEADLINE_SECONDS,
    ESCAPES,
    _browser_or_skip,
    _wait_screen,
    assert_refusal,
    group_alive,
    served,
    wait_for,
)

from nexus_tui.logic.demo import build_demo

FLOOD = 1100
# The server's descriptors in the flood test: far fewer than the flood, as on a host whose
# limit is low (the raise at start can do nothing when soft and hard are the same).
SERVER_FILES = 256

# Another user's process: FLOOD connections, half of them with a request line never finished;
# it says how many connected, then holds them until its stdin closes.
FLOODER = """
import resource, select, socket, sys, time
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
port, count = int(sys.argv[1]), int(sys.argv[2])
pending = {}
poller = select.poll()
for _ in range(count):
    s = socket.socket()
    s.setblocking(False)
    s.connect_ex(("127.0.0.1", port))
    pending[s.fileno()] = s
    poller.register(s, select.POLLOUT)
connected, end = [], time.monotonic() + 20
while pending and time.monotonic() < end:
    for fd, _ in poller.poll(500):
        s = pending.pop(fd)
        poller.unregister(fd)
        if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0:
            connected.append(s)
for index, s in enumerate(connected):
    if index % 2:
        try:
            s.send(b"GET / HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\n")
        except OSError:
            pass
print("connected", len(connected), flush=True)
sys.stdin.read()
"""


@pytest.fixture(scope="module")
def demo_project(tmp_path_factory: pytest.TempPathFactory) -> str:
    return build_demo(str(tmp_path_factory.mktemp("guard") / "demo")).directory


def files_limit(soft: int, hard: int) -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def soft_files_of(pid: int) -> int:
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            return int(line.split()[3])
    raise AssertionError("no open-files line")


async def test_a_flood_of_half_open_connections_never_locks_the_operator_out(demo_project: str) -> None:
    with served("-d", demo_project, preexec_fn=lambda: files_limit(SERVER_FILES, SERVER_FILES)) as server:
        assert soft_files_of(server.process.pid) == SERVER_FILES
        flooder = subprocess.Popen(
            [sys.executable, "-c", FLOODER, str(server.port), str(FLOOD)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert flooder.stdout is not None
            line = flooder.stdout.readline()
            assert line.startswith("connected"), line
            # Every flood connection is still open on the flooder's side: the operator comes now.
            timeout = aiohttp.ClientTimeout(total=DEADLINE_SECONDS)
            async with aiohttp.ClientSession(timeout=timeout, cookies=server.cookie) as client:
                async with client.get(server.url) as page:
                    assert page.status == 200
                    assert "nexus dashboard" in await page.text()
                async with client.ws_connect(server.base + "/ws?width=100&height=30") as socket_:
                    [pid] = server.wait_sessions(1)
                    await socket_.receive(timeout=DEADLINE_SECONDS)  # the app's first bytes
                    assert group_alive(pid)
        finally:
            flooder.kill()
            flooder.wait()
        assert server.stop() == 0
    assert "Too many open files" not in "".join(server.lines + server.errors)


def _ask_session(connection: socket.socket, server: object) -> bytes:
    """One keep-alive request with the token's cookie on ``connection``; the response head."""
    name, token = next(iter(server.cookie.items()))  # type: ignore[attr-defined]
    connection.sendall(f"GET /session HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: {name}={token}\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = connection.recv(4096)
        assert chunk, "the server closed a connection that showed the token"
        head += chunk
    return head


def test_a_connection_that_never_shows_the_token_is_closed(demo_project: str) -> None:
    with served("-d", demo_project) as server:
        proven = socket.create_connection(("127.0.0.1", server.port), timeout=DEADLINE_SECONDS)
        assert _ask_session(proven, server).startswith(b"HTTP/1.1 204")
        silent = socket.create_connection(("127.0.0.1", server.port))
        slow = socket.create_connection(("127.0.0.1", server.port))
        slow.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # a header never finished
        for connection in (silent, slow):
            connection.settimeout(DEADLINE_SECONDS)
            with contextlib.suppress(ConnectionResetError):  # closed by the server, without lingering
                assert connection.recv(1) == b""  # closed by the server
            connection.close()
        # The connection that showed the token is still served, though it was idle as long.
        assert _ask_session(proven, server).startswith(b"HTTP/1.1 204")
        proven.close()
        assert server.stop() == 0


async def test_a_host_that_is_not_this_servers_is_refused(demo_project: str) -> None:
    with served("-d", demo_project, "--public-host", "nexus.example.org") as server:
        async with aiohttp.ClientSession() as client:
            for host in ("evil.example", "127.0.0.1.evil.example", "nexus.example.org.evil", ""):
                async with client.get(server.url, headers={"Host": host}) as refused:
                    body = await refused.text()
                    assert refused.status == 403, host
                    assert "Unknown host name" in body and "--public-host" in body
                    assert "Set-Cookie" not in refused.headers
                async with aiohttp.ClientSession(cookies=server.cookie) as holder:
                    with pytest.raises(aiohttp.WSServerHandshakeError) as handshake:
                        await holder.ws_connect(server.base + "/ws", headers={"Host": host})
                    assert handshake.value.status == 403
            for host in (
                f"127.0.0.1:{server.port}",
                f"localhost:{server.port}",
                "LOCALHOST.",
                "[::1]:9000",  # an SSH tunnel on another local port
                "nexus.example.org",
                "Nexus.Example.Org:443",
            ):
                async with client.get(server.url, headers={"Host": host}) as allowed:
                    assert allowed.status == 200, host
        # The token is still needed under a good name.
        async with aiohttp.ClientSession() as client, client.get(server.base + "/") as no_token:
            assert_refusal(no_token.status, await no_token.text())
        assert server.session_pids() == []
        assert server.stop() == 0


async def test_secure_cookie_marks_the_token_cookie(demo_project: str) -> None:
    for arguments, secure in (((), False), (("--secure-cookie",), True)):
        with served("-d", demo_project, *arguments) as server:
            async with aiohttp.ClientSession() as client, client.get(server.url) as response:
                assert response.status == 200
                cookie = response.cookies[f"nexus_serve_token_{server.port}"]
                assert bool(cookie["secure"]) is secure
                assert cookie["httponly"] and cookie["samesite"] == "Strict"
            assert server.stop() == 0


def test_the_soft_limit_on_open_files_is_raised_at_start(demo_project: str) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard <= SERVER_FILES:
        pytest.skip(f"the hard limit ({hard}) leaves nothing to raise")
    wanted = hard if hard != resource.RLIM_INFINITY else soft
    with served("-d", demo_project, preexec_fn=lambda: files_limit(SERVER_FILES, wanted)) as server:
        assert soft_files_of(server.process.pid) == wanted
        assert server.stop() == 0


# ----------------------------------------------------------------- --discover, in a session


async def test_a_discover_session_survives_a_hostile_directory_made_while_it_runs(tmp_path: Path) -> None:
    root = tmp_path / "machine"
    build_demo(str(root / "team-a"))
    with served("--discover", str(root)) as server:
        async with (
            aiohttp.ClientSession(cookies=server.cookie) as client,
            client.ws_connect(server.base + "/ws?width=160&height=40") as socket_,
        ):
            [pid] = server.wait_sessions(1)
            received = ""

            async def until_shown(text: str) -> str:
                nonlocal received
                end = time.monotonic() + DEADLINE_SECONDS
                while text not in ESCAPES.sub("", received) and time.monotonic() < end:
                    message = await socket_.receive(timeout=DEADLINE_SECONDS)
                    if isinstance(message.data, bytes):
                        received += message.data.decode("utf-8", "replace")
                    elif message.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED):
                        break
                return ESCAPES.sub("", received)

            assert "All projects" in await until_shown("All projects")
            # A worker makes a directory inside its own scope: x[b="]y in markup killed it.
            (root / 'late[b="]x' / ".bmad-plus" / "nexus").mkdir(parents=True)
            assert 'late[b="]x' in await until_shown('late[b="]x')
            assert group_alive(pid)
            assert f"session closed (pid {pid})" not in "".join(server.lines)
        assert server.stop() == 0
    assert not re.search(r"MarkupError|Traceback", "".join(server.lines + server.errors))


# ----------------------------------------------------------------- in a real browser


def test_the_token_leaves_the_address_bar_once_the_cookie_is_set(demo_project: str) -> None:
    driver = _browser_or_skip()
    try:
        with served("-d", demo_project) as server:
            driver.get(server.url + "&fontsize=14")  # type: ignore[attr-defined]
            _wait_screen(driver, "Runs (3)")
            wait_for(lambda: "token" not in driver.current_url, "the token to leave the address bar")  # type: ignore[attr-defined]
            assert driver.current_url == f"{server.base}/?fontsize=14"  # type: ignore[attr-defined]
            # The cookie does the token's work: a reload shows the dashboard again.
            driver.refresh()  # type: ignore[attr-defined]
            _wait_screen(driver, "Runs (3)")
            assert "Access token required" not in driver.page_source  # type: ignore[attr-defined]
            server.wait_sessions(2)
            assert server.stop() == 0
    finally:
        driver.quit()  # type: ignore[attr-defined]
