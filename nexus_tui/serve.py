"""``nexus-tui serve``: the dashboard in a browser, on textual-serve.

Each browser session runs its own ``nexus-tui`` process (textual-serve's :class:`AppService`
speaks Textual's web-driver protocol with it); this module adds what an operator's server needs:

- an access token per start: the page, its assets and the websocket refuse a missing or wrong
  one with 403 (constant-time compare); the first good request sets an HttpOnly cookie so the
  assets and the websocket need not carry it;
- read-only sessions unless ``allow_actions`` (the dashboard's own ``--read-only`` gate);
- at most ``max_sessions`` session processes; the next browser gets a page saying so;
- every session process is the leader of its own process group, and stopping the server
  ends every group it started;
- nothing loaded from outside the host (our own page; the assets come from the textual-serve
  package);
- before the token is looked at (``serve_guard``): a bounded number of connections that have
  not shown it, each with a deadline, and a ``Host`` that names this server (loopback, the
  listening address or ``--public-host``);
- the cookie can be marked ``Secure`` (``--secure-cookie``: the page is reached over HTTPS
  through a proxy), and the page drops ``?token=`` from the address bar once the cookie works.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import ipaddress
import json
import os
import secrets
import shlex
import signal
import socket
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from aiohttp import WSMsgType, web
from textual_serve.app_service import AppService
from textual_serve.download_manager import DownloadManager

from nexus_core.terminal import terminal_safe

from .serve_guard import ConnectionGate, accept_connections, allowed_names, host_allowed, raise_open_files
from .serve_pages import PAGE_TITLE_META, REFUSED_PAGE, UNKNOWN_HOST_PAGE, busy_page, dashboard_page

DEFAULT_PORT = 8000
DEFAULT_MAX_SESSIONS = 4
# How long a session gets to quit on its own (it is asked first) before its group is killed.
QUIT_GRACE_SECONDS = 3.0
KILL_GRACE_SECONDS = 2.0
STDERR_CHUNK = 64 * 1024

# The only files served under /static/: what our page names, from the textual-serve package.
STATIC_FILES = {
    "js/textual.js": "text/javascript",
    "css/xterm.css": "text/css",
    "fonts/RobotoMono-VariableFont_wght.ttf": "font/ttf",
}

SECURITY_HEADERS = {
    # 'self' only: the page can load and connect to nothing outside this host.
    "Content-Security-Policy": "default-src 'none'; script-src 'self' 'nonce-{nonce}'; style-src 'self' "
    "'unsafe-inline'; font-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; "
    "form-action 'none'; frame-ancestors 'none'",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}


@dataclass(frozen=True)
class ServeConfig:
    """What ``nexus-tui serve`` was asked for."""

    directories: tuple[str, ...] = ()
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    allow_actions: bool = False
    max_sessions: int = DEFAULT_MAX_SESSIONS
    poll: bool = False
    # Extra arguments for every session's nexus-tui (e.g. --discover ROOT).
    session_arguments: tuple[str, ...] = ()
    # Names the browser may use beyond loopback ones and --host (a reverse proxy's name).
    public_hosts: tuple[str, ...] = ()
    secure_cookie: bool = False  # the token cookie only ever travels over HTTPS
    token: str = field(default_factory=lambda: secrets.token_urlsafe(32))

    @property
    def read_only(self) -> bool:
        return not self.allow_actions


def session_command(config: ServeConfig) -> list[str]:
    """The argv of one browser session's dashboard process."""
    command = [sys.executable, "-m", "nexus_tui"]
    for directory in config.directories:
        command += ["-d", directory]
    if config.poll:
        command.append("--poll")
    if config.read_only:
        command.append("--read-only")
    command += config.session_arguments
    return command


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def exposure_warning(config: ServeConfig) -> str:
    """What anyone who reaches a non-loopback address can see (and do)."""
    can = (
        "see every run, task, attempt, check result, evidence path, worker summary and lock of the projects "
        "served, and read their files' names and hashes"
    )
    if config.allow_actions:
        can += ", and ACT on them (start, record, verify, accept, cancel, recover locks: --allow-actions)"
    return (
        f"warning: serving on {config.host}, not on loopback: anyone who can reach this address and holds the "
        f"URL with its token can {can}. The connection is plain HTTP: the token and everything shown cross the "
        "network unencrypted. Prefer an SSH tunnel, or a reverse proxy with TLS (see the README). Browsers must "
        "name the server by a loopback name, the --host address (not a wildcard) or a --public-host name: any "
        "other Host header is refused."
    )


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _kill_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


class SessionProcess(AppService):
    """One browser session's dashboard process, in a process group of its own.

    Replaces textual-serve's shell launch (``create_subprocess_shell`` of one command string)
    with an argv exec, so no directory name is ever parsed by a shell, and a new session, so
    stopping it reaches every process it started. Relies on AppService's ``_process``/``_stdin``
    attributes: textual-serve is pinned exactly in pyproject.toml for that reason.
    """

    def __init__(self, argv: list[str], *, on_stderr: Callable[[bytes], None], **kwargs: Any) -> None:
        super().__init__(shlex.join(argv), **kwargs)
        self.argv = argv
        self._on_stderr = on_stderr
        self._stderr_task: asyncio.Task[None] | None = None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    async def _open_app_process(self, width: int = 80, height: int = 24) -> asyncio.subprocess.Process:
        environment = self._build_environment(width=width, height=height)
        process = await asyncio.create_subprocess_exec(
            *self.argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=environment,
            start_new_session=True,
        )
        # AppService copies the child's stderr raw to our stdout; it may hold worker-controlled
        # text, so we read it ourselves (made terminal-safe) and hand AppService an empty stream.
        child_stderr = process.stderr
        assert child_stderr is not None and process.stdin is not None
        self._stderr_task = asyncio.create_task(self._drain_stderr(child_stderr))
        empty = asyncio.StreamReader()
        empty.feed_eof()
        process.stderr = empty
        self._process = process
        self._stdin = process.stdin
        return process

    async def on_meta(self, data: bytes) -> None:
        """The app's title goes to the page (textual-serve knows no such packet); the rest as usual."""
        with contextlib.suppress(ValueError):
            meta = json.loads(data)
            if isinstance(meta, dict) and meta.get("type") == PAGE_TITLE_META:
                title = terminal_safe(str(meta.get("title", "")), one_line=True)
                await self.remote_write_str(json.dumps([PAGE_TITLE_META, title]))
                return
        await super().on_meta(data)

    async def _drain_stderr(self, stream: asyncio.StreamReader) -> None:
        while True:
            try:
                line = await stream.readline()
            except ValueError:  # a line longer than the reader's limit: what is buffered
                line = await stream.read(STDERR_CHUNK)
            if not line:
                return
            self._on_stderr(line)

    async def shut(self) -> None:
        """Ask the app to quit, then end its whole process group; returns once it has exited."""
        process = self._process
        if process is None:
            return
        if process.returncode is None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.stop(), QUIT_GRACE_SECONDS)
        # The group outlives its leader when the app left children: end it whatever the leader did.
        _kill_group(process.pid, signal.SIGTERM)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(process.wait(), KILL_GRACE_SECONDS)
        _kill_group(process.pid, signal.SIGKILL)
        await process.wait()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task
            self._task = None
        if self._stderr_task is not None:
            # The group is gone, so its stderr ends: read to the end (a crash's last lines).
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(self._stderr_task, KILL_GRACE_SECONDS)


def _to_int(value: str, default: int, low: int, high: int) -> int:
    try:
        return min(high, max(low, int(value)))
    except ValueError:
        return default


class DashboardServer:
    """The aiohttp application and the session processes it owns."""

    def __init__(self, config: ServeConfig, log: Callable[[str], None] = print) -> None:
        self.config = config
        self.log = log
        self.cookie_name = "nexus_serve_token"
        self.sessions: set[SessionProcess] = set()
        self.websockets: set[web.WebSocketResponse] = set()
        self.download_manager = DownloadManager()
        self.static_root = resources.files("textual_serve") / "static"
        self.stopping = False
        self.gate = ConnectionGate()
        self.host_names = allowed_names(config.host, config.public_hosts)

    def bind_port(self, port: int) -> None:
        # Cookies are per host, not per port: two servers on one host must not share one.
        self.cookie_name = f"nexus_serve_token_{port}"

    # -- access control
    def _good(self, presented: str | None) -> bool:
        if not presented:
            return False
        return hmac.compare_digest(presented.encode("utf-8"), self.config.token.encode("utf-8"))

    @web.middleware
    async def _token_gate(self, request: web.Request, handler: Any) -> web.StreamResponse:
        if not host_allowed(request.headers.get("Host"), self.host_names):
            return web.Response(status=403, text=UNKNOWN_HOST_PAGE, content_type="text/html")
        from_query = request.query.get("token")
        if not (self._good(from_query) or self._good(request.cookies.get(self.cookie_name))):
            return web.Response(status=403, text=REFUSED_PAGE, content_type="text/html")
        self.gate.prove(request.transport)
        response: web.StreamResponse = await handler(request)
        if from_query is not None and not response.prepared:
            secure = self.config.secure_cookie or request.secure
            response.set_cookie(
                self.cookie_name, self.config.token, httponly=True, samesite="Strict", path="/", secure=secure
            )
        return response

    def make_app(self) -> web.Application:
        app = web.Application(middlewares=[self._token_gate])
        app.add_routes(
            [
                web.get("/", self.handle_index),
                web.get("/session", self.handle_session),
                web.get("/ws", self.handle_websocket),
                web.get("/static/{name:.+}", self.handle_static),
            ]
        )
        return app

    # -- handlers
    def _full(self) -> bool:
        return len(self.sessions) >= self.config.max_sessions

    def _busy(self) -> web.Response:
        return web.Response(status=503, text=busy_page(self.config.max_sessions), content_type="text/html")

    async def handle_index(self, request: web.Request) -> web.Response:
        if self._full():
            return self._busy()
        nonce = secrets.token_urlsafe(16)
        font_size = _to_int(request.query.get("fontsize", "16"), 16, 6, 64)
        page = dashboard_page(nonce=nonce, read_only=self.config.read_only, font_size=font_size)
        response = web.Response(text=page, content_type="text/html")
        for name, value in SECURITY_HEADERS.items():
            response.headers[name] = value.replace("{nonce}", nonce)
        return response

    async def handle_session(self, request: web.Request) -> web.Response:
        """204 once the cookie works (the page asks, without the token, before dropping it from
        the address bar)."""
        return web.Response(status=204, headers={"Cache-Control": "no-store"})

    async def handle_static(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        content_type = STATIC_FILES.get(name)
        if content_type is None:
            raise web.HTTPNotFound()
        body = (self.static_root / name).read_bytes()
        return web.Response(body=body, content_type=content_type, headers={"Cache-Control": "no-store"})

    def _same_origin(self, request: web.Request) -> bool:
        # A page on another site cannot open our websocket with the operator's cookie.
        origin = request.headers.get("Origin")
        if origin is None:
            return True
        return origin.split("://", 1)[-1] == request.host

    async def handle_websocket(self, request: web.Request) -> web.StreamResponse:
        if not self._same_origin(request):
            return web.Response(status=403, text=REFUSED_PAGE, content_type="text/html")
        if self._full() or self.stopping:
            return self._busy()
        width = _to_int(request.query.get("width", "80"), 80, 10, 1000)
        height = _to_int(request.query.get("height", "24"), 24, 5, 1000)
        websocket = web.WebSocketResponse(heartbeat=15)
        session = SessionProcess(
            session_command(self.config),
            on_stderr=self._child_stderr,
            write_bytes=websocket.send_bytes,
            write_str=websocket.send_str,
            close=websocket.close,
            download_manager=self.download_manager,
        )
        # Counted before the first await: the limit holds against simultaneous connections.
        self.sessions.add(session)
        try:
            await websocket.prepare(request)
            self.websockets.add(websocket)
            await session.start(width, height)
            peer = request.remote or "?"
            self.log(
                f"session opened for {peer} (pid {session.pid}, {len(self.sessions)} of {self.config.max_sessions})"
            )
            await self._relay(websocket, session)
        except (asyncio.CancelledError, ConnectionError):
            pass
        finally:
            pid = session.pid
            await session.shut()
            self.sessions.discard(session)
            self.websockets.discard(websocket)
            with contextlib.suppress(Exception):
                await websocket.close()
            if pid is not None:
                self.log(f"session closed (pid {pid})")
        return websocket

    async def _relay(self, websocket: web.WebSocketResponse, session: SessionProcess) -> None:
        """Browser -> app: keystrokes, resizes, focus. Malformed messages are dropped."""
        async for message in websocket:
            if message.type != WSMsgType.TEXT:
                continue
            try:
                envelope = message.json()
                kind = envelope[0]
                if kind == "stdin":
                    await session.send_bytes(str(envelope[1]).encode("utf-8"))
                elif kind == "resize":
                    size = envelope[1]
                    await session.set_terminal_size(
                        _to_int(str(size["width"]), 80, 10, 1000), _to_int(str(size["height"]), 24, 5, 1000)
                    )
                elif kind == "ping":
                    await websocket.send_json(["pong", str(envelope[1])])
                elif kind == "blur":
                    await session.blur()
                elif kind == "focus":
                    await session.focus()
            except (ValueError, LookupError, TypeError):
                continue

    def _child_stderr(self, line: bytes) -> None:
        self.log("session: " + terminal_safe(line.decode("utf-8", "replace").rstrip("\n"), one_line=True))

    async def close(self) -> None:
        """End every session process (their groups) and close every websocket."""
        self.stopping = True
        await asyncio.gather(*(session.shut() for session in list(self.sessions)), return_exceptions=True)
        for websocket in list(self.websockets):
            with contextlib.suppress(Exception):
                await websocket.close()


def open_listener(host: str, port: int) -> socket.socket:
    """The listening socket (port 0: any free port). OSError when the address cannot be had."""
    family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    listener = socket.socket(family, kind, proto)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(address)
        listener.listen(128)
        listener.setblocking(False)
    except OSError:
        listener.close()
        raise
    return listener


@contextlib.contextmanager
def _stop_on_signals(loop: asyncio.AbstractEventLoop, stop: asyncio.Event) -> Iterator[None]:
    signals = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    for sig in signals:
        loop.add_signal_handler(sig, stop.set)
    try:
        yield
    finally:
        for sig in signals:
            loop.remove_signal_handler(sig)


async def run_server(
    config: ServeConfig,
    stop: asyncio.Event,
    log: Callable[[str], None] = print,
    ready: Callable[[str], None] | None = None,
) -> None:
    """Serve until ``stop`` is set, then end every session. ``ready`` gets the tokenised URL."""
    listener = open_listener(config.host, config.port)
    port = listener.getsockname()[1]
    server = DashboardServer(config, log)
    server.bind_port(port)
    runner = web.AppRunner(server.make_app(), handle_signals=False, access_log=None)
    await runner.setup()
    assert runner.server is not None
    # Accepted here, not by an aiohttp site: every connection is counted by the gate first.
    accepting = asyncio.create_task(accept_connections(listener, runner.server, server.gate))

    def accepting_ended(task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            log(f"Nexus: the server stopped accepting connections: {task.exception()}")
            stop.set()

    accepting.add_done_callback(accepting_ended)
    try:
        url = f"http://{_url_host(config.host)}:{port}/?token={config.token}"
        (ready or log)(url)
        await stop.wait()
    finally:
        accepting.cancel()
        with contextlib.suppress(BaseException):
            await accepting
        await server.close()
        await runner.cleanup()
        listener.close()


def serve(config: ServeConfig) -> int:
    """``nexus-tui serve``: run until Ctrl+C (or SIGTERM); the exit status."""
    for directory in config.directories:
        if not os.path.isdir(directory):
            print(f"Nexus: not a directory: {terminal_safe(directory, one_line=True)}", file=sys.stderr)
            return 1
    if config.max_sessions < 1:
        print("Nexus: --max-sessions must be at least 1", file=sys.stderr)
        return 1
    if not is_loopback(config.host):
        print(exposure_warning(config), file=sys.stderr, flush=True)
    raise_open_files()  # room for the sessions; the gate bounds what strangers can hold

    def say(line: str) -> None:
        print(line, flush=True)

    def ready(url: str) -> None:
        mode = "read-only" if config.read_only else "ACTIONS ENABLED"
        say(f"nexus dashboard ({mode}, at most {config.max_sessions} session(s)) at:")
        say(f"    {url}")
        say("Press Ctrl+C to stop the server and every session it started.")

    async def main() -> None:
        stop = asyncio.Event()
        with _stop_on_signals(asyncio.get_running_loop(), stop):
            await run_server(config, stop, say, ready)

    try:
        asyncio.run(main())
    except OSError as error:
        print(f"Nexus: cannot listen on {config.host}:{config.port}: {error.strerror or error}", file=sys.stderr)
        return 1
    say("Server stopped; every session has ended.")
    return 0
