"""PayloadMetadata as the JSON object kafka-journal stores with the events of an Append.

`{"expireAfter": "1 day", "data": {...}}`, each field omitted when absent (`{}` when empty).
`expireAfter` is read as Scala duration text or a number of milliseconds and always written as
the canonical text (see `journal.codec.duration`). `data` is any JSON value; JSON null and an
absent field both mean "no data", as in kafka-journal.
"""

from __future__ import annotations

from typing import cast

from journal.codec import duration
from journal.codec.errors import DecodeError, EncodeError
from journal.codec.json_value import JsonObject, expect_object, type_name
from journal.core.model import InvalidValue, Json, PayloadMetadata

_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1


def payload_metadata_to_json(metadata: PayloadMetadata) -> dict[str, Json]:
    obj: dict[str, Json] = {}
    if metadata.expire_after is not None:
        try:
            obj["expireAfter"] = str(duration.parse_duration(metadata.expire_after))
        except InvalidValue as e:
            raise EncodeError(f"metadata.expireAfter: {e}") from e
    if metadata.data is not None:
        obj["data"] = metadata.data
    return obj


def payload_metadata_from_json(value: object, where: str) -> PayloadMetadata:
    obj: JsonObject = expect_object(value, where)
    expire_after = obj.get("expireAfter")
    data = obj.get("data")
    return PayloadMetadata(
        expire_after=None if expire_after is None else _expire_after(expire_after, where),
        data=cast(Json, data),  # whatever orjson decoded is a Json value
    )


def _expire_after(value: object, where: str) -> str:
    try:
        if isinstance(value, str):
            return str(duration.parse_duration(value))
        # Play reads any JSON number that is a whole Long: 5, 5.0, 5e3.
        if isinstance(value, float) and value.is_integer() and _LONG_MIN <= value <= _LONG_MAX:
            value = int(value)
        if isinstance(value, int) and not isinstance(value, bool):
            return str(duration.from_millis(value))
    except InvalidValue as e:
        raise DecodeError(f"{where}.expireAfter: {e}") from e
    raise DecodeError(
        f"{where}.expireAfter must be a duration string or milliseconds, got {type_name(value)}"
    )
