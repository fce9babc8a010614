"""`kafka-journal topic grow` on the secured stack: the grown topic NEW and its quarantine get
the rights the operator granted on T and its quarantine (app/grow.py mirrors T's literal
topic ACLs), so each principal carries on across the grow."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace

import pytest
from aiokafka import AIOKafkaProducer, TopicPartition

from app.grow import RUN_AS_ADMIN, GrowRefused, grant_mirrored, grow_topic, mirror_acls
from journal.client.journals import Journals
from journal.core.grow import Grow, Phase
from journal.core.model import Ack, Event, TextPayload
from journal.kafka.acls import (
    Acl,
    AclOperation,
    AclPattern,
    AclPermission,
    AclResource,
    create_acls,
    describe_acls,
)
from journal.kafka.consumers import start_consumer, stop_consumer
from journal.kafka.topic import end_offsets, quarantine_topic
from journal.kafka.writer import partition_of
from journal.settings import Settings
from journal.store.cassandra import CassandraStore
from kjconfig.access import KAFKA_ADMIN, KafkaAccess
from stack import Stack
from tests.support.eventually import eventually
from tests.support.secured import Granted, granted_journal

pytestmark = [pytest.mark.integration, pytest.mark.secured]


@pytest.fixture(scope="module")
async def granted(secured_stack: Stack) -> Granted:
    return await granted_journal(secured_stack, partitions=2)


def grower(granted: Granted) -> Settings:
    """Who runs the grow: Kafka's admin (it creates topics and ACLs), Cassandra's writer (it
    records the grow); a short lease, as the test's clients start after the grow."""
    return granted.as_role("worker").replace(kafka_username=KAFKA_ADMIN, grow_lease_s=0.05)


@pytest.fixture(scope="module")
async def store(granted: Granted) -> AsyncIterator[CassandraStore]:
    connected = await CassandraStore.connect(grower(granted).cassandra_config())
    yield connected
    await connected.close()


def ignore(line: str) -> None:
    """What the command says: not what these tests check."""


# an operator's own ACL on T, beside the journal's: a deny, from one host
OPERATORS = Acl(
    "User:someone-else", AclResource.TOPIC, "", AclOperation.READ,
    permission=AclPermission.DENY, host="10.9.9.9",
)  # fmt: skip


async def literal_acls(kafka: KafkaAccess, *topics: str) -> set[Acl]:
    return {
        acl
        for topic in topics
        for acl in await describe_acls(kafka, AclResource.TOPIC, topic, AclPattern.LITERAL)
    }


@pytest.fixture(scope="module")
async def grown(granted: Granted, store: CassandraStore) -> Grow:
    settings, topic = grower(granted), granted.settings.topic
    admin = settings.kafka_access()
    theirs = replace(OPERATORS, name=topic)
    await create_acls(admin, [theirs])

    async def visible() -> bool:
        return theirs in await literal_acls(admin, topic)

    await eventually(visible, "the operator's ACL is visible")
    # a dry run lists the ACLs it would create, and creates nothing
    said: list[str] = []
    assert await grow_topic(settings, store, 4, dry_run=True, say=said.append) is None
    new = f"{topic}.4"
    for acl in (
        f"User:journal-client WRITE TOPIC {new}",
        f"User:journal-replicator WRITE TOPIC {new}.quarantine",
        str(replace(theirs, name=new)),
    ):
        assert f"  ACL to create: {acl}" in said
    assert await literal_acls(admin, new, f"{new}.quarantine") == set()
    grow = await grow_topic(settings, store, 4, yes=True, say=ignore)
    assert grow is not None and grow.phase is Phase.DONE and grow.new_topic == new

    async def in_force() -> bool:  # a broker applies created ACLs after it answers
        return replace(theirs, name=new) in await literal_acls(admin, new)

    await eventually(in_force, "NEW's ACLs applied by the broker")
    return grow


async def test_each_principal_keeps_its_rights_on_the_grown_topic(
    granted: Granted, grown: Grow
) -> None:
    # the client: an append lands on NEW (the journal moved at the cut) and reads back
    async with await Journals.connect(granted.settings) as client:
        journal = client.journal("after-grow")
        await journal.append([Event(1, payload=TextPayload("e1"))], ack=Ack.KAFKA)
        assert [event.seq_nr async for event in journal.read()] == [1]
    # the replicator (and the worker, its union) reads it in NEW, and quarantines into NEW's
    for role in ("replicator", "worker"):
        kafka = granted.as_role(role).kafka_access()
        tp = TopicPartition(grown.new_topic, partition_of("after-grow", 4))
        end = (await end_offsets(kafka, grown.new_topic, 4))[tp.partition]
        consumer = await start_consumer(kafka)
        try:
            consumer.assign([tp])
            keys = []
            while await consumer.position(tp) < end:
                batches = await consumer.getmany(tp, timeout_ms=1000)
                keys += [message.key for message in batches.get(tp, [])]
        finally:
            await stop_consumer(consumer)
        assert b"after-grow" in keys
        producer = AIOKafkaProducer(**kafka.client_options(), acks="all")
        await producer.start()
        try:
            await producer.send_and_wait(quarantine_topic(grown.new_topic), b"set aside", b"k")
        finally:
            await producer.stop()


async def test_new_and_its_quarantine_have_the_rights_of_t_and_a_rerun_adds_none(
    granted: Granted, grown: Grow
) -> None:
    settings, topic, new = grower(granted), granted.settings.topic, grown.new_topic
    admin = settings.kafka_access()
    ours = (new, quarantine_topic(new))
    acls = await mirror_acls(settings, topic, new)
    assert replace(OPERATORS, name=new) in acls  # whatever the operator granted on T

    async def granted_as_t() -> bool:
        return await literal_acls(admin, *ours) == set(acls)

    await eventually(granted_as_t, "NEW and its quarantine have exactly T's rights, renamed")
    # what a rerun of the create step does (a crash before the phase was recorded)
    await grant_mirrored(settings, acls)
    assert await literal_acls(admin, *ours) == set(acls)
    assert len(acls) == len(set(acls))


async def test_the_grow_refuses_to_run_as_another_principal_than_the_admin(
    granted: Granted, store: CassandraStore
) -> None:
    """Refused before anything is recorded: without a Kafka user set (the role's default
    login), at once; with another user than the admin, at the describe of T's ACLs (to grow
    T, or T.4 once the other tests grew it)."""
    with pytest.raises(GrowRefused) as refused:
        await grow_topic(granted.as_role("worker"), store, 8, yes=True, say=ignore)
    assert str(refused.value) == RUN_AS_ADMIN
    client = granted.settings.replace(kafka_username="journal-client")
    with pytest.raises(GrowRefused, match="Describe on the cluster") as refused:
        await grow_topic(client, store, 8, dry_run=True, say=ignore)
    assert RUN_AS_ADMIN in str(refused.value)
