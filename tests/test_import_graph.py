"""No import cycle in the packages: read from the source with ``ast``, every import counts, at
module level or inside a function or an ``if TYPE_CHECKING:`` block, since a lazy import is
still a module that needs the other one (it only hides the cycle until the call).

``from package import name`` is an edge to ``package.name`` when that is a module, else to the
package (its ``__init__``). A cycle fails the test with its modules in import order.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("nexus_core", "nexus_tui")


def modules() -> dict[str, tuple[Path, bool]]:
    """Each module's dotted name -> (its file, whether it is a package's ``__init__``)."""
    found: dict[str, tuple[Path, bool]] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            found[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return found


def imported_by(name: str, path: Path, is_package: bool, known: dict[str, tuple[Path, bool]]) -> set[str]:
    """The project modules ``name`` imports, anywhere in its source."""
    edges: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            edges |= {alias.name for alias in node.names if alias.name in known}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                source = ".".join([*base, node.module] if node.module else base)
            else:
                source = node.module or ""
            for alias in node.names:
                if f"{source}.{alias.name}" in known:
                    edges.add(f"{source}.{alias.name}")
                elif source in known:
                    edges.add(source)
    edges.discard(name)
    return edges


def import_graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imported_by(name, path, is_package, known) for name, (path, is_package) in known.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected group of modules (Tarjan), as a path back to its start."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for other in sorted(graph[module]):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in on_stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            group: set[str] = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.add(member)
                if member == module:
                    break
            if len(group) > 1:
                groups.append(group)

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return [path_around(graph, group) for group in groups]


def path_around(graph: dict[str, set[str]], group: set[str]) -> list[str]:
    """A cycle through the group's first module, by a breadth-first search inside the group."""
    start = min(group)
    paths = {start: [start]}
    queue = [start]
    while queue:
        module = queue.pop(0)
        for other in sorted(graph[module] & group):
            if other == start:
                return [*paths[module], start]
            if other not in paths:
                paths[other] = [*paths[module], other]
                queue.append(other)
    raise AssertionError(f"no cycle through {start} in {sorted(group)}")


def test_no_module_imports_itself_back() -> None:
    found = cycles(import_graph())
    assert not found, "import cycles:\n" + "\n".join(" -> ".join(cycle) for cycle in found)


def test_the_walk_sees_lazy_and_relative_imports() -> None:
    """The graph is not empty by mistake: it has a module-level relative import, a package's
    submodule by ``from . import``, and an import made inside a function."""
    graph = import_graph()
    assert "nexus_tui.widgets.project_pane" in graph["nexus_tui.app"]
    assert "nexus_core.state.canonical" in graph["nexus_core.engine"]
    assert "nexus_tui.app" in graph["nexus_tui.cli"]  # inside its entry function only


def test_a_cycle_is_named_in_import_order() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c", "a"]]
