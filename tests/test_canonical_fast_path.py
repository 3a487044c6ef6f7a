"""The hashing fast path (parse_for_hashing + compact_parsed + compact_with_member) gives
exactly compact(parse(text)) for any JSON text, including those that need the walk."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from nexus_core import canonical

keys = st.one_of(st.text(max_size=6), st.integers(0, 20).map(str), st.sampled_from(["01", "4294967295", "-1"]))
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**60), 2**60),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(keys, inner, max_size=4)),
    max_leaves=20,
)


def _text(value: Any, escape_keys: bool) -> str:
    text = json.dumps(value, ensure_ascii=escape_keys, indent=2)
    return text


@settings(max_examples=300, deadline=None)
@given(values, values, st.booleans())
def test_fast_path_equals_compact_of_parse(member: Any, other: Any, ascii_escapes: bool) -> None:
    text = _text({"schemaVersion": 1, "plan": member, "tasks": other}, ascii_escapes)
    reference = canonical.parse(text)
    parsed, needs_walk = canonical.parse_for_hashing(text)
    assert canonical.compact(parsed) == canonical.compact(reference)
    member_text = canonical.compact_parsed(parsed["plan"], needs_walk)
    assert member_text == canonical.compact(reference["plan"])
    whole = canonical.compact_with_member(parsed, "plan", member_text, needs_walk)
    assert whole == canonical.compact(reference)


def test_an_escaped_index_key_needs_the_walk() -> None:
    parsed, needs_walk = canonical.parse_for_hashing('{"b": 1, "\\u0031": 2}')
    assert needs_walk and canonical.compact_parsed(parsed, needs_walk) == '{"1":2,"b":1}'
