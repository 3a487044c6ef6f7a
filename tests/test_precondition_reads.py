"""Each check of the one table reads exactly the facts it declares (``Check.reads``): over many
combinations of fact values, a check reads every fact it names and no other fact of the run file
(so the dashboard, which compares an action's ``actions.reads`` again at confirm, misses no fact
the core's checks depend on). Every fact has words, and task_facts gives exactly those."""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping
from pathlib import Path

from project_kit import host_situations

from nexus_core import actions
from nexus_core.preconditions import CALL_FACTS, FACT_WORDS, Check, task_facts
from nexus_core.state.store import load_run

VALUES: dict[str, tuple[object, ...]] = {
    "attempt": ("a1", None),
    "attempts": (0, 1, 2),
    "integration": ("pending", "rejected", "accepted"),
    "unacceptedDependency": (None, "dep"),
    "execution": ("running", "blocked", "ambiguous", "completed", "failed", "cancelled"),
    "verification": ("pending", "running", "passed", "failed", "ambiguous"),
    "verifiedAttempt": (True, False),
    "verificationRounds": (0, 1, 5),
    "cancellation": ("none", "requested", "reconciled"),
    "backend": ("host", "process"),
    "retrySafe": (True, False),
    "reconciled": (True, False),
    "process": (None, "running", "finished"),
    "receipt": (True, False),
    "keptReceipt": (True, False),
    "collected": (True, False),
    "contract": (True, False),
    "idempotent": (True, False),
    "maxAttempts": (1, 2, 3),
}
CALL_VALUES: dict[str, tuple[object, ...]] = {"retry": (True, False)}


class Recording(Mapping[str, object]):
    def __init__(self, facts: dict[str, object]) -> None:
        self.facts = facts
        self.read: set[str] = set()

    def __getitem__(self, key: str) -> object:
        self.read.add(key)
        return self.facts[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.facts)

    def __len__(self) -> int:
        return len(self.facts)


def every_check() -> dict[int, tuple[str, Check]]:
    return {id(check): (name, check) for name, command in actions.COMMANDS.items() for check in command.checks}


def test_every_fact_has_words_and_a_value_domain() -> None:
    assert set(VALUES) == set(FACT_WORDS)
    assert set(CALL_VALUES) == set(CALL_FACTS)
    for _, check in every_check().values():
        assert set(check.reads) <= set(FACT_WORDS), check.name


def test_task_facts_names_exactly_the_facts(tmp_path: Path) -> None:
    project = host_situations(tmp_path / "p")
    run = load_run(project.dir, "r1")
    for task in run["tasks"]:
        assert set(task_facts(run, task)) == set(FACT_WORDS)


def test_each_check_reads_exactly_the_facts_it_declares() -> None:
    chooser = random.Random(13)
    for name, check in every_check().values():
        read: set[str] = set()
        outcomes = set()
        for _ in range(3000):
            values = {**VALUES, **CALL_VALUES}
            facts = Recording({fact: chooser.choice(domain) for fact, domain in values.items()})
            outcomes.add(check.passes(facts))
            check.refusal(facts)  # its message reads only declared facts too
            read |= facts.read
        assert read - set(CALL_FACTS) == set(check.reads), (name, check.name, sorted(read ^ set(check.reads)))
        assert outcomes == {True, False}, (name, check.name)  # the samples reach both answers


def test_an_actions_reads_are_its_checks_reads() -> None:
    for name, command in actions.COMMANDS.items():
        declared = {fact for check in command.checks for fact in check.reads}
        assert set(actions.reads(name)) == declared, name
    assert actions.reads("inspect") == () and actions.reads("wait") == ()
