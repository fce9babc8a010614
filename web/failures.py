"""What the core's and the drivers' exceptions mean to an HTTP client.

`api_error_of` turns an exception raised while serving a journal route into the `ApiError` to
answer with, or None when it is not a known failure (the caller then answers 500 and logs it):

- `JournalTruncated` -> 410 `journal_truncated`. Events the read needs expired from Kafka before
  replication stored them: a data-loss signal, not a transient condition, so not a 503 (a client
  would retry forever) and not a 500 (nothing is wrong with this request or this process).
  410 says "this history is gone and retrying will not bring it back"; an operator must act.
- `JournalErased` -> 410 `journal_erased`: the journal was erased (docs/erasure.md), or its
  erasure began; its payloads are gone for good, for reads and appends alike.
- `AppendTooLarge` (the core's, including the broker's size refusals) -> 413 `append_too_large`.
- `SnapshotTooLarge` -> 413 `snapshot_too_large`; `SnapshotBeyondJournal` -> 409
  `snapshot_beyond_journal` with the journal's last seqNr.
- `SeqNrConflict` -> 409 `seq_nr_conflict` with the journal's last seqNr: reread, decide again.
- `IdempotencyKeyReused` -> 422 `idempotency_key_reused`: a client bug, retrying cannot help.
- `IdempotencyUnresolved` -> 422 `idempotency_key_unresolved`: a keyed append at the end whose
  earlier attempt the bounded search could not rule out; nothing was appended, and the same
  request cannot do better (expectedSeqNr or a new key can).
- `OutcomeUnknown` -> 503 `outcome_unknown` with `Retry-After`: a conditional append was produced
  but its verdict could not be read; retry with the same Idempotency-Key to learn it. An append
  at the end without a key is not safe to repeat (`UNKEYED_AT_END`), and its answer says so.
- `UndecodableBatch` -> 503 `undecodable_records` with `Retry-After`: the journal's
  partition holds a batch this process cannot decode (journal.kafka.poison) and the read spans it;
  it reads again once replication has skipped it.
- `EnvelopeRefused` -> 503 `undecodable_records` with `Retry-After`: an event of the journal
  does not open with its data key (tampered with, or sealed under a key-encryption key this
  process lacks): stored data this process cannot read, as an undecodable batch; nothing is
  wrong with the request, and an operator must look (docs/erasure.md).
- `PartitionCountChanged` -> 503 `partition_count_changed` with `Retry-After`: the topic's
  partition count is not the one the keyspace recorded (someone added partitions behind the
  project's back), so this process refuses to produce or read rather than put a journal on two
  partitions. Not the client's fault (no 4xx) nor a bug (no 500): a dependency unusable until
  an operator acts, which a client waits out as any 503; the message says what happened.
- `JournalMoved` and `TopicGrown` -> 503 `unavailable` with `Retry-After`: the journal moved
  to a grown topic (docs/growing.md) and this operation, or this process (one with a
  key-encryption key), does not follow it there yet; reads, appends and snapshots follow it,
  so only what is not built gets here (a moved journal's read with the store down, say).
  Nothing took effect.
- aiohttp's client errors -> 503 `outcome_unknown` with `Retry-After`. Only a call to another
  worker raises them, and the forwarder (app/forwarding.py) answers each failure it can classify
  itself; one that still gets here may have been sent, so whether it took effect is unknown, and
  the client must repeat it (appends of the same seqNrs or with an Idempotency-Key, deletes and
  purges are safe to repeat; an append at the end without a key is not).
- `Unavailable` (the core maps the drivers' errors to it where it calls them: Kafka's,
  Cassandra's "no host / timed out / unavailable / schema missing" family) and plain timeouts
  or refused connections -> 503 `unavailable` with `Retry-After`: the request was fine and the
  same request can succeed once the dependency is back.
"""

from __future__ import annotations

import aiohttp

from journal.codec import EnvelopeRefused
from journal.errors import (
    AppendTooLarge,
    IdempotencyKeyReused,
    IdempotencyUnresolved,
    JournalErased,
    JournalMoved,
    JournalTruncated,
    OutcomeUnknown,
    PartitionCountChanged,
    SeqNrConflict,
    SnapshotBeyondJournal,
    SnapshotTooLarge,
    TopicGrown,
    Unavailable,
    UndecodableBatch,
)
from web.error_answers import ApiError, ErrorCode

_UNAVAILABLE: tuple[type[BaseException], ...] = (Unavailable, TimeoutError, ConnectionError)

# what an outcome_unknown answer tells the client that may have sent one (the forwarder's too)
UNKEYED_AT_END = (
    "an append at the end (events without seqNrs) without an Idempotency-Key is not safe to "
    "repeat: a repeat is numbered anew, so it is appended twice if the first took effect. Read "
    "the journal to learn whether it was, and send an Idempotency-Key with appends at the end "
    "to make their retries safe"
)


def api_error_of(error: BaseException, retry_after_s: int) -> ApiError | None:
    """The answer for a known failure of a journal operation; None for anything else."""
    if isinstance(error, ApiError):
        return error
    if isinstance(error, JournalTruncated):
        return ApiError(
            410,
            ErrorCode.JOURNAL_TRUNCATED,
            f"events of this journal were lost: {error}. Retrying will not help; an operator "
            "must repair the journal (see the kafka_journal_truncated_reads_total metric)",
        )
    if isinstance(error, JournalErased):
        return ApiError(
            410,
            ErrorCode.JOURNAL_ERASED,
            f"{error}; the journal was erased and its id stays erased (docs/erasure.md)",
        )
    if isinstance(error, SeqNrConflict):
        return ApiError(
            409,
            ErrorCode.SEQ_NR_CONFLICT,
            f"{error}: nothing was appended; read the journal and decide again",
            seq_nr=error.seq_nr,
        )
    if isinstance(error, SnapshotTooLarge):
        return ApiError(413, ErrorCode.SNAPSHOT_TOO_LARGE, f"{error}: nothing was stored")
    if isinstance(error, SnapshotBeyondJournal):
        return ApiError(
            409,
            ErrorCode.SNAPSHOT_BEYOND_JOURNAL,
            f"{error}: nothing was stored; snapshot the journal as it is",
            seq_nr=error.seq_nr,
        )
    if isinstance(error, IdempotencyKeyReused):
        return ApiError(422, ErrorCode.IDEMPOTENCY_KEY_REUSED, str(error))
    if isinstance(error, IdempotencyUnresolved):
        return ApiError(422, ErrorCode.IDEMPOTENCY_KEY_UNRESOLVED, f"{error}; nothing was appended")
    if isinstance(error, OutcomeUnknown):
        learn = (
            "retry with the same Idempotency-Key (or read the journal) to learn which"
            if error.repeatable
            else f"but {UNKEYED_AT_END}"
        )
        return unavailable(
            ErrorCode.OUTCOME_UNKNOWN,
            f"{error}. The append is wholly in the journal or wholly absent: {learn}",
            retry_after_s,
        )
    if isinstance(error, PartitionCountChanged):
        return unavailable(ErrorCode.PARTITION_COUNT_CHANGED, str(error), retry_after_s)
    if isinstance(error, UndecodableBatch):
        return unavailable(ErrorCode.UNDECODABLE_RECORDS, str(error), retry_after_s)
    if isinstance(error, EnvelopeRefused):
        return unavailable(
            ErrorCode.UNDECODABLE_RECORDS,
            f"an event of this journal does not open with its data key: {error}; an operator "
            "must look (tampered with, or sealed under another key-encryption key)",
            retry_after_s,
        )
    if isinstance(error, (JournalMoved, TopicGrown)):
        return unavailable(
            ErrorCode.UNAVAILABLE,
            f"{error}: this operation does not follow a grow yet (docs/growing.md); nothing "
            "took effect",
            retry_after_s,
        )
    if isinstance(error, AppendTooLarge):
        return ApiError(413, ErrorCode.APPEND_TOO_LARGE, f"the append is too large: {error}")
    if isinstance(error, aiohttp.ClientError):  # before _UNAVAILABLE: some are OSErrors
        return unavailable(
            ErrorCode.OUTCOME_UNKNOWN,
            f"a call to the worker owning this journal failed: {type(error).__name__}: "
            f"{error or 'no detail'}; whether it took effect is unknown, repeat the request",
            retry_after_s,
        )
    if isinstance(error, _UNAVAILABLE):
        return unavailable(
            ErrorCode.UNAVAILABLE,
            f"a dependency (Kafka or Cassandra) did not answer: {type(error).__name__}: "
            f"{error or 'no detail'}",
            retry_after_s,
        )
    return None


def unavailable(code: ErrorCode, message: str, retry_after_s: int) -> ApiError:
    return ApiError(503, code, message, {"Retry-After": str(retry_after_s)})
