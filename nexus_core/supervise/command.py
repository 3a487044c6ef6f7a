"""The ``nexus wait`` and ``nexus loop`` click commands."""

from __future__ import annotations

import contextlib
import math
import signal
import sys
from types import FrameType
from typing import NoReturn

import click

from ..cli.output import write
from ..cli.refusal import refuse
from ..errors import NexusError
from ..terminal import terminal_safe
from .classify import EXIT_ERROR, EXIT_INTERRUPTED
from .events import error_message, json_line
from .loop import LoopStop, parse_interval, run_loop, ticks_phrase
from .wait import summary_object, wait_for_run

# ----------------------------------------------------------------- CLI


def _out(text: str) -> None:
    write(sys.stdout, text)


def _err(text: str) -> None:
    write(sys.stderr, text)


def _fail(error: BaseException, as_json: bool) -> NoReturn:
    """A refusal as every nexus command prints one; with --json the envelope on stdout and, as
    the outcome line of a wait, the human lines on stderr too."""
    if isinstance(error, OSError) and not isinstance(error, NexusError):
        error = NexusError(error_message(error))
    refuse(error, as_json, human_too=True, ours=True)


def _seconds(_ctx: click.Context, _param: click.Parameter, value: str) -> float:
    """A finite, non-negative number of seconds (nan and inf are refused, not read as "forever")."""
    try:
        number = float(value)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a number of seconds") from None
    if not math.isfinite(number) or number < 0 or number > 10**9:
        raise click.BadParameter(f"{value!r} is not a number of seconds between 0 and 1000000000")
    return number


INTERRUPTED_LINE = "nexus wait: interrupted; nothing was changed.\n"
EXIT_TERMINATED = 143  # 128 + SIGTERM, what the shell reports for a command it terminated


class _Terminated(BaseException):  # like KeyboardInterrupt: no "except Exception" swallows it
    """SIGTERM reached ``nexus wait``: it ends as after Ctrl+C, with the same line."""


def _on_term(_number: int, _frame: FrameType | None) -> None:
    raise _Terminated


WAIT_HELP = """Block until RUN settles, streaming one JSON event per line on stdout.

\b
Read-only: never takes a lock, never writes state. Exit codes:
  0    every task accepted (with --task: that task and its dependencies)
  3    a task needs an operator (blocked, ambiguous, cancellation to
       reconcile, retry decision, stale evidence, overdue, dead verifier or
       supervisor, corrupt or unsafe run file)
  4    a task spent its attempt budget (maxAttempts) without acceptance
  6    settled but not finished: work awaits verify, accept or collect and
       nothing is running
  1    the watcher's own error (unknown run or task, unreadable project)
  124  no change for --idle-timeout seconds
  130  interrupted (Ctrl+C); nothing was changed
  143  terminated (SIGTERM); nothing was changed
A task that can be started (dependencies accepted) or is running or
verifying keeps the wait going. The last stderr line states the outcome.
"""

LOOP_HELP = """Inspect RUN every INTERVAL and print what changed; with --verify also
verify every completed attempt that has no verification yet.

\b
INTERVAL: 30s to 24h, as Ns, Nm or Nh. The first tick runs at once.
A tick that finds the run busy (writer.lock or recovery.lock held, a
verification or a launch running) is skipped and counted, never queued.
After 500 executed ticks the loop stops by itself with a notice.
The loop lives in this process only: nothing is scheduled or persisted,
and it ends with this process. Ctrl+C stops it cleanly after the current
step. Verifications run in their own process group, so Ctrl+C never reaches
a check; a second Ctrl+C leaves a running verification to finish and record
its verdict by itself.
"""


@click.command(name="wait", context_settings={"help_option_names": ["-h", "--help"]}, help=WAIT_HELP)
@click.argument("run")
@click.option("--task", "task_id", metavar="TASK", help="Wait for this task (and its dependencies) only.")
@click.option(
    "--idle-timeout",
    callback=_seconds,
    default="600",
    show_default=True,
    metavar="SECONDS",
    help="Give up (exit 124) after this long without any change; 0 waits forever.",
)
@click.option(
    "--settle-grace",
    callback=_seconds,
    default="2",
    show_default=True,
    metavar="SECONDS",
    help="A settled state that an agent may still move on (exit 3 or 6) must hold this long.",
)
@click.option("--event-log", metavar="FILE", help="Also write the events to FILE, a new file (0600).")
@click.option("--json", "as_json", is_flag=True, help="End with a summary object on stdout.")
@click.option("--poll", "force_polling", is_flag=True, help="Poll instead of using the file watcher.")
@click.option("-d", "--directory", default=".", metavar="PATH", help="Project directory (default: the current one).")
def wait_command(
    run: str,
    task_id: str | None,
    idle_timeout: float,
    settle_grace: float,
    event_log: str | None,
    as_json: bool,
    force_polling: bool,
    directory: str,
) -> None:
    previous_term = signal.signal(signal.SIGTERM, _on_term)
    try:
        result = wait_for_run(
            directory,
            run,
            task_id=task_id,
            idle_timeout=idle_timeout,
            settle_grace=settle_grace,
            event_log=event_log,
            emit=_out,
            force_polling=force_polling,
            warn=lambda text: _err(f"nexus wait: warning: {terminal_safe(text, one_line=True)}\n"),
        )
    except (NexusError, OSError) as error:
        _fail(error, as_json)
    except KeyboardInterrupt:
        _err(INTERRUPTED_LINE)
        raise SystemExit(EXIT_INTERRUPTED) from None
    except _Terminated:
        _err(INTERRUPTED_LINE)
        raise SystemExit(EXIT_TERMINATED) from None
    finally:
        signal.signal(signal.SIGTERM, previous_term)
    if as_json:
        _out(json_line(summary_object(run, task_id, result)))
    if result.code == EXIT_ERROR:
        _err(f"Nexus: {terminal_safe(result.message, one_line=True)}\n")
    else:
        _err(f"nexus wait: {terminal_safe(result.message, one_line=True)} [exit {result.code}]\n")
    raise SystemExit(result.code)


@click.command(name="loop", context_settings={"help_option_names": ["-h", "--help"]}, help=LOOP_HELP)
@click.argument("run")
@click.option("--every", "interval", required=True, metavar="INTERVAL", help="30s to 24h, as Ns, Nm or Nh.")
@click.option("--verify", is_flag=True, help="Verify completed attempts that have no verification yet.")
@click.option("-d", "--directory", default=".", metavar="PATH", help="Project directory (default: the current one).")
def loop_command(run: str, interval: str, verify: bool, directory: str) -> None:
    try:
        every = parse_interval(interval)
    except NexusError as error:
        _fail(error, False)
    stop = LoopStop()

    def on_signal(_number: int, _frame: FrameType | None) -> None:
        stop.request()
        if stop.requests == 1:
            _err(
                "nexus loop: stopping after the current step (Ctrl+C again leaves a running verification to finish).\n"
            )

    previous = {number: signal.signal(number, on_signal) for number in (signal.SIGINT, signal.SIGTERM)}
    _out(
        f"nexus loop: run {terminal_safe(run, one_line=True)} every {interval}{' with --verify' if verify else ''}; "
        "it lives in this process only. Ctrl+C stops it.\n"
    )
    try:
        result = run_loop(directory, run, every, verify=verify, emit=_out, stop=stop)
    except (NexusError, OSError) as error:
        _fail(error, False)
    finally:
        for number, handler in previous.items():
            with contextlib.suppress(ValueError, TypeError):
                signal.signal(number, handler)
    _out(f"nexus loop: {ticks_phrase(result.executed)} run, {result.skipped} skipped ({result.reason}).\n")
    raise SystemExit(0)


def _usage_error(message: str) -> NoReturn:
    _err(f"error: {terminal_safe(message, one_line=True)}\n")
    raise SystemExit(EXIT_ERROR)


def supervise_main(argv: list[str]) -> NoReturn:
    """``nexus wait ...`` and ``nexus loop ...``: argv starts with the command name."""
    command = wait_command if argv[0] == "wait" else loop_command
    run_click(command, argv[1:], f"nexus {argv[0]}")


def run_click(command: click.Command, args: list[str], prog_name: str) -> NoReturn:
    """Run a click command with nexus's usage errors (``error: ...``, exit 1), never click's."""
    try:
        command.main(args=args, prog_name=prog_name, standalone_mode=False)
    except click.exceptions.NoSuchOption as error:
        _usage_error(f"unknown option '{error.option_name}'")
    except click.exceptions.MissingParameter as error:
        name = error.param.name if error.param else "argument"
        kind = "option '--every'" if name == "interval" else f"argument '{name}'"
        _usage_error(f"missing required {kind}")
    except click.exceptions.UsageError as error:
        if type(error).__name__ == "NoArgsIsHelpError" and error.ctx is not None:
            _out(error.ctx.get_help() + "\n")  # a group with no subcommand: its help, as --help
            raise SystemExit(0) from None
        _usage_error(error.format_message().rstrip("."))
    except click.exceptions.Abort:
        raise SystemExit(EXIT_INTERRUPTED) from None
    except click.exceptions.Exit as done:
        raise SystemExit(done.exit_code) from None
    raise SystemExit(0)
