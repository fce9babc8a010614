"""JSON text in and out, plus the typed field access every JSON decoder here shares.

`dumps` writes compact UTF-8 JSON (the form kafka-journal writes) and raises EncodeError for
anything that is not strictly a `Json` value. `loads` raises DecodeError for anything that is not
JSON. The `expect_*`/`optional_*` readers raise DecodeError naming the offending field, so a
decoder states its schema as a sequence of reads and never lets a KeyError or TypeError escape.
"""

from __future__ import annotations

import math
from typing import cast

import orjson

from journal.codec.errors import DecodeError, EncodeError
from journal.core.model import Json

JsonObject = dict[str, object]


def dumps(value: object, what: str) -> bytes:
    """`value` as JSON; EncodeError unless it is strictly a `Json` value.

    orjson refuses much (integers beyond 64 bits, lone surrogates, non-string keys, most
    foreign types) but writes NaN as null, tuples as lists, and dates, UUIDs or enums as their
    text: each would read back as a different value. So the bytes are read back and compared,
    all in C, which costs less than walking the value in Python; only a value that fails is
    walked, to name what in it is not JSON.
    """
    try:
        encoded = orjson.dumps(value)
    except orjson.JSONEncodeError as e:
        raise EncodeError(f"{what} cannot be written as JSON: {e}") from e
    if orjson.loads(encoded) != value:
        _check_json(value, what)
        raise EncodeError(f"{what} would not read back as the same value")
    return encoded


def loads(raw: bytes, what: str) -> Json:
    try:
        return cast(Json, orjson.loads(raw))
    except orjson.JSONDecodeError as e:
        raise DecodeError(f"{what} is not valid JSON: {e}") from e


_SCALARS = frozenset({str, int, bool, type(None)})


def _check_json(value: object, what: str) -> None:
    """Name what in `value` is not strictly Json. Iterative, so a deep value cannot hit
    RecursionError."""
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind in _SCALARS:
            continue
        if kind is dict or isinstance(item, dict):
            for key, nested in cast(dict[object, object], item).items():
                if not isinstance(key, str):
                    raise EncodeError(f"{what} contains a non-string object key {key!r}")
                stack.append(nested)
        elif kind is list or isinstance(item, list):
            stack.extend(cast(list[object], item))
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise EncodeError(f"{what} contains a non-finite number {item!r}")
        elif not isinstance(item, (bool, int, str)):  # subclasses (IntEnum...) are their value
            raise EncodeError(f"{what} contains a {type(item).__name__}, which is not JSON")


def type_name(value: object) -> str:
    """The JSON name of a decoded value's type, for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def expect_object(value: object, where: str) -> JsonObject:
    if not isinstance(value, dict):
        raise DecodeError(f"{where} must be a JSON object, got {type_name(value)}")
    return cast(JsonObject, value)


def expect_array(value: object, where: str) -> list[object]:
    if not isinstance(value, list):
        raise DecodeError(f"{where} must be a JSON array, got {type_name(value)}")
    return cast(list[object], value)


def expect_str(value: object, where: str) -> str:
    if not isinstance(value, str):
        raise DecodeError(f"{where} must be a string, got {type_name(value)}")
    return value


def expect_int(value: object, where: str) -> int:
    # bool is an int in Python but never a number in JSON.
    if isinstance(value, bool) or not isinstance(value, int):
        raise DecodeError(f"{where} must be an integer, got {type_name(value)} {value!r}")
    return value


def field(obj: JsonObject, key: str, where: str) -> object:
    """A required field; JSON null counts as absent, as in kafka-journal (Play JSON)."""
    value = obj.get(key)
    if value is None:
        raise DecodeError(f"{where}.{key} is missing")
    return value


def optional_str(obj: JsonObject, key: str, where: str) -> str | None:
    value = obj.get(key)
    return None if value is None else expect_str(value, f"{where}.{key}")


def optional_object(obj: JsonObject, key: str, where: str) -> JsonObject | None:
    value = obj.get(key)
    return None if value is None else expect_object(value, f"{where}.{key}")
