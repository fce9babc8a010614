"""aiokafka's errors, known in this one module: what the Kafka room catches, and the core's
error (journal/errors.py) each failure becomes, so nothing above journal/kafka/ sees a driver
error.

`core_error` maps one:
- Kafka's authorizer refused a right the caller names ("Write on topic t"): `KafkaAccessDenied`
  naming the principal and the right;
- a record too large for the producer or the broker: `AppendTooLarge`;
- anything else: `KafkaUnavailable` (the same call can succeed later).

The rest are what the room handles itself rather than maps: `POISON_ERRORS`, a batch this
process cannot decode (journal/kafka/poison.py); `STUCK_PRODUCER_ERRORS`, an idempotent
producer that must be replaced (journal/kafka/producer.py).
"""

from __future__ import annotations

from aiokafka.errors import (
    ClusterAuthorizationFailedError,
    CorruptRecordException,
    GroupAuthorizationFailedError,
    InvalidProducerEpoch,
    InvalidProducerIdMapping,
    KafkaError,
    MessageSizeTooLargeError,
    OutOfOrderSequenceNumber,
    ProducerFenced,
    RecordTooLargeError,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailed,
    UnsupportedCodecError,
)

from journal.errors import AppendTooLarge, JournalError, KafkaAccessDenied, KafkaUnavailable
from kjconfig.access import KafkaAccess

__all__ = [
    "POISON_ERRORS",
    "STUCK_PRODUCER_ERRORS",
    "KafkaError",
    "core_error",
    "kafka_denied",
]

# refusals by the authorizer (a missing ACL)
DENIED_ERRORS: tuple[type[Exception], ...] = (
    TopicAuthorizationFailedError,
    GroupAuthorizationFailedError,
    ClusterAuthorizationFailedError,
    TransactionalIdAuthorizationFailed,
)
TOO_LARGE_ERRORS: tuple[type[Exception], ...] = (MessageSizeTooLargeError, RecordTooLargeError)
POISON_ERRORS: tuple[type[Exception], ...] = (UnsupportedCodecError, CorruptRecordException)
STUCK_PRODUCER_ERRORS: tuple[type[Exception], ...] = (
    OutOfOrderSequenceNumber,
    InvalidProducerEpoch,
    InvalidProducerIdMapping,
    ProducerFenced,
)


def core_error(
    error: Exception, context: str, *, kafka: KafkaAccess | None = None, right: str | None = None
) -> JournalError:
    """The core's error for aiokafka's `error`, met doing `context` (the message's start).
    A refusal maps to `KafkaAccessDenied` only where the caller names the `right` it used."""
    if kafka is not None and right is not None and isinstance(error, DENIED_ERRORS):
        return kafka_denied(kafka, right, error)
    if isinstance(error, TOO_LARGE_ERRORS):
        return AppendTooLarge(f"Kafka refused the record: {error!r}")
    return KafkaUnavailable(f"{context}: {error!r}")


def kafka_denied(
    kafka: KafkaAccess, right: str, cause: BaseException | None = None
) -> KafkaAccessDenied:
    """The core's error for Kafka refusing `kafka`'s principal `right` ("Write on topic t")."""
    who = "an anonymous client" if kafka.login is None else f"User:{kafka.login.username}"
    detail = "" if cause is None else f" ({type(cause).__name__})"
    return KafkaAccessDenied(f"Kafka denied {who} {right}{detail}: an ACL must grant it")
