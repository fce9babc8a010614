"""Replication of a grown topic's successors (docs/growing.md, "Replication of NEW").

A grow moves a journal of OLD/p to NEW/q (q mod N = p) with its state only: its events before
the cut stay in OLD's rows. Whoever replicates OLD/p (a worker: the owner of OLD/p, `owns`)
replicates every NEW/q with q mod N = p too, with a plain consumer, from NEW/q's pointer:
- only once OLD/p is replicated through its cut (OLD's pointer at or past it): every journal
  moved from p then has its final row in OLD, its base;
- a journal with no row in NEW folds its first records there onto its state in OLD
  (`Replicator`'s `moved_from`), and its row in NEW keeps that base (`JournalMeta.base`):
  reads stream OLD's events up to it, then NEW's; a Purge in NEW ends it;
- along a chain of grows the same, one link at a time: NEW2/r once NEW/(r mod M) is
  replicated through its own cut. Every count is a multiple of the first, so r mod N names
  the owner of the whole chain's partitions that descend from OLD/p.
Two owners at once for a moment (a rebalance) replay the same records: a no-op (`offset + 1`
stamps, the fold's offset check). Every crash point is replication's: rows, then the pointer.
Nothing here holds more than a batch of records and the cached rows of `StoredRows`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from aiokafka import AIOKafkaConsumer, TopicPartition

from journal.core.grow import Grow, Phase
from journal.errors import StoreUnavailable
from journal.kafka.consumers import start_consumer, stop_consumer
from journal.metrics import METRICS, forget_replication_lag, set_replication_lag
from journal.replication.replicate import Quarantine, Replicator, replicate_range
from journal.store.base import EventualStore
from kjconfig.access import KafkaAccess

log = logging.getLogger(__name__)

# a pass this often: a moved journal's reads never wait for it (they fold NEW's log onto the
# store, as every read does), so this is how far behind NEW's rows may start, not a latency
SUCCESSOR_POLL_S = 1.0


@dataclass(frozen=True, slots=True)
class Link:
    """One grow of a chain: `grow.topic` (the predecessor, of `old_partitions`) into
    `grow.new_topic`; `predecessors`: `grow.topic` and the topics before it, nearest first."""

    grow: Grow
    old_partitions: int
    predecessors: tuple[str, ...]

    def predecessor_of(self, partition: int) -> int:
        return partition % self.old_partitions


async def predecessor_of(store: EventualStore, topic: str) -> Grow | None:
    """The grow `topic` is the successor of, if any: NEW is named `<OLD>.<M>`
    (`new_topic_of`), and OLD's registry row names it."""
    old, _, count = topic.rpartition(".")
    if not old or not count.isdigit():
        return None
    grow = await store.grow(old)
    return grow if grow is not None and grow.new_topic == topic else None


async def predecessors_of(store: EventualStore, topic: str) -> list[Grow]:
    """The grows that led to `topic`, nearest first (`predecessor_of`, along the chain)."""
    chain: list[Grow] = []
    while (grow := await predecessor_of(store, topic)) is not None:
        chain.append(grow)
        topic = grow.topic
    return chain


async def chain_of(
    store: EventualStore, topic: str, partitions: int, before: tuple[str, ...] = ()
) -> list[Link]:
    """The grows of `topic` (of `partitions`; `before`: its own predecessors, nearest first),
    then of each successor, as the registry has them (those with a cut recorded: a plan alone
    moves nothing)."""
    links: list[Link] = []
    count = partitions
    while (grow := await store.grow(topic)) is not None and grow.cut:
        before = (topic, *before)
        links.append(Link(grow, count, before))
        topic, count = grow.new_topic, grow.partitions
    return links


@dataclass(frozen=True, slots=True)
class WorkerTopic:
    """The topic a worker's Faust app runs on (`worker_topic`): `topic`, of `partitions`, and
    the done grows that led there from the chain's first topic (`links`, the first first)."""

    topic: str
    partitions: int
    links: tuple[Link, ...] = ()

    @property
    def moved_from(self) -> tuple[str, ...]:
        """`topic`'s predecessors, nearest first (a `Replicator`'s `moved_from`)."""
        return self.links[-1].predecessors if self.links else ()


async def worker_topic(store: EventualStore, topic: str, partitions: int) -> WorkerTopic:
    """Where a worker starting now runs its Faust app (docs/growing.md, "The workers move to
    the grown topic"): the newest topic the DONE grows lead to from `topic`, the chain's first
    (of `partitions`); a grow not done yet: the topic before it. Decided once, at the start:
    a running worker keeps its topic, so a rolling restart is the switch."""
    links: list[Link] = []
    for link in await chain_of(store, topic, partitions):
        if link.grow.phase is not Phase.DONE:
            break
        links.append(link)
    if not links:
        return WorkerTopic(topic, partitions)
    last = links[-1].grow
    return WorkerTopic(last.new_topic, last.partitions, tuple(links))


async def undrained(store: EventualStore, grow: Grow, partitions: int) -> list[int]:
    """The predecessor's partitions (of `partitions`) not replicated through their cut yet:
    replicating a successor partition whose predecessor is among them would take a base from
    a row that is not final."""
    pointers = await store.pointers(grow.topic)
    return [
        p
        for p in range(partitions)
        if (cut := grow.cut.get(p)) is None or pointers.get(p, -1) < cut
    ]


class SuccessorReplication:
    """Replicates the successor partitions this process owns (see the module): `run` until
    cancelled, or one `step` at a time."""

    def __init__(
        self,
        kafka: KafkaAccess,
        store: EventualStore,
        quarantine: Quarantine,
        topic: str,
        partitions: int,
        owns: Callable[[int], bool],
        before: tuple[str, ...] = (),
    ) -> None:
        """`topic` of `partitions`: the topic whose partitions `owns` says this process
        replicates (a worker's: the one its Faust app runs on, `worker_topic`, whose
        predecessors, nearest first, are `before`); its successors are replicated from there."""
        self._kafka = kafka
        self._store = store
        self._quarantine = quarantine
        self._topic = topic
        self._partitions = partitions
        self._owns = owns
        self._before = before
        self._replicators: dict[str, Replicator] = {}
        self._drained: set[str] = set()  # predecessors replicated through every cut
        self._pointers: dict[TopicPartition, int] = {}  # those replicated here since owned
        self._behind_since: dict[TopicPartition, float] = {}  # first found behind (wall clock)
        self._published: set[TopicPartition] = set()  # partitions with a lag series
        self._consumer: AIOKafkaConsumer | None = None

    async def chain(self) -> list[Link]:
        """The grows of this process's topic, then of each successor (`chain_of`)."""
        return await chain_of(self._store, self._topic, self._partitions, self._before)

    async def step(self) -> int:
        """One pass: every successor partition this process may replicate, from its pointer
        to its end now; the records replicated. Its lag is published for every successor
        partition this process owns, those still waiting for their predecessor too."""
        owned: list[tuple[Link, TopicPartition]] = []
        waiting: list[TopicPartition] = []
        for link in await self.chain():
            behind = await self._behind(link)
            for partition in range(link.grow.partitions):
                if self._owns(partition % self._partitions):
                    tp = TopicPartition(link.grow.new_topic, partition)
                    if link.predecessor_of(partition) in behind:
                        waiting.append(tp)
                    else:
                        owned.append((link, tp))
        self._forget_except({tp for _, tp in owned}, {*waiting})
        if not owned and not waiting:
            return 0
        consumer = await self._started()
        ends = await consumer.end_offsets([*(tp for _, tp in owned), *waiting])
        pointers = {
            topic: await self._store.pointers(topic) for topic in {t.topic for t in waiting}
        }
        for tp in waiting:  # a query a topic, not a partition
            self._publish_lag(tp, ends[tp] - pointers[tp.topic].get(tp.partition, -1) - 1)
        replicated = 0
        for link, tp in owned:
            kept = self._pointers.get(tp)
            pointer = await self._pointer(tp) if kept is None else kept
            self._publish_lag(tp, ends[tp] - pointer - 1)
            if pointer + 1 < ends[tp]:
                replicator = self._replicator(link)
                try:
                    await replicate_range(consumer, replicator, tp, pointer + 1, ends[tp])
                except BaseException:
                    replicator.forget(tp.partition)
                    self._pointers.pop(tp, None)  # read again: the store's holds what was done
                    raise
                replicated += ends[tp] - pointer - 1
                pointer = ends[tp] - 1
                self._publish_lag(tp, 0)
            self._pointers[tp] = pointer
        return replicated

    async def _pointer(self, tp: TopicPartition) -> int:
        pointer = await self._store.pointer(tp.topic, tp.partition)
        return -1 if pointer is None else pointer

    def _publish_lag(self, tp: TopicPartition, records: int) -> None:
        """`kafka_journal_replication_lag_*` of a successor partition: its records after
        the pointer as of this pass, and for how long passes have found it behind (this loop
        replicates whole ranges, not records as they come, so it tells no record's age)."""
        now = time.time()
        since = self._behind_since.setdefault(tp, now) if records > 0 else None
        if since is None:
            self._behind_since.pop(tp, None)
        seconds = 0.0 if since is None else now - since
        set_replication_lag(METRICS, tp.topic, tp.partition, max(records, 0), seconds)
        self._published.add(tp)

    async def run(self) -> None:
        """`step` every `SUCCESSOR_POLL_S`, until cancelled; a failure (the store, Kafka) is
        logged and the next pass starts from the store's pointers."""
        try:
            while True:
                try:
                    await self.step()
                except StoreUnavailable as error:  # an outage: every pass would say it
                    log.debug("replicating a grown topic's successor: %r", error)
                except Exception as error:
                    log.warning("replicating a grown topic's successor failed: %r", error)
                await asyncio.sleep(SUCCESSOR_POLL_S)
        finally:
            await self.close()

    async def close(self) -> None:
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            await stop_consumer(consumer)

    async def _behind(self, link: Link) -> set[int]:
        """The predecessor's partitions not replicated through their cut yet (`undrained`:
        one read of its pointers a pass, none once it is through every cut)."""
        if link.grow.topic in self._drained:
            return set()
        behind = set(await undrained(self._store, link.grow, link.old_partitions))
        if not behind:
            self._drained.add(link.grow.topic)
        return behind

    def _replicator(self, link: Link) -> Replicator:
        new = link.grow.new_topic
        if new not in self._replicators:
            self._replicators[new] = Replicator(
                self._store, self._quarantine, cuts=self._store, moved_from=link.predecessors
            )
        return self._replicators[new]

    def _forget_except(self, owned: set[TopicPartition], waiting: set[TopicPartition]) -> None:
        """Rows cached for partitions no longer owned are stale once another process writes
        them: forgotten, and read again if they come back. Their lag is its new owner's."""
        for tp in [tp for tp in self._published if tp not in owned and tp not in waiting]:
            self._published.discard(tp)
            self._behind_since.pop(tp, None)
            forget_replication_lag(METRICS, tp.topic, tp.partition)
        for tp in [tp for tp in self._pointers if tp not in owned]:
            del self._pointers[tp]
            replicator = self._replicators.get(tp.topic)
            if replicator is not None:
                replicator.forget(tp.partition)

    async def _started(self) -> AIOKafkaConsumer:
        if self._consumer is None:
            self._consumer = await start_consumer(self._kafka, fetch_max_wait_ms=20)
        return self._consumer


class Predecessors:
    """The wait of a worker whose Faust app runs on a grown topic (NEW's group, `worker_topic`)
    before its agent's replication writes NEW/q: every predecessor of q along the chain
    (OLD/(q mod N), ...) replicated through its cut, so a moved journal's base is final. A
    predecessor short of its cut is replicated up to it here, link by link from the first
    topic (OLD's group may have no member left: without this, restarting every worker before
    OLD reached its cuts stalls NEW for good; tests/model/test_worker_switch_model.py). A member
    of OLD's group may replicate it at the same time: the same records replayed, a no-op."""

    def __init__(
        self,
        kafka: KafkaAccess,
        store: EventualStore,
        quarantine: Quarantine,
        links: tuple[Link, ...],
    ) -> None:
        self._kafka = kafka
        self._store = store
        self._quarantine = quarantine
        self._links = links
        self._through: set[int] = set()  # the grown topic's partitions whose wait is over
        self._lock = asyncio.Lock()  # one catch-up at a time: a worker's start, rarely more

    async def through_cuts(self, partition: int) -> None:
        """Return once every predecessor of the grown topic's `partition` is replicated
        through its cut, catching up those that are not; raises what the store or Kafka
        raise (the caller retries). One read of the pointers a link, none once through."""
        if partition in self._through:
            return
        async with self._lock:
            for link in self._links:  # the first topic first: each link's base is final then
                old = link.predecessor_of(partition)
                cut = link.grow.cut[old]  # a done grow has every cut
                tp = TopicPartition(link.grow.topic, old)
                pointer = await self._store.pointer(tp.topic, old)
                start = 0 if pointer is None else pointer + 1
                if start > cut:
                    continue
                log.info("%s-%s: replicated here up to its cut %s", tp.topic, old, cut)
                replicator = Replicator(
                    self._store,
                    self._quarantine,
                    cuts=self._store,
                    moved_from=link.predecessors[1:],
                )
                consumer = await start_consumer(self._kafka, fetch_max_wait_ms=20)
                try:
                    await replicate_range(consumer, replicator, tp, start, cut + 1)
                finally:
                    await stop_consumer(consumer)
            self._through.add(partition)
