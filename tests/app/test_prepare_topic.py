"""What a worker creates before Faust runs (app/worker.py `prepare_topic`): the action topic,
and its four tables' changelogs with the topic's partitions, compacted, so Faust never assigns
before they are in its metadata."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from app.settings import WorkerSettings
from app.worker import TABLE_NAMES, prepare_topic
from journal.kafka.topic import partition_count
from stack import Stack
from tests.support.harness import settings_for, unique

pytestmark = pytest.mark.integration


async def cleanup_policy(settings: WorkerSettings, topic: str) -> str:
    admin = AIOKafkaAdminClient(**settings.journal.kafka_access().client_options())
    await admin.start()
    try:
        (configs,) = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
    finally:
        await admin.close()
    (resource,) = configs.to_object()["resources"]
    (policy,) = [
        entry["config_value"]
        for entry in resource["config_entries"]
        if entry["config_names"] == "cleanup.policy"
    ]
    return str(policy)


def test_a_worker_creates_its_tables_changelogs_before_faust(stack: Stack, keyspace: str) -> None:
    journal = settings_for(stack, unique("prepare"), keyspace, 5)
    settings = WorkerSettings(journal=journal, app_id=unique("app"))
    assert prepare_topic(settings)[0].partitions == 5
    kafka = journal.kafka_access()
    for table in TABLE_NAMES:
        changelog = f"{settings.app_id}-{table}-changelog"
        assert asyncio.run(partition_count(kafka, changelog)) == 5, changelog
        assert asyncio.run(cleanup_policy(settings, changelog)) == "compact", changelog
