"""JSON text in and out, plus the typed field access every JSON decoder here shares.

`dumps` writes compact UTF-8 JSON (the form kafka-journal writes) and raises EncodeError for
anything that is not strictly a `Json` value. `loads` raises DecodeError for anything that is not
JSON. The `expect_*`/`optional_*` readers raise DecodeError naming the offending field, so a
decoder states its schema as a sequence of reads and never lets a KeyError or TypeError escape.
"""

from __future__ import annotations

from typing import cast

import msgspec

from journal.codec.errors import DecodeError, EncodeError
from journal.core.model import InvalidValue, Json, encode_json

JsonObject = dict[str, object]


def dumps(value: object, what: str) -> bytes:
    """`value` as compact JSON; EncodeError unless it is strictly a `Json` value (see
    `journal.core.model.encode_json`)."""
    try:
        return encode_json(value, what)
    except InvalidValue as e:
        raise EncodeError(str(e)) from e


def loads(raw: bytes | msgspec.Raw, what: str) -> Json:
    """Any JSON, integers beyond 64 bits included (orjson would refuse them)."""
    try:
        return cast(Json, msgspec.json.decode(raw))
    except (msgspec.DecodeError, UnicodeDecodeError) as e:
        raise DecodeError(f"{what} is not valid JSON: {e}") from e


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
