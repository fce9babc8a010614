"""`kafka-journal quarantine list | replay`: the quarantine topic for an operator
(journal/kafka/quarantine.py says what a replay means for the fold)."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime

from app.progress import Meter
from journal.kafka.quarantine import ReplayStep, list_quarantine, plan_replay, replay
from journal.settings import Settings


def run_list(settings: Settings, as_json: bool) -> int:
    """Print the quarantine: a table, or one JSON object a line."""
    records = asyncio.run(list_quarantine(settings.kafka_access(), settings.topic))
    if as_json:
        for record in records:
            print(json.dumps(record.as_json()))
        return 0
    print(f"{'at':<10} {'from':<14} {'time':<20} {'replayed':<8} reason")
    for record in records:
        when = datetime.fromtimestamp(record.timestamp_ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")
        replayed = "yes" if record.replayed else "no"
        origin = record.origin or "?"
        print(f"{record.position:<10} {origin:<14} {when:<20} {replayed:<8} {record.reason}")
    print(f"{len(records)} quarantined records of {settings.topic}")
    return 0


def run_replay(settings: Settings, dry_run: bool) -> int:
    """Replay the quarantined records this version decodes; print what happens to each."""
    kafka = settings.kafka_access()

    async def replaying() -> list[ReplayStep]:
        steps = plan_replay(await list_quarantine(kafka, settings.topic))
        if not dry_run:
            meter = Meter("replay", sum(step.replay for step in steps))
            await replay(kafka, settings.topic, steps, meter.advance)
            meter.close()
        return steps

    steps = asyncio.run(replaying())
    replays = "would replay" if dry_run else "replayed"
    stays = "would stay" if dry_run else "stays"
    for step in steps:
        record = step.record
        journal = "?" if record.key is None else record.key.decode("utf-8", "replace")
        if step.replay:
            print(f"{replays} {record.position} (journal {journal}) to {settings.topic}")
        else:
            print(f"{stays} {record.position} (journal {journal}): {step.still}")
    done = sum(step.replay for step in steps)
    print(f"{done} {replays}, {len(steps) - done} {stays}")
    return 0
