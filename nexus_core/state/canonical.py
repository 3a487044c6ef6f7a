"""JS-compatible JSON: what ``JSON.stringify`` writes and what ``JSON.parse`` reads.

Every hash the registry stores is taken over ``JSON.stringify`` output, so byte-for-byte
agreement with JavaScript is the contract (SPEC 2.2):

* index-like keys ("0".."4294967294") come first in numeric order, then insertion order;
* numbers follow ``Number.prototype.toString`` (``1e-7``, ``0.000001``, ``1e+21``, no ``.0``);
* lone UTF-16 surrogates are written as ``\\udxxx`` escapes, everything else non-ASCII raw;
* inputs are parsed as doubles (integers beyond 2^53 lose precision), NaN/Infinity refused.

Two paths give these bytes. The plain path uses orjson, for values it provably spells exactly
as ``JSON.stringify`` does: no float, no integer beyond 2^53, no key that may be index-like,
no lone surrogate (see ``_plain_bytes``; everyday run state is all of these). Everything else
takes the general path: a normalised copy handed to the C encoder of :mod:`json`, the rare
values it cannot spell (exponent floats, huge integral floats) through a placeholder. Property
tests prove the two paths give the same bytes (tests/test_canonical_fast_path.py).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from json.encoder import encode_basestring as _quote  # the C version when available
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..shapes import JsonObject

# orjson is imported only once state is large enough to pay for it: its import (it pulls in
# dataclasses, inspect, ast...) costs some 10 ms, more than it saves on a small run.
_ORJSON_WORTH = 128 << 10
_orjson: Any = None
_orjson_tried = False


def plain_path(size: int = _ORJSON_WORTH) -> Any:
    """The orjson module when loaded, or now loaded because ``size`` bytes of JSON are worth it;
    None while the general path alone is used (or when orjson is not installed)."""
    global _orjson, _orjson_tried
    if _orjson is None and not _orjson_tried and size >= _ORJSON_WORTH:
        _orjson_tried = True
        try:
            import orjson
        except ImportError:  # pragma: no cover - the general path is complete on its own
            return None
        _orjson = orjson
    return _orjson


MAX_SAFE_INTEGER = 2**53 - 1
_INDEX_KEY = re.compile(r"(?:0|[1-9][0-9]{0,9})\Z")
_SURROGATE = re.compile("[\ud800-\udfff]")
# Values the C encoder writes exactly as JSON.stringify does once walk() has respelled numbers.
_PLAIN = {str, bool, type(None)}
_SCALARS = {str, bool, type(None), int, float}
_JS_TRIM = (
    "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005"
    "\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
)


def js_number(value: float | int) -> str:
    """``Number.prototype.toString`` for a JSON number (non-finite gives ``null``)."""
    if isinstance(value, int):
        if abs(value) <= MAX_SAFE_INTEGER:
            return str(value)
        value = float(value)
    if not math.isfinite(value):
        return "null"
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    mantissa, _, exponent = repr(abs(value)).partition("e")
    int_part, _, frac_part = mantissa.partition(".")
    if frac_part == "0":
        frac_part = ""
    all_digits = int_part + frac_part
    significant = all_digits.lstrip("0")
    # value = 0.d1..dk * 10^n
    n = len(int_part) + (int(exponent) if exponent else 0) - (len(all_digits) - len(significant))
    digits = significant.rstrip("0")
    k = len(digits)
    if k <= n <= 21:
        text = digits + "0" * (n - k)
    elif 0 < n <= 21:
        text = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        text = "0." + "0" * (-n) + digits
    else:
        e = n - 1
        text = digits[0] + ("." + digits[1:] if k > 1 else "") + "e" + ("+" if e > 0 else "-") + str(abs(e))
    return sign + text


def is_index_key(key: str) -> bool:
    return bool(_INDEX_KEY.match(key)) and int(key) <= 4294967294


def js_key_order(keys: list[str]) -> list[str]:
    index = [k for k in keys if is_index_key(k)]
    if not index:
        return keys
    index.sort(key=int)
    return index + [k for k in keys if not is_index_key(k)]


class _Normaliser:
    """Builds the copy handed to the C encoder; collects raw number spellings."""

    def __init__(self) -> None:
        self.token = ""
        self.raw: list[str] = []

    def number(self, value: float) -> Any:
        if not math.isfinite(value):
            return None
        if value.is_integer() and abs(value) <= MAX_SAFE_INTEGER:
            return int(value)
        text = js_number(value)
        if text == repr(value):
            return value
        if not self.token:
            self.token = os.urandom(8).hex()
        self.raw.append(text)
        return f"\x00{self.token}:{len(self.raw) - 1}\x00"

    def walk(self, value: Any) -> Any:
        if isinstance(value, dict):
            keys = list(value)
            # Only a key starting with a digit can be index-like; min() finds one at C speed.
            ordered = js_key_order(keys) if keys and min(keys) < ":" else keys
            if set(map(type, value.values())) <= _PLAIN:
                # Nothing inside to respell (e.g. a scope's hash map): hand it over as it is.
                return value if ordered is keys else {k: value[k] for k in ordered}
            return {k: self.walk(value[k]) for k in ordered}
        if isinstance(value, list):
            if set(map(type, value)) <= _PLAIN:
                return value
            return [self.walk(v) for v in value]
        if isinstance(value, float):
            return self.number(value)
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_SAFE_INTEGER:
            return self.number(float(value))
        return value

    def finish(self, text: str) -> str:
        if self.raw:
            pattern = re.compile(r'"\\u0000' + self.token + r':(\d+)\\u0000"')
            text = pattern.sub(lambda m: self.raw[int(m.group(1))], text)
        if has_lone_surrogate(text):
            text = _SURROGATE.sub(lambda m: f"\\u{ord(m.group(0)):04x}", text)
        return text


# Checks on orjson's compact output with every digit deleted. A float keeps its fraction point
# ("1.5" -> ".") or its exponent ("1e-7" -> "e-", "1e+21" -> "e+") right after the character
# that opens a value inside a container (":", "[" or ","), or after its sign ("-1.5" -> "-.");
# an all-digit key ("42", the only kind that can be index-like) becomes an empty key. Inside a
# string, where every quote is escaped, these can only raise a false alarm (the general path
# then runs), never hide a number or a key. The sign is only looked for after a value opener,
# so a hyphenated UUID group such as "-12e-" (in every run) raises no false alarm.
_FRACTION = re.compile(rb"\.(?:(?<=[:\[,]\.)|(?<=[:\[,]-\.))[,}\]e]")
_NEGATIVE_EXPONENT = re.compile(rb"e-(?:(?<=[:\[,]e-)|(?<=[:\[,]-e-))")
_POSITIVE_EXPONENT = re.compile(rb"e\+(?:(?<=[:\[,]e\+)|(?<=[:\[,]-e\+))")
_EXACT_INDEX_KEY = re.compile(rb'[{,]"(?:0|[1-9][0-9]{0,9})":')
_EMPTY_KEY = re.compile(rb'"":(?<=[{,]"":)')  # '{"":' or ',"":' in one scan
_DIGITS = b"0123456789"


def _plain_bytes(value: Any) -> bytes | None:
    """``compact(value)`` as UTF-8, through orjson, when orjson provably writes what
    ``JSON.stringify`` writes; else None (the caller takes the general path).

    orjson writes strings exactly as the json module does with ``ensure_ascii=False`` (same
    escapes, lowercase hex, U+2028/DEL raw) and keeps dict insertion order. It differs from
    JavaScript only on what is refused here: a lone surrogate (orjson raises), an integer beyond
    2^53 (raises under OPT_STRICT_INTEGER), a float (any float: ``2.0``, ``1e-7``, ``-0.0``; found
    in the output), an index-like key (found in the output), a non-str key or a foreign type
    (raises), nesting beyond orjson's depth limit (raises)."""
    orjson = _orjson
    if orjson is None or not isinstance(value, dict | list):
        return None
    try:
        data: bytes = orjson.dumps(value, option=orjson.OPT_STRICT_INTEGER)
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        return None
    if data in _CHECKED:
        # Being plain is a property of the text (a float or an index-like key shows in it), so
        # a text already found plain needs no second look: a save, then printing the run saved,
        # or the next load of what this process just wrote.
        return data
    if not _proven_plain(value, data):
        return None
    remember_plain(data)
    return data


def _proven_plain(value: Any, data: bytes) -> bool:
    """Whether the dict or list ``value``, which orjson wrote as ``data``, is plain: by the
    cheaper of the two proofs."""
    if _containers_estimate(data) * _BYTES_PER_CONTAINER < len(data):
        # Mostly big hash maps (a large scope's snapshots): walking the few containers costs
        # less than scanning the text, which file names such as "f-1.bin" fill with false alarms.
        return _tree_is_plain(value)
    return _text_is_plain(data)


# The texts of the items of the last large list proven plain inside a larger value (a run's
# tasks, by the load or the save that proved the run): the next save of a run compares each
# task's text with the one at its place before and scans only those that differ (one task, in
# a mutation) instead of the whole text (some 2.5 ms per MiB, on every save).
_plain_items: list[bytes] = []


def note_plain_items(items: Any, size: int) -> None:
    """Remember the item texts of ``items``, a list inside a value of ``size`` bytes that
    ``parse_plain`` returned or the plain path wrote (so every item of it is plain), for the
    next save's proof (``_plain_bytes_by_items``): a run's tasks, after its load."""
    global _plain_items
    if _orjson is not None and isinstance(items, list) and size >= _ORJSON_WORTH:
        _plain_items = [_orjson.dumps(item) for item in items]


def _plain_bytes_by_items(value: dict[str, Any], key: str) -> bytes | None:
    """``_plain_bytes(value)`` for a dict whose list ``value[key]`` held mostly the same item
    texts at the last proof (``note_plain_items``): those are plain already, the others and the
    rest of ``value`` are proven here. None when there is nothing noted or the proof does not
    go through (the caller then runs the whole one, which decides)."""
    global _plain_items
    orjson = _orjson
    previous = _plain_items
    items = value.get(key)
    if orjson is None or not previous or not isinstance(items, list) or is_index_key(key):
        return None
    rest = {k: v for k, v in value.items() if k != key}
    strict = orjson.OPT_STRICT_INTEGER  # refuses integers beyond 2^53 (lone surrogates always)
    try:
        texts = [orjson.dumps(item, option=strict) for item in items]
        rest_text: bytes = orjson.dumps(rest, option=strict)
        key_text: bytes = orjson.dumps(key)
    except TypeError:
        return None
    for index, text in enumerate(texts):
        if index < len(previous) and text == previous[index]:
            continue  # the text of an item proven plain (a property of the text): plain
        if not (isinstance(items[index], dict | list) and _proven_plain(items[index], text)):
            return None
    if not _proven_plain(rest, rest_text):
        return None
    if list(value)[-1] == key:
        # orjson's compact text of the whole, from its parts (it writes '{"k":v,...}' and
        # '[v,...]' with nothing in between): the run is not serialised a second time.
        member = key_text + b":[" + b",".join(texts) + b"]}"
        data = rest_text[:-1] + (b"," if rest else b"") + member
    else:
        data = orjson.dumps(value, option=strict)
    _plain_items = texts
    remember_plain(data)
    return data


def _text_is_plain(data: bytes) -> bool:
    """No float and no index-like key in orjson's compact output ``data`` (false alarms only)."""
    shape = data.translate(None, _DIGITS)
    if _FRACTION.search(shape) or _NEGATIVE_EXPONENT.search(shape) or _POSITIVE_EXPONENT.search(shape):
        return False
    return not (_EMPTY_KEY.search(shape) and _EXACT_INDEX_KEY.search(data))


_BYTES_PER_CONTAINER = 300  # which of the two checks is cheaper (either is a proof)
_SAMPLE_STRIDE = 16


def _containers_estimate(data: bytes) -> int:
    """About how many objects and arrays ``data`` holds: only which proof to run depends on it,
    so every 16th byte is counted (two full counts cost 0.5 ms per megabyte, on every save)."""
    if len(data) < 1 << 16:
        return data.count(b"{") + data.count(b"[")
    sample = data[::_SAMPLE_STRIDE]
    return (sample.count(b"{") + sample.count(b"[")) * _SAMPLE_STRIDE


_MEMO_LIMIT = 4 << 20
_CHECKED: list[bytes] = []  # the last few plain texts (not too large: each is kept in memory)


def remember_plain(data: bytes) -> None:
    """Note a compact text known plain (found so, or built from plain parts only)."""
    if len(data) <= _MEMO_LIMIT and data not in _CHECKED:
        _CHECKED.append(data)
        del _CHECKED[:-4]


_LEAVES = {str, bool, type(None), int}


def _tree_is_plain(value: Any) -> bool:
    """No float and no index-like key anywhere in a value orjson accepted (which already
    refused lone surrogates, integers beyond 2^53 and non-str keys)."""
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            # Only a key starting with a digit can be index-like; min() finds one at C speed.
            if node and min(node) < ":" and any(is_index_key(key) for key in node):
                return False
            items: Any = node.values()
        else:
            items = node
        others = set(map(type, items)) - _LEAVES
        if not others:
            continue
        if any(issubclass(kind, float) for kind in others):
            return False
        stack.extend(item for item in items if isinstance(item, dict | list | tuple))
    return True


def parse_plain(raw: bytes) -> tuple[Any, bytes] | None:
    """``(parse(raw.decode("utf-8", "replace")), compact of it as UTF-8)`` through orjson when
    that is provably the same value and every part of it is plain (``compact_plain`` may then
    serialise any part), else None.

    Refused (orjson raises): invalid UTF-8, a byte order mark, a lone surrogate escape, NaN or
    Infinity, a raw control character, a number beyond the double range, too deep a nesting.
    Then only integers beyond 2^53 could differ (orjson keeps them exact, JavaScript makes them
    doubles): ``_plain_bytes`` refuses those, and floats, whose parse it so never relies on."""
    orjson = plain_path(len(raw))
    if orjson is None:
        return None
    try:
        value = orjson.loads(raw)
    except ValueError:  # orjson.JSONDecodeError is a ValueError
        return None
    data = _plain_bytes(value)
    return None if data is None else (value, data)


def last_member_plain(value: JsonObject, data: bytes, key: str) -> bytes:
    """``compact_plain(value[key])`` where ``data`` is ``compact_plain(value)``: cut out of it
    when ``key`` is the last key (a run inside its envelope), so it is not serialised again."""
    orjson = _orjson
    if orjson is not None and list(value)[-1:] == [key]:
        head = orjson.dumps({k: v for k, v in value.items() if k != key})
        prefix = head[:-1] + (b"," if len(value) > 1 else b"") + orjson.dumps(key) + b":"
        if data.startswith(prefix) and data.endswith(b"}"):
            return data[len(prefix) : -1]
    return compact_plain(value[key])


def compact_plain(value: Any) -> bytes:
    """``compact(value)`` as UTF-8 for a value ``parse_plain`` returned or the plain path wrote
    (``_plain_bytes`` found it plain), or any part of one."""
    if _orjson is None or not isinstance(value, dict | list):
        return compact(value).encode("utf-8")
    return _orjson.dumps(value)  # type: ignore[no-any-return]


def compact(value: Any) -> str:
    """``JSON.stringify(value)``."""
    plain = _plain_bytes(value)
    if plain is not None:
        return plain.decode("utf-8")
    return general_compact(value)


def general_compact(value: Any) -> str:
    """``compact`` without the plain path: the normalising walk and the json module."""
    norm = _Normaliser()
    text = json.dumps(norm.walk(value), ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return norm.finish(text)


# A key that may be index-like (walk() would move it); one spelled with an escape
# (``"\\u0031"`` is "1") is caught by looking for the escape itself.
_INDEX_KEY_TEXT = re.compile(r'"(?:0|[1-9][0-9]{0,9})"[ \t\r\n]*:')


def parse_for_hashing(text: str) -> tuple[Any, bool]:
    """``parse(text)``, and whether ``compact()`` of it (or of any part of it) needs the
    normalising walk: False when no number needs respelling (no fraction, no exponent, no
    integer beyond 2^53) and no key can be index-like. Then ``compact_parsed(value, False)``
    hands the value straight to the C encoder. A false True only costs the walk."""
    respell = False

    def integer(token: str) -> int | float:
        nonlocal respell
        number = int(token)
        if abs(number) <= MAX_SAFE_INTEGER:
            return number
        respell = True
        return float(token)

    def fraction(token: str) -> float:
        nonlocal respell
        respell = True
        return float(token)

    value = json.loads(text, parse_int=integer, parse_float=fraction, parse_constant=_reject_constant)
    return value, respell or "\\u003" in text or _INDEX_KEY_TEXT.search(text) is not None


def compact_parsed(value: Any, needs_walk: bool = True) -> str:
    """``compact(value)`` for a value (or part of one) ``parse_for_hashing`` cleared."""
    if needs_walk:
        return compact(value)
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return _Normaliser().finish(text)


def compact_with_member(value: JsonObject, key: str, member_text: str, needs_walk: bool = True) -> str:
    """``compact(value)`` when ``member_text`` is already ``compact(value[key])``: the member
    (e.g. a run's plan, also hashed on its own) is serialised once and spliced in."""
    token = "\x00" + os.urandom(8).hex() + "\x00"  # no JSON text can spell it by chance
    stand_in = dict(value)
    stand_in[key] = token  # same key position
    head, found, tail = compact_parsed(stand_in, needs_walk).partition(json.dumps(token))
    if not found:  # cannot happen; never hash a wrong text
        return compact(value)
    return head + member_text + tail


def pretty(value: Any) -> str:
    """``JSON.stringify(value, null, 2)``."""
    plain = _plain_pretty(value)
    return general_pretty(value) if plain is None else plain.decode("utf-8")


def pretty_bytes(value: Any) -> bytes:
    """``pretty(value)`` as UTF-8 (what the CLI prints), without a round trip through str."""
    plain = _plain_pretty(value)
    return general_pretty(value).encode("utf-8", "replace") if plain is None else plain


def _plain_pretty(value: Any) -> bytes | None:
    if _plain_bytes(value) is None:
        return None
    # orjson's OPT_INDENT_2 is JSON.stringify's pretty form: 2 spaces, '"key": value', [] and {}.
    return _orjson.dumps(value, option=_orjson.OPT_INDENT_2)  # type: ignore[no-any-return]


def general_pretty(value: Any) -> str:
    """``pretty`` without the plain path."""
    norm = _Normaliser()
    pieces: list[str] = []
    _indented(norm.walk(value), 0, pieces)
    return norm.finish("".join(pieces))


def envelope_texts(run: Any) -> tuple[str, str]:
    """``(compact(run), pretty({"schemaVersion": 1, "sha256": sha256(compact(run)), "run": run}))``
    with one normalising walk shared by both (a save writes the same run twice)."""
    payload, text = envelope_bytes(run)
    return payload.decode("utf-8"), text.decode("utf-8")


def envelope_bytes(run: Any) -> tuple[bytes, bytes]:
    """``envelope_texts`` as UTF-8 (what a save writes), without a round trip through str."""
    payload, text, _plain = envelope_parts(run)
    return payload, text


def envelope_parts(run: Any, items_key: str | None = None, newline: bool = False) -> tuple[bytes, bytes, bool]:
    """``envelope_bytes`` and whether the plain path wrote them (then the run holds no float,
    no integer beyond 2^53, no index-like key and no lone surrogate: what a parse of the file
    gives serialises to the same bytes as the run itself).

    ``items_key``: the member of ``run`` that is a large list changing an item at a time (a
    run's tasks): proven item by item against the last proof (``_plain_bytes_by_items``).
    ``newline``: the file text ends with a newline (as a state file does)."""
    plain = None
    if items_key is not None and isinstance(run, dict):
        plain = _plain_bytes_by_items(run, items_key)
        if plain is None:
            plain = _plain_bytes(run)
            if plain is not None:
                note_plain_items(run.get(items_key), len(plain))
    else:
        plain = _plain_bytes(run)
    if plain is not None:
        digest = hashlib.sha256(plain).hexdigest()
        # The compact envelope, as the next load of this file checks it: plain parts only.
        remember_plain(b'{"schemaVersion":1,"sha256":"' + digest.encode() + b'","run":' + plain + b"}")
        envelope = {"schemaVersion": 1, "sha256": digest, "run": run}
        option = _orjson.OPT_INDENT_2 | (_orjson.OPT_APPEND_NEWLINE if newline else 0)
        return plain, _orjson.dumps(envelope, option=option), True
    payload, text = general_envelope_texts(run)
    return payload.encode("utf-8"), (text + "\n" if newline else text).encode("utf-8"), False


def general_envelope_texts(run: Any) -> tuple[str, str]:
    """``envelope_texts`` without the plain path."""
    norm = _Normaliser()
    walked = norm.walk(run)
    payload = norm.finish(json.dumps(walked, ensure_ascii=False, separators=(",", ":"), allow_nan=False))
    pieces: list[str] = []
    _indented({"schemaVersion": 1, "sha256": sha256_text(payload), "run": walked}, 0, pieces)
    return payload, norm.finish("".join(pieces))


def _scalar(value: Any) -> str:
    """One scalar as the json encoder writes it (walk() has already respelled numbers)."""
    if isinstance(value, str):
        return _quote(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if type(value) is int:
        return int.__repr__(value)
    if type(value) is float:
        return float.__repr__(value)
    return json.dumps(value, ensure_ascii=False, allow_nan=False)


# Below this size a container is cheaper to write item by item than through json.dumps.
_BULK = 16


def _indented(value: Any, depth: int, out: list[str]) -> None:
    """Append what ``json.dumps(value, indent=2)`` writes, without its pure-Python encoder for
    the bulk: a large container of scalars only (e.g. a hash map) goes through the C encoder
    with the newline and indentation folded into its item separator. Pieces are joined once,
    so a megabyte-sized map is not copied again at every level."""
    is_dict = isinstance(value, dict)
    if not is_dict and not isinstance(value, list):
        out.append(_scalar(value))
        return
    if not value:
        out.append("{}" if is_dict else "[]")
        return
    inner = "\n" + "  " * (depth + 1)
    opening, closing = ("{", "}") if is_dict else ("[", "]")
    out.append(opening + inner)
    values = value.values() if is_dict else value
    if len(value) > _BULK and set(map(type, values)) <= _SCALARS:
        body = json.dumps(value, ensure_ascii=False, separators=("," + inner, ": "), allow_nan=False)
        out.append(body[1:-1])
    else:
        separator = "," + inner
        first = True
        for item in value.items() if is_dict else value:
            if not first:
                out.append(separator)
            first = False
            if is_dict:
                out.append(_quote(item[0]) + ": ")
                item = item[1]
            if type(item) in _SCALARS:
                out.append(_scalar(item))
            else:
                _indented(item, depth + 1, out)
    out.append("\n" + "  " * depth + closing)


def _parse_int(text: str) -> int | float:
    number = int(text)
    if abs(number) <= MAX_SAFE_INTEGER:
        return number
    return float(text)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def parse(text: str) -> Any:
    """``JSON.parse``: doubles only, no NaN/Infinity literals. Raises ValueError."""
    return json.loads(text, parse_int=_parse_int, parse_constant=_reject_constant)


def copy(value: Any) -> Any:
    """A JSON deep copy (``JSON.parse(JSON.stringify(v))``): non-finite numbers become null."""
    plain = _plain_bytes(value)
    if plain is not None:
        return _orjson.loads(plain)
    return parse(compact(value))


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def sha256_json(value: Any) -> str:
    return hashlib.sha256(compact(value).encode("utf-8")).hexdigest()


def same(a: Any, b: Any) -> bool:
    """The reference's equality: compact serialisations are identical (key order matters)."""
    if type(a) is dict and type(b) is dict and len(a) == len(b) and _same_text_map(a, b):
        return True  # the everyday case (a snapshot against the hashes it was taken as), unserialised
    return compact(a) == compact(b)


def _same_text_map(a: dict[Any, Any], b: dict[Any, Any]) -> bool:
    """Whether ``a`` and ``b`` hold the same string keys in the same order, each with the same
    string or null value: their serialisations are then identical. False says nothing (other
    values, or an order ``JSON.stringify`` would change anyway): ``same`` then serialises."""
    for (key_a, value_a), (key_b, value_b) in zip(a.items(), b.items(), strict=True):
        if type(key_a) is not str or key_a != key_b or type(key_b) is not str:
            return False
        if value_a is None:
            if value_b is not None:
                return False
        elif type(value_a) is not str or type(value_b) is not str or value_a != value_b:
            return False
    return True


def utf16_len(text: str) -> int:
    """``String.prototype.length``: UTF-16 code units."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def utf16_key(text: str) -> bytes:
    """Sort key equal to JS default ``Array.sort()`` order."""
    return text.encode("utf-16-be", "surrogatepass")


def js_sorted(items: Any) -> list[str]:
    return sorted(items, key=utf16_key)


def js_trim(text: str) -> str:
    return text.strip(_JS_TRIM)


def has_lone_surrogate(text: str) -> bool:
    # A scan by the UTF-8 codec is far faster than the regex over megabytes of state.
    if text.isascii():
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False
