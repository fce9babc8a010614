"""The "Read (recovery)" scenario's sizing (its measurements run in `kafka-journal bench`): its
direct client's tail index holds every journal the scenario writes."""

from __future__ import annotations

from bench.read import METHOD, OTHER_JOURNALS, READ_JOURNALS, ReadSizes, read_settings
from journal.kafka import DEFAULT_TAIL_MAX_JOURNALS
from journal.settings import Settings


def test_the_clients_tail_index_holds_every_journal_the_scenario_writes() -> None:
    # at the default bound the pile's journals alone filled the index (issue 42): the stopped
    # journal's last append went unindexed and the scenario waited out its 600 s
    default = Settings().replace(tail_max_journals=DEFAULT_TAIL_MAX_JOURNALS)
    assert default.tail_max_journals < READ_JOURNALS
    assert read_settings(default).tail_max_journals >= READ_JOURNALS
    larger = default.replace(tail_max_journals=3 * READ_JOURNALS)
    assert read_settings(larger).tail_max_journals == 3 * READ_JOURNALS  # never lowered
    assert read_settings(default).topic == default.topic


def test_the_method_says_the_journals_and_the_bound() -> None:
    method = ReadSizes(20_000, 1_000_000, 100).method(METHOD)
    assert f"{OTHER_JOURNALS:,} other journals" in method
    assert f"{READ_JOURNALS:,}" in method and "KJ_TAIL_MAX_JOURNALS" in method
