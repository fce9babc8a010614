"""The head's bookkeeping: what Kafka adds to the store, and when Kafka alone is enough."""

from __future__ import annotations

from journal.head import Head
from journal.model import JournalKey
from tests.support import actions as a

KEY = JournalKey("t", "j")


def head_of(*records: object) -> Head:
    head = Head()
    for record in records:
        head.add(record)  # type: ignore[arg-type]
    return head


def test_a_purge_voids_what_came_before() -> None:
    head = head_of(
        a.append(KEY, 0, 1, 3), a.delete(KEY, 1, 2), a.purge(KEY, 2), a.append(KEY, 3, 1, 1)
    )
    assert head.purged and head.delete_to is None and head.seq_nr == 1
    assert [e.seq_nr for e in head.events] == [1]


def test_kafka_alone_is_whole_from_seq_nr_one_a_purge_or_a_covering_delete() -> None:
    assert head_of(a.append(KEY, 0, 1, 2)).whole_journal
    assert head_of(a.purge(KEY, 0)).whole_journal
    assert head_of(a.append(KEY, 0, 4, 5), a.delete(KEY, 1, 3)).whole_journal
    assert not head_of(a.append(KEY, 0, 4, 5)).whole_journal  # 1..3 expired: maybe in the store
    assert not head_of(a.delete(KEY, 0, 3)).whole_journal
    assert not head_of().whole_journal


def test_past_its_budget_a_head_keeps_only_offsets_and_a_purge_resets_it() -> None:
    head = Head(budget_bytes=1)
    for record in (a.append(KEY, 0, 1, 2), a.append(KEY, 1, 3, 3)):
        head.add(record)
    assert head.events == [] and head.spilled == [0, 1]
    assert (head.first_from, head.seq_nr) == (1, 3)
    head.add(a.purge(KEY, 2))
    assert head.spilled == [] and head.held_bytes == 0
