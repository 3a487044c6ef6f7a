"""The one table of mutating actions (SPEC 8): each name with the core function it calls and the
input it takes. The CLI's dispatch and the dashboard both call the core through :data:`MUTATIONS`,
so an action's entry point is written once. The process backend's launch and collect are
reached from here, never through the engine (which would import the process module back).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, NamedTuple

from . import engine, locks
from .paths import root_of
from .shapes import JsonObject, Run

# nexus_core.process (subprocess, selectors, threading, base64, the plan validator) is imported
# by launch and collect only: start-up time of every other mutation.

Progress = Callable[[dict[str, Any]], None]
StopAsked = Callable[[], bool]
# What the action reads from the command line: --input (required or optional), --plan, nothing.
Takes = Literal["input", "optional-input", "plan", "nothing"]
# What a mutation returns: the run as saved, or recover-lock's receipt.
Result = Run | JsonObject


class Mutation(NamedTuple):  # not a dataclass: importing dataclasses costs milliseconds per call
    name: str
    takes: Takes
    per_task: bool  # RUN TASK positionals (else the project: create, recover-lock)
    long: bool  # accepts progress and should_stop hooks (live progress, Stop)
    call: Callable[..., Result]


def _task(function: Callable[[str, str, str, Any], Run]) -> Callable[..., Result]:
    def call(directory: str, run_id: str, task_id: str, options: Any, **_: Any) -> Result:
        return function(directory, run_id, task_id, options)

    return call


def _verify(
    directory: str,
    run_id: str,
    task_id: str,
    options: Any,
    progress: Progress | None = None,
    should_stop: StopAsked | None = None,
) -> Result:
    return engine.verify_task(directory, run_id, task_id, progress=progress, should_stop=should_stop)


def _accept(directory: str, run_id: str, task_id: str, options: Any, **_: Any) -> Result:
    return engine.accept_task(directory, run_id, task_id)


def _launch(
    directory: str,
    run_id: str,
    task_id: str,
    options: Any,
    progress: Progress | None = None,
    should_stop: StopAsked | None = None,
) -> Result:
    from . import process

    return process.launch_task(directory, run_id, task_id, options, progress=progress, should_stop=should_stop)


def _collect(directory: str, run_id: str, task_id: str, options: Any, **_: Any) -> Result:
    from . import process

    return process.collect_task(directory, run_id, task_id, options)


def _create(directory: str, run_id: str | None, task_id: str | None, plan: Any, **_: Any) -> Result:
    return engine.create_run(directory, plan)


def _recover_lock(directory: str, run_id: str | None, task_id: str | None, options: Any, **_: Any) -> Result:
    return locks.recover_lock(root_of(directory), options)


MUTATIONS: dict[str, Mutation] = {
    mutation.name: mutation
    for mutation in (
        Mutation("start", "input", True, False, _task(engine.start_task)),
        Mutation("launch", "optional-input", True, True, _launch),
        Mutation("collect", "input", True, False, _collect),
        Mutation("record", "input", True, False, _task(engine.record_attempt)),
        Mutation("reconcile", "input", True, False, _task(engine.reconcile_attempt)),
        Mutation("verify", "nothing", True, True, _verify),
        Mutation("retry", "input", True, False, _task(engine.retry_task)),
        Mutation("cancel", "input", True, False, _task(engine.cancel_task)),
        Mutation("accept", "nothing", True, False, _accept),
        Mutation("create", "plan", False, False, _create),
        Mutation("recover-lock", "input", False, False, _recover_lock),
    )
}


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
    if mutation.long:
        return mutation.call(directory, run_id, task_id, options, progress=progress, should_stop=should_stop)
    return mutation.call(directory, run_id, task_id, options)
