"""docs/plan-format.md agrees with the validator (issue 24 item 6): every field the validator
stores is documented, and every limit and default the doc states is probed on
``normalize_plan`` at its boundaries (the lowest and highest accepted, one past each refused).
A limit changed in plan.py and not in the doc, or the other way round, fails here."""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from nexus_core.errors import NexusError
from nexus_core.plan import normalize_plan

DOC = Path(__file__).resolve().parent.parent / "docs" / "plan-format.md"
HEADING = re.compile(r"^## .*\(`([^`]+)`\)\s*$")
ROW = re.compile(r"^\| `(\w+)` \| ([^|]+) \| ([^|]+) \| ([^|]+) \| ([^|]+) \|")


def doc_tables() -> dict[str, dict[str, dict[str, str]]]:
    """{location: {field: {type, required, default, limits}}} from the doc's tables."""
    tables: dict[str, dict[str, dict[str, str]]] = {}
    where = None
    for line in DOC.read_text(encoding="utf-8").splitlines():
        heading = HEADING.match(line)
        if heading:
            where = heading.group(1)
            tables[where] = {}
            continue
        row = ROW.match(line)
        if row and where is not None:
            field, kind, required, default, limits = (part.strip() for part in row.groups())
            tables[where][field] = {"type": kind, "required": required, "default": default, "limits": limits}
    return tables


TABLES = doc_tables()


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project whose files every probe may name: a check script, inputs, 1001 resource files."""
    project = tmp_path_factory.mktemp("plan-doc")
    (project / "checks").mkdir()
    (project / "checks" / "check.py").write_text("print('ok')\n")
    (project / "inputs").mkdir()
    (project / "inputs" / "task.txt").write_text("Do it.\n")
    (project / "res").mkdir()
    for index in range(1001):
        (project / "res" / f"r{index}.txt").write_text("r\n")
    return project


def task(root: Path, task_id: str) -> dict[str, Any]:
    return {
        "id": task_id,
        "objective": f"Write out/{task_id}/r.txt.",
        "scope": [f"out/{task_id}"],
        "artifacts": [f"out/{task_id}/r.txt"],
        "checks": [check(root, "ok")],
    }


def check(root: Path, check_id: str) -> dict[str, Any]:
    return {"id": check_id, "command": str(root / "checks" / "check.py"), "args": []}


def base(root: Path, adapter: str = "command") -> dict[str, Any]:
    """A valid plan whose first task is a process task (so every location exists)."""
    first = task(root, "t0")
    execution: dict[str, Any] = {"adapter": adapter, "command": str(root / "checks" / "check.py")}
    execution["input"] = "inputs/task.txt"
    if adapter == "command":
        execution["args"] = []
    first["execution"] = execution
    return {"id": "doc", "tasks": [first, task(root, "t1")]}


def at(plan: dict[str, Any], where: str) -> dict[str, Any]:
    """The object of a doc location in ``plan``."""
    places: dict[str, dict[str, Any]] = {
        "plan": plan,
        "plan.tasks[i]": plan["tasks"][0],
        "plan.tasks[i].checks[j]": plan["tasks"][0]["checks"][0],
        "plan.tasks[i].execution": plan["tasks"][0]["execution"],
    }
    return places[where]


def accepted(root: Path, plan: dict[str, Any]) -> bool:
    try:
        normalize_plan(str(root), plan)
    except NexusError:
        return False
    return True


def items(root: Path, where: str, field: str) -> Callable[[int], Any]:
    """The index-th valid, distinct item of a list field."""
    resource = lambda i: f"res/r{i}.txt"  # noqa: E731
    makers: dict[tuple[str, str], Callable[[int], Any]] = {
        ("plan", "tasks"): lambda i: task(root, f"t{i}"),
        ("plan.tasks[i]", "dependsOn"): lambda i: f"t{i + 1}",
        ("plan.tasks[i]", "scope"): lambda i: f"out/t0/s{i}",
        ("plan.tasks[i]", "artifacts"): lambda i: f"out/t0/a{i}",
        ("plan.tasks[i]", "resources"): resource,
        ("plan.tasks[i]", "checks"): lambda i: check(root, f"c{i}"),
        ("plan.tasks[i]", "acceptance"): lambda i: f"criterion {i}",
        ("plan.tasks[i]", "authorizations"): lambda i: f"authorization {i}",
        ("plan.tasks[i].checks[j]", "args"): lambda i: f"arg{i}",
        ("plan.tasks[i].checks[j]", "resources"): resource,
        ("plan.tasks[i].execution", "instructions"): resource,
        ("plan.tasks[i].execution", "resources"): resource,
        ("plan.tasks[i].execution", "args"): lambda i: f"arg{i}",
        ("plan.tasks[i].execution", "blockedExitCodes"): lambda i: 1 + i % 255,
    }
    return makers[(where, field)]


def with_value(root: Path, where: str, field: str, value: Any) -> dict[str, Any]:
    plan = base(root)
    if (where, field) == ("plan", "tasks"):
        plan["tasks"] = value
    elif (where, field) == ("plan.tasks[i]", "dependsOn"):
        plan["tasks"] = [plan["tasks"][0]] + [task(root, f"t{i + 1}") for i in range(max(len(value), 1))]
        plan["tasks"][0]["dependsOn"] = value
    elif (where, field) == ("plan.tasks[i]", "scope"):
        plan["tasks"][0]["scope"] = value
        plan["tasks"][0]["artifacts"] = [f"{value[0]}/r.txt"] if value else []
    else:
        at(plan, where)[field] = value
    return plan


def limited_fields() -> list[tuple[str, str, str]]:
    return [
        (where, field, row["limits"])
        for where, rows in TABLES.items()
        for field, row in rows.items()
        if re.fullmatch(r"(\d+)\.\.(\d+)( items)?|≤(\d+) (items|chars)|id", row["limits"])
    ]


def test_the_doc_has_a_table_per_object_and_states_the_issues_limits() -> None:
    assert set(TABLES) == {"plan", "plan.tasks[i]", "plan.tasks[i].checks[j]", "plan.tasks[i].execution"}
    assert TABLES["plan"]["maxParallel"]["limits"] == "1..32"
    assert TABLES["plan.tasks[i]"]["deadlineMs"]["limits"] == "100..86400000"


@pytest.mark.parametrize("adapter", ["command", "codex-exec"])
def test_every_field_the_validator_stores_is_in_the_doc(root: Path, adapter: str) -> None:
    plan = base(root, adapter)
    plan["tasks"][0]["dependsOn"] = ["t1"]
    normalized = normalize_plan(str(root), plan)
    stored = {
        "plan": set(normalized),
        "plan.tasks[i]": set(normalized["tasks"][0]),
        "plan.tasks[i].checks[j]": set(normalized["tasks"][0]["checks"][0]),
        "plan.tasks[i].execution": set(normalized["tasks"][0]["execution"]),
    }
    for where, fields in stored.items():
        documented = set(TABLES[where])
        if where == "plan.tasks[i].execution" and adapter == "command":
            documented -= {"sandbox", "model"}  # codex-exec's only (it stores its fixed args too)
        assert fields == documented, where


@pytest.mark.parametrize(("where", "field", "limits"), limited_fields(), ids=lambda v: str(v))
def test_each_stated_limit_is_the_validators(root: Path, where: str, field: str, limits: str) -> None:
    assert accepted(root, base(root))
    kind = TABLES[where][field]["type"]
    probes: list[tuple[Any, bool]]
    if limits == "id":
        probes = [("a" * 64, True), ("a" * 65, False), ("A", False), ("-a", False), ("a_b-1", True)]
    elif match := re.fullmatch(r"≤(\d+) chars", limits):
        high = int(match.group(1))
        probes = [("x" * high, True), ("x" * (high + 1), False)]
    else:
        match = re.fullmatch(r"(?:(\d+)\.\.)?(\d+)( items)?|≤(\d+) items", limits)
        assert match is not None
        low = int(match.group(1)) if match.group(1) else 0
        high = int(match.group(2) or match.group(4))
        if "items" in limits or limits.startswith("≤"):
            make = items(root, where, field)
            probes = [([make(i) for i in range(high)], True), ([make(i) for i in range(high + 1)], False)]
            if low > 0:
                probes += [([make(i) for i in range(low)], True), ([make(i) for i in range(low - 1)], False)]
        else:
            assert kind == "integer", (where, field)
            probes = [(low, True), (high, True), (low - 1, False), (high + 1, False)]
    for value, ok in probes:
        short = not isinstance(value, (str, list)) or len(value) < 8
        shown = value if short else f"{type(value).__name__}[{len(value)}]"
        assert accepted(root, with_value(root, where, field, copy.deepcopy(value))) is ok, (where, field, shown)


@pytest.mark.parametrize(
    ("where", "field", "default"),
    [
        (where, field, row["default"])
        for where, rows in TABLES.items()
        for field, row in rows.items()
        if row["required"] == "no" and row["default"] != "—" and "per check" not in row["default"]
    ],
    ids=lambda v: str(v),
)
def test_each_stated_default_is_what_an_omitted_field_becomes(root: Path, where: str, field: str, default: str) -> None:
    plan = base(root, "codex-exec" if field == "sandbox" else "command")
    at(plan, where).pop(field, None)
    normalized = normalize_plan(str(root), plan)
    value = at(
        {
            **normalized,
            "tasks": [{**normalized["tasks"][0], "checks": normalized["tasks"][0]["checks"]}],
        },
        where,
    )[field]
    if field == "resources" and where == "plan.tasks[i]":
        value = [v for v in value if v not in normalized["tasks"][0]["execution"]["resources"]]
    if field == "resources" and where == "plan.tasks[i].execution":
        value = [v for v in value if v != "inputs/task.txt"]  # the input is a resource too
    expected = default.strip("`")
    expected_value: Any = {"[]": [], "{}": {}, "false": False}.get(expected, expected)
    if re.fullmatch(r"\d+", expected):
        expected_value = int(expected)
    assert value == expected_value
