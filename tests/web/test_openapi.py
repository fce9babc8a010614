"""/openapi.json is valid OpenAPI 3.1, and its generated schemas agree with the validation.

Every request body and query the test suite holds valid must pass the document's schemas, and
every one it holds invalid must fail them, driven through `jsonschema` exactly as a client's
generated validator would. A few refusals depend on more than one value or on the value's
Unicode or nesting, which JSON Schema cannot say; they are listed below with the reason, and the
test insists the schema lets them through, so the list cannot go stale.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from multidict import MultiDict, MultiDictProxy
from openapi_spec_validator import OpenAPIV31SpecValidator

from tests.web import test_api, test_validation
from tests.web.test_validation import body
from web.error_answers import ApiError, ErrorCode
from web.openapi import openapi_document
from web.validation import parse_append, parse_read_query, parse_snapshot

DOCUMENT = openapi_document()


def test_the_document_is_valid_openapi_3_1() -> None:
    assert DOCUMENT["openapi"] == "3.1.0"
    OpenAPIV31SpecValidator(DOCUMENT).validate()  # raises, naming the first problem


def schema_validator(ref: str) -> Draft202012Validator:
    """A validator of `ref`, resolving the document's own references."""
    root = {"$ref": ref, "components": DOCUMENT["components"]}
    Draft202012Validator.check_schema(root)
    return Draft202012Validator(root)


APPEND_SCHEMA = schema_validator("#/components/schemas/AppendRequest")

# --- append bodies ----------------------------------------------------------------------------

VALID_BODIES = [
    *test_validation.VALID_APPENDS,
    body({"events": [{"seqNr": 1, "payload": {"a": 1}, "tags": ["t"]}], "expireAfter": "PT36H"}),
]


def _event_body(event: dict[str, object]) -> bytes:
    return body({"events": [event]})


def _field_body(name: str, value: object) -> bytes:
    return body({"events": [{"seqNr": 1}], name: value})


INVALID_BODIES = [
    *(body(obj) for obj in test_validation.WRONG_SHAPES),
    *test_validation.BAD_SEQ_NRS,
    *test_validation.MIXED_SEQ_NRS,
    *map(_event_body, test_validation.BAD_PAYLOAD_EVENTS),
    *map(_event_body, test_validation.SURROGATE_EVENTS),
    *(_field_body("headers", value) for value in test_validation.BAD_HEADERS),
    *(_field_body("expireAfter", value) for value in test_validation.BAD_EXPIRE_AFTERS),
    # (not DEEP_PAYLOAD: JSON Schema has no keyword for depth, and a validator would recurse
    # through all of it)
    *(
        raw
        for method, _, raw, status, code in test_api.BAD_REQUESTS
        if method == "POST" and status == 400 and code != ErrorCode.MALFORMED_JSON and raw
        if raw not in test_validation.GAPPED_APPENDS
    ),
]

# What JSON Schema cannot express, and why.
BEYOND_SCHEMA = {
    # in JSON Schema's data model 1.0 and 1e3 are the integers 1 and 1000
    b'{"events":[{"seqNr":1.0}]}': "integral number",
    b'{"events":[{"seqNr":1e3}]}': "integral number",
    # a lone surrogate is a string to JSON Schema; it is only not encodable as UTF-8
    body({"events": [{"seqNr": 1}], "metadata": {"deep": "\ud800"}}): "Unicode",
    **{_event_body(event): "Unicode" for event in test_validation.SURROGATE_EVENTS},
    # the pattern gives the syntax; the value must also be positive, whole nanoseconds and
    # within Scala's range
    **{
        _field_body("expireAfter", value): "duration value"
        for value in ("P0D", "PT0S", "PT0.0000000001S", "PT1.0000000000000000000000000001S")
    },
    _field_body("expireAfter", "P" + "1" * 80 + "D"): "duration value",
    _field_body("expireAfter", "P99999999999D"): "duration value",
}


def json_of(raw: bytes) -> Any:
    """A body as a JSON document (integers exact, as the API reads them)."""
    return json.loads(raw)


@pytest.mark.parametrize("raw", VALID_BODIES)
def test_the_schema_accepts_every_valid_body(raw: bytes) -> None:
    parse_append(raw)  # the API accepts it: the list is honest
    errors = [error.message for error in APPEND_SCHEMA.iter_errors(json_of(raw))]
    assert errors == []


@pytest.mark.parametrize("raw", INVALID_BODIES)
def test_the_schema_rejects_every_invalid_body(raw: bytes) -> None:
    with pytest.raises(ApiError) as refused:
        parse_append(raw)  # the API refuses it: the list is honest
    assert refused.value.status == 400
    accepted = APPEND_SCHEMA.is_valid(json_of(raw))
    if raw in BEYOND_SCHEMA:
        assert accepted, f"the schema now rejects {raw[:80]!r}: remove it from BEYOND_SCHEMA"
    else:
        assert not accepted, f"{refused.value.code}: {refused.value.message}"


@pytest.mark.parametrize("raw", test_validation.GAPPED_APPENDS)
def test_consecutive_seq_nrs_are_beyond_the_schema(raw: bytes) -> None:
    """They relate the items of an array to each other; the core refuses a gap (test_app)."""
    assert APPEND_SCHEMA.is_valid(json_of(raw))


def test_bodies_that_are_not_json_are_not_schema_matters() -> None:
    for raw in test_validation.MALFORMED:
        with pytest.raises(ApiError) as refused:
            parse_append(raw)
        assert refused.value.code == ErrorCode.MALFORMED_JSON


# --- read queries -----------------------------------------------------------------------------

READ_PARAMETERS = {
    parameter["name"]: Draft202012Validator(parameter["schema"])
    for parameter in DOCUMENT["paths"]["/journals/{id}/events"]["get"]["parameters"]
}


def query_accepted(pairs: list[tuple[str, str]]) -> bool:
    """Whether the read's parameter schemas accept these pairs: a value of ASCII digits is the
    integer it spells, anything else stays a string (which an integer schema refuses)."""
    for name, text in pairs:
        value: object = int(text) if text.isascii() and text.isdigit() else text
        if name not in READ_PARAMETERS or not READ_PARAMETERS[name].is_valid(value):
            return False
    return True


@pytest.mark.parametrize("pairs", test_validation.VALID_READ_QUERIES)
def test_the_parameters_accept_every_valid_read_query(pairs: list[tuple[str, str]]) -> None:
    parse_read_query(MultiDictProxy(MultiDict(pairs)))
    assert query_accepted(pairs)


@pytest.mark.parametrize("pairs", test_validation.BAD_READ_QUERIES)
def test_the_parameters_reject_every_invalid_read_query(pairs: list[tuple[str, str]]) -> None:
    with pytest.raises(ApiError):
        parse_read_query(MultiDictProxy(MultiDict(pairs)))
    names = [name for name, _ in pairs]
    if len(set(names)) < len(names):
        # OpenAPI describes each parameter once; it cannot forbid repeating one
        assert query_accepted(pairs[:1])
    else:
        assert not query_accepted(pairs)


# --- snapshot bodies ----------------------------------------------------------------------------

SNAPSHOT_SCHEMA = schema_validator("#/components/schemas/SnapshotIn")
VALID_SNAPSHOTS: list[object] = [
    {"payload": {"state": [1]}},
    {"payload": None},
    {"payloadText": "t"},
    {"payloadBinary": "AA=="},
]
INVALID_SNAPSHOTS: list[object] = [
    {},
    {"payload": 1, "payloadText": "t"},
    {"payloadBinary": "a"},
    {"payloadText": 1},
    {"payload": 1, "seqNr": 1},
    [],
]


@pytest.mark.parametrize("value", VALID_SNAPSHOTS)
def test_snapshot_bodies_the_api_takes_pass_the_schema(value: object) -> None:
    parse_snapshot(body(value))
    SNAPSHOT_SCHEMA.validate(value)


@pytest.mark.parametrize("value", INVALID_SNAPSHOTS)
def test_snapshot_bodies_the_api_refuses_fail_the_schema(value: object) -> None:
    with pytest.raises(ApiError) as refused:
        parse_snapshot(body(value))
    assert refused.value.status == 400
    assert not SNAPSHOT_SCHEMA.is_valid(value)
