"""The direct client's journal id listing against the real servers (journal/client/listing.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from journal.client.journals import Journals
from journal.client.listing import MAX_LIMIT, UnreplicatedIds
from journal.core.index import IndexAnswer, RecordIndex
from journal.core.model import JournalKey
from stack import Stack
from tests.journal.test_journals import Direct
from tests.support.harness import harness
from tests.support.listing import all_pages, events, existing, populate

pytestmark = pytest.mark.integration


class KeysFromKafka:
    """The tail index without its ids: the listing reads the keys from Kafka, as a worker."""

    def __init__(self, index: RecordIndex) -> None:
        self._index = index

    def covered(self, partition: int) -> int:
        return self._index.covered(partition)

    async def lookup(self, key: JournalKey, partition: int, fence: int) -> IndexAnswer:
        return await self._index.lookup(key, partition, fence)

    async def close(self) -> None:
        return None


@pytest.fixture(params=["tail_index", "kafka_keys"])
async def api(request: pytest.FixtureRequest, stack: Stack, keyspace: str) -> AsyncIterator[Direct]:
    async with harness(stack, keyspace, "journal_ids") as connected:
        client = connected.journals
        if request.param == "kafka_keys":
            index = KeysFromKafka(client.index)
            connected.journals = Journals(
                client.topic, client.writer, client.store, index, client.fence, client.kafka
            )
            assert not isinstance(connected.journals.index, UnreplicatedIds)
        else:
            assert isinstance(client.index, UnreplicatedIds)
        try:
            yield Direct(connected, replicating=True)
        finally:
            await connected.journals.close()  # what listing opened (a client built from parts)
            connected.journals = client


async def pages(api: Direct, prefix: str, limit: int) -> list[list[str]]:
    async def page(prefix: str, after: str | None, limit: int) -> tuple[list[str], str | None]:
        got = await api.journals.ids(prefix, after, limit)
        return list(got.ids), got.next

    return await all_pages(page, prefix, limit)


async def test_pages_merge_the_store_and_kafka_and_leave_out_what_does_not_exist(
    api: Direct,
) -> None:
    await populate(api, "p-", api.harness.replicate)
    for stage in ("unreplicated", "replicated"):
        got = await pages(api, "p-", 2)
        assert [i for page in got for i in page] == existing("p-"), (stage, got)
        assert got[:2] == [existing("p-")[:2], existing("p-")[2:]], (stage, got)
        one_page = await api.journals.ids("p-", limit=MAX_LIMIT)
        assert (list(one_page.ids), one_page.next) == (existing("p-"), None), stage
        everything = await api.journals.ids()
        assert set(everything.ids) == {*existing("p-"), "other-p-1"}, stage
        await api.harness.replicate()


async def test_after_and_a_prefix_nothing_has(api: Direct) -> None:
    for journal_id in ("a", "b", "c"):
        await api.append(journal_id, events(1, 1))
    page = await api.journals.ids(after="a", limit=1)
    assert (page.ids, page.next) == (("b",), "b")
    assert (await api.journals.ids(prefix="z")).ids == ()
    assert (await api.journals.ids(after="c")).ids == ()


async def test_bad_limits_are_refused(api: Direct) -> None:
    for limit in (0, -1, MAX_LIMIT + 1):
        with pytest.raises(ValueError, match="limit"):
            await api.journals.ids(limit=limit)
