"""The direct client's view of the grow registry (journal/client/growing.py `Registry`)."""

from __future__ import annotations

import asyncio
import threading
from types import SimpleNamespace
from typing import TYPE_CHECKING, cast

from journal.client.growing import Cuts, Growth, Registry
from journal.core.grow import SEAL_AFTER_LEASES, Grow, Phase, seal_wait_s
from journal.core.index import IndexAnswer, Indexed, NotIndexed, RecordIndex
from journal.core.model import JournalKey
from journal.store.base import EventualStore
from kjconfig.access import KafkaAccess

if TYPE_CHECKING:
    from journal.client.journals import Journals


class GatedRegistryStore:
    """A store whose registry reads answer when the test opens their gate."""

    def __init__(self) -> None:
        self.gates: asyncio.Queue[asyncio.Future[Grow | None]] = asyncio.Queue()
        self.reads = 0

    async def grow(self, topic: str) -> Grow | None:
        gate: asyncio.Future[Grow | None] = asyncio.get_running_loop().create_future()
        self.reads += 1
        self.gates.put_nowait(gate)
        return await gate


async def asked_as_a_read_finishes() -> int:
    """A caller asks afresh in the very step where the read before it finished, before that
    read's done callbacks ran: the registry reads again (and must not wait on the done read,
    which never yields to the loop). The reads the store saw."""
    store = GatedRegistryStore()
    registry = Registry(cast(EventualStore, store), "topic")
    first = asyncio.ensure_future(registry.fresh())
    (await store.gates.get()).set_result(None)
    # the second caller's first step comes right after the read's task finishes, whose done
    # callbacks come after it: none of them has run when the second caller asks
    second = asyncio.ensure_future(registry.fresh())
    (await store.gates.get()).set_result(None)
    assert await second is None
    assert await first is None
    return store.reads


def test_a_caller_asking_as_a_read_finishes_gets_a_newer_read() -> None:
    # the old code spun on the done read without ever yielding, so the loop (and a
    # pytest-timeout inside it) never ran again: the scenario runs on a thread of its own
    result: list[int] = []
    thread = threading.Thread(
        target=lambda: result.append(asyncio.run(asked_as_a_read_finishes())), daemon=True
    )
    thread.start()
    thread.join(30)  # a bound on the scenario's end (milliseconds), not a speed goal
    assert not thread.is_alive(), "Registry.fresh spins on a finished read"
    assert result == [2]


class CountingRegistryStore:
    """A store whose registry holds no grow until the test records one."""

    def __init__(self) -> None:
        self.reads = 0
        self.grow: Grow | None = None

    async def grow_of(self, topic: str) -> Grow | None:
        self.reads += 1
        return self.grow


def _growth(store: CountingRegistryStore, lease_s: float) -> Growth:
    backing = cast(EventualStore, SimpleNamespace(grow=store.grow_of))
    registry = Registry(backing, "topic", lease_s)
    cuts = Cuts("topic", registry, cast(RecordIndex, None), cast(KafkaAccess, None), 5.0)

    async def build(grow: Grow) -> Journals:
        raise AssertionError("no successor is needed")

    return Growth(registry, cuts, build)


async def acknowledged_reads(lease_s: float, acknowledgements: int) -> int:
    """The registry reads `acknowledgements` `ack=kafka` acknowledgements cost, one after the
    other, with no grow planned."""
    store = CountingRegistryStore()
    growth = _growth(store, lease_s)
    key = JournalKey("topic", "a")
    for offset in range(acknowledgements):
        await growth.acknowledged(key, 0, offset)
    return store.reads


def test_a_read_that_finds_no_grow_is_a_lease_for_the_acknowledgements_after_it() -> None:
    # one read for the lease (60 s: the test's acknowledgements all fall in it); without a
    # lease, as before, one read per acknowledgement (the direct append's largest cost)
    assert asyncio.run(acknowledged_reads(60.0, 20)) == 1
    assert asyncio.run(acknowledged_reads(0.0, 20)) == 20


def test_a_registry_that_found_a_grow_is_never_clear() -> None:
    async def scenario() -> tuple[bool, bool]:
        store = CountingRegistryStore()
        registry = Registry(cast(EventualStore, SimpleNamespace(grow=store.grow_of)), "t", 60.0)
        await registry.fresh()
        before = registry.clear()
        store.grow = Grow("t", "t.6", 6, Phase.PLANNED)
        await registry.fresh()
        return before, registry.clear()

    assert asyncio.run(scenario()) == (True, False)


def test_the_command_seals_only_leases_after_the_plan() -> None:
    lease = 1.0
    assert seal_wait_s(plan_known=100.0, now=100.0, lease_s=lease) == SEAL_AFTER_LEASES * lease
    assert seal_wait_s(plan_known=100.0, now=101.5, lease_s=lease) == SEAL_AFTER_LEASES - 1.5
    assert seal_wait_s(plan_known=100.0, now=200.0, lease_s=lease) == 0.0  # a resumed run
    assert SEAL_AFTER_LEASES > 1  # a Seal never within a client's lease


class DroppingIndex:
    """A worker's tail: it drops what replication covered, so it holds no Seal's key and its
    `needs` moves on with every lookup (or, `behind`, it cannot tell at all)."""

    def __init__(self, behind: bool) -> None:
        self.behind = behind
        self.needs = 0

    async def lookup(self, key: JournalKey, partition: int, fence: int) -> IndexAnswer:
        self.needs += 1
        return NotIndexed("behind") if self.behind else Indexed((), self.needs)


async def cut_reads(lease_s: float, behind: bool, looks: int) -> int:
    """The registry reads `looks` reads' cut checks cost with no grow planned."""
    store = CountingRegistryStore()
    registry = Registry(cast(EventualStore, SimpleNamespace(grow=store.grow_of)), "t", lease_s)
    index = cast(RecordIndex, DroppingIndex(behind))
    cuts = Cuts("t", registry, index, cast(KafkaAccess, None), 5.0)
    for fence in range(1, looks + 1):
        assert await cuts.below(0, fence) is None
    return store.reads


def test_a_read_that_finds_no_grow_is_a_lease_for_the_cut_checks_after_it() -> None:
    # a worker's reads ask its tail, which cannot tell whether a Seal lies below the fence
    # once it dropped what replication covered: one registry read a lease, not one a read
    for behind in (False, True):
        assert asyncio.run(cut_reads(60.0, behind, 20)) == 1
        assert asyncio.run(cut_reads(0.0, behind, 20)) == 20


async def index_lookups(lease_s: float, looks: int) -> int:
    """The index lookups `looks` reads' cut checks cost with no grow planned."""
    store = CountingRegistryStore()
    registry = Registry(cast(EventualStore, SimpleNamespace(grow=store.grow_of)), "t", lease_s)
    index = DroppingIndex(behind=False)
    cuts = Cuts("t", registry, cast(RecordIndex, index), cast(KafkaAccess, None), 5.0)
    for fence in range(1, looks + 1):
        assert await cuts.below(0, fence) is None
    return index.needs


def test_with_no_grow_a_cut_check_never_waits_on_the_index() -> None:
    # a worker's index of Seals is its verdicts tail, which a read would otherwise wait on to
    # reach the fence: with no grow recorded the registry read answers, lease or not
    assert asyncio.run(index_lookups(60.0, 20)) == 0
    assert asyncio.run(index_lookups(0.0, 20)) == 0


async def cut_found_without_the_index() -> tuple[int | None, int]:
    store = CountingRegistryStore()
    store.grow = Grow("t", "t.6", 6, Phase.CREATED, cut={0: 41})
    registry = Registry(cast(EventualStore, SimpleNamespace(grow=store.grow_of)), "t", 60.0)
    index = DroppingIndex(behind=False)
    cuts = Cuts("t", registry, cast(RecordIndex, index), cast(KafkaAccess, None), 5.0)
    return await cuts.below(0, 100), index.needs


def test_a_recorded_cut_is_taken_from_the_registry() -> None:
    assert asyncio.run(cut_found_without_the_index()) == (41, 0)
