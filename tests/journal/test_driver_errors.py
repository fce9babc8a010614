"""The drivers' errors stop at the core's boundary: callers see journal/errors.py only."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiokafka.errors import (
    KafkaConnectionError,
    MessageSizeTooLargeError,
    TopicAuthorizationFailedError,
)
from cassandra import InvalidRequest, OperationTimedOut

from journal.codec.actions import MalformedRecord, RawRecord
from journal.codec.errors import DecodeError, EncodeError
from journal.errors import (
    AppendTooLarge,
    JournalError,
    KafkaAccessDenied,
    KafkaUnavailable,
    SetupMissing,
    StoreUnavailable,
)
from journal.kafka.driver_errors import core_error
from journal.kafka.producer import JournalProducer
from journal.store import cql
from journal.store.schema import SchemaMissing, SchemaTooNew
from kjconfig.access import ClientTls, KafkaAccess
from kjconfig.settings import SettingsError


class Refusing:
    """An aiokafka producer's `send_and_wait` that fails as the driver does."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    async def send_and_wait(self, *args: Any, **kwargs: Any) -> Any:
        raise self.error


@pytest.mark.parametrize(
    ("driver", "core"),
    [
        (MessageSizeTooLargeError(), AppendTooLarge),
        (KafkaConnectionError("no broker"), KafkaUnavailable),
    ],
)
async def test_the_producer_raises_the_cores_errors(
    driver: Exception, core: type[Exception]
) -> None:
    producer = JournalProducer(KafkaAccess("127.0.0.1:1"))
    producer._producer = Refusing(driver)  # the driver seam (aiokafka is untyped)
    with pytest.raises(core) as raised:
        await producer.send_and_wait("topic", b"value")
    assert raised.value.__cause__ is driver


@pytest.mark.parametrize(
    ("driver", "mapped"),
    [
        (OperationTimedOut("slow"), True),
        (InvalidRequest("keyspace kj does not exist"), True),
        (InvalidRequest("unconfigured table journals"), True),
        (InvalidRequest("line 1:7 no viable alternative"), False),  # our bug: stays a bug
    ],
)
async def test_cassandra_failures_become_store_unavailable(driver: Exception, mapped: bool) -> None:
    future: asyncio.Future[list[Any]] = asyncio.get_running_loop().create_future()
    cql._reject(future, driver)
    error = future.exception()
    assert error is not None
    assert isinstance(error, StoreUnavailable) is mapped
    assert (error.__cause__ if mapped else error) is driver


def test_kafka_errors_are_mapped_in_one_place() -> None:
    kafka = KafkaAccess("127.0.0.1:1")
    denied = TopicAuthorizationFailedError()
    assert isinstance(
        core_error(denied, "t-0", kafka=kafka, right="Read on topic t"), KafkaAccessDenied
    )
    assert type(core_error(denied, "t-0")) is KafkaUnavailable  # no right named: not told apart
    assert isinstance(core_error(MessageSizeTooLargeError(), "t-0"), AppendTooLarge)
    gone = core_error(KafkaConnectionError("no broker"), "t-0")
    assert type(gone) is KafkaUnavailable and str(gone).startswith("t-0: ")


def test_one_root_for_what_the_library_raises() -> None:
    record = RawRecord("t", 0, 0, 0, None, None, [])
    for error in (DecodeError(), EncodeError(), MalformedRecord(record, "no key"), SettingsError()):
        assert isinstance(error, JournalError) and isinstance(error, ValueError)
    for setup in (SchemaMissing(), SchemaTooNew()):  # an operator's fix, not a bug
        assert isinstance(setup, SetupMissing) and isinstance(setup, JournalError)
    with pytest.raises(SettingsError):  # a bad setting, still a ValueError
        KafkaAccess("localhost:9092", tls=ClientTls())
