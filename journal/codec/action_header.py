"""The `journal.action` Kafka record header: which action a record carries, as JSON.

One top-level key names the action, its object holds the fields (kafka-journal's
`ActionHeader` Play JSON format):

    {"append": {"range": {"from": 1, "to": 5}, "origin": "o", "version": "v",
                "payloadType": "json" | "binary", "metadata": {"data": ...}}}
    {"delete": {"to": 3, "origin": "o", "version": "v"}}
    {"purge": {"origin": "o", "version": "v"}}
    {"mark": {"id": "id", "origin": "o", "version": "v"}}

Optional fields are omitted when absent (and read back as absent when null). An append without
`metadata` is the legacy form and reads as empty HeaderMetadata; `"metadata": {}` is written for
empty metadata. Unknown fields inside an action are ignored. A JSON object without any known
action key (say `{"new": {}}`, from a newer writer) decodes to None, "no action", so that readers
can skip it; every other malformation, including two action keys at once, is a DecodeError.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import assert_never, cast

import msgspec
import orjson

from journal.codec.errors import DecodeError, EncodeError
from journal.codec.json_value import (
    JsonObject,
    dumps,
    expect_int,
    expect_object,
    expect_str,
    field,
    loads,
    optional_object,
    optional_str,
)
from journal.core.model import (
    ActionHeader,
    AppendHeader,
    DeleteHeader,
    HeaderMetadata,
    InvalidValue,
    Json,
    MarkHeader,
    PayloadType,
    PurgeHeader,
    SeqRange,
)

ACTION_HEADER = "journal.action"

_APPEND_PAYLOAD_TYPES = {"binary": PayloadType.BINARY, "json": PayloadType.JSON}
_APPEND_PAYLOAD_TYPE_NAMES = {
    kind: b'"%s"' % name.encode() for name, kind in _APPEND_PAYLOAD_TYPES.items()
}


def encode_action_header(header: ActionHeader) -> bytes:
    """The header value kafka-journal writes for `header`; EncodeError if it has none.

    Written out byte by byte rather than through a generic JSON walk: the header is ours, its
    integers are checked seqNrs, and only its strings and the metadata's data need orjson (the
    same compact form, so the bytes are those `orjson.dumps` of the object would give).
    """
    match header:
        case AppendHeader():
            payload_type = _APPEND_PAYLOAD_TYPE_NAMES.get(header.payload_type)
            if payload_type is None:
                raise EncodeError(
                    f"an append's payloadType is binary or json, not {header.payload_type.value}"
                )
            data = header.metadata.data
            metadata = b"" if data is None else b'"data":' + dumps(data, "append header metadata")
            return (
                b'{"append":{"range":{"from":%d,"to":%d}%s,"payloadType":%s,"metadata":{%s}}}'
                % (
                    header.range.from_,
                    header.range.to,
                    _origin_version(header.origin, header.version),
                    payload_type,
                    metadata,
                )
            )
        case DeleteHeader():
            return b'{"delete":{"to":%d%s}}' % (
                header.to,
                _origin_version(header.origin, header.version),
            )
        case PurgeHeader():
            return b'{"purge":{%s}}' % _origin_version(header.origin, header.version).lstrip(b",")
        case MarkHeader():
            return b'{"mark":{"id":%s%s}}' % (
                _string(header.id, "mark id"),
                _origin_version(header.origin, header.version),
            )
        case _:
            assert_never(header)


def decode_action_header(raw: bytes) -> ActionHeader | None:
    """The action in a `journal.action` header; None for an unknown action; else DecodeError."""
    plain = _PLAIN_APPENDS.get(raw)
    if plain is not None:
        return plain
    plain = plain_append_text(raw)
    if plain is not None:
        if plain.metadata is _NO_HEADER_METADATA:  # shared: nothing mutable in it
            if len(_PLAIN_APPENDS) >= _PLAIN_APPENDS_MAX:
                _PLAIN_APPENDS.clear()
            _PLAIN_APPENDS[raw] = plain
        return plain
    obj = expect_object(loads(raw, "action header"), "action header")
    plain = plain_append(obj)
    return checked_action_header(obj) if plain is None else plain


class _Range(msgspec.Struct, gc=False):
    from_: int = msgspec.field(name="from")
    to: int


class _Append(msgspec.Struct, gc=False):
    range: _Range
    payloadType: str
    origin: str | None = None
    version: str | None = None
    metadata: msgspec.Raw = msgspec.Raw()


class _AppendAction(msgspec.Struct, gc=False, forbid_unknown_fields=True):
    append: _Append


_APPEND_DECODER = msgspec.json.Decoder(_AppendAction)
_NO_HEADER_METADATA = HeaderMetadata()

# Appends of the same range by one writer carry the same header text (their journals differ):
# decoded once. Only headers without metadata data (no mutable Json to share).
_PLAIN_APPENDS: dict[bytes, AppendHeader] = {}
_PLAIN_APPENDS_MAX = 4096


def plain_append_text(raw: bytes) -> AppendHeader | None:
    """`plain_append` of the header's text, read in one msgspec pass into the shape it takes
    (no dicts): every Append replication, a read or a subscription meets goes here first.
    None for anything else, which `plain_append` and the checked reader then read."""
    try:
        append = _APPEND_DECODER.decode(raw).append
    except (msgspec.DecodeError, UnicodeDecodeError):
        return None
    payload_type = _APPEND_PAYLOAD_TYPES.get(append.payloadType)
    if payload_type is None:
        return None
    metadata = bytes(append.metadata)
    if not metadata or metadata == b"null" or metadata == b"{}":
        header_metadata = _NO_HEADER_METADATA
    elif metadata[:1] == b"{":
        data = cast(dict[str, Json], msgspec.json.decode(metadata)).get("data")
        header_metadata = _NO_HEADER_METADATA if data is None else HeaderMetadata(data)
    else:
        return None
    try:
        seq_range = SeqRange(append.range.from_, append.range.to)
    except InvalidValue:
        return None  # the checked reader names the fault
    return AppendHeader(seq_range, payload_type, append.origin, append.version, header_metadata)


def checked_action_header(obj: JsonObject) -> ActionHeader | None:
    """The action of a decoded header, every field checked: DecodeError names a fault."""
    names = [name for name in _DECODERS if name in obj]
    if not names:
        return None
    if len(names) > 1:
        raise DecodeError(f"action header names more than one action: {', '.join(names)}")
    name = names[0]
    try:
        return _DECODERS[name](expect_object(obj[name], name), name)
    except InvalidValue as e:
        raise DecodeError(f"{name} header: {e}") from e


@functools.lru_cache(maxsize=1024)
def _origin_version(origin: str | None, version: str | None) -> bytes:
    """`,"origin":...,"version":...`, each only when present.

    Cached: a process writes with one origin and one version, on every action it writes.
    """
    fields = b""
    if origin is not None:
        fields += b',"origin":' + _string(origin, "origin")
    if version is not None:
        fields += b',"version":' + _string(version, "version")
    return fields


def _string(text: str, what: str) -> bytes:
    if not isinstance(text, str):
        raise EncodeError(f"{what} must be a string, got {type(text).__name__}")
    try:
        return orjson.dumps(text)  # quoted and escaped, as orjson writes any string
    except orjson.JSONEncodeError as e:  # a lone surrogate
        raise EncodeError(f"{what} cannot be written as JSON: {e}") from e


def plain_append(obj: JsonObject) -> AppendHeader | None:
    """An Append header of the shape this project and kafka-journal write, read with a few type
    checks (every record replication, a read or a subscription meets is one); None for anything
    else, which the checked reader then reads, or names the fault of. Reads what it reads as
    the checked reader does (a test holds them to that)."""
    if len(obj) != 1:
        return None
    append = obj.get("append")
    if type(append) is not dict:
        return None
    range_, payload_type = append.get("range"), append.get("payloadType")
    if type(range_) is not dict or type(payload_type) is not str:
        return None
    first, last = range_.get("from"), range_.get("to")
    origin, version = append.get("origin"), append.get("version")
    metadata = append.get("metadata")
    if (
        type(first) is not int
        or type(last) is not int
        or payload_type not in _APPEND_PAYLOAD_TYPES
        or not (origin is None or type(origin) is str)
        or not (version is None or type(version) is str)
        or not (metadata is None or type(metadata) is dict)
    ):
        return None
    try:
        seq_range = SeqRange(first, last)
    except InvalidValue:
        return None  # the checked reader names the fault
    return AppendHeader(
        range=seq_range,
        payload_type=_APPEND_PAYLOAD_TYPES[payload_type],
        origin=origin,
        version=version,
        metadata=HeaderMetadata(None if metadata is None else cast(Json, metadata.get("data"))),
    )


def _decode_append(obj: JsonObject, where: str) -> AppendHeader:
    range_ = expect_object(field(obj, "range", where), f"{where}.range")
    payload_type_name = expect_str(field(obj, "payloadType", where), f"{where}.payloadType")
    payload_type = _APPEND_PAYLOAD_TYPES.get(payload_type_name)
    if payload_type is None:
        raise DecodeError(f"{where}.payloadType must be binary or json, got {payload_type_name!r}")
    metadata = optional_object(obj, "metadata", where)
    return AppendHeader(
        range=SeqRange(
            expect_int(field(range_, "from", f"{where}.range"), f"{where}.range.from"),
            expect_int(field(range_, "to", f"{where}.range"), f"{where}.range.to"),
        ),
        payload_type=payload_type,
        origin=optional_str(obj, "origin", where),
        version=optional_str(obj, "version", where),
        # A missing "metadata" is the legacy form; a missing "data" is empty metadata.
        metadata=HeaderMetadata(None if metadata is None else cast(Json, metadata.get("data"))),
    )


def _decode_delete(obj: JsonObject, where: str) -> DeleteHeader:
    return DeleteHeader(
        to=expect_int(field(obj, "to", where), f"{where}.to"),
        origin=optional_str(obj, "origin", where),
        version=optional_str(obj, "version", where),
    )


def _decode_purge(obj: JsonObject, where: str) -> PurgeHeader:
    return PurgeHeader(
        origin=optional_str(obj, "origin", where),
        version=optional_str(obj, "version", where),
    )


def _decode_mark(obj: JsonObject, where: str) -> MarkHeader:
    return MarkHeader(
        id=expect_str(field(obj, "id", where), f"{where}.id"),
        origin=optional_str(obj, "origin", where),
        version=optional_str(obj, "version", where),
    )


_DECODERS: dict[str, Callable[[JsonObject, str], ActionHeader]] = {
    "append": _decode_append,
    "delete": _decode_delete,
    "purge": _decode_purge,
    "mark": _decode_mark,
}
