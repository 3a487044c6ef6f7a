"""The ``nexus`` command: the reference's interface (SPEC 8), action by action."""

from __future__ import annotations

import sys
from typing import Any, NoReturn

from . import canonical
from .errors import NexusError

USAGE = (
    "Use nexus create --plan FILE, inspect RUN, or "
    "start|launch|collect|record|reconcile|verify|retry|cancel|accept RUN TASK."
)
CLOSING = "Use inspect --json for recorded evidence and reconciliation observations."


def _write(stream: Any, text: str) -> None:
    stream.buffer.write(text.encode("utf-8", "replace"))
    stream.buffer.flush()


def human_summary(result: dict[str, Any]) -> str:
    if not isinstance(result.get("tasks"), list):
        return canonical.pretty(result)
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
    lines.append(CLOSING)
    return "\n".join(lines)


def exit_code_for(action: str, task_id: str | None, result: dict[str, Any]) -> int:
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
) -> dict[str, Any]:
    from .inputs import read_input_file

    if action == "inspect" and task is None:
        if input_file is not None or plan is not None:
            raise NexusError("inspect is read-only and takes no input file.")
        from . import observe

        return observe.inspect_run(directory, run)
    # Imported after inspect: the inventory answers without loading the engine.
    from . import actions

    mutation = actions.MUTATIONS.get(action)
    if mutation is not None and not mutation.per_task and run is None and task is None:
        if mutation.takes == "plan":
            if input_file is not None:
                raise NexusError(f"{action} uses --plan.")
            return actions.call(action, directory, None, None, read_input_file(plan, "--plan"))
        if plan is not None:
            raise NexusError(f"{action} uses --input.")
        return actions.call(action, directory, None, None, read_input_file(input_file, "--input"))
    if mutation is None or not mutation.per_task or not run or not task or plan is not None:
        raise NexusError(USAGE)
    options: dict[str, Any] | None
    if mutation.takes == "nothing":
        if input_file is not None:
            raise NexusError(f"{action} executes its recorded contract and takes no input file.")
        options = None
    elif mutation.takes == "optional-input" and input_file is None:
        options = {}
    else:
        options = read_input_file(input_file, "--input")
    return actions.call(action, directory, run, task, options)


def _usage_error(message: str) -> NoReturn:
    _write(sys.stderr, f"error: {message}\n")
    sys.exit(1)


def _command() -> Any:
    """The click command, built on first use: click costs tens of milliseconds to import and
    the plain ``inspect`` forms do without it (see ``_plain_inspect``)."""
    import click

    @click.command(
        name="nexus",
        context_settings={"help_option_names": ["-h", "--help"]},
        help="Launch or coordinate attempts, recover interrupted work and verify current artifacts.\n\n"
        "\b\n"
        "  nexus create --plan FILE [--json] [-d DIR]\n"
        "  nexus inspect [RUN] [--json] [-d DIR]\n"
        "  nexus recover-lock --input FILE [--json] [-d DIR]\n"
        "  nexus start|launch|collect|record|reconcile|verify|retry|cancel|accept RUN TASK\n"
        "        [--input FILE] [--json] [-d DIR]\n"
        "  nexus wait RUN [--task TASK] [--idle-timeout SECONDS] [--event-log FILE] [--json] [-d DIR]\n"
        "  nexus loop RUN --every INTERVAL [--verify] [-d DIR]",
    )
    @click.argument("action")
    @click.argument("run", required=False)
    @click.argument("task", required=False)
    @click.option(
        "-d", "--directory", default=".", metavar="PATH", help="Project directory (default: the current one)."
    )
    @click.option("--plan", "plan", metavar="FILE", help="JSON task plan for create.")
    @click.option("--input", "input_file", metavar="FILE", help="JSON observation or host identity for a mutation.")
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
) -> NoReturn:
    try:
        result = dispatch(action, run, task, directory, plan, input_file)
    except NexusError as error:
        _fail(error.message, as_json)
    except OSError as error:
        _fail(f"{error.strerror}: {error.filename}" if error.filename else str(error), as_json)
    except Exception as error:  # a bug of ours: still a clean error line, never a traceback
        _fail(f"Internal error ({type(error).__name__}: {error}); nothing else was changed. Please report it.", as_json)
    code = exit_code_for(action, task, result)
    if as_json:
        _write(sys.stdout, canonical.pretty(result) + "\n")
    else:
        _write(sys.stdout, human_summary(result) + "\n")
    sys.exit(code)


def _fail(message: str, as_json: bool) -> NoReturn:
    if as_json:
        _write(sys.stdout, canonical.compact({"schemaVersion": 1, "status": "error", "error": message}) + "\n")
    else:
        _write(sys.stderr, f"Nexus: {message}\n")
    sys.exit(1)


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


def _plain_inspect(words: list[str]) -> tuple[str | None, str, bool] | None:
    """(run, directory, as_json) for ``inspect [RUN] [--json] [-d DIR]`` written plainly, else
    None (click then parses, with its exact errors). Start-up is most felt on inspect."""
    if not words or words[0] != "inspect":
        return None
    run: str | None = None
    directory: str | None = None
    as_json = False
    rest = iter(words[1:])
    for word in rest:
        if word == "--json" and not as_json:
            as_json = True
        elif word in ("-d", "--directory") and directory is None:
            directory = next(rest, None)
            if directory is None or directory.startswith("-"):
                return None
        elif not word.startswith("-") and run is None:
            run = word
        else:
            return None
    return run, "." if directory is None else directory, as_json


def main(argv: list[str] | None = None) -> None:
    words = argv if argv is not None else sys.argv[1:]
    if words and words[0] in ("wait", "loop"):
        # Separate commands with their own options; the action grammar below stays as it is.
        from .supervise import supervise_main

        supervise_main(list(words))
    plain = _plain_inspect(list(words))
    if plain is not None:
        run_action("inspect", plain[0], None, plain[1], None, None, plain[2])
    import click

    try:
        _command().main(args=argv, prog_name="nexus", standalone_mode=False)
    except click.exceptions.NoSuchOption as error:
        _usage_error(f"unknown option '{error.option_name}'")
    except click.exceptions.MissingParameter as error:
        name = error.param.name if error.param else "action"
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
