"""The private members of libraries the code relies on, at the versions constraints.txt pins:
each test fails if an upgrade takes away or changes what the code relies on, rather than the
product silently changing behaviour. Each hook lives behind one small function (or override)
named here; where a public way exists the code uses it instead (aiokafka's `_send_request`
became the client's `send`)."""

from __future__ import annotations

import asyncio
import inspect
import time
from pathlib import Path
from threading import Event, Lock
from types import SimpleNamespace
from typing import Any

import faust
import pytest
from aiohttp.web import AppRunner
from aiokafka import AIOKafkaConsumer, TopicPartition
from cassandra.cluster import ResponseFuture
from faust.transport.drivers import aiokafka as faust_aiokafka
from faust.types import TP

from agents.poison import (
    AGENT_FETCH_MAX_WAIT_MS,
    SkippedBatches,
    _GuardedConsumer,
    _GuardedThread,
    _positions,
    guarded_transport,
    set_fetch_max_wait,
)
from app.worker import _App, serving_runner
from journal.kafka.consumers import cancel_fetch_again, start_consumer, stop_consumer
from journal.store.cql import drop_cancelled_timer
from stack import Stack
from tables.expiry import TIMED, FaustExpiryTable, time_key
from tables.store import (
    IndexStore,
    IndexTable,
    forget_key_partitions,
    partition_db,
    partition_items,
    partition_keys,
)

# --- cassandra-driver: ResponseFuture._timer (journal/store/cql.py) ---------------------------


class _Timer:
    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


def _bare_future(made: list[Any]) -> ResponseFuture:
    """A ResponseFuture with only what its timer touches: the driver's connection class's
    `create_timer`, a timeout and a start time."""

    def create_timer(delay: float, callback: Any) -> _Timer:
        made.append(callback)
        return _Timer()

    future: ResponseFuture = ResponseFuture.__new__(ResponseFuture)
    connection_class = SimpleNamespace(create_timer=create_timer)
    future.session = SimpleNamespace(cluster=SimpleNamespace(connection_class=connection_class))
    future.timeout = 10.0
    future._start_time = time.time()
    return future


def test_a_response_future_makes_its_timer_only_when_it_holds_none() -> None:
    made: list[Any] = []
    future = _bare_future(made)
    assert future._timer is None
    future._start_timer()
    timer = future._timer
    assert isinstance(timer, _Timer)
    assert made[0].__self__ is future  # the timer holds the future: the cycle cql.py breaks
    future._start_timer()  # as for a next page, the timer still held: none made
    assert future._timer is timer
    assert len(made) == 1
    drop_cancelled_timer(future)
    assert future._timer is None
    future._start_timer()  # as for a next page: a new timer
    assert len(made) == 2


def test_a_response_future_cancels_and_keeps_its_timer_when_answered() -> None:
    future = _bare_future([])
    future._start_timer()
    timer = future._timer
    future._callback_lock = Lock()
    future._callbacks = []
    future._event = Event()
    future._set_final_result([])
    assert isinstance(timer, _Timer)
    assert timer.cancelled
    assert future._timer is timer  # kept: dropping it is ours to do


# --- faust-streaming's RocksDB store (tables/store.py, tables/expiry.py) ----------------------


def _index_table(tmp_path: Path, name: str = "hooks") -> Any:
    async def ends(topic: str, partitions: int) -> dict[int, int]:
        return dict.fromkeys(range(partitions), 0)

    app = faust.App("hooks-test", datadir=str(tmp_path), store="rocksdb://")
    return app.tables.add(
        IndexTable(
            app,
            changelog_ends=ends,
            name=name,
            beacon=app.tables.beacon,
            key_type=bytes,
            value_type=bytes,
            partitions=2,
        )
    )


def test_faust_builds_an_index_tables_store_with_its_new_store(tmp_path: Path) -> None:
    table = _index_table(tmp_path)
    assert type(table.data) is IndexStore
    assert table._store is None  # the store's URL when given; else the app's


def test_a_partitions_items_are_its_own_without_the_offset_key(tmp_path: Path) -> None:
    store = _index_table(tmp_path).data
    partition_db(store, 0).put(b"a", b"1")
    partition_db(store, 1).put(b"b", b"2")
    tp = TP(store.table.changelog_topic.get_topic_name(), 0)
    store.set_persisted_offset(tp, 7)  # stored in the partition's db under the offset key
    assert partition_db(store, 0).get(store.offset_key) == b"7"
    assert list(partition_items(store, 0)) == [(b"a", b"1")]
    assert list(partition_keys(store, 0)) == [b"a"]
    assert list(partition_items(store, 1)) == [(b"b", b"2")]


def test_the_stores_reads_trust_its_key_index_until_it_is_forgotten(tmp_path: Path) -> None:
    store = _index_table(tmp_path).data
    partition_db(store, 0).put(b"k", b"v")
    partition_db(store, 1)  # open: the store looks in every open partition
    store._key_index[b"k"] = 1  # a stale location, as after a partition was emptied
    assert store._get(b"k") is None  # only the indexed partition was looked in
    forget_key_partitions(store)
    assert store._get(b"k") == b"v"


def test_a_partitions_entries_come_in_key_order_so_expiry_times_soonest_first(
    tmp_path: Path,
) -> None:
    by_id, by_time = _index_table(tmp_path, "by-id"), _index_table(tmp_path, "by-time")
    t0 = 1_767_225_600_000
    entries = [(b"b", t0 + 5), (b"a", t0 + 5), (b"z", 2**42), (b"zz", 3), (b"ab", t0 + 5)]
    store = by_time.data
    for key, at in entries:
        partition_db(store, 0).put(time_key(key, at), b"1")
    partition_db(store, 1).put(time_key(b"other", 1), b"1")  # another partition's
    # Faust's offset key (between the time keys and the mark in byte order) and the mark
    store.set_persisted_offset(TP(store.table.changelog_topic.get_topic_name(), 0), 7)
    expiry = FaustExpiryTable(by_id, by_time)
    assert not expiry.timed(0)
    partition_db(store, 0).put(TIMED, b"1")
    assert expiry.timed(0) and not expiry.timed(1)
    soonest = sorted(entries, key=lambda entry: (entry[1], entry[0]))
    assert list(expiry.soonest(0)) == soonest  # RocksDB's order, the mark left out
    for key, at in entries:
        partition_db(by_id.data, 0).put(key, str(at).encode())
    assert list(expiry.entries(0, b"ab")) == [(b"b", t0 + 5), (b"z", 2**42), (b"zz", 3)]


# --- faust-streaming's aiohttp driver: `_runner` (app/worker.py) ------------------------------


async def test_faust_serves_its_web_server_with_the_runner_the_worker_drains(
    tmp_path: Path,
) -> None:
    # a unix socket: Faust refuses port 0, and a fixed port could be taken
    app = faust.App("hooks-web", web_transport=f"unix://{tmp_path / 'web.sock'}")
    runner = serving_runner(app.web)
    assert isinstance(runner, AppRunner)
    assert runner.app is app.web.web_app
    await app.web.start_server()
    try:
        assert len(runner.sites) == 1  # the listener `Draining.stop_serving` stops
        assert runner.server is not None
    finally:
        await app.web.stop_server()


# --- faust-streaming's app: `_on_partitions_assigned` (app/worker.py `_App`) --------------------


def test_faust_hands_an_assignment_to_the_method_the_app_overrides_before_its_tables() -> None:
    assert _parameters(faust.App._on_partitions_assigned) == _parameters(
        _App._on_partitions_assigned
    )
    # the consumer calls the app's method (the override), not a function bound elsewhere
    assert "on_partitions_assigned=self._on_partitions_assigned" in inspect.getsource(
        faust.App._new_consumer
    )
    # and the tables' callbacks (the restore ahead) come inside it: the hook runs before them
    assert "self.tables.on_rebalance" in inspect.getsource(faust.App._on_partitions_assigned)


async def test_the_app_calls_its_hook_with_the_assignment_before_faust_handles_it() -> None:
    app = _App("hooks-assigned", broker="kafka://127.0.0.1:1")
    order: list[str] = []
    app.before_assignment = lambda assigned: order.append(f"hook {sorted(assigned)}")

    async def faust_handles(assigned: set[Any], generation_id: int = 0) -> None:
        order.append("faust")

    # Faust's own handling (its tables' callbacks) stands behind `super()`: replaced here
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(faust.App, "_on_partitions_assigned", lambda self, *a: faust_handles(*a))
        await app._on_partitions_assigned({TP("t", 1)}, 3)
    assert order == ["hook [TP(topic='t', partition=1)]", "faust"]


# --- faust-streaming's aiokafka consumer thread and aiokafka's consumer (agents/poison.py) ----


def _parameters(function: Any) -> list[str]:
    return list(inspect.signature(function).parameters)


def test_faust_still_has_the_methods_the_guarded_transport_overrides() -> None:
    base = faust_aiokafka.AIOKafkaConsumerThread
    for name in ("_create_worker_consumer", "_fetch_records"):
        assert _parameters(getattr(base, name)) == _parameters(getattr(_GuardedThread, name))
    assert _parameters(faust_aiokafka.Consumer._new_consumer_thread) == ["self"]
    # Faust fetches through `_fetch_records` (a poison batch's error comes out of it)
    assert "self._fetch_records" in inspect.getsource(base.getmany)


async def test_the_guarded_transports_consumer_thread_fetches_with_the_short_wait() -> None:
    app = faust.App("hooks-poison", broker="kafka://127.0.0.1:1")
    transport = guarded_transport(app, SkippedBatches())

    async def ignored(*args: Any) -> None:
        return None

    consumer = transport.create_consumer(
        callback=ignored, on_partitions_revoked=ignored, on_partitions_assigned=ignored
    )
    assert isinstance(consumer, _GuardedConsumer)
    thread = consumer._thread  # Faust makes it with `_new_consumer_thread`
    assert isinstance(thread, _GuardedThread)
    made = thread._create_worker_consumer(transport)
    try:
        assert made._fetch_max_wait_ms == AGENT_FETCH_MAX_WAIT_MS
    finally:
        await stop_consumer(made)  # never started: closes its client only


@pytest.mark.integration
async def test_aiokafka_hands_the_fetch_wait_set_before_start_to_its_fetcher(
    stack: Stack,
) -> None:
    consumer = AIOKafkaConsumer(**stack.settings.kafka_access.client_options(), group_id=None)
    set_fetch_max_wait(consumer, 35)
    await consumer.start()
    try:
        assert consumer._fetcher._fetch_max_wait_ms == 35
    finally:
        await stop_consumer(consumer)


@pytest.mark.integration
async def test_aiokafka_fetch_routine_is_a_task_a_second_cancel_ends(stack: Stack) -> None:
    """`cancel_fetch_again` (journal/kafka/consumers.py): the consumer's fetcher runs its
    routine as `_fetch_task`, and a cancel ends it."""
    consumer = await start_consumer(stack.settings.kafka_access)
    task = consumer._fetcher._fetch_task
    assert isinstance(task, asyncio.Task) and not task.done()
    cancel_fetch_again(consumer)
    await asyncio.wait({task}, timeout=30)
    assert task.done()
    await stop_consumer(consumer)  # its fetch routine gone: the stop still ends


@pytest.mark.integration
async def test_a_consumers_positions_are_read_without_awaiting(stack: Stack) -> None:
    consumer = await start_consumer(stack.settings.kafka_access)
    try:
        assert _positions(consumer) == {}  # nothing assigned
        tp = TopicPartition("__consumer_offsets", 0)  # always there; only its position is set
        consumer.assign([tp])
        consumer.seek(tp, 0)
        assert _positions(consumer) == {tp: 0}
        assert await consumer.position(tp) == 0  # the public (awaiting) answer agrees
    finally:
        await stop_consumer(consumer)
