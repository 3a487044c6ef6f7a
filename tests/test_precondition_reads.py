"""``preconditions.READS`` is exactly what each state check reads: over many combinations of
fact values, the check of an action reads every fact READS lists for it and no other (so the
dashboard, which re-compares READS at confirm, misses no fact the core's check depends on)."""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping
from pathlib import Path

from project_kit import host_situations

from nexus_core.preconditions import CHECKED_ACTIONS, FACT_WORDS, READS, facts_allow, state_allows, task_facts
from nexus_core.store import load_run

VALUES: dict[str, tuple[object, ...]] = {
    "attempt": ("a1", None),
    "attempts": (0, 1, 2),
    "integration": ("pending", "rejected", "accepted"),
    "dependenciesAccepted": (True, False),
    "execution": ("running", "blocked", "ambiguous", "completed", "failed", "cancelled"),
    "verification": ("pending", "running", "passed", "failed", "ambiguous"),
    "verificationRounds": (0, 1, 5),
    "cancellation": ("none", "requested", "reconciled"),
    "backend": ("host", "process"),
    "retrySafe": (True, False),
    "reconciled": (True, False),
    "process": (None, "running", "finished"),
    "receipt": (True, False),
    "collected": (True, False),
    "contract": (True, False),
    "idempotent": (True, False),
    "maxAttempts": (1, 2, 3),
}


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


def test_every_fact_has_words_and_a_value_domain() -> None:
    assert set(VALUES) == set(FACT_WORDS)
    assert set(READS) == set(CHECKED_ACTIONS)
    assert all(set(names) <= set(FACT_WORDS) for names in READS.values())


def test_task_facts_names_exactly_the_facts(tmp_path: Path) -> None:
    project = host_situations(tmp_path / "p")
    run = load_run(project.dir, "r1")
    for task in run["tasks"]:
        assert set(task_facts(run, task)) == set(FACT_WORDS)


def test_each_check_reads_exactly_the_facts_reads_lists() -> None:
    chooser = random.Random(13)
    for action in sorted(CHECKED_ACTIONS):
        read: set[str] = set()
        allowed = 0
        for _ in range(4000):
            facts = Recording({name: chooser.choice(values) for name, values in VALUES.items()})
            allowed += facts_allow(action, facts)
            read |= facts.read
        assert read == set(READS[action]), (action, sorted(read ^ set(READS[action])))
        assert allowed  # the samples reach the accepting branch too


def test_state_allows_is_the_check_on_task_facts(tmp_path: Path) -> None:
    project = host_situations(tmp_path / "p")
    run = load_run(project.dir, "r1")
    for action in CHECKED_ACTIONS:
        for task in run["tasks"]:
            assert state_allows(action, run, task) == facts_allow(action, task_facts(run, task))
