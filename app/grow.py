"""`kafka-journal topic grow --partitions M`: the operator's command that grows the action
topic online, by the protocol of docs/growing.md.

Every step is decided from the registry (the keyspace's `topic_grow`) and the log, nothing
from the memory of an earlier run (`journal.core.grow.next_step`): run again with the same
arguments, a run killed anywhere resumes. The steps: record the plan; create NEW
(`<topic>.<M>`, M partitions, create-if-absent, refusing a NEW of another count) and record
its count for the guard; for each old partition in order: record its end (`low`), produce a
Seal into it, record the first Seal at or after `low` as its cut; record "done".

It refuses (exit 1, nothing changed) an M that is not a larger multiple of the topic's count
and a grow to another M than the one recorded. Everything that consumes the topic follows a
grow (docs/growing.md): workers (reads, appends, replication of the grown topic),
subscriptions and subscription groups.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import replace

from app.confirm import confirm, run_resumable
from journal.core import (
    Grow,
    Phase,
    Step,
    check_multiple,
    new_topic_of,
    next_step,
    partition_state,
    seal_wait_s,
)
from journal.errors import InvalidValue, KafkaAccessDenied, PartitionCountChanged
from journal.kafka import (
    Acl,
    AclPattern,
    AclResource,
    JournalProducer,
    JournalWriter,
    TopicSpec,
    create_acls,
    describe_acls,
    end_offsets,
    ensure_topic,
    first_seal,
    partition_count,
    quarantine_spec,
    quarantine_topic,
)
from journal.settings import Settings
from journal.store import CassandraStore, EventualStore

COMMAND = "topic grow"
RUN_AS_ADMIN = (
    "with KJ_SECURITY=on, topic grow runs as Kafka's administrator, a principal allowed to "
    "create topics and to describe and create ACLs: set KJ_KAFKA_USERNAME and its password "
    "(KJ_KAFKA_PASSWORD or KJ_KAFKA_PASSWORD_FILE; the local stack's admin: journal-admin), "
    "with a Cassandra role that writes the keyspace (KJ_CASSANDRA_USERNAME=journal_writer)"
)


class GrowRefused(Exception):
    """The state does not allow this grow: nothing (more) changed."""


def _mirrors_acls(settings: Settings) -> bool:
    """Whether the grow gives NEW and its quarantine the rights of T and its quarantine: with
    security on (Kafka has an authorizer); off, Kafka has no ACLs (DescribeAcls fails with
    SECURITY_DISABLED), so there is nothing to mirror."""
    return settings.security == "on"


def mirrored(acls: list[Acl], topic: str, new_topic: str) -> list[Acl]:
    """`acls` with the literal topic ACLs of `topic` and of its quarantine renamed to
    `new_topic` and its quarantine; any other ACL unchanged."""
    names = {topic: new_topic, quarantine_topic(topic): quarantine_topic(new_topic)}
    return [
        replace(acl, name=names[acl.name])
        if acl.resource is AclResource.TOPIC
        and acl.pattern is AclPattern.LITERAL
        and acl.name in names
        else acl
        for acl in acls
    ]


async def mirror_acls(settings: Settings, topic: str, new_topic: str) -> list[Acl]:
    """The ACLs `new_topic` and its quarantine need: every literal ACL on `topic` and on its
    quarantine (any principal, operation, permission, host: whatever the operator granted),
    renamed. None with security off. (A PREFIXED `topic.` ACL would have covered every grown
    topic at once, and the quarantine `topic.quarantine` too, which clients must not read.)"""
    if not _mirrors_acls(settings):
        return []
    kafka = settings.kafka_access()
    try:
        found = [
            acl
            for name in (topic, quarantine_topic(topic))
            for acl in await describe_acls(kafka, AclResource.TOPIC, name, AclPattern.LITERAL)
        ]
    except KafkaAccessDenied as error:
        raise GrowRefused(f"{error}; {RUN_AS_ADMIN}") from None
    return mirrored(found, topic, new_topic)


async def grant_mirrored(settings: Settings, acls: list[Acl]) -> None:
    """Create `acls` (`mirror_acls`'s): again, a no-op."""
    try:
        await create_acls(settings.kafka_access(), acls)
    except KafkaAccessDenied as error:
        raise GrowRefused(f"{error}; {RUN_AS_ADMIN}") from None


async def _sealed(settings: Settings, grow: Grow | None, old: int) -> dict[int, int]:
    """The first Seal at or after `low`, per partition whose low is recorded and cut is not
    (the log's answer to a run killed between producing a Seal and recording it)."""
    if grow is None:
        return {}
    kafka = settings.kafka_access()
    found = {}
    for p in range(old):
        if p in grow.low and p not in grow.cut:
            seal = await first_seal(kafka, settings.topic, p, grow.low[p])
            if seal is not None:
                found[p] = seal
    return found


def _describe(grow: Grow | None, topic: str, old: int, new: int, sealed: dict[int, int]) -> str:
    step = next_step(grow, old, sealed)
    new_topic = new_topic_of(topic, new) if grow is None else grow.new_topic
    phase = "none" if grow is None else grow.phase.value
    lines = [
        f"grow {topic} ({old} partitions) into {new_topic} ({new} partitions): phase {phase}, "
        f"next step: {step}"
    ]
    lines += [f"  {topic}/{p}: {partition_state(grow, p, sealed)}" for p in range(old)]
    return "\n".join(lines)


async def grow_topic(
    settings: Settings,
    store: EventualStore,
    partitions: int,
    *,
    dry_run: bool = False,
    yes: bool = False,
    before_step: Callable[[Step], None] = lambda step: None,
    say: Callable[[str], None] = print,
) -> Grow | None:
    """Grow `settings.topic` to `partitions`, or resume doing so; the registry's record at the
    end (None: a dry run before any plan). `before_step`: called before each step (tests inject
    failures there). GrowRefused, NotConfirmed, or Unavailable (try again: it resumes). With
    security on it runs as Kafka's administrator (`RUN_AS_ADMIN`): it creates NEW, NEW's
    quarantine and their ACLs."""
    if _mirrors_acls(settings) and settings.kafka_username is None:
        # the default login is the role's (journal-client...), which may create neither
        raise GrowRefused(RUN_AS_ADMIN)
    root, kafka = settings.topic, settings.kafka_access()
    grow = await store.grow(root)
    # a topic grown before lives on in the topic it grew into: the next grow is of that one
    # (its registry row is keyed by it); a done grow to this very count is this run, finished
    while grow is not None and grow.phase is Phase.DONE and grow.partitions != partitions:
        settings = settings.model_copy(update={"topic": grow.new_topic})
        grow = await store.grow(grow.new_topic)
    topic = settings.topic
    old = await partition_count(kafka, topic)
    if grow is not None and grow.partitions != partitions:
        raise GrowRefused(
            f"a grow of {topic} to {grow.partitions} partitions is recorded ({grow.phase.value}):"
            f" run it again with --partitions {grow.partitions}"
        )
    if grow is None:
        recorded = await store.recorded_partitions(topic, old)
        if recorded is not None and recorded != old:
            raise GrowRefused(str(PartitionCountChanged(topic, old, recorded)))
        try:
            check_multiple(old, partitions)
        except InvalidValue as error:
            raise GrowRefused(str(error)) from None
    sealed = await _sealed(settings, grow, old)
    say(_describe(grow, topic, old, partitions, sealed))
    if next_step(grow, old, sealed).action in ("plan", "create"):
        new_topic = new_topic_of(topic, partitions) if grow is None else grow.new_topic
        # the ACLs the create step makes, as T has them now (it describes them again there)
        for acl in await mirror_acls(settings, topic, new_topic):
            say(f"  ACL to create: {acl}")
    if dry_run or next_step(grow, old, sealed).action == "finished":
        return grow
    confirm(f"Grow {topic} to {partitions} partitions now?", yes)
    producer = JournalProducer(kafka, ack_timeout_s=settings.kafka_ack_timeout_s)
    await producer.start()
    plan_known = time.monotonic() if grow is not None else None
    try:
        writer = JournalWriter(producer, old)
        while True:
            step = next_step(grow, old, sealed)
            if step.action == "finished":
                return grow
            before_step(step)
            if step.action == "seal" and plan_known is not None:
                wait = seal_wait_s(plan_known, time.monotonic(), settings.grow_lease_s)
                if wait > 0:  # clients' leases of "no grow" end first (Registry.clear)
                    say(f"waiting {wait:.1f} s after the plan before the first Seal")
                    await asyncio.sleep(wait)
            await _take(settings, store, writer, step, grow, partitions, sealed, say)
            if step.action == "plan":
                plan_known = time.monotonic()
            grow = await store.grow(topic)
            sealed = await _sealed(settings, grow, old)
    finally:
        await producer.stop()


async def _take(
    settings: Settings,
    store: EventualStore,
    writer: JournalWriter,
    step: Step,
    grow: Grow | None,
    partitions: int,
    sealed: dict[int, int],
    say: Callable[[str], None],
) -> None:
    topic, kafka = settings.topic, settings.kafka_access()
    p = step.partition
    if step.action == "plan":
        await store.record_plan(topic, new_topic_of(topic, partitions), partitions)
        return
    assert grow is not None
    if step.action == "create":
        spec = settings.topic_spec()
        new_spec = TopicSpec(
            grow.new_topic,
            grow.partitions,
            spec.replication_factor,
            spec.min_insync_replicas,
            spec.retention_ms,
        )
        count = await ensure_topic(kafka, new_spec)
        if count != grow.partitions:
            raise GrowRefused(
                f"{grow.new_topic} exists with {count} partitions, not {grow.partitions}: "
                "delete it (nothing of the journal is in it before the first Seal) or grow to "
                f"{count}"
            )
        # the workers quarantine into it, but may not create it with security on
        await ensure_topic(kafka, quarantine_spec(grow.new_topic, spec.replication_factor))
        # NEW's rights before the first Seal moves a journal there; a crash before the phase
        # is recorded runs this step again, and an existing ACL is created again as a no-op
        acls = await mirror_acls(settings, topic, grow.new_topic)
        await grant_mirrored(settings, acls)
        if acls:
            say(f"granted {len(acls)} ACLs of {topic} and its quarantine on {grow.new_topic}")
        # the guard holds every process to NEW's count from now on
        recorded = await store.recorded_partitions(grow.new_topic, grow.partitions)
        if recorded is not None and recorded != grow.partitions:
            raise GrowRefused(str(PartitionCountChanged(grow.new_topic, count, recorded)))
        await store.record_phase(topic, Phase.CREATED)
        say(f"created {grow.new_topic} with {count} partitions")
    elif step.action == "mark_low":
        assert p is not None
        ends = await end_offsets(kafka, topic, p + 1)
        await store.record_low(topic, p, ends[p])
    elif step.action == "seal":
        assert p is not None
        started = time.perf_counter()
        position = await writer.seal(topic, p)
        took = time.perf_counter() - started
        say(f"{topic}/{p}: sealed at offset {position.offset} ({took:.3f} s)")
    elif step.action == "record_cut":
        assert p is not None
        await store.record_cut(topic, p, sealed[p])
        say(f"{topic}/{p}: cut at offset {sealed[p]} recorded")
    elif step.action == "done":
        await store.record_phase(topic, Phase.DONE)
        say(f"done: {topic} grew into {grow.new_topic} ({grow.partitions} partitions)")


def run_grow(settings: Settings, partitions: int, dry_run: bool, yes: bool) -> int:
    """The command line's entry (exit codes: `run_resumable`)."""

    async def work(store: CassandraStore) -> None:
        await grow_topic(settings, store, partitions, dry_run=dry_run, yes=yes)

    return run_resumable(COMMAND, settings, work, GrowRefused)
