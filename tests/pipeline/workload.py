"""A seeded random workload over many journals, written with the direct client.

Besides one writer per journal it has racing and retrying ones, whose Appends the conflict
rule rejects: rivals from a stale view (their first seqNr at or below the journal's last) or
ahead of it, and exact repeats of a journal's last Append (a client's retry).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from journal.client.journals import Journals
from journal.codec import encode_action_header
from journal.core.model import (
    Ack,
    AppendHeader,
    BinaryPayload,
    Event,
    JsonPayload,
    Payload,
    PayloadMetadata,
    PayloadType,
    Position,
    SeqRange,
    TextPayload,
)
from journal.kafka.producer import JournalProducer


@dataclass
class Workload:
    journal_ids: list[str]
    appends: int = 0
    events: int = 0
    deletes: int = 0
    purges: int = 0
    malformed: int = 0
    rivals: int = 0  # Appends that do not continue their journal
    retries: int = 0  # repeats of a journal's last Append
    seq_nrs: dict[str, int] = field(default_factory=dict)
    race: Race | None = None


@dataclass(frozen=True)
class Race:
    """The issue's race, last in the workload: A appends 1-3, B (a stale view) 1-2, A retries."""

    journal_id: str
    winner: Position
    rival: Position
    retry: Position
    rival_payload: str


@dataclass(frozen=True)
class _Append:
    events: Sequence[Event]
    metadata: PayloadMetadata
    headers: dict[str, str] | None


def _payload(rng: random.Random, n: int) -> Payload | None:
    kind = rng.random()
    if kind < 0.55:
        return JsonPayload.of({"n": n, "s": "x" * rng.randint(0, 20), "l": [1, 2.5, None, True]})
    if kind < 0.75:
        return TextPayload(f"text {n} ü")
    if kind < 0.9:
        return BinaryPayload(bytes(rng.randrange(256) for _ in range(rng.randint(0, 16))))
    return None


async def write_workload(
    journals: Journals, seed: int, actions: int = 240, journal_count: int = 24
) -> Workload:
    """Appends (mostly), rivals, retries, Deletes and Purges at random; then the race.

    Journal j0 grows past segments and is never purged.
    """
    rng = random.Random(seed)
    ids = [f"j{i}" for i in range(journal_count)]
    work = Workload(ids, seq_nrs=dict.fromkeys(ids, 0))
    last_appends: dict[str, _Append] = {}  # each journal's last accepted Append, for retries
    for step in range(actions):
        journal_id = "j0" if step % 8 == 0 else rng.choice(ids)
        journal = journals.journal(journal_id)
        last = work.seq_nrs[journal_id]
        roll = rng.random()
        if roll < 0.64 or last == 0:
            count = rng.randint(1, 6 if journal_id != "j0" else 12)
            append = _Append(
                [
                    Event(
                        n,
                        frozenset(rng.sample(["a", "b", "c"], rng.randint(0, 2))),
                        _payload(rng, n),
                    )
                    for n in range(last + 1, last + count + 1)
                ],
                PayloadMetadata(
                    expire_after="1 day" if rng.random() < 0.2 else None,
                    data={"step": step} if rng.random() < 0.3 else None,
                ),
                {"h": str(step)} if rng.random() < 0.3 else None,
            )
            await journal.append(append.events, metadata=append.metadata, headers=append.headers)
            last_appends[journal_id] = append
            work.seq_nrs[journal_id] = last + count
            work.appends += 1
            work.events += count
        elif roll < 0.72:
            # a rival from a stale view, or one that skips seqNrs: rejected
            first = rng.randint(1, last) if rng.random() < 0.8 else last + 2
            events = [
                Event(n, payload=TextPayload(f"rival {step}")) for n in range(first, first + 3)
            ]
            await journal.append(events, ack=Ack.KAFKA)  # as a sole writer's: the fold judges
            work.rivals += 1
        elif roll < 0.78 and journal_id in last_appends:
            retried = last_appends[journal_id]  # a no-op, deleted since or not
            await journal.append(
                retried.events, metadata=retried.metadata, headers=retried.headers, ack=Ack.KAFKA
            )
            work.retries += 1
        elif roll < 0.9:
            await journal.delete(rng.randint(1, last))
            work.deletes += 1
        elif journal_id != "j0":  # j0 is never purged: it grows past a segment (50 events)
            await journal.purge()
            last_appends.pop(journal_id, None)  # after it, a retry could start the journal again
            work.seq_nrs[journal_id] = 0
            work.purges += 1
    race = work.race = await _race(journals, "race")
    work.journal_ids.append(race.journal_id)
    work.seq_nrs[race.journal_id] = 3
    work.appends += 1
    work.events += 3
    work.rivals += 1
    work.retries += 1
    return work


async def _race(journals: Journals, journal_id: str) -> Race:
    journal = journals.journal(journal_id)
    winner = [Event(n, payload=TextPayload(f"winner {n}")) for n in (1, 2, 3)]
    rival = "rival"
    won = await journal.append(winner)
    rivals = [Event(n, payload=TextPayload(rival)) for n in (1, 2)]
    lost = await journal.append(rivals, ack=Ack.KAFKA)
    retry = await journal.append(winner, ack=Ack.KAFKA)
    return Race(journal_id, won, lost, retry, rival)


async def write_malformed(producer: JournalProducer, topic: str) -> int:
    """Three records replication must set aside: no header, a bad header, bad events."""
    append_header = encode_action_header(AppendHeader(SeqRange(1, 1), PayloadType.JSON))
    bad = [
        (b"bad-1", b"{}", []),
        (b"bad-2", b"", [("journal.action", b"{not json")]),
        (b"bad-3", b"not events", [("journal.action", append_header)]),
    ]
    for key, value, headers in bad:
        await producer.send_and_wait(topic, value, key=key, headers=headers)
    return len(bad)
