"""Frozen dataclass values as JSON and back, by their type hints: the one encoding of the
dashboard's project model on the wire (``nexus observe``), an exact round trip.

``encode`` turns a dataclass into an object of its fields (in order), tuples and lists into
arrays, frozensets into sorted arrays; JSON values (a run, an inspection: plain dicts at run
time) pass as they are. ``decoder(T)`` builds, once per type, the function that reads such JSON
back into a ``T``, checking every value against its field's type: a field the type does not know
is ignored (a newer peer's addition), a missing field takes its default or is an error.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Callable
from typing import Any


class DecodeError(ValueError):
    """A JSON value that is not the type it should be (the message names where)."""


def encode(value: Any) -> Any:
    """``value`` as JSON-ready data (dicts, lists, strings, numbers, booleans, None)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {field.name: encode(getattr(value, field.name)) for field in dataclasses.fields(value)}
    if isinstance(value, (tuple, list)):
        return [encode(item) for item in value]
    if isinstance(value, (frozenset, set)):
        items = [encode(item) for item in value]
        try:
            return sorted(items)
        except TypeError:
            return items
    if isinstance(value, dict):
        return {key: encode(item) for key, item in value.items()}
    return value


Decoder = Callable[[Any, str], Any]


def decode(kind: Any, value: Any) -> Any:
    """``value`` (JSON data) read back as ``kind``; DecodeError when it does not fit."""
    return decoder(kind)(value, "$")


@functools.cache
def decoder(kind: Any) -> Decoder:
    """The function that reads JSON data as ``kind`` (built once per type)."""
    if kind is Any or kind is object:
        return _as_is
    if dataclasses.is_dataclass(kind) and isinstance(kind, type):
        return _dataclass_decoder(kind)
    origin = typing.get_origin(kind)
    arguments = typing.get_args(kind)
    if origin is typing.Union or origin is types.UnionType:
        return _union_decoder(arguments)
    if origin is tuple:
        if len(arguments) == 2 and arguments[1] is Ellipsis:
            item = decoder(arguments[0])
            return lambda value, where: tuple(item(x, f"{where}[{i}]") for i, x in enumerate(_array(value, where)))
        items = tuple(decoder(argument) for argument in arguments)
        return lambda value, where: _fixed_tuple(items, value, where)
    if origin in (frozenset, set, list):
        item = decoder(arguments[0]) if arguments else _as_is
        build: Any = origin
        return lambda value, where: build(item(x, f"{where}[{i}]") for i, x in enumerate(_array(value, where)))
    if origin is dict or kind is dict:
        value_decoder = decoder(arguments[1]) if len(arguments) == 2 else _as_is
        return lambda value, where: {
            key: value_decoder(item, f"{where}.{key}") for key, item in _object(value, where).items()
        }
    if origin is typing.Literal:
        allowed = arguments
        return lambda value, where: value if value in allowed else _fail(where, f"one of {allowed}", value)
    if kind is type(None):
        return lambda value, where: value if value is None else _fail(where, "null", value)
    if kind is bool:
        return lambda value, where: value if isinstance(value, bool) else _fail(where, "a boolean", value)
    if kind is int:
        return lambda value, where: (
            value if isinstance(value, int) and not isinstance(value, bool) else _fail(where, "an integer", value)
        )
    if kind is float:
        return lambda value, where: (
            value
            if isinstance(value, (int, float)) and not isinstance(value, bool)
            else _fail(where, "a number", value)
        )
    if kind is str:
        return lambda value, where: value if isinstance(value, str) else _fail(where, "a string", value)
    raise TypeError(f"no JSON decoding for {kind!r}")


def _as_is(value: Any, where: str) -> Any:
    return value


def _fail(where: str, expected: str, value: Any) -> Any:
    raise DecodeError(f"{where}: expected {expected}, got {type(value).__name__}")


def _array(value: Any, where: str) -> list[Any]:
    return value if isinstance(value, list) else _fail(where, "an array", value)


def _object(value: Any, where: str) -> dict[str, Any]:
    return value if isinstance(value, dict) else _fail(where, "an object", value)


def _fixed_tuple(items: tuple[Decoder, ...], value: Any, where: str) -> tuple[Any, ...]:
    array = _array(value, where)
    if len(array) != len(items):
        _fail(where, f"{len(items)} items", value)
    return tuple(item(x, f"{where}[{i}]") for i, (item, x) in enumerate(zip(items, array, strict=True)))


def _union_decoder(arguments: tuple[Any, ...]) -> Decoder:
    options = [decoder(argument) for argument in arguments if argument is not type(None)]
    nullable = type(None) in arguments

    def decode_union(value: Any, where: str) -> Any:
        if value is None and nullable:
            return None
        last: DecodeError | None = None
        for option in options:
            try:
                return option(value, where)
            except DecodeError as error:
                last = error
        raise last or DecodeError(f"{where}: expected null, got {type(value).__name__}")

    return decode_union


def _dataclass_decoder(kind: type[Any]) -> Decoder:
    hints = typing.get_type_hints(kind)
    fields = [
        (
            field.name,
            field.default is not dataclasses.MISSING or field.default_factory is not dataclasses.MISSING,
        )
        for field in dataclasses.fields(kind)
        if field.init
    ]
    decoders: dict[str, Decoder] = {}  # filled on first use: a field's type may be the class itself

    def decode_dataclass(value: Any, where: str) -> Any:
        data = _object(value, where)
        if not decoders:
            decoders.update({name: decoder(hints[name]) for name, _ in fields})
        arguments = {}
        for name, optional in fields:
            if name in data:
                arguments[name] = decoders[name](data[name], f"{where}.{name}")
            elif not optional:
                raise DecodeError(f"{where}: {kind.__name__} lacks {name}")
        return kind(**arguments)

    return decode_dataclass
