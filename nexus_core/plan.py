"""Plan normalization and validation (SPEC 4), rule by rule in the reference's order."""

from __future__ import annotations

import os
import re
import stat
from typing import Any

from .errors import fail
from .paths import directory_at, in_scope, overlap, read_regular, relative, safe_target, touches_state
from .shapes import CheckDefinition, JsonObject, Plan, TaskDefinition
from .snapshots import executable, files_snapshot, scope_snapshot
from .state import canonical
from .validate import ident, integer_in, is_ident, rule_at, string_list, text, unique, within

_SECRET_KEY = re.compile(r"password|secret|token|credential|api[^\n\r\u2028\u2029]?key", re.IGNORECASE | re.ASCII)
EXECUTION_COMMON = ("adapter", "command", "input", "instructions", "resources", "cwd", "outputLimitBytes")
EXECUTION_EXTRA = {"command": ("args", "blockedExitCodes"), "codex-exec": ("sandbox", "model")}
_MODEL = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9._/-]{0,119}\Z")
INPUT_FILE_LIMIT = 262144
COMBINED_INPUT_LIMIT = 1048576


def _default(value: Any, key: str, fallback: Any) -> Any:
    found = value.get(key)
    return fallback if found is None else found


def _literal_args(value: object, message: str) -> list[str]:
    if not isinstance(value, list) or len(value) > 100:
        raise fail(message)
    for arg in value:
        if not isinstance(arg, str) or canonical.utf16_len(arg) > 8000 or "\x00" in arg:
            raise fail(message)
    return list(value)


def _is_regular(path: str) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def _file_argument(root: str, cwd: str, arg: str) -> str | None:
    """The project-relative candidate of an argument that names an existing regular file."""
    if not arg or arg.startswith("-"):
        return None
    absolute = os.path.normpath(os.path.join(root, cwd, arg))
    if not _is_regular(absolute):
        return None
    return os.path.relpath(absolute, root).replace(os.sep, "/")


def normalize_execution(root: str, value: Any) -> JsonObject | None:
    if value is _ABSENT:
        return None
    if not isinstance(value, dict):
        raise fail("execution must be a command or codex-exec object.")
    adapter = value.get("adapter")
    if adapter not in EXECUTION_EXTRA:
        raise fail("Unsupported execution adapter.")
    allowed = EXECUTION_COMMON + EXECUTION_EXTRA[adapter]
    if any(key not in allowed for key in value):
        raise fail("Unknown execution field; shell, environment and arbitrary Codex flags are unsupported.")
    with rule_at(".input"):
        input_file = relative(value.get("input"))
    with within(".instructions"):
        instructions = string_list(_default(value, "instructions", []), "execution instructions", paths=True)
    with within(".resources"):
        declared = string_list(_default(value, "resources", []), "execution resources", paths=True)
    resources = unique([input_file, *instructions, *declared])
    cwd = _default(value, "cwd", ".")
    with rule_at(".cwd"):
        directory_at(root, cwd)
    limit = integer_in(_default(value, "outputLimitBytes", 262144), 1024, 2097152)
    if limit is None:
        raise fail("execution outputLimitBytes must be between 1024 and 2097152.")
    with rule_at(".command"):
        resolved = executable(value.get("command"))
    result: JsonObject = {"adapter": adapter, **resolved}
    if adapter == "command":
        args = _literal_args(value.get("args"), "execution args must be a bounded literal argument array.")
        codes = _default(value, "blockedExitCodes", [])
        if not isinstance(codes, list) or len(codes) > 10 or any(integer_in(c, 1, 255) is None for c in codes):
            raise fail("blockedExitCodes must contain explicit nonzero exit codes between 1 and 255.")
        blocked: list[int] = []
        for code in codes:
            if int(code) not in blocked:
                blocked.append(int(code))
    else:
        sandbox = _default(value, "sandbox", "read-only")
        if sandbox not in ("read-only", "workspace-write"):
            raise fail("codex-exec supports read-only or workspace-write only.")
        model = value.get("model")
        if model is not None and (not isinstance(model, str) or not _MODEL.match(model)):
            raise fail("Codex model must be an explicit bounded model identifier.")
        args = [
            "-a",
            "never",
            "exec",
            "--json",
            "--color",
            "never",
            "--sandbox",
            sandbox,
            "--skip-git-repo-check",
            "--ignore-user-config",
        ]
        if model is not None:
            args += ["--model", model]
        args.append("-")
        blocked = []
    result.update(
        args=args,
        input=input_file,
        instructions=instructions,
        resources=resources,
        cwd=cwd,
        outputLimitBytes=limit,
        blockedExitCodes=blocked,
    )
    if adapter == "codex-exec":
        result["sandbox"] = sandbox
        result["model"] = model
    return result


def input_bytes(root: str, execution: JsonObject) -> bytes:
    """The stdin of an execution (SPEC 6.3)."""
    files = [*execution["instructions"], execution["input"]]
    separators = bool(execution["instructions"])
    out = bytearray()
    for rel in files:
        path = safe_target(root, rel)
        try:
            info = os.stat(path)
        except FileNotFoundError:
            raise fail(f"execution input is missing: {rel}") from None
        if not stat.S_ISREG(info.st_mode) or info.st_size > INPUT_FILE_LIMIT:
            raise fail("execution input must be a regular file no larger than 256 KiB.")
        try:
            data = read_regular(path, INPUT_FILE_LIMIT, checked=info)
        except FileNotFoundError:
            raise fail(f"execution input is missing: {rel}") from None
        except OSError:  # swapped after the stat (a FIFO, a symlink, another file) or grown
            raise fail("execution input must be a regular file no larger than 256 KiB.") from None
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            raise fail("execution input must contain UTF-8 text without NUL bytes.") from None
        if b"\x00" in data:
            raise fail("execution input must contain UTF-8 text without NUL bytes.")
        if separators:
            out += f"\n--- {rel} ---\n".encode()
        out += data
        if len(out) > COMBINED_INPUT_LIMIT:
            raise fail("combined execution input exceeds 1 MiB.")
    return bytes(out)


class _Absent:
    pass


_ABSENT: Any = _Absent()


def _check(root: str, raw: Any, task_resources: list[str]) -> CheckDefinition:
    if not isinstance(raw, dict):
        raw = {}
    check_id = ident(raw.get("id"), "Check ID")
    args = _literal_args(raw.get("args"), "Check args must be a bounded literal argument array.")
    cwd = _default(raw, "cwd", ".")
    with rule_at(".cwd"):
        directory_at(root, cwd)
    with within(".resources"):
        check_resources = string_list(_default(raw, "resources", []), "check resources", paths=True)
    allowed = set(task_resources) | set(check_resources)
    for arg in args:
        candidate = _file_argument(root, cwd, arg)
        if candidate is not None and candidate not in allowed:
            raise fail(f"File argument must be declared as a protected resource: {candidate}")
    timeout = integer_in(_default(raw, "timeoutMs", 30000), 10, 300000)
    if timeout is None:
        raise fail("Check timeoutMs must be between 10 and 300000.")
    with rule_at(".command"):
        resolved = executable(raw.get("command"))
    return {
        "id": check_id,
        "command": resolved["command"],
        "commandHash": resolved["commandHash"],
        "args": args,
        "cwd": cwd,
        "timeoutMs": timeout,
        "resources": check_resources,
    }


def _write_scope(root: str, raw: JsonObject) -> list[str]:
    """The task's write scope: paths under the project, never the runtime state or .git."""
    with within(".scope"):
        scope = string_list(raw.get("scope"), "write scope", paths=True, empty=False)
    for index, item in enumerate(scope):
        if touches_state(item):
            raise fail("Runtime state and .git cannot be a worker write scope.")
        try:
            is_file = stat.S_ISREG(os.lstat(os.path.join(root, item)).st_mode)
        except OSError:
            is_file = False
        with rule_at(f".scope[{index}]"):
            safe_target(root, item if is_file else item + "/.nexus-scope-probe")
    return scope


def _checks(root: str, raw: JsonObject, resources: list[str]) -> list[CheckDefinition]:
    """The task's 1-30 checks, each normalised, their ids distinct."""
    checks_raw = raw.get("checks")
    if not isinstance(checks_raw, list) or not 1 <= len(checks_raw) <= 30:
        raise fail("Each task needs 1-30 explicit verification checks.")
    checks = []
    for index, check in enumerate(checks_raw):
        with within(f".checks[{index}]"):
            checks.append(_check(root, check, resources))
    check_ids = [c["id"] for c in checks]
    if len(set(check_ids)) != len(check_ids):
        raise fail("Duplicate check IDs.")
    return checks


def _task(root: str, raw: Any) -> TaskDefinition:
    if not isinstance(raw, dict):
        raw = {}
    task_id = ident(raw.get("id"), "Task ID")
    scope = _write_scope(root, raw)
    with within(".artifacts"):
        artifacts = string_list(raw.get("artifacts"), "artifacts", paths=True, empty=False)
    for artifact in artifacts:
        if not any(in_scope(artifact, s) for s in scope):
            raise fail(f"Artifact is outside its task write scope: {artifact}")
    with within(".resources"):
        resources = string_list(_default(raw, "resources", []), "resources", paths=True)
    with within(".execution"):
        execution = normalize_execution(root, raw.get("execution", _ABSENT))
    if execution:
        for extra in execution["resources"]:
            if extra not in resources:
                resources.append(extra)
    checks = _checks(root, raw, resources)
    check_ids = [c["id"] for c in checks]
    max_attempts = integer_in(_default(raw, "maxAttempts", 2), 1, 10)
    if max_attempts is None:
        raise fail("maxAttempts must be between 1 and 10.")
    if "idempotent" in raw and not isinstance(raw["idempotent"], bool):
        raise fail("idempotent must be boolean.")
    deadline = integer_in(_default(raw, "deadlineMs", 3600000), 100, 86400000)
    if deadline is None:
        raise fail("deadlineMs must be between 100 and 86400000.")
    if "acceptance" in raw:
        value = raw["acceptance"]
        acceptance = string_list(value if isinstance(value, list) else [value], "acceptance criteria", empty=False)
    else:
        acceptance = [f"Check {c} passes on the current artifacts." for c in check_ids]
    objective = text(raw.get("objective"), "Objective")
    depends_on = string_list(_default(raw, "dependsOn", []), "dependencies")
    for index, dep in enumerate(depends_on):
        with rule_at(f".dependsOn[{index}]"):
            ident(dep)
    authorizations = string_list(_default(raw, "authorizations", []), "existing authorizations")
    definition: TaskDefinition = {
        "id": task_id,
        "objective": objective,
        "dependsOn": depends_on,
        "scope": scope,
        "artifacts": artifacts,
        "resources": resources,
        "checks": checks,
        "maxAttempts": max_attempts,
        "idempotent": raw.get("idempotent") is True,
        "deadlineMs": deadline,
        "acceptance": acceptance,
        "authorizations": authorizations,
    }
    if execution:
        definition["execution"] = execution
    return definition


def _check_cycles(tasks: list[TaskDefinition]) -> None:
    by_id = {t["id"]: t for t in tasks}
    done: set[str] = set()
    visiting: set[str] = set()

    def visit(task_id: str) -> None:
        if task_id in done:
            return
        if task_id in visiting:
            raise fail(f"Dependency cycle at {task_id}")
        visiting.add(task_id)
        for dep in by_id[task_id]["dependsOn"]:
            if dep not in by_id:
                raise fail(f"Unknown dependency: {dep}")
            visit(dep)
        visiting.discard(task_id)
        done.add(task_id)

    for task in tasks:
        visit(task["id"])


def _relative_command(root: str, command: str) -> str:
    return os.path.relpath(command, root).replace(os.sep, "/")


def normalize_plan(root: str, plan: Any) -> Plan:
    try:
        return _normalize_plan(root, plan)
    except UnicodeEncodeError as error:
        # A lone surrogate reached a file name, command or argument: no file or process can
        # carry it (text fields such as objective or config keep theirs, like the reference).
        bad = canonical.compact(error.object[error.start : error.end])[1:-1] if isinstance(error.object, str) else "?"
        raise fail(f"Paths, commands and arguments cannot contain a lone surrogate ({bad}).") from None


def _normalize_plan(root: str, plan: Any) -> Plan:
    if not isinstance(plan, dict):
        raise fail("A JSON plan object is required.")
    run_id = ident(plan.get("id"), "Run ID")
    raw_tasks = plan.get("tasks")
    if not isinstance(raw_tasks, list) or not 1 <= len(raw_tasks) <= 200:
        raise fail("A plan needs 1-200 tasks.")
    max_parallel = integer_in(_default(plan, "maxParallel", 1), 1, 32)
    if max_parallel is None:
        raise fail("maxParallel must be between 1 and 32.")
    config = _default(plan, "config", {})
    if (
        not isinstance(config, dict)
        or any(_SECRET_KEY.search(k) for k in config)
        or any(isinstance(v, (dict, list)) or v is None for v in config.values())
    ):
        raise fail("config accepts non-secret primitive settings only.")
    tasks = []
    for index, raw in enumerate(raw_tasks):
        task_id = raw.get("id") if isinstance(raw, dict) else None
        with within(f"tasks[{index}]", task_id if is_ident(task_id) else None):
            tasks.append(_task(root, raw))
    ids = [t["id"] for t in tasks]
    if len(set(ids)) != len(ids):
        raise fail("Duplicate task IDs.")
    _check_cycles(tasks)
    _check_isolation(root, tasks)
    return {"id": run_id, "maxParallel": max_parallel, "config": canonical.copy(config), "tasks": tasks}


def _check_isolation(root: str, tasks: list[TaskDefinition]) -> None:
    """No two write scopes overlap, and nothing a check or worker trusts lies in any write
    scope (``_protect``, task by task)."""
    for i, first in enumerate(tasks):
        for second in tasks[i + 1 :]:
            if any(overlap(a, b) for a in first["scope"] for b in second["scope"]):
                raise fail(f"Overlapping exclusive write scopes: {first['id']} and {second['id']}")
    all_scopes = [s for t in tasks for s in t["scope"]]
    for task in tasks:
        _protect(root, task, all_scopes)


def _protect(root: str, task: TaskDefinition, all_scopes: list[str]) -> None:
    """Verifiers, resources, executables and file arguments outside every write scope; then
    the task's resourceHashes."""
    protected = list(task["resources"])
    for check in task["checks"]:
        protected += check["resources"]
    for file in protected:
        if any(in_scope(file, s) for s in all_scopes):
            raise fail(f"Verifier/resource lies in a worker write scope: {file}")
    for check in task["checks"]:
        if any(in_scope(_relative_command(root, check["command"]), s) for s in all_scopes):
            raise fail("Verifier executable lies in a worker write scope.")
    execution = task.get("execution")
    if execution:
        if any(in_scope(_relative_command(root, execution["command"]), s) for s in all_scopes):
            raise fail("Worker executable lies in a worker write scope.")
        for arg in execution["args"]:
            candidate = _file_argument(root, execution["cwd"], arg)
            if candidate is not None and candidate not in protected:
                raise fail(f"Execution file argument must be a protected resource: {candidate}")
        input_bytes(root, execution)
    task["resourceHashes"] = files_snapshot(root, protected, True)
    scope_snapshot(root, task["scope"])
