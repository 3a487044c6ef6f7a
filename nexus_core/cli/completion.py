"""Shell completion for ``nexus`` (click's protocol, through ``_NEXUS_COMPLETE``).

The completion tree is built from the real command definitions: the action grammar's options
and arguments (the click command ``cli`` passes in), one subcommand per action of the
vocabulary (``actions.ACTIONS``) and per separate command (``actions.SEPARATE_COMMANDS``, whose
click command is loaded only when the words name one). Each parameter is copied and given a
completing type by its name: run ids from the runs inventory (file names only, no run file is
loaded), task ids from the run file (read-only: for an action, only the tasks its state checks
accept, ``actions.allows``; for ``wait --task``, every task), files for
``--plan``/``--input``/``--event-log``, directories for ``-d``.

Completion never writes, never takes a lock and never prints a traceback: whatever cannot be
read (a missing project, a ``.bmad-plus`` that is a file, a corrupt run file) simply offers
what can be read, or nothing.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable, Iterable
from typing import Any

import click
from click.core import ParameterSource
from click.shell_completion import CompletionItem, FishComplete, add_completion_class, shell_complete

from .. import actions
from ..errors import NexusError
from ..preconditions import latest_attempt, plan_of, records, verification_status
from ..shapes import Record
from ..terminal import terminal_safe

Completer = Callable[[click.Context, str], list[CompletionItem]]


class Completing(click.ParamType):  # type: ignore[type-arg]
    """A string parameter that completes with ``completer``; its value is left unchanged."""

    def __init__(self, name: str, completer: Completer) -> None:
        self.name = name
        self.completer = completer

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        return value

    def shell_complete(self, ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
        try:
            return self.completer(ctx, incomplete)
        except Exception:  # completion offers what it can read; a traceback would land in the shell
            return []


# ----------------------------------------------------------------- what is offered


def _directory(ctx: click.Context) -> str:
    """The project named by ``-d`` in these words (innermost first), else the current directory."""
    current: click.Context | None = ctx
    while current is not None:
        value = current.params.get("directory")
        if isinstance(value, str) and current.get_parameter_source("directory") is ParameterSource.COMMANDLINE:
            return os.path.abspath(os.path.expanduser(value))
        current = current.parent
    return os.path.abspath(".")


def _run_ids(ctx: click.Context, incomplete: str) -> list[CompletionItem]:
    from ..state.store import list_run_ids

    try:
        ids = list_run_ids(_directory(ctx))
    except (NexusError, OSError):  # no project, or an unsafe one: nothing to offer
        return []
    return [CompletionItem(run_id) for run_id in ids if run_id.startswith(incomplete)]


def _readable_run(root: str, run_id: str) -> tuple[Record | None, bool]:
    """(the run as far as it can be read, whether the core would load it). Read-only: no lock."""
    from ..state import store

    _path, raw = store.read_state_bytes(root, run_id)
    try:
        return store.parse_run(root, run_id, raw), True
    except NexusError:
        pass
    import json

    try:
        envelope = json.loads(raw.decode("utf-8", "replace"))
    except (ValueError, RecursionError):
        return None, False
    run = envelope.get("run") if isinstance(envelope, dict) else None
    return (run if isinstance(run, dict) else None), False


def _task_ids(ctx: click.Context, incomplete: str) -> list[CompletionItem]:
    from ..state.store import RUN_ID

    run_id = ctx.params.get("run")
    if not isinstance(run_id, str) or not RUN_ID.match(run_id):
        return []
    try:
        run, loadable = _readable_run(_directory(ctx), run_id)
    except (NexusError, OSError):
        return []
    if run is None:
        return []
    tasks = [t for t in records(run.get("tasks")) if isinstance(t.get("id"), str) and RUN_ID.match(t["id"])]
    if not tasks:  # a run whose task records are unreadable: the plan may still name them
        tasks = [{"id": d["id"]} for d in records(plan_of(run).get("tasks")) if isinstance(d.get("id"), str)]
        tasks = [t for t in tasks if RUN_ID.match(t["id"])]
    action = actions.ACTIONS.get(ctx.info_name or "")
    if action is not None and not loadable:
        return []  # the core refuses the run: no task is one the action would take
    awaiting = awaiting_tasks(run, action.name) if action is not None else set()
    offered = [
        CompletionItem(task["id"], help=_task_state(task))
        for task in tasks
        if task["id"].startswith(incomplete) and (action is None or actions.allows(action.name, run, task))
    ]
    # Those whose need's guided action is this very action first (sorted() is stable: plan order).
    return sorted(offered, key=lambda item: item.value not in awaiting)


def awaiting_tasks(run: Record, action: str) -> set[str]:
    """The tasks whose need's guided action is ``action`` (the classifier's, on the run file
    alone: stale evidence, which needs hashing, is not looked for)."""
    from ..needs import stand_run
    from ..timeutil import now_ms

    try:
        standings = stand_run(run, {}, now_ms())  # type: ignore[arg-type]
    except Exception:  # a shape the core would refuse: no order beyond validity
        return set()
    return {task_id for task_id, standing in standings.items() if standing.action == action}


def _files(_ctx: click.Context, incomplete: str) -> list[CompletionItem]:
    return [CompletionItem(incomplete, type="file")]


def _directories(_ctx: click.Context, incomplete: str) -> list[CompletionItem]:
    return [CompletionItem(incomplete, type="dir")]


# Parameter name (in every command's definition) -> how its values complete.
COMPLETERS: dict[str, Completer] = {
    "run": _run_ids,
    "task": _task_ids,
    "task_id": _task_ids,
    "directory": _directories,
    "directories": _directories,  # nexus attention -d (repeatable)
    "discover": _directories,
    "plan": _files,
    "input_file": _files,
    "event_log": _files,
}


def _task_state(task: Record) -> str:
    """The task's state in the words of ``nexus inspect``'s summary line (zsh and fish show it)."""
    attempt = latest_attempt(task)
    if attempt is None:
        state = f"not started; acceptance={task.get('integration')}" if "integration" in task else "not started"
    else:
        verification = verification_status(attempt)
        state = f"{attempt.get('execution')}; verification={verification}; acceptance={task.get('integration')}"
    return terminal_safe(state, one_line=True)


# ----------------------------------------------------------------- the completion tree


def _completing_copy(param: click.Parameter) -> click.Parameter:
    completer = COMPLETERS.get(param.name or "")
    if completer is None:
        return param
    clone = copy.copy(param)
    clone.type = Completing(param.name or "", completer)
    return clone


def _completing(params: Iterable[click.Parameter]) -> list[click.Parameter]:
    return [_completing_copy(param) for param in params]


def _options(command: click.Command, action: str | None = None) -> list[click.Parameter]:
    """The command's options; for an action, only the input option it takes (SPEC 8.3)."""
    takes = actions.ACTIONS[action].takes if action is not None else None
    refused = {
        "plan": action is not None and takes != "plan",
        "input_file": action is not None and takes not in ("input", "optional-input"),
    }
    return [p for p in command.params if isinstance(p, click.Option) and not refused.get(p.name or "", False)]


def _arguments_of(action: str, command: click.Command) -> list[click.Parameter]:
    """The positionals the action grammar takes (SPEC 8.3): mutations RUN TASK, inspect RUN."""
    entry = actions.ACTIONS[action]
    wanted = ("run", "task") if entry.per_task else ("run",) if entry.kind == "inspect" else ()
    return [param for param in command.params if isinstance(param, click.Argument) and param.name in wanted]


def _load(target: str) -> click.Command | None:
    try:
        command = actions.load(target)
    except (ImportError, AttributeError):
        return None
    return command if isinstance(command, click.Command) else None


class CompletingCommand(click.Command):
    """A command of the completion tree. When the words end in an option that awaits its value
    (``--task <TAB>``) click's parser would stop and drop every value before it (the run that
    task ids depend on), so that last word is left out of the parse; click still completes it."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if ctx.resilient_parsing and args and self._awaits_value(ctx, args[-1]):
            return super().parse_args(ctx, args[:-1])
        return super().parse_args(ctx, args)

    def _awaits_value(self, ctx: click.Context, word: str) -> bool:
        return any(
            isinstance(param, click.Option) and not param.is_flag and word in (*param.opts, *param.secondary_opts)
            for param in self.get_params(ctx)
        )


class CompletionRoot(click.Group):
    """``nexus`` seen as a group: one subcommand per action and per separate command."""

    def __init__(self, action_command: click.Command) -> None:
        super().__init__(
            name="nexus",
            params=_completing(_options(action_command)),
            context_settings=action_command.context_settings,
        )
        self.action_command = action_command

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(actions.COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in actions.ACTIONS:
            params = _arguments_of(cmd_name, self.action_command) + _options(self.action_command, cmd_name)
            return CompletingCommand(
                cmd_name,
                params=_completing(params),
                help=actions.ACTIONS[cmd_name].summary,
                context_settings=self.action_command.context_settings,
            )
        if cmd_name in actions.SEPARATE_COMMANDS:
            command = _load(actions.SEPARATE_COMMANDS[cmd_name].command)
            if command is None:
                return None
            if isinstance(command, click.Group):  # its subcommands complete as click defines them
                return command
            return CompletingCommand(
                cmd_name,
                params=_completing(command.params),
                help=command.help,
                context_settings=command.context_settings,
            )
        return None

    def shell_complete(self, ctx: click.Context, incomplete: str) -> list[CompletionItem]:
        # The names with their one-line help, without loading a separate command's module.
        items = [
            CompletionItem(name, help=command.summary)
            for name, command in actions.COMMANDS.items()
            if name.startswith(incomplete)
        ]
        return items + click.Command.shell_complete(self, ctx, incomplete)


class OrderedFishComplete(FishComplete):
    """fish sorts candidates unless told to keep their order: task ids come in plan order."""

    source_template = FishComplete.source_template.replace("complete --no-files", "complete --keep-order --no-files")


def complete(instruction: str, action_command: click.Command, complete_var: str) -> int:
    """Answer ``<complete_var>=<instruction>`` (``bash_source``, ``zsh_complete``, ...) for
    ``nexus``, whose action grammar is ``action_command``; the exit status."""
    try:
        add_completion_class(OrderedFishComplete, "fish")
        root = CompletionRoot(action_command)
        return shell_complete(root, {}, "nexus", complete_var, instruction)
    except Exception:  # never a traceback in the operator's shell
        return 1
