"""The core's one error hierarchy: everything the library raises on purpose is a
`JournalError` (defined in kjconfig/errors.py, below the core: the settings loader raises one
too). Driver errors are mapped to these where the core calls the drivers (aiokafka's in
journal/kafka/driver_errors.py, cassandra-driver's in journal/store/cql.py), so no layer above
`journal/` needs to know them.

- `Unavailable`: a dependency did not answer; the same call can succeed later (HTTP 503).
- `AccessDenied` (an `Unavailable`): Kafka or Cassandra refused this process's principal a
  right; the message names the right, so an operator can grant it (HTTP 503 with it).
- `StoreLoginRefused`: Cassandra refused this process's login; raised at connect.
- `TlsRefused`: a server's certificate failed this process's verification (or it spoke no
  TLS); raised at connect, naming the server and the reason (kjconfig/errors.py).
- `PartitionCountChanged` (a `SetupMissing`): the topic's live partition count is not the one
  the keyspace recorded (HTTP 503 `partition_count_changed`); an operator's problem.
- `GrownTopicConfigured` (a `SetupMissing`): the configured topic is one a grow made;
  processes are configured with the chain's first topic (docs/growing.md); raised at connect.
- `JournalTruncated`: records a read needs expired before replication stored them (HTTP 410).
- `JournalErased`: the journal was erased (crypto-shredded, docs/erasure.md) (HTTP 410).
- `AppendTooLarge`: the append cannot be written as one record (HTTP 413).
- `SnapshotTooLarge`: a snapshot's payload exceeds the store's limit (HTTP 413).
- `SnapshotBeyondJournal`: a snapshot at a seqNr the journal has not reached (HTTP 409).
- `InvalidValue`: a value breaks the journal's rules (HTTP 400).
- `SeqNrConflict`: a conditional append found the journal elsewhere (HTTP 409).
- `IdempotencyKeyReused`: an idempotency key came back with a different request (HTTP 422).
- `OutcomeUnknown`: a conditional append was produced but its verdict could not be learnt
  (HTTP 503): it is wholly in the journal or wholly absent; a retry with the same idempotency
  key tells which.
- Also JournalErrors, defined beside what raises them: `DecodeError` and `EncodeError`
  (journal/codec/errors.py), `MalformedRecord` (journal/codec/actions.py), `SettingsError`
  (kjconfig/settings.py); each is a ValueError too.
"""

from __future__ import annotations

from kjconfig.errors import JournalError as JournalError  # the root; imported from here
from kjconfig.errors import TlsRefused as TlsRefused  # raised where clients connect


class Unavailable(JournalError, ConnectionError):
    """A dependency did not answer (no host, timeout, leader moving): try again later."""


class StoreUnavailable(Unavailable):
    """The eventual store (Cassandra) did not answer."""


class KafkaUnavailable(Unavailable):
    """Kafka did not answer, or did not deliver the records a read needs in time."""


class AccessDenied(Unavailable):
    """A server refused this process's principal a right it needs (an ACL, a grant); the
    message names the principal's missing right. It lasts until an operator grants it."""


class KafkaAccessDenied(AccessDenied, KafkaUnavailable):
    """Kafka's authorizer refused an operation (a topic's Write or Read, a group's Read...)."""


class StoreAccessDenied(AccessDenied, StoreUnavailable):
    """Cassandra's authorizer refused a statement (SELECT, MODIFY on the keyspace...)."""


class StoreLoginRefused(JournalError, PermissionError):
    """Cassandra refused this process's login (an unknown role, a wrong password): no wait
    cures it, so it is no `StoreUnavailable`."""


class SetupMissing(JournalError):
    """The journal's topic or keyspace is missing or not as this code needs, and this process
    cannot fix it: an operator's task (create it, or run a newer version)."""


class PartitionCountChanged(SetupMissing):
    """The topic's partition count is not the one the keyspace recorded for it
    (journal/kafka/guard.py): someone added partitions behind the project's back. A journal
    lives in the partition its key maps to under the recorded count, so this process refuses
    to produce or serve on the topic rather than put a journal on two partitions."""

    def __init__(self, topic: str, live: int, recorded: int) -> None:
        super().__init__(
            f"topic {topic} has {live} partitions, the journal recorded {recorded}: appends "
            f"and reads of {topic} are refused, as Kafka's partitioner would now put a "
            "journal's records on another partition than its earlier ones. Kafka cannot take "
            "partitions away; see 'The partition count changed' in docs/operations.md "
            "(do not record the new count by hand)"
        )
        self.topic = topic
        self.live = live
        self.recorded = recorded


class TopicGrown(SetupMissing):
    """The topic is being grown, or was, into a larger one (docs/growing.md), and this process
    does not follow a grow: it refuses to serve the topic rather than serve half of it."""

    def __init__(self, topic: str, new_topic: str, phase: str, who: str) -> None:
        super().__init__(
            f"topic {topic} is being grown into {new_topic} (phase {phase}): {who} does not "
            "follow a grow and refuses the topic (docs/growing.md: the direct client and "
            "workers follow it)"
        )
        self.topic = topic
        self.new_topic = new_topic


class GrownTopicConfigured(SetupMissing):
    """The configured topic is one a grow made (docs/growing.md): processes are configured with
    the chain's first topic and follow its grows from there. One configured with a grown topic
    would not know the journals moved into it had a history before the move."""

    def __init__(self, topic: str, first: str) -> None:
        super().__init__(
            f"topic {topic} was made by growing {first} (kafka-journal topic grow): configure "
            f"{first}, the first topic of its chain (KJ_TOPIC), and the process follows every "
            f"grow of it; configured with {topic} it would read the journals moved there "
            "without their history before the move"
        )
        self.topic = topic
        self.first = first


class JournalMoved(JournalError):
    """The journal's partition was cut by a grow below where this operation looked or wrote
    (docs/growing.md): nothing of the operation took effect in the old topic; the direct client
    redoes it in the grown one (journal/client/growing.py). Not an answer to anyone."""

    def __init__(self, key: object, cut: int) -> None:
        super().__init__(f"{key}: moved by a grow (its partition was cut at offset {cut})")
        self.cut = cut


class JournalMoving(Unavailable):
    """Whether the journal's partition is cut cannot be learnt within the bound
    (`Settings.grow_wait_s`) while a grow is in progress: try again shortly (503)."""


class JournalTruncated(JournalError):
    """Records a read needs expired from Kafka before replication stored them."""


class JournalErased(JournalError):
    """The journal was erased, or its erasure began (docs/erasure.md): its payloads are gone
    for good; HTTP 410 `journal_erased`."""


class UndecodableBatch(JournalError):
    """A read needs records of a batch this process cannot decode (unknown codec, corrupt):
    it cannot tell whether they hold the journal's actions (journal/kafka/poison.py)."""


class AppendTooLarge(JournalError, ValueError):
    """An append whose record would exceed what the producer and broker accept."""


class SnapshotTooLarge(JournalError, ValueError):
    """A snapshot whose payload exceeds the store's `max_snapshot_bytes`."""


class SnapshotBeyondJournal(JournalError):
    """A snapshot at a seqNr above the journal's last one: it would describe events the
    journal does not hold. `seq_nr` is the journal's last seqNr (0 for none)."""

    def __init__(self, snapshot_seq_nr: int, seq_nr: int) -> None:
        super().__init__(
            f"a snapshot at seqNr {snapshot_seq_nr} is beyond the journal's last seqNr {seq_nr}"
        )
        self.seq_nr = seq_nr


class InvalidValue(JournalError, ValueError):
    """A value that breaks the journal's rules (a seqNr out of range, a gap in a batch...)."""


class SeqNrConflict(JournalError):
    """A conditional append the log rejected: the journal's last seqNr was not the expected one.

    `seq_nr` is the journal's last seqNr when the verdict was taken (0 for none).
    """

    def __init__(self, seq_nr: int, expected: int) -> None:
        super().__init__(f"the journal's last seqNr is {seq_nr}, not the expected {expected}")
        self.seq_nr = seq_nr
        self.expected = expected


class IdempotencyKeyReused(JournalError, ValueError):
    """An idempotency key that took effect with another request than the one repeating it."""


class IdempotencyUnresolved(JournalError, ValueError):
    """A keyed append at the end whose search for an earlier attempt could not tell (see
    `journal.client.conditional`): nothing was produced; retrying the same cannot help."""


class OutcomeUnknown(Unavailable):
    """A conditional append whose verdict could not be learnt (Kafka or the store failed
    between producing it and reading it back): it is wholly visible or wholly absent.

    A repeat of the same request learns which: with `idempotency_key`, the append's own (one
    the direct client made for an append at the end included), which the repeat must carry.
    `repeatable` is False for an append at the end without a key: a repeat is numbered anew,
    so it is appended twice if the first took effect (read the journal instead)."""

    def __init__(
        self, message: str, *, idempotency_key: str | None = None, repeatable: bool = True
    ) -> None:
        super().__init__(message)
        self.idempotency_key = idempotency_key
        self.repeatable = repeatable
