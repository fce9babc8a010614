"""A 200,000-event journal read end to end in bounded memory (invariant 6)."""

from __future__ import annotations

import resource

import pytest

from journal.core.model import Event, Json, JsonPayload
from tests.support.harness import Harness

pytestmark = pytest.mark.integration

EVENTS = 200_000
PER_APPEND = 1_000
PAYLOAD: Json = {"text": "x" * 200}  # about 300 bytes an event, encoded


def rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * resource.getpagesize()


async def test_a_huge_journal_streams_in_bounded_memory(connected: Harness) -> None:
    journal = connected.journals.journal("huge")
    for first in range(1, EVENTS + 1, PER_APPEND):
        batch = [
            Event(n, payload=JsonPayload.of(PAYLOAD)) for n in range(first, first + PER_APPEND)
        ]
        await journal.append(batch)
    await connected.replicate()
    await journal.append([Event(EVENTS + 1, payload=JsonPayload.of(PAYLOAD))])  # a head, too

    baseline = peak = rss_bytes()
    expected = 1
    async for record in journal.read():
        assert record.seq_nr == expected
        expected += 1
        if expected % 5_000 == 0:
            peak = max(peak, rss_bytes())
    assert expected == EVENTS + 2
    growth_mb = (peak - baseline) / 2**20
    print(f"\n{EVENTS + 1} events read; peak RSS growth {growth_mb:.1f} MB")
    # The journal is ~60 MB of payload: holding it would show. Generous for allocator noise.
    assert growth_mb < 40
