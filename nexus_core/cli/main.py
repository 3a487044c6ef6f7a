"""The ``nexus`` command: the reference's interface (SPEC 8), action by action."""

from __future__ import annotations

import contextlib
import gc
import os
import sys
from collections.abc import Mapping
from typing import Any, NoReturn

from .. import actions
from ..errors import NexusError, hint_of
from ..state import canonical
from ..state.state_dirs import UnsafeDirectory
from . import output, refusal


def terminal_safe(value: object, *, one_line: bool = False) -> str:
    """nexus_core.terminal's, imported on first use: a --json call prints none of it (its
    patterns cost some 0.5 ms to compile on every call)."""
    from ..terminal import terminal_safe as safe

    return safe(value, one_line=one_line)


USAGE = (
    "Use nexus create --plan FILE, inspect RUN, or "
    "start|launch|collect|record|reconcile|verify|retry|cancel|accept RUN TASK."
)  # the reference's refusal of a malformed call (SPEC 8.3), word for word
COMPLETE_VAR = "_NEXUS_COMPLETE"  # click's shell completion protocol (``_NEXUS_COMPLETE=bash_source nexus``)
CLOSING = "Use inspect --json for recorded evidence and reconciliation observations."
DESCRIPTION = "Launch or coordinate attempts, recover interrupted work and verify current artifacts."
HELP_WIDTH = 100  # a longer synopsis line continues below, its options indented


def synopsis_lines() -> list[str]:
    """One line per form of the command, from the vocabulary: consecutive entries with the
    same usage share a line (``nexus start|launch|... RUN TASK ...``). The help and the README's
    tour show these."""
    lines: list[tuple[list[str], str]] = []
    for name, command in actions.COMMANDS.items():
        if lines and lines[-1][1] == command.usage:
            lines[-1][0].append(name)
        else:
            lines.append(([name], command.usage))
    return [f"nexus {'|'.join(names)} {usage}" for names, usage in lines]


def help_text() -> str:
    """``nexus --help``'s text above the options."""
    lines = []
    for line in synopsis_lines():
        head, _, options = line.partition(" [")
        lines += [f"  {line}"] if len(line) <= HELP_WIDTH or not options else [f"  {head}", f"        [{options}"]
    return DESCRIPTION + "\n\n\b\n" + "\n".join(lines)


def usage_hint() -> str:
    """The usage refusal's hint: the forms the reference's line does not name."""
    import re

    named = set(re.split(r"[ |,.]+", USAGE))
    forms = [f"nexus {name} {command.synopsis}" for name, command in actions.COMMANDS.items() if name not in named]
    return "Also: " + ", ".join(forms) + " (nexus --help shows every option)."


def usage_error() -> NexusError:
    return NexusError(USAGE, usage_hint())


_write = output.write


def human_summary(result: Mapping[str, Any]) -> str:
    """The human form of ``result``, safe for a terminal: worker-controlled text (identities,
    hints, stale reasons naming files) cannot act on it or forge a line."""
    if not isinstance(result.get("tasks"), list):
        # JSON escapes C0 already; C1, DEL and bidi controls pass JSON untouched.
        return terminal_safe(canonical.pretty(result))
    observations = {o["taskId"]: o for o in result.get("observations") or []}
    lines = [f"Nexus run {result['id']} \u2014 durable task coordination"]
    for task in result["tasks"]:
        attempt = task["attempts"][-1] if task["attempts"] else None
        execution = attempt["execution"] if attempt else "not started"
        status = attempt["verification"]["status"] if attempt else "pending"
        lines.append(f"{task['id']}: {execution}; verification={status}; acceptance={task['integration']}")
        if attempt:
            backend = attempt["backend"]
            lines.append(f"  Attempt: {attempt['id']}; {backend['kind']}: {backend['id']}/{backend['sessionId']}")
        observation = observations.get(task["id"])
        if observation:
            line = f"  {observation['hint']}"
            if observation["stale"]:
                line += f" STALE: {observation['staleReason']}"
            lines.append(line)
    for unsafe in result.get("unsafeStateDirectories") or []:  # ours: never in the reference's output
        lines.append("Warning: " + UnsafeDirectory(unsafe["directory"], unsafe["problem"]).warning())
    lines.append(CLOSING)
    return "\n".join(terminal_safe(line, one_line=True) for line in lines)


def exit_code_for(action: str, task_id: str | None, result: Mapping[str, Any]) -> int:
    if not isinstance(result.get("tasks"), list) or task_id is None:
        return 0
    task = next((t for t in result["tasks"] if t["id"] == task_id), None)
    attempt = task["attempts"][-1] if task and task["attempts"] else None
    if action == "verify":
        return 0 if attempt and attempt["verification"]["status"] == "passed" else 1
    if action == "launch":
        receipt = ((attempt or {}).get("process") or {}).get("receipt") or {}
        return 0 if receipt.get("outcome") == "completed" else 1
    if action == "collect":
        return 0 if attempt and attempt["execution"] == "completed" else 1
    return 0


def dispatch(
    action: str, run: str | None, task: str | None, directory: str, plan: str | None, input_file: str | None
) -> Mapping[str, Any]:
    """What the command prints: an inspection or inventory, the saved run, a receipt (SPEC 8.3)."""
    command = actions.ACTIONS.get(action)
    if command is not None and command.kind == "inspect" and task is None:
        if input_file is not None or plan is not None:
            raise NexusError("inspect is read-only and takes no input file.")
        from .. import observe

        return observe.inspect_run(directory, run)
    if command is not None and command.kind == "mutation" and not command.per_task and run is None and task is None:
        return actions.call(action, directory, None, None, _project_input(action, command.takes, plan, input_file))
    if command is None or not command.per_task or not run or not task or plan is not None:
        raise usage_error()
    return actions.call(action, directory, run, task, _task_input(action, command.takes, input_file))


def _project_input(action: str, takes: str, plan: str | None, input_file: str | None) -> dict[str, Any]:
    """The --plan (create) or --input (recover-lock) of a project-level mutation."""
    from .inputs import read_input_file

    if takes == "plan":
        if input_file is not None:
            raise NexusError(f"{action} uses --plan.")
        return read_input_file(plan, "--plan")
    if plan is not None:
        raise NexusError(f"{action} uses --input.")
    return read_input_file(input_file, "--input")


def _task_input(action: str, takes: str, input_file: str | None) -> dict[str, Any] | None:
    """The --input of a per-task mutation: none for verify and accept, {} for launch without one."""
    from .inputs import read_input_file

    if takes == "nothing":
        if input_file is not None:
            raise NexusError(f"{action} executes its recorded contract and takes no input file.")
        return None
    if takes == "optional-input" and input_file is None:
        return {}
    return read_input_file(input_file, "--input")


def _usage_error(message: str) -> NoReturn:
    _write(sys.stderr, f"error: {terminal_safe(message, one_line=True)}\n")
    sys.exit(1)


def click_command() -> Any:
    """The click command, built on first use: click costs tens of milliseconds to import and
    the plainly written forms do without it (see ``_plain_command``). Its help comes from the
    vocabulary (``actions.COMMANDS``)."""
    import click

    @click.command(name="nexus", context_settings={"help_option_names": ["-h", "--help"]}, help=help_text())
    @click.argument("action")
    @click.argument("run", required=False)
    @click.argument("task", required=False)
    @click.option(
        "-d", "--directory", default=".", metavar="PATH", help="Project directory (default: the current one)."
    )
    @click.option("--plan", "plan", metavar="FILE", help="JSON task plan for create.")
    @click.option(
        "--input",
        "input_file",
        metavar="FILE",
        help="JSON observation or host identity for a mutation ('-': read it from standard input).",
    )
    @click.option("--json", "as_json", is_flag=True, help="Print durable state and evidence as JSON.")
    @click.version_option(package_name="nexus-registry", prog_name="nexus")
    def nexus(
        action: str,
        run: str | None,
        task: str | None,
        directory: str,
        plan: str | None,
        input_file: str | None,
        as_json: bool,
    ) -> None:
        run_action(action, run, task, directory, plan, input_file, as_json)

    return nexus


def run_action(
    action: str,
    run: str | None,
    task: str | None,
    directory: str,
    plan: str | None,
    input_file: str | None,
    as_json: bool,
    one_shot: bool = False,
) -> NoReturn:
    """Run the action, print its result, exit. ``one_shot``: this process exists for this one
    action (see ``_exit``)."""
    try:
        result = dispatch(action, run, task, directory, plan, input_file)
    except NexusError as error:
        _fail(error.message, as_json, one_shot, hint_of(error))
    except OSError as error:
        _fail(f"{error.strerror}: {error.filename}" if error.filename else str(error), as_json, one_shot)
    except Exception as error:  # a bug of ours: still a clean error line, never a traceback
        message = f"Internal error ({type(error).__name__}: {error}); nothing else was changed."
        _fail(message, as_json, one_shot, "Please report it.")
    code = exit_code_for(action, task, result)
    if as_json:
        output.write_bytes(sys.stdout, canonical.pretty_bytes(result))
        _write(sys.stdout, "\n")
    else:
        _write(sys.stdout, human_summary(result) + "\n")
    _exit(code, one_shot)


def _fail(message: str, as_json: bool, one_shot: bool = False, hint: str | None = None) -> NoReturn:
    """A refusal, printed as the reference prints it, our ``hint`` apart (``refusal``); exit 1."""
    refusal.report(message, hint, as_json)
    _exit(1, one_shot)


def _exit(code: int, one_shot: bool) -> NoReturn:
    """End the process. A one-shot process skips the interpreter's teardown (freeing every
    object of a run of up to 16 MiB, then the modules: milliseconds on every call): what it
    wrote is on disk already (each write fsynced before its rename) and its output flushed."""
    if one_shot:
        with contextlib.suppress(OSError, ValueError):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


_VALUED_OPTIONS = ("-d", "--directory", "--plan", "--input")


def _positional_count(words: list[str]) -> int:
    """Positional words as commander counts them (option values are not positionals)."""
    count = 0
    skip_value = False
    for word in words:
        if skip_value:
            skip_value = False
        elif word in _VALUED_OPTIONS:
            skip_value = True
        elif not word.startswith("-") or word == "-":
            count += 1
    return count


_PLAIN_OPTIONS = {"-d": "directory", "--directory": "directory", "--plan": "plan", "--input": "input"}


def _plain_command(words: list[str]) -> tuple[str, str | None, str | None, str, str | None, str | None, bool] | None:
    """(action, run, task, directory, plan, input, as_json) for an action written plainly: up to
    two positionals after it, each option at most once, no ``--opt=value`` form, no value that
    starts with "-". Else None: click then parses, with its exact errors. Importing and running
    click costs some 20 ms, felt on every call an agent makes."""
    if not words or words[0] not in actions.ACTIONS:
        return None
    positionals: list[str] = []
    values: dict[str, str] = {}
    as_json = False
    rest = iter(words[1:])
    for word in rest:
        if word == "--json" and not as_json:
            as_json = True
        elif word in _PLAIN_OPTIONS and _PLAIN_OPTIONS[word] not in values:
            value = next(rest, None)
            if value is None or (value.startswith("-") and value != "-"):  # "-": --input - (stdin)
                return None
            values[_PLAIN_OPTIONS[word]] = value
        elif not word.startswith("-") and len(positionals) < 2:
            positionals.append(word)
        else:
            return None
    run, task = [*positionals, None, None][:2]
    directory = values.get("directory", ".")
    return words[0], run, task, directory, values.get("plan"), values.get("input"), as_json


def main(argv: list[str] | None = None) -> None:
    """``nexus``. A closed output pipe ends any command quietly (``output``)."""
    try:
        _main(argv)
    except BrokenPipeError:  # a write that did not go through output.write
        output.broken_pipe()


def _main(argv: list[str] | None) -> None:
    instruction = os.environ.get(COMPLETE_VAR)
    if instruction is not None:
        from .completion import complete

        sys.exit(complete(instruction, click_command(), COMPLETE_VAR))
    words = argv if argv is not None else sys.argv[1:]
    command = actions.SEPARATE_COMMANDS.get(words[0]) if words else None
    if command is not None:
        # Separate commands with their own options; the action grammar below stays as it is.
        actions.load(command.runner)(list(words))
    plain = _plain_command(list(words))
    if plain is not None:
        one_shot = argv is None  # the nexus process itself, not a caller's main(argv)
        if one_shot and plain[0] != "launch":
            # Reference counting frees what a one-shot action drops (JSON trees hold no cycles);
            # the cycle collector would only rescan the parsed run as it grows (milliseconds on a
            # large run). launch supervises its child for as long as it runs: it keeps it.
            gc.disable()
        run_action(*plain, one_shot=one_shot)
    import click

    try:
        click_command().main(args=argv, prog_name="nexus", standalone_mode=False)
    except click.exceptions.NoSuchOption as error:
        _usage_error(f"unknown option '{error.option_name}'")
    except click.exceptions.MissingParameter as error:
        name = error.param.name if error.param else "action"
        if name == "action":  # commander's line, then (ours) the full help of a bare ``nexus``
            command = click_command()
            context = click.Context(command, info_name="nexus", **command.context_settings)
            _write(sys.stderr, f"error: missing required argument 'action'\n\n{context.get_help()}\n")
            sys.exit(1)
        _usage_error(f"missing required argument '{name}'")
    except click.exceptions.UsageError as error:
        if "unexpected extra argument" in error.message.lower():
            count = _positional_count(list(words))
            _usage_error(f"too many arguments for 'nexus'. Expected 3 arguments but got {count}.")
        _usage_error(error.message.rstrip("."))
    except click.exceptions.Abort:
        sys.exit(130)
    except click.exceptions.Exit as done:
        sys.exit(done.exit_code)


if __name__ == "__main__":
    main()
