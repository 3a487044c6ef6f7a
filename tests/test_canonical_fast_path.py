"""Fast paths give exactly what the general code gives: the hashing fast path
(parse_for_hashing + compact_parsed + compact_with_member) is compact(parse(text)) for any JSON
text; the orjson plain path writes and parses what the stdlib path does; stored times parse
without strptime as strptime parses them."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from nexus_core import timeutil
from nexus_core.state import canonical

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


# ----------------------------------------------------------------- the plain (orjson) path

# Loaded on demand for large state in the CLI; here always, so every test below compares paths.
assert canonical.plain_path() is not None, "orjson is a declared dependency"

# Mostly plain values (so the orjson path is really taken), with every kind of value it must
# refuse mixed in: floats of every spelling, integers around 2^53, index-like and digit-leading
# keys, lone surrogates, control characters, text that looks like numbers after a ':'.
tricky_text = st.one_of(
    st.text(max_size=10),
    st.sampled_from(
        ["2026-12-01T21:56:51.123Z", "a:1.5,", "x:1e-7]", "[-2.5}", ',"1":', "\ud800", "\udfff", "\x00\x1f\x7f"]
    ),
    st.sampled_from(["\u2028\u2029", 'q"uo\\te', "\\", '\\"', "é😀", "0", "42", "01", "1e5"]),
)
plain_keys = st.one_of(
    st.text(max_size=6),
    st.integers(0, 2**33).map(str),
    st.sampled_from(["01", "4294967294", "4294967295", "-1", "1.5", "9x", "a", "b", "\ud800", 'q"k']),
)
plain_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**53) - 3, 2**53 + 3),
    st.integers(-(2**64), 2**64),
    st.sampled_from([2**53 - 1, -(2**53 - 1), 2**53, 0, -1]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([2.0, -0.0, 1e-7, 1e21, 1e16, 0.000001, 1.5e-7, 123e20, 5e-324]),
    tricky_text,
)
plain_values = st.recursive(
    plain_scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(plain_keys, inner, max_size=4)),
    max_leaves=24,
)


@settings(max_examples=1500, deadline=None)
@given(plain_values)
def test_plain_path_writes_what_the_general_path_writes(value: Any) -> None:
    plain = canonical._plain_bytes(value)
    general = canonical.general_compact(value)
    if plain is not None:
        assert plain.decode("utf-8") == general
    assert canonical.compact(value) == general
    assert canonical.pretty(value) == canonical.general_pretty(value)
    assert canonical.pretty_bytes(value) == canonical.general_pretty(value).encode("utf-8", "replace")
    if isinstance(value, dict):
        assert canonical.envelope_texts(value) == canonical.general_envelope_texts(value)
        _payload, text = canonical.general_envelope_texts(value)
        assert canonical.envelope_parts(value, newline=True)[1] == (text + "\n").encode("utf-8")
    assert canonical.copy(value) == canonical.parse(general)


def _typed(value: Any) -> Any:
    """The value with every scalar's type made visible (1 and 1.0 and True compare equal)."""
    if isinstance(value, dict):
        return [(k, _typed(v)) for k, v in value.items()]
    if isinstance(value, list):
        return [_typed(v) for v in value]
    return (type(value).__name__, repr(value))


@settings(max_examples=1500, deadline=None)
@given(plain_values, st.sampled_from(["compact", "pretty", "ascii", "spaced"]))
def test_plain_parse_is_the_general_parse(value: Any, form: str) -> None:
    try:
        if form == "compact":
            text = canonical.general_compact(value)
        elif form == "pretty":
            text = canonical.general_pretty(value)
        else:
            text = json.dumps(value, ensure_ascii=form == "ascii", indent=None if form == "ascii" else 3)
    except ValueError:  # json.dumps refuses nothing here but be explicit about it
        return
    raw = text.encode("utf-8", "surrogatepass")
    plain = canonical.parse_plain(raw)
    if plain is None:
        return
    parsed, whole = plain
    reference = canonical.parse(raw.decode("utf-8", "replace"))
    assert _typed(parsed) == _typed(reference)
    assert whole.decode("utf-8") == canonical.general_compact(reference)
    assert canonical.compact_plain(parsed) == whole
    if isinstance(parsed, dict) and parsed:
        last = list(parsed)[-1]
        member = canonical.last_member_plain(parsed, whole, last)
        assert member.decode("utf-8") == canonical.general_compact(reference[last])


def test_plain_path_is_taken_for_everyday_state_and_refused_for_the_rest() -> None:
    everyday = {"id": "r1", "sequence": 3, "at": "2026-12-01T21:56:51.123Z", "map": {"a/1.txt": "ab" * 32}}
    assert canonical._plain_bytes(everyday) is not None
    expected = (everyday, canonical.compact(everyday).encode())
    assert canonical.parse_plain(canonical.pretty(everyday).encode()) == expected
    for refused in (
        {"x": 1.5},
        {"x": 2.0},
        {"x": [1e-7]},
        {"x": -0.0},
        {"x": 2**53},
        {"x": -(2**53)},
        {"1": 0},
        {"b": {"0": 1}},
        {"x": "\ud800"},
        {1: "non-str key"},
    ):
        assert canonical._plain_bytes(refused) is None, refused
    for text in (b'{"x":1.0}', b'{"x":9007199254740993}', b'{"7":1}', b'"\\ud800"', b"\xef\xbb\xbf{}", b"[NaN]"):
        assert canonical.parse_plain(text) is None, text


@settings(max_examples=500, deadline=None)
@given(
    st.one_of(
        st.integers(-(10**13), 10**14).map(timeutil.iso_from_ms),
        st.text(alphabet="0123456789-T:.Z+z ", min_size=20, max_size=26),
        st.sampled_from(["2026-02-30T00:00:00.000Z", "2026-12-01T23:59:60.000Z", "٢٠٢٦-12-01T00:00:00.000Z"]),
    )
)
def test_stored_times_parse_as_strptime_parses_them(text: str) -> None:
    try:
        moment = datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
        expected: int | None = round(moment.timestamp() * 1000)
    except ValueError:
        expected = None
    assert timeutil.parse_iso_ms(text) == expected


@settings(max_examples=1500, deadline=None)
@given(
    st.sampled_from(["work", "out/a", "é/x", "😀" * 240, "a" * 495]),
    st.one_of(
        st.text(max_size=8),
        st.sampled_from([".", "..", "...", "a.", "a ", "nul", "COM1.txt", "lpt9", "console", "com0", "a:b", "x\x7f"]),
        st.text(alphabet='abc.:<>"|?*\\/ \x00\x1f\x7fé', max_size=6),
    ),
)
def test_a_walked_entry_is_judged_as_relative_judges_it(parent: str, name: str) -> None:
    from nexus_core import paths
    from nexus_core.errors import NexusError

    child = f"{parent}/{name}"
    try:
        paths.relative(child)
        accepted = True
    except NexusError:
        accepted = False
    if paths.portable_child(name, child):
        assert accepted, child


@settings(max_examples=1500, deadline=None)
@given(plain_values)
def test_both_plainness_checks_are_proofs(value: Any) -> None:
    """The text check and the container walk (whichever is cheaper runs) each accept only
    values the plain path writes exactly."""
    orjson = canonical.plain_path()
    try:
        data = orjson.dumps(value, option=orjson.OPT_STRICT_INTEGER)
    except TypeError:
        return
    if not isinstance(value, dict | list):
        return
    exact = data.decode("utf-8") == canonical.general_compact(value)
    if canonical._text_is_plain(data):
        assert exact and canonical._tree_is_plain(value)
    if canonical._tree_is_plain(value):
        assert exact


plain_items = st.dictionaries(plain_keys, plain_values, max_size=3)


@settings(max_examples=1500, deadline=None)
@given(
    st.lists(plain_items, min_size=1, max_size=6),
    plain_values,
    st.integers(0, 5),
    st.one_of(plain_items, plain_scalars),
    st.one_of(st.none(), plain_values),
    st.sampled_from(["last", "first", "alone"]),
)
def test_a_proof_by_items_accepts_only_what_the_plain_path_writes_exactly(
    items: list[Any], head: Any, index: int, replacement: Any, new_head: Any, place: str
) -> None:
    """A save's proof against the item texts of the last proof (a run whose one task changed):
    whatever it accepts is plain (no float, no index-like key: the container walk decides
    exactly) and its text (assembled from the parts when the list is the last member) is
    exactly what JSON.stringify writes."""
    canonical.plain_path(1 << 30)
    before = {"head": head, "tasks": items}
    if canonical._plain_bytes(before) is None:
        return  # only what a proof accepted is ever noted
    canonical.note_plain_items(before["tasks"], 1 << 30)
    changed = list(items)
    changed[index % len(items)] = replacement
    head = head if new_head is None else new_head
    after: dict[str, Any] = {
        "last": {"head": head, "tasks": changed},
        "first": {"tasks": changed, "head": head},
        "alone": {"tasks": changed},
    }[place]
    data = canonical._plain_bytes_by_items(after, "tasks")
    if data is not None:
        assert canonical._tree_is_plain(after)
        assert data.decode("utf-8") == canonical.general_compact(after)


text_maps = st.dictionaries(keys, st.one_of(st.none(), st.text(max_size=4), st.integers(0, 3)), max_size=5)


@settings(max_examples=400, deadline=None)
@given(text_maps, st.data())
def test_same_is_equality_of_compact_texts(first: dict[str, Any], data: st.DataObject) -> None:
    """``same`` (the reference's equality) answers what comparing compact texts answers, for
    maps in any order (index-like keys are reordered by JSON.stringify), with values that
    Python calls equal but JSON writes differently (``1`` and ``True``, ``0`` and ``False``)."""
    order = data.draw(st.permutations(list(first.items())))
    changed = data.draw(st.sampled_from(["same", "reordered", "retyped", "other"]))
    if changed == "same":
        second = dict(first)
    elif changed == "reordered":
        second = dict(order)
    elif changed == "retyped":
        second = {key: (bool(value) if type(value) is int and value < 2 else value) for key, value in first.items()}
    else:
        second = data.draw(text_maps)
    assert canonical.same(first, second) == (canonical.compact(first) == canonical.compact(second))
    assert canonical.same(second, first) == canonical.same(first, second)
