"""`kafka-journal quarantine list | replay`: the quarantine topic for an operator
(journal/replication/quarantine.py says what a replay means for the fold)."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime

from app.confirm import REFUSED_EXIT, UNAVAILABLE_EXIT, NotConfirmed, confirm, failed
from app.progress import Meter
from journal.errors import Unavailable
from journal.replication import (
    ReplayStep,
    list_quarantine,
    newest_quarantined,
    plan_replay,
    replay,
)
from journal.settings import Settings


def run_list(settings: Settings, as_json: bool, limit: int) -> int:
    """Print the quarantine's newest `limit` records, oldest of them first: a table, or one
    JSON object a line. Bounded: only the last `limit` records of each partition are read."""
    newest, total = asyncio.run(newest_quarantined(settings.kafka_access(), settings.topic, limit))
    records = newest[::-1]
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
    print(
        f"{len(records)} quarantined records of {settings.topic} shown, the newest; the "
        f"quarantine holds {total} records (replay markers included)"
    )
    return 0


def run_replay(settings: Settings, positions: tuple[str, ...], dry_run: bool, yes: bool) -> int:
    """Replay the quarantined records named by `positions` ("partition:offset" as the list
    shows them; empty: every one) that this version decodes: print what happens to each, ask
    (or `yes`), replay; a named record not in the quarantine, or already replayed, refuses
    them all (exit codes: app/confirm.py)."""
    kafka = settings.kafka_access()

    async def planned() -> list[ReplayStep]:
        steps = plan_replay(await list_quarantine(kafka, settings.topic))
        return [step for step in steps if not positions or step.record.position in positions]

    try:
        steps = asyncio.run(planned())
        unknown = sorted(set(positions) - {step.record.position for step in steps})
        if unknown:
            return failed(
                "quarantine replay",
                f"not in the quarantine, or replayed already: {', '.join(unknown)}; nothing "
                "replayed",
                REFUSED_EXIT,
            )
        done = _print_steps(settings.topic, steps)
        if dry_run or not done:
            print(f"{done} would replay, {len(steps) - done} would stay")
            return 0
        confirm(f"replay {done} records to {settings.topic}?", yes)
        # another replay may have run meanwhile: replay only what was shown, as it was shown
        if asyncio.run(planned()) != steps:
            return failed(
                "quarantine replay", "the quarantine changed meanwhile: look again", REFUSED_EXIT
            )
        meter = Meter("replay", done)
        asyncio.run(replay(kafka, settings.topic, steps, meter.advance))
        meter.close()
    except NotConfirmed as declined:
        return failed("quarantine replay", str(declined), declined.exit_code)
    except Unavailable as error:
        return failed("quarantine replay", f"unavailable: {error}", UNAVAILABLE_EXIT)
    print(f"{done} replayed, {len(steps) - done} stays")
    return 0


def _print_steps(topic: str, steps: list[ReplayStep]) -> int:
    """Print what a replay of `steps` would do to each record; how many it replays."""
    for step in steps:
        record = step.record
        journal = "?" if record.key is None else record.key.decode("utf-8", "replace")
        if step.replay:
            print(f"would replay {record.position} (journal {journal}) to {topic}")
        else:
            print(f"would stay {record.position} (journal {journal}): {step.still}")
    return sum(step.replay for step in steps)
