"""A grown topic in the pipeline (docs/growing.md): its moved journals' bases are their rows
in the topics it grew from, which the rebuild and the audit read once final."""

from __future__ import annotations

from journal.errors import JournalError
from journal.replication import predecessors_of, undrained
from journal.settings import Settings
from journal.store import CassandraStore
from pipeline.offsets import topic_offsets
from pipeline.report import Progress


class PredecessorBehind(JournalError):
    """A grown topic rebuilt or audited before its predecessor is replicated through its cuts:
    its moved journals' bases are not final yet."""


async def grown_from(
    settings: Settings, store: CassandraStore, progress: Progress
) -> tuple[str, ...]:
    """The topics a grown topic grew from (docs/growing.md), nearest first, once the nearest
    is replicated through every cut: their rows are the moved journals' bases; PredecessorBehind
    before. The registry says so: a keyspace rebuilt from nothing needs `topic_grow` restored
    first."""
    chain = await predecessors_of(store, settings.topic)
    if not chain:
        old, _, count = settings.topic.rpartition(".")
        if old and count.isdigit():  # a grown topic's name, or a user's: only said
            progress(
                f"warning: {settings.topic} is named as a topic grown from {old}, and this "
                f"keyspace's registry has no grow of {old} into it: if it is one, its moved "
                "journals' appends are rejected without their bases (restore topic_grow first, "
                "docs/growing.md)"
            )
        return ()
    grow = chain[0]
    old_partitions = len((await topic_offsets(settings.kafka_access(), grow.topic)).end)
    behind = await undrained(store, grow, old_partitions)
    if behind:
        raise PredecessorBehind(
            f"{settings.topic} grew from {grow.topic}, whose partitions {behind} are not "
            f"replicated through their cut: replicate or rebuild {grow.topic} first "
            "(docs/growing.md)"
        )
    return tuple(g.topic for g in chain)
