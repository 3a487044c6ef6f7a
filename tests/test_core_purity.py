"""nexus_core stays a pure engine, and so does the dashboard's logic layer: the UI toolkits never
leak into them."""

from __future__ import annotations

import json
import subprocess
import sys

CORE_MODULES = [
    "nexus_core",
    "nexus_core.cli.main",
    "nexus_core.engine",
    "nexus_core.observe",
    "nexus_core.state.store",
    "nexus_core.state.locks",
    "nexus_core.backend.process",
    "nexus_core.plan",
    "nexus_core.backend.checks",
]


def test_core_never_imports_textual_or_rich() -> None:
    probe = (
        "import importlib, json, pkgutil, sys\n"
        "import nexus_core\n"
        "for info in pkgutil.walk_packages(nexus_core.__path__, 'nexus_core.'):\n"
        "    importlib.import_module(info.name)\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    loaded = json.loads(result.stdout)
    assert set(CORE_MODULES) <= set(loaded)
    leaked = [name for name in loaded if name.split(".")[0] in ("textual", "rich")]
    assert leaked == []


LOGIC_MODULES = [
    "nexus_tui.logic.model",
    "nexus_tui.logic.operations",
    "nexus_tui.logic.recovery",
    "nexus_tui.logic.demo",
    "nexus_tui.logic.selection",
    "nexus_tui.logic.session",
    "nexus_tui.logic.discovery",
    "nexus_tui.logic.schedules",
]


def test_the_dashboards_logic_layer_never_imports_textual_or_rich() -> None:
    # Every module under nexus_tui/logic/, imported alone in a fresh interpreter: the decisions
    # of the dashboard stay testable (and reusable, e.g. served) without any UI toolkit.
    probe = (
        "import importlib, json, pkgutil, sys\n"
        "import nexus_tui.logic as logic\n"
        "for info in pkgutil.walk_packages(logic.__path__, 'nexus_tui.logic.'):\n"
        "    importlib.import_module(info.name)\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    loaded = json.loads(result.stdout)
    assert set(LOGIC_MODULES) <= set(loaded)
    leaked = [name for name in loaded if name.split(".")[0] in ("textual", "rich")]
    assert leaked == []


def test_the_engine_does_not_import_the_process_backend() -> None:
    # The process backend builds on the engine; launch and collect are reached through
    # nexus_core.actions, so the two modules no longer import each other.
    probe = "import json, sys\nimport nexus_core.engine\nprint(json.dumps(sorted(sys.modules)))\n"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert "nexus_core.backend.process" not in json.loads(result.stdout)


def test_the_engine_never_imports_the_command_line() -> None:
    """Imports run one way: the command line (nexus_core/cli/, and each feature's command.py)
    imports the engine, state and backend, never the reverse."""
    import ast
    from pathlib import Path

    core = Path(__file__).resolve().parents[1] / "nexus_core"
    offenders = []
    for path in sorted(core.rglob("*.py")):
        relative = path.relative_to(core)
        if relative.parts[0] == "cli" or path.name == "command.py":
            continue
        package = ["nexus_core", *relative.parts[:-1]]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = package[: len(package) - node.level + 1] if node.level else []
                target = ".".join([*base, *(node.module.split(".") if node.module else [])])
                names = [f"{target}.{alias.name}" for alias in node.names]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            offenders += [f"{relative}: {name}" for name in names if name.startswith("nexus_core.cli")]
    assert offenders == []
