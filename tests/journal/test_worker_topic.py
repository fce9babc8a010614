"""Which topic a worker's Faust app runs on (journal/replication/successor.py `worker_topic`):
the newest topic the done grows lead to from the chain's first, a grow not done stopping at
the topic before it; and the app id and tables' directory that go with it
(app/settings.py)."""

from __future__ import annotations

from pathlib import Path

from app.settings import WorkerSettings
from journal.core.grow import Phase, new_topic_of
from journal.replication import worker_topic
from journal.settings import Settings
from journal.store.memory import MemoryStore


async def grown(store: MemoryStore, topic: str, partitions: int, done: bool = True) -> str:
    """A grow of `topic` recorded with every cut of its `old` partitions (the count's half),
    done or not; the grown topic."""
    new = new_topic_of(topic, partitions)
    await store.record_plan(topic, new, partitions)
    await store.record_phase(topic, Phase.CREATED)
    for partition in range(partitions // 2):
        await store.record_low(topic, partition, 10)
        await store.record_cut(topic, partition, 11)
    if done:
        await store.record_phase(topic, Phase.DONE)
    return new


async def test_no_grow_runs_on_the_first_topic() -> None:
    on = await worker_topic(MemoryStore(), "j", 2)
    assert (on.topic, on.partitions, on.links, on.moved_from) == ("j", 2, (), ())


async def test_a_done_grow_moves_the_worker() -> None:
    store = MemoryStore()
    new = await grown(store, "j", 4)
    on = await worker_topic(store, "j", 2)
    assert (on.topic, on.partitions, on.moved_from) == (new, 4, ("j",))
    assert [link.old_partitions for link in on.links] == [2]


async def test_a_grow_not_done_keeps_the_topic_before_it() -> None:
    store = MemoryStore()
    await store.record_plan("j", new_topic_of("j", 4), 4)  # planned only
    assert (await worker_topic(store, "j", 2)).topic == "j"
    store = MemoryStore()
    await grown(store, "j", 4, done=False)  # every cut recorded, not done yet
    assert (await worker_topic(store, "j", 2)).topic == "j"


async def test_a_chain_moves_the_worker_to_the_last_done_grow() -> None:
    store = MemoryStore()
    middle = await grown(store, "j", 4)
    last = await grown(store, middle, 8)
    on = await worker_topic(store, "j", 2)
    assert (on.topic, on.partitions, on.moved_from) == (last, 8, (middle, "j"))
    assert [link.old_partitions for link in on.links] == [2, 4]
    # the second grow not done: the middle topic
    store = MemoryStore()
    middle = await grown(store, "j", 4)
    await grown(store, middle, 8, done=False)
    on = await worker_topic(store, "j", 2)
    assert (on.topic, on.partitions, on.moved_from) == (middle, 4, ("j",))


def test_a_grown_topic_has_an_app_id_and_tables_of_its_own(tmp_path: Path) -> None:
    settings = WorkerSettings(
        journal=Settings(topic="j"), app_id="kj", datadir=tmp_path, web_port=7001
    )
    assert settings.app_id_on("j") == "kj"
    assert settings.datadir_on("j") == tmp_path
    assert settings.app_id_on("j.4") == "kj-j.4"  # its changelogs keep the `kj-` prefix
    assert settings.datadir_on("j.4") == tmp_path / "kj-j.4"
