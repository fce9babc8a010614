"""A seeded random workload over many journals, written with the direct client."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from journal.codec import encode_action_header
from journal.journals import Journals
from journal.model import (
    AppendHeader,
    BinaryPayload,
    Event,
    JsonPayload,
    Payload,
    PayloadMetadata,
    PayloadType,
    SeqRange,
    TextPayload,
)
from journal.producer import JournalProducer


@dataclass
class Workload:
    journal_ids: list[str]
    appends: int = 0
    events: int = 0
    deletes: int = 0
    purges: int = 0
    malformed: int = 0
    seq_nrs: dict[str, int] = field(default_factory=dict)


def _payload(rng: random.Random, n: int) -> Payload | None:
    kind = rng.random()
    if kind < 0.55:
        return JsonPayload({"n": n, "s": "x" * rng.randint(0, 20), "l": [1, 2.5, None, True]})
    if kind < 0.75:
        return TextPayload(f"text {n} ü")
    if kind < 0.9:
        return BinaryPayload(bytes(rng.randrange(256) for _ in range(rng.randint(0, 16))))
    return None


async def write_workload(
    journals: Journals, seed: int, actions: int = 240, journal_count: int = 24
) -> Workload:
    """Appends (mostly), Deletes and Purges at random; journal j0 grows past segments."""
    rng = random.Random(seed)
    ids = [f"j{i}" for i in range(journal_count)]
    work = Workload(ids, seq_nrs=dict.fromkeys(ids, 0))
    for step in range(actions):
        journal_id = "j0" if step % 8 == 0 else rng.choice(ids)
        journal = journals.journal(journal_id)
        last = work.seq_nrs[journal_id]
        roll = rng.random()
        if roll < 0.82 or last == 0:
            count = rng.randint(1, 6 if journal_id != "j0" else 12)
            events = [
                Event(
                    n, frozenset(rng.sample(["a", "b", "c"], rng.randint(0, 2))), _payload(rng, n)
                )
                for n in range(last + 1, last + count + 1)
            ]
            metadata = PayloadMetadata(
                expire_after="1 day" if rng.random() < 0.2 else None,
                data={"step": step} if rng.random() < 0.3 else None,
            )
            headers = {"h": str(step)} if rng.random() < 0.3 else None
            await journal.append(events, metadata=metadata, headers=headers)
            work.seq_nrs[journal_id] = last + count
            work.appends += 1
            work.events += count
        elif roll < 0.94:
            await journal.delete(rng.randint(1, last))
            work.deletes += 1
        elif journal_id != "j0":  # j0 is never purged: it grows past a segment (50 events)
            await journal.purge()
            work.seq_nrs[journal_id] = 0
            work.purges += 1
    return work


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
