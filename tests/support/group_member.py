"""A subscription group's member in a process of its own, for tests that kill one:
`python -m tests.support.group_member SETTINGS NAME ACKS`, SETTINGS the JSON of the servers,
topic and keyspace (`settings_json`), ACKS `every` or `every-other` (of the events handed to
it, across batches: so a kill at any time leaves some acknowledged and some not).

It writes a JSON line per assignment it gets (`{"generation", "assignment"}`: its count of
assignments, its partitions) before that assignment's events, and one per event (`{"id",
"seqNr", "position": [partition, offset, index], "generation", "acked", "payload"}`), and
acknowledges an event after its line is out, as `kafka-journal subscribe --group` does."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import orjson

from journal.client.journals import Journals
from journal.core.model import JsonPayload
from journal.settings import Settings
from journal.subscriptions.groups import GroupEvent

FIELDS = ("kafka_bootstrap", "cassandra_hosts", "cassandra_port", "topic", "keyspace", "partitions")
HEARTBEAT_S = 0.5  # a quiet member writes its new assignment this soon


def settings_json(settings: Settings) -> str:
    """What the member process needs of `settings`."""
    return orjson.dumps({name: getattr(settings, name) for name in FIELDS}).decode()


def event_line(event: GroupEvent, generation: int, acked: bool) -> dict[str, Any]:
    payload = event.record.event.payload
    position = event.position
    return {
        "id": event.key.id,
        "seqNr": event.record.seq_nr,
        "position": [position.partition, position.offset, position.index],
        "generation": generation,
        "acked": acked,
        "payload": payload.value if isinstance(payload, JsonPayload) else None,
    }


async def run(settings: Settings, name: str, every_other: bool) -> None:
    journals = await Journals.connect(settings)
    try:
        async with journals.subscribe_group(name, heartbeat_s=HEARTBEAT_S) as member:
            out = sys.stdout.buffer
            generation = 0
            handed = 0
            async for batch in member.batches():
                lines = []
                if member.generation != generation:
                    generation = member.generation
                    lines.append({"generation": generation, "assignment": member.assignment()})
                acked = []
                for event in batch:
                    ack = not every_other or handed % 2 == 0
                    handed += 1
                    lines.append(event_line(event, generation, ack))
                    if ack:
                        acked.append(event.position)
                if lines:
                    out.write(b"".join(orjson.dumps(line) + b"\n" for line in lines))
                    out.flush()
                member.ack(*acked)
    finally:
        await journals.close()


def main(argv: list[str]) -> None:
    raw, name, acks = argv
    if acks not in ("every", "every-other"):
        raise SystemExit(f"ACKS: every or every-other, not {acks!r}")
    settings = Settings.model_validate(orjson.loads(raw))
    asyncio.run(run(settings, name, acks == "every-other"))


if __name__ == "__main__":
    main(sys.argv[1:])
