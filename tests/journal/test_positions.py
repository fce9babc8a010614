"""Exact positions: a subscription position names the event, so resuming after any event
(inside an Append too) repeats none; positions of the earlier form are still read."""

from __future__ import annotations

import base64
import random
from collections.abc import AsyncIterator

import pytest

from journal.core.model import Event, JsonPayload
from journal.errors import InvalidValue
from journal.subscriptions.subscription import Heartbeat, SubscribedEvent, SubscriptionPosition
from stack import Stack
from tests.support.harness import Harness, harness


def b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def test_a_position_inside_an_append_survives_its_encoding() -> None:
    position = SubscriptionPosition(((0, 17), (2, 4)), inside=((2, 3),))
    assert SubscriptionPosition.parse(position.encode()) == position
    assert position.handled_inside(2) == 3 and position.handled_inside(0) == 0
    at_start = SubscriptionPosition(((0, 5),), inside=((1, 2),))
    assert SubscriptionPosition.parse(b64("0:5,1:-1+2")) == at_start
    assert SubscriptionPosition.parse(at_start.encode()) == at_start
    old = SubscriptionPosition.parse(b64("0:17,2:4"))  # an earlier version's
    assert old == SubscriptionPosition(((0, 17), (2, 4))) and old.inside == ()


@pytest.mark.parametrize("garbage", [b64("1:1+0"), b64("1:1+x"), b64("1:1+"), b64("1:1+-2")])
def test_a_bad_inside_count_is_not_a_position(garbage: str) -> None:
    with pytest.raises(InvalidValue, match="not a subscription position"):
        SubscriptionPosition.parse(garbage)


@pytest.fixture
async def h(stack: Stack, keyspace: str) -> AsyncIterator[Harness]:
    # a topic of its own in the module's keyspace (`keyspace`: creating one is slow)
    async with harness(stack, keyspace, "pos", 2) as connected:
        yield connected


@pytest.mark.integration
async def test_resuming_after_any_event_repeats_none(h: Harness) -> None:
    rng = random.Random(2)
    written: list[tuple[str, int]] = []
    for round_ in range(4):
        for j in range(4):
            journal_id = f"j{j}"
            first = round_ * 4 + 1
            events = [
                Event(n, frozenset({"odd" if n % 2 else "even"}), JsonPayload.of({"n": n}))
                for n in range(first, first + 4)
            ]
            await h.journals.journal(journal_id).append(events)
            written += [(journal_id, e.seq_nr) for e in events]
        if round_ == 1:
            await h.replicate()  # half from the store's table, half from the fold

    async def sessions(tags: frozenset[str]) -> list[tuple[str, int]]:
        after: SubscriptionPosition | None = None
        got: list[tuple[str, int]] = []
        while True:
            limit, taken = rng.randint(1, 5), 0
            items = h.journals.subscribe(after, tags=tags)
            ended = True
            async for item in items:
                if isinstance(item, Heartbeat):
                    after = item.position
                    continue
                assert isinstance(item, SubscribedEvent)
                got.append((item.key.id, item.record.seq_nr))
                after = SubscriptionPosition.parse(item.position.encode())
                taken += 1
                if taken == limit:
                    ended = False
                    break
            await items.aclose()  # type: ignore[attr-defined]
            if ended:
                return got

    everything = await sessions(frozenset())
    assert sorted(everything) == sorted(written) and len(set(everything)) == len(everything)
    odd = await sessions(frozenset({"odd"}))
    assert sorted(odd) == sorted(w for w in written if w[1] % 2)
