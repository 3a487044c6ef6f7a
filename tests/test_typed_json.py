"""nexus_core.typed_json: dataclasses to JSON and back by their type hints, exactly."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from nexus_core.typed_json import DecodeError, decode, encode


@dataclass(frozen=True)
class Leaf:
    name: str
    count: int
    ratio: float
    flag: bool
    maybe: str | None
    words: tuple[str, ...]
    pair: tuple[str, int]
    tags: frozenset[str] = frozenset()
    raw: dict[str, Any] | None = None


@dataclass(frozen=True)
class Tree:
    leaves: tuple[Leaf, ...]
    first: Leaf | None = None
    notes: list[str] = field(default_factory=list)


def sample() -> Tree:
    leaf = Leaf(
        "a\u009b\x1b\ud800✓",
        3,
        0.5,
        True,
        None,
        ("x", "y"),
        ("p", 2),
        frozenset({"b", "a"}),
        {"nested": [1, 2.5, None, {"k": "v"}], "n": -1},
    )
    return Tree((leaf, Leaf("b", 0, 1.0, False, "m", (), ("q", 0))), leaf, ["n1"])


def test_a_value_survives_json_exactly() -> None:
    from nexus_core.supervise.events import json_line

    value = sample()
    line = json_line(encode(value))
    assert "\u009b" not in line and "\ud800" not in line  # terminal-safe on the wire
    assert decode(Tree, json.loads(line)) == value


def test_encoding_keeps_field_order_and_sorts_sets() -> None:
    encoded = encode(sample().leaves[0])
    assert list(encoded) == ["name", "count", "ratio", "flag", "maybe", "words", "pair", "tags", "raw"]
    assert encoded["tags"] == ["a", "b"]


def test_unknown_fields_are_ignored_and_defaults_fill_missing_ones() -> None:
    data = encode(Tree((), None))
    data["added_by_a_newer_peer"] = 1
    del data["notes"]
    assert decode(Tree, data) == Tree((), None)


@pytest.mark.parametrize(
    ("mutate", "where"),
    [
        (lambda d: d["leaves"][0].update(count="3"), "$.leaves[0].count: expected an integer"),
        (lambda d: d["leaves"][0].update(count=True), "$.leaves[0].count: expected an integer"),
        (lambda d: d["leaves"][0].update(flag=1), "$.leaves[0].flag: expected a boolean"),
        (lambda d: d["leaves"][0].update(pair=["p"]), "$.leaves[0].pair: expected 2 items"),
        (lambda d: d["leaves"][0].pop("name"), "$.leaves[0]: Leaf lacks name"),
        (lambda d: d.update(leaves={}), "$.leaves: expected an array"),
        (lambda d: d.update(first=[]), "$.first: expected an object"),
    ],
)
def test_a_value_of_the_wrong_type_is_refused_naming_where(mutate: Any, where: str) -> None:
    data = json.loads(json.dumps(encode(sample())))
    mutate(data)
    with pytest.raises(DecodeError, match=where.replace("[", r"\[").replace("$", r"\$")):
        decode(Tree, data)
