"""The detail pane of the selected task (or run): header, attempts as a tree, the latest
verification. It renders from a project's session; the tree is built again only when its shape
changes (another task, an attempt or a branch more); otherwise the labels that read differently
(an age moving, a state) are set in place, which costs no layout. Its texts: ``detail_text.py``
(the headers, the verification) and ``attempt_tree.py`` (the attempts)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static, Tree

from nexus_core.shapes import Observation, TaskDefinition

from ..logic.model import RunView
from ..logic.session import ProjectSession
from .attempt_tree import Node, attempt_node
from .detail_text import run_header, task_header, verification_text
from .shown import update_changed
from .styles import Styles, styles_of


def task_detail(view: RunView, task_id: str, now: int, styles: Styles) -> tuple[Text, list[Node], Text] | None:
    """(header, attempt nodes, verification text) for one task, from the core's inspection."""
    inspection = view.inspection
    if not inspection:
        return None
    task = next((t for t in inspection["tasks"] if t["id"] == task_id), None)
    if task is None:
        return None
    definition: TaskDefinition = next(
        (d for d in inspection["plan"]["tasks"] if d.get("id") == task_id), TaskDefinition()
    )
    observation: Observation = next(
        (o for o in inspection.get("observations") or [] if o["taskId"] == task_id), Observation()
    )
    row = next((r for r in view.rows if r.task_id == task_id), None)
    header = task_header(view, task, definition, observation, row, now, styles)
    attempts = task["attempts"]
    nodes = [attempt_node(attempt, index, len(attempts), now, styles) for index, attempt in enumerate(attempts)]
    verification = verification_text(attempts[-1], now, styles) if attempts else Text()
    return header, nodes, verification


class TaskDetail(VerticalScroll):
    def __init__(self, index: int) -> None:
        super().__init__(classes="detail", id=f"detail-{index}")
        self.index = index
        self._shown: tuple[Any, ...] | None = None  # (run, task, shape) the tree shows
        self._labels: list[Node] = []  # the nodes whose labels the tree shows

    def compose(self) -> ComposeResult:
        yield Static(Text("Loading…", style="dim"), classes="detail-head", id=f"detail-head-{self.index}")
        tree: Tree[None] = Tree(Text("attempts"), id=f"attempts-{self.index}", classes="attempts")
        tree.show_root = False
        tree.guide_depth = 2
        yield tree
        yield Static("", classes="detail-verification", id=f"detail-verification-{self.index}")

    @property
    def attempts_tree(self) -> Tree[None]:
        return self.query_one(f"#attempts-{self.index}", Tree)

    def forget(self) -> None:
        """Rebuild the tree at the next sync (the theme changed)."""
        self._shown = None

    def sync(self, session: ProjectSession, now: int, display_path: Callable[[str], str]) -> None:
        snapshot, view = session.snapshot, session.current_view()
        head = self.query_one(f"#detail-head-{self.index}", Static)
        verification = self.query_one(f"#detail-verification-{self.index}", Static)
        tree = self.attempts_tree
        if snapshot is None:
            return
        if view is None:
            update_changed(head, Text("No run in this project yet." if not snapshot.error else "", style="dim"))
            tree.clear()
            update_changed(verification, "")
            self._shown = None
            return
        styles = styles_of(self.app)
        detail = task_detail(view, session.task_id, now, styles) if session.task_id else None
        if detail is None:
            update_changed(head, run_header(view, snapshot, now, styles, display_path))
            if self._shown is not None:
                tree.clear()
            update_changed(verification, "")
            self._shown = None
            return
        header, nodes, verification_body = detail
        update_changed(head, run_header(view, snapshot, now, styles, display_path) + header if view.error else header)
        update_changed(verification, verification_body)
        # Not by the inspection's identity: each scan of the run makes a new one, and building the
        # tree again (a layout of the whole screen) was most of the frame after any change to the
        # run, whichever task it touched.
        key = (view.run_id, session.task_id, _shape(nodes))
        if key != self._shown:
            tree.clear()
            for node in nodes:
                _add_node(tree.root, node)
            self._shown = key
        else:
            _relabel(tree.root.children, nodes, self._labels)
        self._labels = nodes


def _shape(nodes: list[Node]) -> tuple[Any, ...]:
    return tuple((node.expand, _shape(node.children)) for node in nodes)


def _relabel(shown: Iterable[Any], nodes: list[Node], before: list[Node]) -> None:
    """Set in place the labels that read differently (the tree has the nodes' shape)."""
    for tree_node, node, old in zip(shown, nodes, before, strict=True):
        if node.label != old.label:
            tree_node.set_label(node.label)
        _relabel(tree_node.children, node.children, old.children)


def _add_node(parent: Any, node: Node) -> None:
    if node.children:
        child = parent.add(node.label, expand=node.expand)
        for grandchild in node.children:
            _add_node(child, grandchild)
    else:
        parent.add_leaf(node.label)
