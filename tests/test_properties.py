"""Property-based tests for the canonical JSON writer and plan validation.

The oracle for the JS rules is the real thing: Node's JSON.parse/JSON.stringify, run once per
example over a batch of values (skipped where node is absent, a failure under CI=true).
"""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from node_kit import IN_CI, NODE, require_node
from project_kit import Project, plan, task_def

from nexus_core.errors import NexusError
from nexus_core.plan import normalize_plan
from nexus_core.state import canonical

NODE_IS_THE_ORACLE = "node is the oracle for JS JSON rules"
# Skipped before any example is drawn; under CI=true the test runs and require_node fails it.
needs_node = pytest.mark.skipif(NODE is None and not IN_CI, reason=NODE_IS_THE_ORACLE)

_NODE_ECHO = (
    "let s='';process.stdin.on('data',d=>s+=d).on('end',()=>{"
    "const items=JSON.parse(s);"
    "process.stdout.write(JSON.stringify(items.map(t=>[JSON.stringify(JSON.parse(t)),"
    "JSON.stringify(JSON.parse(t),null,2)])));});"
)


def _node_restringify(texts: list[str]) -> list[list[str]]:
    node = require_node(NODE_IS_THE_ORACLE)
    done = subprocess.run([node, "-e", _NODE_ECHO], input=json.dumps(texts), capture_output=True, text=True, check=True)
    return json.loads(done.stdout)  # type: ignore[no-any-return]


# Keys mixing index-like keys (hoisted by JS), near misses ("01", "4294967295") and text.
keys = st.one_of(
    st.integers(0, 2**32).map(str),
    st.sampled_from(["01", "-1", "1.5", "4294967294", "4294967295", "", "__proto__x", "a", "b", "é", "😀"]),
    st.text(max_size=6),
)
numbers = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.integers(-(2**60), 2**60),
    st.sampled_from([0.1, 1e21, 1e-7, 1.5e-7, 1e-6, 123e20, 2**53, 2**53 + 1.0, -0.0, 5e-324, 1.7976931348623157e308]),
)
leaves = st.one_of(st.none(), st.booleans(), numbers, st.text(max_size=12))
values = st.recursive(
    leaves,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(keys, inner, max_size=5)),
    max_leaves=25,
)


def _same_numbers(a: Any, b: Any) -> bool:
    """Equality where numbers compare as JS would see them after a round trip."""
    if isinstance(a, dict) and isinstance(b, dict):
        return sorted(a) == sorted(b) and all(_same_numbers(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same_numbers(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return float(a) == float(b) if abs(float(a)) > 2**53 else a == b
    return bool(a == b)


@given(values)
@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
def test_round_trip_parse_of_written_json(value: Any) -> None:
    for text in (canonical.compact(value), canonical.pretty(value)):
        assert _same_numbers(canonical.parse(text), canonical.parse(canonical.compact(value)))
        # Writing what we read gives the same bytes again (the state-file invariant).
        assert canonical.pretty(canonical.parse(text)) == canonical.pretty(value)


@needs_node
@given(st.lists(values, min_size=1, max_size=40))
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_writer_agrees_with_node_on_numbers_and_key_order(batch: list[Any]) -> None:
    ours = [canonical.compact(v) for v in batch]
    for (compact_js, pretty_js), mine, value in zip(_node_restringify(ours), ours, batch, strict=True):
        assert mine == compact_js
        assert canonical.pretty(value) == pretty_js


@needs_node
@given(st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=1, max_size=200))
@settings(max_examples=10, deadline=None)
def test_number_spelling_agrees_with_node(batch: list[float]) -> None:
    ours = [canonical.js_number(x) for x in batch]
    for (compact_js, _), mine in zip(_node_restringify([json.dumps(x) for x in batch]), ours, strict=True):
        assert mine == compact_js


def test_lone_surrogates_are_escaped_like_node() -> None:
    value = {"a": "\ud800", "b": "x\udfffy", "c": "\ude00\ud83d", "d": "😀"}
    assert canonical.compact(value) == '{"a":"\\ud800","b":"x\\udfffy","c":"\\ude00\\ud83d","d":"😀"}'


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_js_number_reads_back_as_the_same_double(x: float) -> None:
    assert float(canonical.js_number(x)) == x or (x == 0 and canonical.js_number(x) == "0")


def test_non_finite_numbers_are_null() -> None:
    assert canonical.compact([math.inf, -math.inf]) == "[null,null]"


# --- plan validation ------------------------------------------------------------------

json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), numbers, st.text(max_size=20)),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=5)),
    max_leaves=20,
)
PLAN_FIELDS = ["id", "maxParallel", "config", "tasks"]
TASK_FIELDS = list(task_def("a"))
CHECK_FIELDS = ["id", "command", "args", "cwd", "timeoutMs", "resources"]
PATHLIKE = st.sampled_from(
    [
        "",
        ".",
        "..",
        "../x",
        "/etc/passwd",
        "out/a",
        "out/a/../b",
        "OUT/A",
        ".git/x",
        ".bmad-plus/nexus/x",
        "a\\b",
        "checks/check.sh",
        "out//a",
        "out/a/",
        " out",
        "C:/x",
        "out/\x00",
        "\ud800",
    ]
)


@st.composite
def damaged_plans(draw: st.DrawFn) -> Any:
    """A valid two-task plan with a few fields replaced by hostile values."""
    value = plan("r1", task_def("a"), task_def("b", dependsOn=["a"]))
    for _ in range(draw(st.integers(1, 3))):
        where = draw(st.sampled_from(["plan", "task", "check"]))
        replacement = draw(st.one_of(json_values, PATHLIKE, st.lists(PATHLIKE, max_size=3)))
        if where == "plan":
            value[draw(st.sampled_from(PLAN_FIELDS))] = replacement
        elif where == "task" and isinstance(value.get("tasks"), list) and value["tasks"]:
            task = value["tasks"][draw(st.integers(0, len(value["tasks"]) - 1))]
            if isinstance(task, dict):
                task[draw(st.sampled_from([*TASK_FIELDS, "execution"]))] = replacement
        elif isinstance(value.get("tasks"), list) and value["tasks"] and isinstance(value["tasks"][0], dict):
            checks = value["tasks"][0].get("checks")
            if isinstance(checks, list) and checks and isinstance(checks[0], dict):
                checks[0][draw(st.sampled_from(CHECK_FIELDS))] = replacement
    return value


# The stored plan's shape (SPEC: the reference's normalized plan).
NORMALIZED_PLAN_KEYS = ["id", "maxParallel", "config", "tasks"]
NORMALIZED_TASK_KEYS = [
    "id",
    "objective",
    "dependsOn",
    "scope",
    "artifacts",
    "resources",
    "checks",
    "maxAttempts",
    "idempotent",
    "deadlineMs",
    "acceptance",
    "authorizations",
]
NORMALIZED_CHECK_KEYS = ["id", "command", "commandHash", "args", "cwd", "timeoutMs", "resources"]


@pytest.fixture(scope="module")
def plan_project(tmp_path_factory: pytest.TempPathFactory) -> Project:
    return Project(tmp_path_factory.mktemp("plans") / "project")


def _validate(project: Project, value: Any) -> None:
    try:
        normalized = normalize_plan(project.dir, value)
    except NexusError as error:
        assert error.message.startswith("Nexus: ") or error.message.startswith("Adapter ")
        assert "Traceback" not in error.message
        return
    # Accepted: the stored shape exactly (the reference's keys, in its order, never one more),
    # the input's ids in order, every bound enforced, and a lossless JSON round trip.
    assert list(normalized) == NORMALIZED_PLAN_KEYS
    assert normalized["id"] == value["id"]
    assert 1 <= normalized["maxParallel"] <= 32
    assert [t["id"] for t in normalized["tasks"]] == [t["id"] for t in value["tasks"]]
    for task in normalized["tasks"]:
        expected = NORMALIZED_TASK_KEYS + (["execution"] if "execution" in task else []) + ["resourceHashes"]
        assert list(task) == expected
        assert 1 <= task["maxAttempts"] <= 10 and 100 <= task["deadlineMs"] <= 86400000
        assert task["scope"] and task["artifacts"] and 1 <= len(task["checks"]) <= 30
        for check in task["checks"]:
            assert list(check) == NORMALIZED_CHECK_KEYS
            assert 10 <= check["timeoutMs"] <= 300000
    assert canonical.parse(canonical.pretty(normalized)) == normalized


@given(json_values)
@settings(max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_any_json_value_is_a_plan_or_a_clean_error(plan_project: Project, value: Any) -> None:
    _validate(plan_project, value)


@given(damaged_plans())
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_damaged_plans_are_normalized_or_refused_cleanly(plan_project: Project, value: Any) -> None:
    _validate(plan_project, value)


def test_valid_plan_normalizes_with_defaults(tmp_path: Path) -> None:
    project = Project(tmp_path / "project")
    minimal = task_def("a")
    for optional in ("dependsOn", "maxAttempts", "deadlineMs", "idempotent", "authorizations"):
        del minimal[optional]
    minimal = {"id": "r1", "tasks": [minimal]}
    normalized = normalize_plan(project.dir, minimal)
    task = normalized["tasks"][0]
    assert normalized["maxParallel"] == 1 and normalized["config"] == {}
    assert (task["maxAttempts"], task["deadlineMs"], task["idempotent"]) == (2, 3600000, False)
    assert task["checks"][0]["command"] == str(Path("/bin/sh").resolve())


@pytest.mark.parametrize(
    "definition",
    [
        task_def("a", scope=["out/\ud800"]),
        task_def("a", checks=[{"id": "c", "command": "/bin/sh", "args": ["checks/check.sh", "\ud800"]}]),
        task_def("a", checks=[{"id": "c", "command": "/bin/\ud800", "args": []}]),
        task_def(
            "a", execution={"adapter": "command", "command": "/bin/\udc00", "args": [], "input": "checks/check.sh"}
        ),
    ],
    ids=["scope", "check-arg", "check-command", "execution-command"],
)
def test_lone_surrogates_in_paths_commands_and_args_are_refused_cleanly(tmp_path: Path, definition: Any) -> None:
    project = Project(tmp_path / "project")
    with pytest.raises(NexusError, match=r"Nonportable path: out/\\ud800|cannot contain a lone surrogate"):
        normalize_plan(project.dir, plan("r1", definition))
