"""The Faust application: one worker of the consumer group that replicates the action topic.

`create_app` wires the rooms together: the tables (`tables/`), the replicating agent
(`agents/`), the HTTP API (`web/`) mounted on Faust's aiohttp application, and the core
(`journal/`) connected when the app starts. `run_worker` runs it until a signal, then stops
it in order (`_Worker`): HTTP first, drained, then Faust's consumer, the core, the group.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import faust
from aiohttp.web import BaseRunner

from agents.carry import DeadlineCarries, DeadlineCarry, Predecessor
from agents.expiry import Expirer, JournalDeadlines, JournalPurges
from agents.poison import SkippedBatches, guarded_transport
from agents.replicating_agent import define_replicating_agent
from agents.replication import KafkaReplay, WorkerReplication
from app.backend import WorkerBackend
from app.faust_metrics import FaustMonitorCollector, FaustTimings
from app.forwarding import Forwarder, Owners
from app.http_tokens import guard_of
from app.logs import json_logging
from app.settings import WorkerSettings
from journal import Journals
from journal.client import Deferred
from journal.errors import (
    GrownTopicConfigured,
    PartitionCountChanged,
    StoreUnavailable,
    TlsRefused,
)
from journal.kafka import (
    JournalProducer,
    JournalWriter,
    TailConfig,
    TailIndex,
    TopicSpec,
    check_recorded,
    cluster_replicas,
    ensure_topic,
    quarantine_spec,
)
from journal.metrics import METRICS
from journal.replication import (
    KafkaQuarantine,
    Predecessors,
    SuccessorReplication,
    WorkerTopic,
    predecessors_of,
    worker_topic,
)
from journal.settings import Settings
from journal.store import CassandraStore, ConnectingStore
from kjconfig.access import KafkaAccess
from tables.expiry import EXPIRY_TABLE, EXPIRY_TIMES_TABLE, ExpiryIndex, define_expiry_table
from tables.index import TableIndex
from tables.partitions import OwnedPartitions
from tables.store import RocksMemory, SharedChangelogEnds, changelog_of
from tables.tables import APPENDS_TABLE, DELETIONS_TABLE, JournalTables, define_tables
from web.app import add_routes
from web.draining import Draining
from web.limits import DEFAULT_RETRY_AFTER_S

log = logging.getLogger(__name__)

# its Faust tables: append-offsets, deletion-offsets, expiry by id and by time
TABLE_NAMES = (APPENDS_TABLE, DELETIONS_TABLE, EXPIRY_TABLE, EXPIRY_TIMES_TABLE)
TABLES = len(TABLE_NAMES)


def create_app(
    settings: WorkerSettings, on: WorkerTopic, replicas: int, draining: Draining
) -> tuple[faust.App, Callable[[], None]]:
    """The Faust app on the action topic `on` names (the chain's first, or the newest a done
    grow made: `worker_topic`), of `on.partitions` partitions (tables match them), with the
    app id of that topic (`WorkerSettings.app_id_on`); the topics Faust creates (table
    changelogs) get `replicas` replicas, as the journal's do; its API behind `draining` (which
    `_Worker` drains first when it stops). With it, what starts building the core
    (`_CoreBuild.start`): `_Worker` calls it as the worker starts.

    The agent and the API start serving once the core is built and the first assignment's
    tables are recovered (`_publish`): until then the agent waits and the API answers 503
    not_ready.
    """
    journal = settings.journal
    kafka = journal.kafka_access()
    partitions, app_id = on.partitions, settings.app_id_on(on.topic)
    app = _App(
        app_id,
        broker=f"kafka://{kafka.bootstrap}",
        # Faust's consumers, producer and table changelogs all log in with these
        broker_credentials=_broker_credentials(kafka),
        store="rocksdb://",
        datadir=str(settings.datadir_on(on.topic)),
        topic_partitions=partitions,
        topic_replication_factor=replicas,
        table_standby_replicas=1,
        # table changelog records wait up to 5 ms to share a produce request: Faust's default
        # (0) sent nearly one request per record, and the agent indexed a pile with the store
        # down at 4,800 records/s against 6,500 (BENCHMARKS.md "Reads with Cassandra down")
        producer_linger=0.005,
        consumer_group_instance_id=settings.group_instance_id,
        broker_session_timeout=settings.session_timeout_s,
        consumer_auto_offset_reset="earliest",
        key_serializer="raw",
        value_serializer="raw",
        web_host=settings.web_host,
        web_port=settings.web_port,
        web_bind=settings.web_host,
        canonical_url=settings.url,
        web_stats_enabled=False,
        web_tables_enabled=False,
        web_router_enabled=False,
        web_application_options={"client_max_size": settings.max_body_bytes},
        web_ssl_context=settings.server_ssl_context(),  # HTTPS only when it is set
        worker_redirect_stdouts=False,  # the welcome text is for the terminal, not the log
    )
    skipped = SkippedBatches()  # the undecodable batches the agent's consumer went past
    app.transport = guarded_transport(app, skipped)  # agents/poison.py
    # every partition of the four tables may be here (active or standby): one budget for all
    memory = RocksMemory(
        settings.rocksdb_memory_bytes, settings.rocksdb_max_open_files, TABLES * partitions
    )
    ends = SharedChangelogEnds(kafka)  # every table asks it in every rebalance
    tables = define_tables(
        app,
        partitions,
        kafka,
        on.topic,
        prune_keys_per_step=settings.prune_keys_per_step,
        prune_interval_s=settings.prune_interval_s,
        memory=memory,
        restore_ahead_min=settings.restore_ahead_min,
        ends=ends,
    )
    expiry = define_expiry_table(
        app,
        partitions,
        kafka,
        memory,
        settings.restore_ahead_min,
        window=settings.expiry_window,
        build_step=settings.expiry_build_step,
        ends=ends,
    )
    owned = OwnedPartitions()
    work: Deferred[WorkerReplication] = Deferred()
    journals: Deferred[Journals] = Deferred()
    verdicts: Deferred[TailIndex] = Deferred()  # follows the owned partitions
    # the catch-ups' Kafka, its admin client kept for the committed offsets at assignment
    replay = KafkaReplay(kafka, on.topic, group=app_id)  # Faust's group: app id
    closers: list[Callable[[], Awaitable[None]]] = [ends.close, replay.close]
    topic = app.topic(on.topic, key_type=bytes, value_type=bytes, partitions=partitions)
    define_replicating_agent(app, topic, work)
    _mount_web(app, settings, partitions, owned, journals, closers, draining)

    core = _CoreBuild(
        functools.partial(
            _build_core,
            settings,
            on,
            tables,
            expiry,
            owned,
            skipped,
            replay,
            verdicts,
            closers,
            # Faust's tables recovering, the agent held back: catch-ups follow their partitions
            lambda: bool(app.rebalancing),
        )
    )

    @app.task
    async def connect() -> None:  # Faust starts it once the first assignment is recovered
        _publish(settings, await core.result(), owned, work, journals, closers)

    @app.task
    async def expire() -> None:  # expired journals of the owned partitions (agents/expiry.py)
        # the `Journals` of the topic the app runs on: its tables are that topic's
        client = await _journals_on(await journals.wait(), on.topic)

        def settled() -> bool:
            return not app.rebalancing  # so the tables are recovered

        expirer = Expirer(
            on.topic,
            expiry,
            owned,
            JournalPurges(client),
            client.fence,
            settled,
            settings.read_wait_s,
            JournalDeadlines(client),
        )
        await expirer.run()

    def on_assigned(assigned: set[Any]) -> None:  # before the tables' callbacks (`_App`)
        replay.assignment()  # before any catch-up asks for this assignment's offsets
        built = core.built()
        for tp in assigned:
            if tp.topic == on.topic:
                owned.assign(tp.partition)
                if built is not None:  # else `_build_core` starts it, with the others owned
                    built.replication.assigned(tp.partition)
                    built.carries.assigned(tp.partition)
        if verdicts.done():
            verdicts.value().follow(owned.partitions())

    app.before_assignment = on_assigned

    @app.on_partitions_revoked.connect
    async def on_revoked(sender: Any, revoked: set[Any], **kwargs: Any) -> None:
        built = core.built()  # its replication may run before the core is published
        for tp in revoked:
            if tp.topic == on.topic:
                if built is not None:
                    await built.replication.revoke(tp.partition)
                    built.carries.revoked(tp.partition)
                else:
                    owned.revoke(tp.partition)
        if verdicts.done():
            verdicts.value().follow(owned.partitions())

    @app.on_before_shutdown.connect
    async def on_shutdown(sender: Any, **kwargs: Any) -> None:
        for close in reversed(closers):
            await close()

    return app, core.start


class _App(faust.App):  # type: ignore[misc]
    """Faust's app, which hands each assignment to `before_assignment` first, before Faust's
    callbacks (the tables' restore ahead, which grows with the journals) and its recovery:
    the partitions that moved start catching up at once (agents/replication.py says why it
    is safe; with Faust's eager protocol they waited for both, issue 43).

    Private: Faust's consumer calls `_on_partitions_assigned` (faust-streaming 0.15.3);
    tests/test_private_hooks.py checks that at the pinned version."""

    before_assignment: Callable[[set[Any]], None] | None = None

    async def _on_partitions_assigned(self, assigned: set[Any], generation_id: int = 0) -> None:
        if self.before_assignment is not None and not self.should_stop:
            self.before_assignment(assigned)
        await super()._on_partitions_assigned(assigned, generation_id)


class _CoreBuild:
    """The core's build (`_build_core`), started as the worker starts, before it joins its
    group (`start`), and awaited by the app's `connect` task, which Faust starts only once the
    first assignment's tables are recovered: built there, its ~2 s (Cassandra's session, the
    tail index's and the producer's clients, each ~0.1-1 s on a loaded host) were part of the
    pause of the partitions handed to a joining worker (BENCHMARKS.md, "A rebalance's pause
    at 200,000 journals, profiled")."""

    def __init__(self, build: Callable[[], Awaitable[_Core]]) -> None:
        self._build = build
        self._task: asyncio.Task[_Core] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.ensure_future(self._build())

    def built(self) -> _Core | None:
        """The core once built, before it is published; None until then."""
        task = self._task
        if task is None or not task.done() or task.cancelled() or task.exception() is not None:
            return None
        return task.result()

    async def result(self) -> _Core:
        self.start()  # a worker that did not start it (none does) builds it now
        assert self._task is not None
        return await self._task


async def _journals_on(client: Journals, topic: str) -> Journals:
    """The `Journals` of `topic` along `client`'s chain of grows (`client`'s own if it is its
    topic): a worker on a grown topic serves through the first topic's, which follows a
    moved journal there."""
    while client.topic != topic:
        assert client.growth is not None  # `worker_topic` found the chain from the registry
        client = await client.growth.successor()
    return client


@dataclass(frozen=True, slots=True)
class _Core:
    replication: WorkerReplication
    client: Journals
    successors: SuccessorReplication
    tables: JournalTables
    topic: str  # the one its Faust app runs on
    carries: DeadlineCarries


async def _build_core(
    settings: WorkerSettings,
    on: WorkerTopic,
    tables: JournalTables,
    expiry: ExpiryIndex,
    owned: OwnedPartitions,
    skipped: SkippedBatches,
    replay: KafkaReplay,
    verdicts: Deferred[TailIndex],
    closers: list[Callable[[], Awaitable[None]]],
    recovering: Callable[[], bool],
) -> _Core:
    """Build the core; nothing uses it before `_publish` (the tail index follows the
    partitions owned meanwhile)."""
    journal = settings.journal
    kafka = journal.kafka_access()
    cassandra = journal.cassandra_config()
    # a worker started while Cassandra is down serves from Kafka until it is reached
    store = await ConnectingStore.start(
        lambda: CassandraStore.connect(cassandra),
        cassandra.max_snapshot_bytes,
        down_retry_s=journal.store_down_retry_s,
    )
    closers.append(store.close)
    index = TableIndex(tables, owned, settings.read_wait_s)
    # a conditional append waits for its verdict: a keys-only consumer of the owned partitions
    # sees the record ~10 ms after it is written, the agent (behind Faust's consumer thread,
    # busy replicating) ~50-100 ms under load
    tail = await TailIndex.start(
        on.topic,
        owned.partitions(),
        store,
        TailConfig(  # reads use the tables: it drops what replication covered at once
            kafka,
            max_journals=journal.tail_max_journals,
            kept_journals=0,
            forgotten_capacity=journal.tail_forgotten_capacity,
            wait_s=settings.read_wait_s,
        ),
    )
    closers.append(tail.close)
    verdicts.set(tail)
    tail.follow(owned.partitions())  # what was assigned while it started
    # with the store down, a journal its tables cannot give whole (a partition taken over)
    # is scanned, as nothing else could answer
    # the client starts at the chain's first topic and follows a grow (journal/client/
    # growing.py); the `Journals` of the topic the app runs on reads with its tables
    client = await Journals.connect(
        journal,
        store=store,
        index=index,
        verdicts=tail,
        scan_without_store=True,
        indexed_topic=on.topic,
    )
    closers.append(client.close)
    # with security on this principal has no Create right: the admin (app/provision.py) or
    # the grow (app/grow.py) created it
    await ensure_topic(kafka, quarantine_spec(on.topic, journal.replication_factor))
    producer = JournalProducer(kafka, ack_timeout_s=journal.kafka_ack_timeout_s)
    await producer.start()
    closers.append(producer.stop)
    replication = WorkerReplication(
        on.topic,
        store,
        KafkaQuarantine(producer),
        tables,
        owned,
        replay,
        skipped,
        expiry=expiry,
        catch_up_concurrency=settings.catch_up_concurrency,
        cached_rows=settings.replication_cached_rows,
        queued_records=settings.replication_queued_records,
        recovering=recovering,
        # on a grown topic: a moved journal folds onto its base, final once the predecessors
        # are replicated through their cuts (caught up here if OLD's group is gone)
        moved_from=on.moved_from,
        predecessors=(
            Predecessors(kafka, store, KafkaQuarantine(producer), on.links) if on.links else None
        ),
    )
    closers.append(replication.close)
    # what is owned catches up now, beside the tables' restore and Faust's recovery, not once
    # they are done (agents/replication.py); later assignments start in `_App`'s hook
    # on a grown topic: the expiry candidates set before the move, carried into its tables
    # (agents/carry.py), from every topic of the chain before it
    carries = DeadlineCarries(
        DeadlineCarry(
            kafka,
            store,
            JournalWriter(producer, on.partitions),
            on.topic,
            on.partitions,
            settings.app_id_on(on.topic),
        ),
        [
            Predecessor(
                link.grow.topic,
                link.old_partitions,
                settings.app_id_on(link.grow.topic),
                dict(link.grow.cut),
            )
            for link in on.links
        ],
    )
    closers.append(carries.close)
    for partition in owned.partitions():
        replication.assigned(partition)
        carries.assigned(partition)
    # the successors of the topic the app runs on (none until it grows): the owner of OLD/p
    # replicates NEW/q for q mod N = p
    successors = SuccessorReplication(
        kafka, store, KafkaQuarantine(producer), on.topic, on.partitions, owned.owns, on.moved_from
    )
    return _Core(replication, client, successors, tables, on.topic, carries)


def _publish(
    settings: WorkerSettings,
    core: _Core,
    owned: OwnedPartitions,
    work: Deferred[WorkerReplication],
    journals: Deferred[Journals],
    closers: list[Callable[[], Awaitable[None]]],
) -> None:
    """The agent and the API may use the core from now on (the first assignment's tables are
    recovered)."""
    successors_task = asyncio.create_task(core.successors.run())
    closers.append(functools.partial(_cancel, successors_task))
    closers.append(core.tables.close)  # the log starts' question in flight
    work.set(core.replication)  # its owned partitions' catch-ups started when it was built
    journals.set(core.client)
    log.info("worker ready at %s, on topic %s", settings.url, core.topic)
    if settings.log_format == "text":  # a terminal's; JSON lines are for a log collector
        print(_welcome(settings.url, settings.journal.http_security_on), flush=True)


async def _cancel(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


def _broker_credentials(kafka: KafkaAccess) -> faust.SASLCredentials | None:
    if kafka.login is None:
        return None
    return faust.SASLCredentials(
        username=kafka.login.username,
        password=kafka.login.password.get_secret_value(),
        mechanism=kafka.login.mechanism,
        ssl_context=kafka.ssl_context(),
    )


def _welcome(url: str, secured: bool) -> str:
    if not secured:
        token, auth = "", ""
    else:
        token = "  T=$(kafka-journal token --scope journal:read --scope journal:write | tail -1)\n"
        auth = ' -H "Authorization: Bearer $T"'
    return (
        f"\nKafka Journal is serving {url}  (API: {url}/openapi.json)\n"
        "Try:\n"
        f"{token}"
        f"  curl -s -XPOST {url}/journals/demo/events{auth} -H 'content-type: application/json' "
        """-d '{"events": [{"seqNr": 1, "payload": {"hello": "world"}}]}'\n"""
        f"  curl -s {url}/journals/demo/events{auth}\n"
    )


def _mount_web(
    app: faust.App,
    settings: WorkerSettings,
    partitions: int,
    owned: OwnedPartitions,
    journals: Deferred[Journals],
    closers: list[Callable[[], Awaitable[None]]],
    draining: Draining,
) -> None:
    web_app = app.web.web_app
    owners = Owners(app, owned, APPENDS_TABLE, partitions, settings.url)  # the app's topic
    add_routes(
        web_app,
        WorkerBackend(journals, owners),
        max_body_bytes=settings.max_body_bytes,
        guard=guard_of(settings.journal),
        max_snapshot_bytes=settings.journal.max_snapshot_bytes,
        max_group_streams=settings.max_group_streams,
    )
    # Faust's own consumer metrics, next to ours in /metrics (read when scraped)
    METRICS.registry.register(FaustMonitorCollector(app))
    app.sensors.add(FaustTimings(METRICS))
    # a leaving worker neither serves nor forwards a request: it answers 503 not_ready
    web_app.middlewares.append(draining.middleware)
    forwarder = Forwarder(owners, tls=settings.forwarding_tls().context())
    # inside the API's error middleware and token check: a forwarded request was checked here
    # and carries its Authorization header on, for the owner to check it again
    web_app.middlewares.append(forwarder.middleware)
    closers.append(forwarder.close)


def prepare_topic(settings: WorkerSettings) -> tuple[WorkerTopic, int]:
    """Create the action topic if needed (before Faust runs); the topic the worker's Faust
    app runs on (`worker_topic`: the chain's first, or the newest its done grows made) with
    its partition count, and the replication factor the journal's topics get on the cluster
    now (Faust's default is 1). PartitionCountChanged if the count is not the keyspace's
    record (journal/kafka/guard.py): checked before Faust, whose tables would otherwise stop
    it with their own mismatch."""
    journal = settings.journal

    async def prepare() -> tuple[WorkerTopic, int]:
        # Faust would log a failed handshake and retry for ever: TlsRefused stops it here
        await asyncio.to_thread(journal.kafka_access().check_tls)
        partitions = await ensure_topic(journal.kafka_access(), journal.topic_spec())
        on = await _check_recorded(journal, partitions)
        replicas = await cluster_replicas(journal.kafka_access(), journal.topic_spec())
        # the tables' changelogs exist, with leaders, before Faust assigns: a fresh worker of 32
        # partitions on a loaded host had Faust assign before the changelogs it had just
        # created were in its metadata ("Ignoring missing topic"), and its agent then failed
        # every record with PartitionsMismatch (Faust's own create is create-if-absent)
        for table in TABLE_NAMES:
            changelog = TopicSpec(
                changelog_of(settings.app_id_on(on.topic), table),
                on.partitions,
                replicas,
                compacted=True,
            )
            await ensure_topic(journal.kafka_access(), changelog)
        return on, replicas

    return asyncio.run(prepare())


async def _check_recorded(journal: Settings, partitions: int) -> WorkerTopic:
    """The topic the worker's Faust app runs on (`worker_topic`). GrownTopicConfigured if a
    grow made the configured topic (configure the chain's first); PartitionCountChanged if the
    keyspace recorded another count. A grow is followed by the core (`Journals.connect`),
    encrypted journals too (one data key per journal across the chain, docs/growing.md). With
    the store down the app runs on the first topic, which serves and replicates the grown
    ones as before the switch; the core checks once the store is reached."""
    first = WorkerTopic(journal.topic, partitions)
    try:
        store = await CassandraStore.connect(journal.cassandra_config())
    except StoreUnavailable:
        log.warning("the store is down: the worker runs on the first topic, %s", journal.topic)
        return first
    try:
        chain = await predecessors_of(store, journal.topic)
        if chain:  # before Faust: its group would serve the grown topic without its history
            raise GrownTopicConfigured(journal.topic, chain[-1].topic)
        await check_recorded(store, journal.topic, partitions)
        try:
            on = await worker_topic(store, journal.topic, partitions)
        except StoreUnavailable:
            return first
        if on.topic != journal.topic:  # the topic is recorded with its count by the grow
            await ensure_topic(
                journal.kafka_access(),
                TopicSpec(on.topic, on.partitions, journal.replication_factor),
            )
        return on
    finally:
        await store.close()


def run_worker(settings: WorkerSettings, loglevel: str = "info") -> int:
    import mode.loop

    mode.loop.use("uvloop")  # before any loop exists; Faust's own CLI does the same
    # three threads take turns on the GIL (the event loop, Faust's consumer thread, the
    # Cassandra driver's I/O thread) and a record crosses all three before a conditional
    # append's verdict: at the default 5 ms a hand-over waits up to 5 ms (with 64 conditional
    # appenders: 353/s at 5 ms, 542/s at 1 ms)
    sys.setswitchinterval(0.001)
    try:
        on, replicas = prepare_topic(settings)
    except (PartitionCountChanged, GrownTopicConfigured, TlsRefused) as error:  # on stderr
        print(f"the worker refuses to start: {error}", file=sys.stderr, flush=True)
        return 1
    settings.datadir_on(on.topic).mkdir(parents=True, exist_ok=True)
    draining = Draining(DEFAULT_RETRY_AFTER_S)
    app, start_core = create_app(settings, on, replicas, draining)
    json_logs = settings.log_format == "json"
    worker = _Worker(
        app,
        draining,
        start_core,
        loglevel=loglevel,
        logging_config=json_logging(loglevel) if json_logs else None,
        quiet=json_logs,  # Faust's banner is not JSON
    )
    # its terminal spinner sets the root logger to DEBUG at levels >= WARN, so every debug
    # call of aiokafka and Faust would build a LogRecord (~8% of a busy worker's CPU)
    worker.spinner = None
    worker.execute_from_commandline()  # runs until a signal; exits the process itself
    return 0


class _Worker(faust.Worker):  # type: ignore[misc]
    """Faust's worker, which stops serving HTTP before it stops anything else.

    On SIGTERM (or SIGINT) Faust stops the worker, whose `on_stop` comes first: readiness false,
    the listener closed, the requests in flight drained (`web.draining`). Then Faust stops the
    app: its consumer (the agent's batches done, the tables' changelogs flushed), the core
    (`on_shutdown`'s closers). A static member (the default) does not leave the group (aiokafka
    sends no LeaveGroup for one): its partitions stay its own until it is back, without a
    rebalance, or its session (`session_timeout_s`) expired; a dynamic one leaves, so the
    others take its partitions over at once. Then the process exits.
    """

    def __init__(
        self, app: faust.App, draining: Draining, start_core: Callable[[], None], **options: Any
    ) -> None:
        super().__init__(app, **options)
        self._draining = draining
        self._start_core = start_core

    async def on_start(self) -> None:
        self._start_core()  # before the app starts: built while the worker joins its group
        await super().on_start()

    async def on_stop(self) -> None:
        await self._draining.stop_serving(serving_runner(self.app.web))
        await super().on_stop()


def serving_runner(faust_web: Any) -> BaseRunner:
    """The aiohttp runner serving Faust's web server (`app.web`).

    Private: Faust's aiohttp driver (faust-streaming 0.15.3) keeps it to itself, as `_runner`,
    made with the driver and set up, its site added, by `start_server`;
    tests/test_private_hooks.py checks that at the pinned version."""
    runner: BaseRunner = faust_web._runner
    return runner
