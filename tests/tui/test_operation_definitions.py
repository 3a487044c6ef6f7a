"""Every mutating action is one definition (an Operation in nexus_tui/logic/operations): this
enumerates them all and proves that the core's table, the registry, the bindings, the footer,
the help screen, the dialog, the recovery button and the long-action flow each come from it."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, cast

import pytest
from rich.text import Text
from textual.app import App
from textual.widgets import Button, Checkbox, Input, RadioSet, Static

from nexus_core import actions as commands
from nexus_core.actions import MUTATIONS
from nexus_core.preconditions import FACT_WORDS
from nexus_tui import actions
from nexus_tui.app import NexusApp
from nexus_tui.logic.operations import (
    LONG_ACTIONS,
    OPERATIONS,
    BackendIdentity,
    Choice,
    Line,
    Preview,
    Seen,
    Tick,
    differences,
)
from nexus_tui.logic.recovery import Situation
from nexus_tui.screens.dialogs import ActionDialog
from nexus_tui.screens.help import HelpScreen
from nexus_tui.screens.recovery import RecoveryScreen


def test_the_dashboard_and_the_cli_know_the_same_mutations() -> None:
    assert set(OPERATIONS) == set(MUTATIONS)
    assert all(name == operation.name for name, operation in OPERATIONS.items())
    assert (
        set(LONG_ACTIONS)
        == {name for name, op in OPERATIONS.items() if op.long}
        == {name for name, mutation in MUTATIONS.items() if mutation.long}
    )


@pytest.mark.parametrize("name", list(OPERATIONS))
def test_the_registry_and_bindings_come_from_the_definition(name: str) -> None:
    operation = OPERATIONS[name]
    entry = actions.spec(name)
    if not operation.in_registry:
        assert entry is None and operation.keys == ""
        return
    assert entry is not None and entry.mutating
    assert (entry.keys, entry.label, entry.help, entry.destructive, entry.footer) == (
        operation.keys,
        operation.label,
        operation.help,
        operation.destructive,
        operation.footer,
    )
    assert actions.spec(f"act({name!r})") is entry  # what the footer and the palette run
    # The action's binding, then its hidden twin (a refused key says why): both carry the id, so
    # a key override (the settings' [keys]) moves both.
    bound = [b for b in NexusApp.BINDINGS if getattr(b, "id", None) == name]
    assert [(b.key, b.action, b.show) for b in bound] == [
        (operation.keys, f"act({name!r})", operation.footer),
        (operation.keys, f"explain({name!r})", False),
    ]


class _Host(App[None]):
    pass


def _preview(name: str) -> Preview:
    return Preview(
        action=name,
        root="/project",
        run_id="demo",
        task_id="a",
        seen=Seen(),
        title=f"{name} a",
        changes=["a change"],
        backend={"kind": "host", "id": "worker", "sessionId": "s1"},
        backend_editable=True,
        confirm_text="a",
    )


@pytest.mark.parametrize("name", list(OPERATIONS))
async def test_the_dialog_and_the_recovery_button_come_from_the_definition(name: str) -> None:
    operation = OPERATIONS[name]
    app = _Host()
    async with app.run_test(size=(110, 60)) as pilot:
        dialog = ActionDialog(_preview(name))
        await app.push_screen(dialog)
        await pilot.pause()
        confirm = dialog.query_one("#confirm", Button)
        assert str(confirm.label) == operation.confirm_label
        assert dialog.has_class("destructive") == operation.destructive
        assert (confirm.variant == "error") == operation.destructive
        wanted: set[str] = set()
        for field in operation.fields:
            if isinstance(field, BackendIdentity):
                wanted |= {"backend_id", "backend_session"}
            else:
                assert isinstance(field, Choice | Line | Tick)
                wanted.add(field.key)
        shown = {w.id for w in dialog.query(Input)} | {w.id for w in dialog.query(Checkbox)}
        shown |= {w.id for w in dialog.query(RadioSet)}
        assert shown == wanted
        dialog.dismiss(None)
        await pilot.pause()
        if operation.in_registry:
            situation = Situation("k", "t", "demo", "a", ["known"], ["check"], "step", next_action=name)
            screen = RecoveryScreen(situation)
            await app.push_screen(screen)
            await pilot.pause()
            assert str(screen.query_one("#next-action", Button).label) == operation.button_label


async def test_the_help_screen_lists_every_bound_action_from_its_definition() -> None:
    app = _Host()
    async with app.run_test(size=(160, 80)) as pilot:
        await app.push_screen(HelpScreen())
        await pilot.pause()
        shown = " ".join(
            shown.plain if isinstance(shown := s.render(), Text) else str(shown) for s in app.screen.query(Static)
        )
        for operation in OPERATIONS.values():
            if operation.in_registry:
                assert operation.label in shown and operation.help in shown


@pytest.mark.parametrize("name", list(OPERATIONS))
def test_every_fact_the_cores_check_reads_is_compared_at_confirm(name: str) -> None:
    """Issue 13 item 4: for every action, each fact its core checks read
    (nexus_core.actions.reads, which test_precondition_reads proves complete), its latest
    attempt and each identity it names is compared at confirm: a change of any one of them is
    caught, and named."""
    operation = OPERATIONS[name]
    if operation.per_task:
        assert commands.reads(name)
        assert {"attempt", *commands.reads(name)} <= set(operation.compared_facts)
    else:
        assert operation.compared_facts == ()
    if name == "recover-lock":  # the core's recover_lock reads writer.lock's hash and recovery.lock
        assert set(operation.compared) == {"lock_hash", "recovery_lock_hash"}
    opened = Seen(facts=dict.fromkeys(FACT_WORDS, "before"))
    for fact in operation.compared_facts:
        now = Seen(facts={**opened.facts, fact: "after"})
        assert differences(operation, opened, now) == [f"{FACT_WORDS[fact]}: before -> after"], fact
    for identity in operation.compared:
        now = replace(opened, **cast(dict[str, Any], {identity: "after"}))
        changed = differences(operation, opened, now)
        assert len(changed) == 1 and changed[0].endswith(": none -> after"), identity
    assert differences(operation, opened, replace(opened)) == []
