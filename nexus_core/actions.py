"""The vocabulary of the ``nexus`` command (pip's ``commands_dict`` is the model): one
:class:`Command` per action of the reference (SPEC 8) and per command of ours, with its help
line, its usage, what it takes, what it calls and, for a mutation, its state checks with their
refusal words (``nexus_core.preconditions``).

Everything reads this table: the CLI's help, usage refusal and dispatch (``cli.py``), shell
completion (``completion.py``), the dashboard's operations (their availability asks
:func:`refusal`) and the engine's checks (the same ``Check`` objects). A new action or command
is one entry here; a new mutating action also needs its core function and, in the dashboard,
one Operation. Light to import: the CLI reads it on every call, so the engine, click and the
separate commands' modules are imported only when an entry is called.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, Literal

from .preconditions import (
    ACCEPT,
    CALL_FACTS,
    CANCEL,
    COLLECT,
    LAUNCH,
    RECONCILE,
    RECORD,
    RETRY,
    START,
    VERIFY,
    Check,
    first_refusal,
    task_facts,
)
from .shapes import JsonObject, Record, Run

Progress = Callable[[dict[str, Any]], None]
StopAsked = Callable[[], bool]
# What an action reads from the command line: --input (required or optional), --plan, nothing.
Takes = Literal["input", "optional-input", "plan", "nothing"]
# "inspect": the read-only action; "mutation": an action that changes state (RUN TASK when
# per_task, else the project); "command": one of ours beside the action grammar, a click
# command with its own options.
Kind = Literal["inspect", "mutation", "command"]
# What a mutation returns: the run as saved, or recover-lock's receipt.
Result = Run | JsonObject


class Command:
    """One entry of the vocabulary. A plain class, not a NamedTuple or a dataclass: making one
    of those costs about a millisecond, on every call of the CLI."""

    __slots__ = (
        "call",
        "checks",
        "command",
        "kind",
        "long",
        "name",
        "per_task",
        "retry",
        "runner",
        "summary",
        "synopsis",
        "takes",
        "usage",
    )

    def __init__(
        self,
        name: str,
        summary: str,  # one line: completion's help (zsh, fish)
        usage: str,  # the words after the name, for ``nexus --help`` and the README's tour
        synopsis: str,  # its required words, for the usage refusal's hint ("Also: nexus wait RUN, ...")
        kind: Kind,
        takes: Takes = "nothing",
        per_task: bool = False,  # RUN TASK positionals
        long: bool = False,  # accepts progress and should_stop hooks (live progress, Stop)
        call: Callable[..., Result] | None = None,  # a mutation: (directory, run, task, input, **hooks)
        checks: tuple[Check, ...] = (),  # a mutation's state checks, in the engine's order
        retry: bool | None = False,  # the call fact ``retry``; None: its input's (launch)
        runner: str = "",  # a command: "module:attribute" of the function given its words
        command: str = "",  # a command: "module:attribute" of its click command (completion reads it)
    ) -> None:
        self.name = name
        self.summary = summary
        self.usage = usage
        self.synopsis = synopsis
        self.kind = kind
        self.takes = takes
        self.per_task = per_task
        self.long = long
        self.call = call
        self.checks = checks
        self.retry = retry
        self.runner = runner
        self.command = command

    def __repr__(self) -> str:
        return f"Command({self.name!r}, {self.kind!r})"


# ----------------------------------------------------------------- how each mutation calls the core
# The engine, the process backend (subprocess, selectors, threading, the plan validator) and the
# lock recovery are imported by the call that needs them only: start-up time of every call.


def _start(directory: str, run_id: str, task_id: str, options: Any, **_: Any) -> Result:
    from .engine import start_task

    return start_task(directory, run_id, task_id, options)


def _retry(directory: str, run_id: str, task_id: str, options: Any, **_: Any) -> Result:
    from .engine import retry_task

    return retry_task(directory, run_id, task_id, options)


def _record(directory: str, run_id: str, task_id: str, options: Any, **_: Any) -> Result:
    from .engine import record_attempt

    return record_attempt(directory, run_id, task_id, options)


def _reconcile(directory: str, run_id: str, task_id: str, options: Any, **_: Any) -> Result:
    from .engine import reconcile_attempt

    return reconcile_attempt(directory, run_id, task_id, options)


def _cancel(directory: str, run_id: str, task_id: str, options: Any, **_: Any) -> Result:
    from .engine import cancel_task

    return cancel_task(directory, run_id, task_id, options)


def _verify(
    directory: str,
    run_id: str,
    task_id: str,
    options: Any,
    progress: Progress | None = None,
    should_stop: StopAsked | None = None,
) -> Result:
    from .engine import verify_task

    return verify_task(directory, run_id, task_id, progress=progress, should_stop=should_stop)


def _accept(directory: str, run_id: str, task_id: str, options: Any, **_: Any) -> Result:
    from .engine import accept_task

    return accept_task(directory, run_id, task_id)


def _launch(
    directory: str,
    run_id: str,
    task_id: str,
    options: Any,
    progress: Progress | None = None,
    should_stop: StopAsked | None = None,
) -> Result:
    from .backend.process import launch_task

    return launch_task(directory, run_id, task_id, options, progress=progress, should_stop=should_stop)


def _collect(directory: str, run_id: str, task_id: str, options: Any, **_: Any) -> Result:
    from .backend.process import collect_task

    return collect_task(directory, run_id, task_id, options)


def _create(directory: str, run_id: str | None, task_id: str | None, plan: Any, **_: Any) -> Result:
    from .engine import create_run

    return create_run(directory, plan)


def _recover_lock(directory: str, run_id: str | None, task_id: str | None, options: Any, **_: Any) -> Result:
    from .paths import root_of
    from .state.locks import recover_lock

    return recover_lock(root_of(directory), options)


# ----------------------------------------------------------------- the table

_OPTIONS = "[--json] [-d DIR]"
_TASK_USAGE = f"RUN TASK [--input FILE] {_OPTIONS}"


def _per_task(
    name: str,
    summary: str,
    takes: Takes,
    call: Callable[..., Result],
    checks: tuple[Check, ...],
    *,
    long: bool = False,
    retry: bool | None = False,
) -> Command:
    return Command(name, summary, _TASK_USAGE, "RUN TASK", "mutation", takes, True, long, call, checks, retry)


# In the order of ``nexus --help`` and completion.
COMMANDS: dict[str, Command] = {
    command.name: command
    for command in (
        Command(
            "create",
            "Create a run from a JSON task plan (--plan).",
            f"--plan FILE {_OPTIONS}",
            "--plan FILE",
            "mutation",
            "plan",
            call=_create,
        ),
        Command(
            "inspect",
            "Show the runs inventory or one run's state and observations.",
            f"[RUN] {_OPTIONS}",
            "RUN",
            "inspect",
        ),
        Command(
            "recover-lock",
            "Recover a dead writer lock (--input).",
            f"--input FILE {_OPTIONS}",
            "--input FILE",
            "mutation",
            "input",
            call=_recover_lock,
        ),
        _per_task("start", "Start a host-owned attempt.", "input", _start, START),
        _per_task(
            "launch",
            "Launch and supervise the task's planned process.",
            "optional-input",
            _launch,
            LAUNCH,
            long=True,
            retry=None,
        ),
        _per_task("collect", "Collect a finished process attempt's receipt.", "input", _collect, COLLECT),
        _per_task("record", "Record a host worker's outcome.", "input", _record, RECORD),
        _per_task("reconcile", "Reconcile an ambiguous or stopped attempt.", "input", _reconcile, RECONCILE),
        _per_task(
            "verify", "Run the task's verification checks on current artifacts.", "nothing", _verify, VERIFY, long=True
        ),
        _per_task("retry", "Retry a failed or cancelled host attempt.", "input", _retry, RETRY, retry=True),
        _per_task("cancel", "Request cancellation of the current attempt.", "input", _cancel, CANCEL),
        _per_task("accept", "Accept verified and current work.", "nothing", _accept, ACCEPT),
        Command(
            "wait",
            "Block until a run settles (JSON events on stdout).",
            "RUN [--task TASK] [--idle-timeout SECONDS] [--event-log FILE] [--json] [-d DIR]",
            "RUN",
            "command",
            runner="nexus_core.supervise:supervise_main",
            command="nexus_core.supervise.command:wait_command",
        ),
        Command(
            "loop",
            "Inspect a run on an interval; optionally verify.",
            "RUN --every INTERVAL [--verify] [-d DIR]",
            "RUN --every INTERVAL",
            "command",
            runner="nexus_core.supervise:supervise_main",
            command="nexus_core.supervise.command:loop_command",
        ),
        Command(
            "schedule",
            "Durable scheduled re-checks: add, list, show, runs, pause, resume, delete, run.",
            f"add|list|show|runs|pause|resume|delete|run ... {_OPTIONS}",
            "add|list|show|runs|pause|resume|delete|run",
            "command",
            runner="nexus_core.schedule.command:schedule_main",
            command="nexus_core.schedule.command:schedule_group",
        ),
        Command(
            "scheduler",
            "Fire the due occurrences of the projects' schedules (foreground).",
            "[-d DIR ...] [--event-log FILE]",
            "[-d DIR ...]",
            "command",
            runner="nexus_core.schedule.command:schedule_main",
            command="nexus_core.schedule.command:scheduler_command",
        ),
        Command(
            "report",
            "A run's report: markdown (PR comment, CI summary), junit (CI test report) or html (read-only).",
            "RUN [--format markdown|junit|html] [-o FILE] [-d DIR]",
            "RUN --format markdown|junit|html [-o FILE]",
            "command",
            runner="nexus_core.report.command:report_main",
            command="nexus_core.report.command:report_command",
        ),
        Command(
            "attention",
            "Everything that waits on a person, oldest first (exit 5 when something does).",
            "[-d DIR ...] [--discover ROOT] [--json] [--watch [--exec CMD] [--exec-timeout S]] [--poll]",
            "[-d DIR ...] [--discover ROOT] [--watch [--exec CMD]]",
            "command",
            runner="nexus_core.attention:attention_main",
            command="nexus_core.attention:attention_command",
        ),
        Command(
            "observe",
            "Stream the dashboard's view of projects as JSON lines (what nexus-tui --ssh reads; read-only).",
            "[-d DIR ...] [--json-lines]",
            "[-d DIR ...] [--json-lines]",
            "command",
            runner="nexus_core.view.observe_command:observe_main",
            command="nexus_core.view.observe_command:observe_command",
        ),
    )
}


class _OfKind(Mapping[str, Command]):
    """The entries of COMMANDS of some kinds, read at each use (an entry added later is in)."""

    def __init__(self, *kinds: Kind) -> None:
        self.kinds = kinds

    def __getitem__(self, name: str) -> Command:
        command = COMMANDS[name]
        if command.kind not in self.kinds:
            raise KeyError(name)
        return command

    def __iter__(self) -> Iterator[str]:
        return iter([name for name, command in COMMANDS.items() if command.kind in self.kinds])

    def __len__(self) -> int:
        return sum(1 for command in COMMANDS.values() if command.kind in self.kinds)


MUTATIONS: Mapping[str, Command] = _OfKind("mutation")
ACTIONS: Mapping[str, Command] = _OfKind("inspect", "mutation")  # the action grammar (SPEC 8.1)
SEPARATE_COMMANDS: Mapping[str, Command] = _OfKind("command")


def per_task_actions() -> tuple[str, ...]:
    return tuple(name for name, command in COMMANDS.items() if command.per_task)


def load(target: str) -> Any:
    """The object a "module:attribute" target names (imported on first use: start-up time)."""
    import importlib

    module, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module), attribute)


# ----------------------------------------------------------------- the checks, asked


def facts_for(
    name: str, run: Record, task: Record, *, retry: bool | None = None, kept_receipt: bool | None = None
) -> dict[str, object]:
    """The facts ``name``'s checks read: the task's (``preconditions.task_facts``) and the call's.
    ``retry`` (launch): whether the call opens a retry attempt; by default the dashboard's and
    completion's launch, a retry once the task has an attempt."""
    facts = task_facts(run, task, kept_receipt)
    fixed = COMMANDS[name].retry
    facts["retry"] = fixed if fixed is not None else (bool(facts["attempts"]) if retry is None else retry)
    return facts


def refusal(name: str, run: Record, task: Record, *, kept_receipt: bool | None = None) -> Check | None:
    """The first of ``name``'s state checks that ``task`` fails, as far as the run file says,
    or None (the core may accept it; its file, process and input checks still decide)."""
    return first_refusal(COMMANDS[name].checks, facts_for(name, run, task, kept_receipt=kept_receipt))


def allows(name: str, run: Record, task: Record) -> bool:
    """Whether ``name`` on ``task`` passes its state checks (False for a shape the core refuses
    anyway, and for an entry that is not a per-task action)."""
    command = COMMANDS.get(name)
    if command is None or not command.per_task:
        return False
    try:
        return refusal(name, run, task) is None
    except Exception:  # any shape: a refusal, never a crash
        return False


def reads(name: str) -> tuple[str, ...]:
    """The facts of the run file that ``name``'s checks read (the dashboard compares them again
    when a dialog is confirmed), in first-read order."""
    names = (fact for check in COMMANDS[name].checks for fact in check.reads if fact not in CALL_FACTS)
    return tuple(dict.fromkeys(names))


# ----------------------------------------------------------------- calling a mutation


def call(
    name: str,
    directory: str,
    run_id: str | None,
    task_id: str | None,
    options: Any,
    *,
    progress: Progress | None = None,
    should_stop: StopAsked | None = None,
) -> Result:
    """Run mutation ``name``; the long ones get the progress and stop hooks."""
    mutation = MUTATIONS[name]
    assert mutation.call is not None, name
    if mutation.long:
        return mutation.call(directory, run_id, task_id, options, progress=progress, should_stop=should_stop)
    return mutation.call(directory, run_id, task_id, options)
