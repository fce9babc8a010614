"""The tail index's filter of forgotten journals ages: its false positives stay under the
documented 1% however many ids pass through, and it never says "no" to an id of the last
generation (journal/kafka/tail.py)."""

from __future__ import annotations

import random

from journal.kafka.tail import ForgottenJournals

CAPACITY = 1_000


def _ids(rng: random.Random, count: int) -> list[bytes]:
    return [rng.randbytes(12).hex().encode() for _ in range(count)]


def test_after_ten_times_its_capacity_false_positives_stay_under_one_percent() -> None:
    rng = random.Random(43)
    forgotten = ForgottenJournals(CAPACITY)
    added = _ids(rng, 10 * CAPACITY)
    for raw_key in added:
        forgotten.add(raw_key)
    never = _ids(rng, 20_000)  # 24 random hex digits: none of them was added
    rate = sum(raw_key in forgotten for raw_key in never) / len(never)
    assert rate < 0.01
    # the ids of the current generation (the last ones added) are all still known
    assert all(raw_key in forgotten for raw_key in added[-CAPACITY // 2 :])


def _add_new(rng: random.Random, forgotten: ForgottenJournals, count: int) -> list[bool]:
    """Add `count` ids the filter does not hold yet (a false "yes" would not be counted, and
    the test would then depend on which ids the seed drew): what each `add` answered."""
    answers: list[bool] = []
    while len(answers) < count:
        (raw_key,) = _ids(rng, 1)
        if raw_key not in forgotten:
            answers.append(forgotten.add(raw_key))
            assert raw_key in forgotten
    return answers


def test_add_says_when_it_dropped_a_generation_and_not_for_an_id_it_holds() -> None:
    rng = random.Random(7)
    forgotten = ForgottenJournals(CAPACITY)
    first = _ids(rng, 1)
    assert not forgotten.add(first[0])
    assert not any(_add_new(rng, forgotten, CAPACITY - 1))  # one generation full: none dropped
    assert not forgotten.add(first[0])  # held already: not counted
    # the first becomes the previous generation: still nothing dropped
    assert not any(_add_new(rng, forgotten, CAPACITY))
    assert first[0] in forgotten
    assert _add_new(rng, forgotten, 2) == [True, False]  # the first generation goes
