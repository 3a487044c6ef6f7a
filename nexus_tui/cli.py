"""The ``nexus-tui`` command line, on click with the conventions of ``nexus`` (``-d``,
``--version``, ``-h``, shell completion through ``_NEXUS_TUI_COMPLETE``).

It is a click group that runs the dashboard when no subcommand is named, so
``nexus-tui -d DIR`` and ``nexus-tui SUBCOMMAND ...`` live side by side. To add a subcommand::

    @dashboard.command("serve", help="...")
    @click.option(...)
    @click.pass_obj
    def serve(options: DashboardOptions, ...) -> None: ...

``options`` holds what was given before the subcommand's name (``nexus-tui -d A serve``);
a subcommand may also declare its own options. Textual is imported only when the dashboard
starts, so ``--help``, ``--version`` and completion stay fast.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

import click
from click.shell_completion import CompletionItem

from nexus_core.terminal import terminal_safe

if TYPE_CHECKING:
    from .app import NexusApp


@dataclass(frozen=True)
class DashboardOptions:
    """The group's options, for the bare form and for any subcommand (``ctx.obj``)."""

    directories: tuple[str, ...]
    poll: bool
    read_only: bool
    demo: bool
    discover: str | None = None
    discover_depth: int = 4
    config: str | None = None
    remote: tuple[str, ...] = ()  # --ssh HOST:PATH, as given
    remote_nexus: str = "nexus"  # --remote-nexus CMD
    keep_demo: bool = False  # --keep-demo: the demo project stays after the dashboard ends


def remote_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """``--ssh HOST:PATH`` (repeatable) and ``--remote-nexus CMD`` (the dashboard and ``serve``)."""
    command = click.option(
        "--remote-nexus",
        default="nexus",
        show_default=True,
        metavar="CMD",
        help="The nexus command on the --ssh hosts, for their shell (e.g. ~/.venv/bin/nexus or "
        "'python3 -m nexus_core.cli').",
    )(command)
    return click.option(
        "--ssh",
        "remote",
        multiple=True,
        metavar="HOST:PATH",
        help="A project on another host, over ssh (your ssh config, keys and known_hosts; NEXUS_SSH_COMMAND "
        "replaces 'ssh'). Repeatable; one connection per host.",
    )(command)


def remote_projects(specs: tuple[str, ...]) -> list[Any] | None:
    """The --ssh projects, or None after printing why one cannot be used (exit 1)."""
    from .logic.ssh import RemoteSpecError, parse_remote, ssh_program

    try:
        if specs:
            ssh_program()
        return [parse_remote(spec) for spec in specs]
    except (RemoteSpecError, ValueError) as error:
        print(f"Nexus: {terminal_safe(error, one_line=True)}", file=sys.stderr)
        return None


def complete_directory(_ctx: click.Context, _param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """The shell's own directory completion (click's protocol: type ``dir``). Not ``click.Path``:
    its conversion would replace the dashboard's own "not a directory" refusal."""
    return [CompletionItem(incomplete, type="dir")]


def discover_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """``--discover ROOT`` and ``--discover-depth N`` (the dashboard and ``serve``)."""
    command = click.option(
        "--discover-depth",
        default=4,
        show_default=True,
        type=click.IntRange(0, 64),
        help="How many directory levels below ROOT --discover looks.",
    )(command)
    return click.option(
        "--discover",
        metavar="ROOT",
        shell_complete=complete_directory,
        help="Every project under ROOT (holding .bmad-plus/nexus), one tab each and an 'All projects' tab; "
        "keeps looking for new ones.",
    )(command)


def directory_option(help_text: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``-d/--directory DIR`` (repeatable, completing directories), shared by the bare form and serve."""
    return click.option(
        "-d",
        "--directory",
        "directories",
        multiple=True,
        metavar="DIR",
        shell_complete=complete_directory,
        help=help_text,
    )


@click.group(
    name="nexus-tui",
    invoke_without_command=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    help="Live dashboard of nexus runs: one tab per project directory.",
)
@directory_option("Project directory (repeat for several tabs; default: the current directory).")
@click.option("--poll", is_flag=True, help="No file watcher: rescan every second instead.")
@click.option("--read-only", "read_only", is_flag=True, help="Disable every action that changes state.")
@click.option(
    "--demo",
    is_flag=True,
    help="Build a demo project in a temporary directory (real core) and open it; it is removed on exit.",
)
@click.option("--keep-demo", "keep_demo", is_flag=True, help="With --demo: keep the demo project and print where.")
@discover_options
@remote_options
@click.option(
    "--config",
    metavar="PATH",
    help="The settings file (default: $XDG_CONFIG_HOME/nexus/config.toml, i.e. ~/.config/nexus/config.toml).",
)
@click.version_option(package_name="nexus-registry", prog_name="nexus-tui")
@click.pass_context
def dashboard(
    ctx: click.Context,
    directories: tuple[str, ...],
    poll: bool,
    read_only: bool,
    demo: bool,
    keep_demo: bool,
    discover: str | None,
    discover_depth: int,
    remote: tuple[str, ...],
    remote_nexus: str,
    config: str | None,
) -> int:
    if keep_demo and not demo:
        _usage_error("--keep-demo goes with --demo.")
    options = DashboardOptions(
        directories,
        poll,
        read_only,
        demo,
        discover,
        discover_depth,
        config,
        remote=remote,
        remote_nexus=remote_nexus,
        keep_demo=keep_demo,
    )
    ctx.obj = options
    if ctx.invoked_subcommand is not None:
        return 0  # the subcommand runs next and its return value is the exit status
    return run_dashboard(options)


def run_dashboard(options: DashboardOptions) -> int:
    """Open the dashboard on ``options``; the exit status (1 with a ``Nexus:`` line on bad input).
    ``--demo``'s temporary project is removed however the dashboard ends (quit, Ctrl+C, SIGTERM,
    SIGHUP, a crash), unless ``--keep-demo``; only SIGKILL leaves it behind."""
    demo_dir = None
    if options.demo:
        import tempfile

        # Built by the dashboard once its first frame is on screen (progress shown there).
        demo_dir = os.path.realpath(tempfile.mkdtemp(prefix="nexus-demo-"))
    app: NexusApp | None = None
    try:
        status, app = _open_dashboard(options, demo_dir)
    finally:
        if demo_dir is not None and not options.keep_demo:
            _remove_demo(demo_dir, app)
    if demo_dir is not None and options.keep_demo and app is not None and app.demo_error is None:
        print(f"The demo project is kept in {demo_dir} (try: nexus inspect -d {demo_dir}); delete it when done.")
    if app is None:
        return status
    end_process(status)


def _remove_demo(directory: str, app: NexusApp | None) -> None:
    """Stop the demo's builder (it writes there) and delete the demo project; say if it stays."""
    from .logic.demo import remove_demo

    if app is not None and app.demo is not None:
        app.demo.stop(wait=True)
    problem = remove_demo(directory)
    if problem is not None:
        print(f"Nexus: could not remove the demo project {directory}: {problem}", file=sys.stderr)


def _open_dashboard(options: DashboardOptions, demo_dir: str | None) -> tuple[int, NexusApp | None]:
    """Check the options and run the dashboard: the exit status, and the app (None when the
    options were refused before it started)."""
    directories = list(options.directories)
    if demo_dir is not None:
        directories = [demo_dir, *directories]
    remote = remote_projects(options.remote)
    if remote is None:
        return 1, None
    if options.discover is None and not remote:
        directories = directories or [os.getcwd()]
    for directory in directories:
        problem = project_problem(directory)
        if problem is not None:  # as nexus prints a refusal: its message, then the hint
            from nexus_core.cli.refusal import human_text
            from nexus_core.errors import hint_of, message_of

            sys.stderr.write(human_text(message_of(problem), hint_of(problem)))
            return 1, None
    settings = load_settings(options.config)
    if settings is None:
        return 1, None
    from .app import NexusApp
    from .logic.demo import DemoBuild

    demo = DemoBuild(demo_dir) if demo_dir else None
    if options.discover is not None:
        if not os.path.isdir(options.discover):
            print(f"Nexus: not a directory: {options.discover}", file=sys.stderr)
            return 1, None
        from .discover_app import DiscoverApp

        app: NexusApp = DiscoverApp(
            options.discover,
            depth=options.discover_depth,
            directories=directories,
            poll=options.poll,
            read_only=options.read_only,
            demo=demo,
            settings=settings,
            remote=remote,
            remote_nexus=options.remote_nexus,
        )
    else:
        app = NexusApp(
            directories,
            poll=options.poll,
            read_only=options.read_only,
            demo=demo,
            settings=settings,
            remote=remote,
            remote_nexus=options.remote_nexus,
        )
    status = run_until_quit(app)
    if app.demo_error is not None:
        print(f"Nexus: could not build the demo: {terminal_safe(app.demo_error, one_line=True)}", file=sys.stderr)
        status = 1
    return status, app


def load_settings(path: str | None) -> Any:
    """The settings (``--config PATH`` or the default file), checked against the themes and the
    action registry; None after printing why they cannot be used (the file, line and key)."""
    from .logic.settings import SettingsError, load

    try:
        settings = load(path, explicit=path is not None)
        from textual.theme import BUILTIN_THEMES

        from . import actions

        settings.check(
            themes=BUILTIN_THEMES,
            binding_ids=[entry.id for entry in actions.REGISTRY if entry.keys],
            clash=actions.keymap_clash,
        )
    except SettingsError as error:
        print(f"Nexus: {terminal_safe(error.message, one_line=True)}", file=sys.stderr)
        return None
    return settings


def run_until_quit(app: NexusApp) -> int:
    """Run ``app`` on a loop of its own. ``asyncio.run`` (what ``App.run`` uses by default)
    would then join the loop's thread pool: a worker thread blocked in a read (a hung network
    filesystem, a device) would hold the quit forever after the screen was restored. SIGTERM
    and SIGHUP end the app like a quit (the terminal restored, ``--demo``'s project removed);
    the exit status is then 128 + the signal's number, as a shell reports it."""
    import asyncio
    import signal

    loop = asyncio.new_event_loop()
    ended_by: list[int] = []

    def end(signal_number: int) -> None:
        ended_by.append(signal_number)
        app.exit()

    for signal_number in (signal.SIGTERM, signal.SIGHUP):
        loop.add_signal_handler(signal_number, end, signal_number)
    from textual.drivers.linux_driver import LinuxDriver

    from .terminal_driver import TerminalDriver

    if app.driver_class is LinuxDriver:  # a terminal that may hang up (not Windows, not a browser)
        app.driver_class = TerminalDriver
    try:
        app.run(loop=loop)
    finally:
        loop.close()  # shuts its thread pool down without waiting for it
    return 128 + ended_by[0] if ended_by else 0


def end_process(status: int) -> NoReturn:
    """End the dashboard process now that the terminal is restored. ``os._exit``: the
    interpreter's exit would join every thread still running (the thread pools' workers), and
    the dashboard writes nothing that needs its teardown (what it wrote is flushed here)."""
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(status)


def project_problem(directory: str) -> Exception | None:
    """Why ``directory`` cannot be shown (the core's refusal for an unusable state directory)."""
    from nexus_core.errors import NexusError

    if not os.path.isdir(directory):
        return NexusError(f"not a directory: {directory}")
    from nexus_core.paths import root_of

    try:
        root_of(directory)
    except NexusError as error:
        return error
    return None


def _usage_error(message: str) -> NoReturn:
    # The same shape and status as ``nexus``'s usage errors.
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(1)


COMPLETE_VAR = "_NEXUS_TUI_COMPLETE"  # click's shell completion protocol, as for nexus


def complete(instruction: str) -> int:
    """Answer ``_NEXUS_TUI_COMPLETE=<instruction>``; never a traceback in the operator's shell."""
    from click.shell_completion import shell_complete

    try:
        return shell_complete(dashboard, {}, "nexus-tui", COMPLETE_VAR, instruction)
    except Exception:
        return 1


def main(argv: list[str] | None = None) -> int:
    """The ``nexus-tui`` entry point; the exit status."""
    instruction = os.environ.get(COMPLETE_VAR)
    if instruction is not None:
        return complete(instruction)
    try:
        status = dashboard.main(args=argv, prog_name="nexus-tui", standalone_mode=False)
    except click.exceptions.NoSuchOption as error:
        _usage_error(f"unknown option '{error.option_name}'")
    except click.exceptions.UsageError as error:
        _usage_error(error.format_message().rstrip("."))
    except click.exceptions.Abort:
        return 130
    except click.exceptions.Exit as done:
        return done.exit_code
    return status if isinstance(status, int) else 0


if __name__ == "__main__":
    raise SystemExit(main())


@dashboard.command(
    "serve",
    help="Serve the dashboard to browsers (one dashboard process per browser session), on 127.0.0.1 "
    "with an access token in the printed URL. Sessions are read-only unless --allow-actions.",
)
@directory_option("Project directory to serve (repeat for several tabs; also accepted before 'serve').")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on (non-loopback: warned).")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535), help="Port (0: any free one).")
@click.option("--allow-actions", is_flag=True, help="Let browser sessions change state (each action still asks first).")
@click.option(
    "--max-sessions",
    default=4,
    show_default=True,
    type=click.IntRange(1, 1000),
    help="Browser sessions at once; the next one gets a page saying so.",
)
@click.option(
    "--public-host",
    "public_hosts",
    multiple=True,
    metavar="NAME",
    help="A host name browsers use to reach the server (a reverse proxy's); repeatable. Requests naming any "
    "other host than these, loopback names and --host are refused (DNS rebinding).",
)
@click.option(
    "--secure-cookie",
    is_flag=True,
    help="Mark the token cookie Secure (sent over HTTPS only): for a server reached through a TLS proxy.",
)
@discover_options
@remote_options
@click.pass_obj
def serve_command(
    options: DashboardOptions,
    directories: tuple[str, ...],
    host: str,
    port: int,
    allow_actions: bool,
    max_sessions: int,
    public_hosts: tuple[str, ...],
    secure_cookie: bool,
    discover: str | None,
    discover_depth: int,
    remote: tuple[str, ...],
    remote_nexus: str,
) -> int:
    if allow_actions and options.read_only:
        _usage_error("--read-only and --allow-actions cannot be used together")
    from .serve import ServeConfig, serve

    root = discover if discover is not None else options.discover
    depth = discover_depth if discover is not None else options.discover_depth
    if root is not None and not os.path.isdir(root):
        print(f"Nexus: not a directory: {root}", file=sys.stderr)
        return 1
    chosen = tuple(os.path.abspath(d) for d in (*options.directories, *directories))
    discovering: tuple[str, ...] = (
        ("--discover", os.path.abspath(root), "--discover-depth", str(depth)) if root is not None else ()
    )
    if load_settings(options.config) is None:
        return 1
    if options.config is not None:
        discovering += ("--config", os.path.abspath(options.config))
    specs = (*options.remote, *remote)
    if remote_projects(specs) is None:
        return 1
    nexus_command = remote_nexus if remote_nexus != "nexus" else options.remote_nexus
    remotes = tuple(word for spec in specs for word in ("--ssh", spec))
    remotes += ("--remote-nexus", nexus_command) if specs else ()
    config = ServeConfig(
        directories=chosen or (() if root is not None or specs else (os.getcwd(),)),
        session_arguments=(*discovering, *remotes),
        host=host,
        port=port,
        allow_actions=allow_actions,
        max_sessions=max_sessions,
        poll=options.poll,
        public_hosts=public_hosts,
        secure_cookie=secure_cookie,
    )
    return serve(config)
