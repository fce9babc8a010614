"""The Faust application: one worker of the consumer group that replicates the action topic.

`create_app` wires the rooms together: the tables (`tables/`), the replicating agent
(`agents/`), the HTTP API (`web/`) mounted on Faust's aiohttp application, and the core
(`journal/`) connected when the app starts. `run_worker` runs it until interrupted.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import faust

from agents.poison import guarded_transport
from agents.replication import ReplicationWork
from agents.replicator import define_agent
from app.backend import WorkerBackend
from app.forwarding import Forwarder, Owners
from app.settings import WorkerSettings
from journal.head import HeadReader, KafkaReadConfig
from journal.journals import Journals
from journal.producer import JournalProducer
from journal.progress import Progress
from journal.replicate import KafkaQuarantine
from journal.store.cassandra import CassandraStore
from journal.topic import TopicSpec, ensure_topic, quarantine_topic
from tables.head_source import TableHeadSource
from tables.tables import JournalTables, define_tables
from web.app import add_routes

log = logging.getLogger(__name__)


@dataclass(slots=True)
class WorkerContext:
    """What the agent and the views share in one worker process."""

    settings: WorkerSettings
    tables: JournalTables
    progress: Progress = field(default_factory=Progress)
    journals: Journals | None = None
    work: ReplicationWork | None = None
    started: asyncio.Event = field(default_factory=asyncio.Event)
    closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)


def create_app(settings: WorkerSettings, partitions: int) -> tuple[faust.App, WorkerContext]:
    """The Faust app for an action topic of `partitions` partitions (tables match them)."""
    journal = settings.journal
    app = faust.App(
        settings.app_id,
        broker=f"kafka://{journal.kafka_bootstrap}",
        store="rocksdb://",
        datadir=str(settings.datadir),
        topic_partitions=partitions,
        topic_replication_factor=journal.replication_factor,
        table_standby_replicas=1,
        consumer_group_instance_id=settings.instance_id,
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
        worker_redirect_stdouts=False,  # the welcome text is for the terminal, not the log
    )
    app.transport = guarded_transport(app)  # past undecodable batches (agents/poison.py)
    context = WorkerContext(settings, define_tables(app, partitions))
    topic = app.topic(journal.topic, key_type=bytes, value_type=bytes, partitions=partitions)
    define_agent(app, topic, context)
    _mount_web(app, context, partitions)

    @app.task
    async def connect() -> None:
        await _connect(context)

    @app.on_partitions_revoked.connect
    async def on_revoked(sender: Any, revoked: set[Any], **kwargs: Any) -> None:
        if context.work is not None:
            for tp in revoked:
                if tp.topic == journal.topic:
                    await context.work.revoke(tp.partition)

    @app.on_before_shutdown.connect
    async def on_shutdown(sender: Any, **kwargs: Any) -> None:
        for close in reversed(context.closers):
            await close()

    return app, context


async def _connect(context: WorkerContext) -> None:
    """Connect the core; the agent waits for this before its first batch."""
    journal = context.settings.journal
    store = await CassandraStore.connect(journal.cassandra_config())
    kafka = HeadReader(KafkaReadConfig(bootstrap=journal.kafka_bootstrap))
    wait_s = context.settings.read_wait_s
    heads = TableHeadSource(context.tables, context.progress, kafka, store, wait_s)
    journals = await Journals.connect(journal, store=store, heads=heads)
    await ensure_topic(
        journal.kafka_bootstrap,
        TopicSpec(quarantine_topic(journal.topic), 1, journal.replication_factor),
    )
    producer = JournalProducer(journal.kafka_bootstrap)
    await producer.start()
    context.journals = journals
    context.closers += [journals.close, producer.stop]
    context.work = ReplicationWork(
        journal.topic,
        store,
        KafkaQuarantine(producer),
        context.tables,
        context.progress,
        journal.kafka_bootstrap,
    )
    context.closers.append(context.work.close)
    context.started.set()
    log.info("worker ready at %s", context.settings.url)
    print(_welcome(context.settings.url), flush=True)


def _welcome(url: str) -> str:
    return (
        f"\nKafka Journal is serving {url}  (API: {url}/openapi.json)\n"
        "Try:\n"
        f"  curl -s -XPOST {url}/journals/demo/events -H 'content-type: application/json' "
        """-d '{"events": [{"seqNr": 1, "payload": {"hello": "world"}}]}'\n"""
        f"  curl -s {url}/journals/demo/events\n"
    )


def _mount_web(app: faust.App, context: WorkerContext, partitions: int) -> None:
    web_app = app.web.web_app
    add_routes(web_app, WorkerBackend(app, context), max_body_bytes=context.settings.max_body_bytes)
    owners = Owners(app, "watermarks", partitions, context.settings.url)
    forwarder = Forwarder(owners)
    web_app.middlewares.append(forwarder.middleware)  # inside the API's error middleware
    context.closers.append(forwarder.close)


def prepare_topic(settings: WorkerSettings) -> int:
    """Create the action topic if needed and return its partition count (before Faust runs)."""
    journal = settings.journal
    return asyncio.run(ensure_topic(journal.kafka_bootstrap, journal.topic_spec()))


def run_worker(settings: WorkerSettings, loglevel: str = "info") -> int:
    import mode.loop

    mode.loop.use("uvloop")  # before any loop exists; Faust's own CLI does the same
    partitions = prepare_topic(settings)
    settings.datadir.mkdir(parents=True, exist_ok=True)
    app, _ = create_app(settings, partitions)
    worker = faust.Worker(app, loglevel=loglevel)
    worker.execute_from_commandline()  # runs until a signal; exits the process itself
    return 0
