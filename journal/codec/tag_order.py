"""The order in which kafka-journal writes a set of tags.

Tags are a Scala `Set[String]`, written in its iteration order, and the reference vectors pin
that order byte for byte: `{"0".."4"}` is written `4, 1, 0, 2, 3`. A Scala immutable set of up
to four elements iterates in insertion order; from five on it is a CHAMP `HashSet`, which
iterates in an order fixed by the strings' hashes. A frozenset has no insertion order, so we
write the order of the Scala set built from the tags in sorted order: sorted for up to four
tags, the `HashSet` order (Scala 2.13 collections, used by both Scala 2.13 and 3) beyond.
Readers must not depend on the order; it only makes our bytes equal to kafka-journal's.
"""

from __future__ import annotations

from collections.abc import Iterable

_SMALL_SET_MAX = 4  # Scala's Set1..Set4
_BITS = 5  # CHAMP: bits of the hash consumed per trie level
_HASH_BITS = 32


def scala_set_order(tags: Iterable[str]) -> list[str]:
    ordered = sorted(set(tags))
    if len(ordered) <= _SMALL_SET_MAX:
        return ordered
    return _champ_order([(_improve(_java_string_hash(tag)), tag) for tag in ordered], 0)


def _champ_order(entries: list[tuple[int, str]], shift: int) -> list[str]:
    """Iteration order of the CHAMP trie node holding `entries` at depth `shift`."""
    if shift >= _HASH_BITS:  # equal hashes: a collision node, insertion order
        return [tag for _, tag in entries]
    buckets: dict[int, list[tuple[int, str]]] = {}
    for entry in entries:
        buckets.setdefault((entry[0] >> shift) & (2**_BITS - 1), []).append(entry)
    ordered = sorted(buckets.items())
    # A node yields its own elements first (by hash fragment), then its sub-nodes depth first.
    result = [bucket[0][1] for _, bucket in ordered if len(bucket) == 1]
    for _, bucket in ordered:
        if len(bucket) > 1:
            result.extend(_champ_order(bucket, shift + _BITS))
    return result


def _java_string_hash(text: str) -> int:
    """`String.hashCode` over UTF-16 code units, as an unsigned 32-bit value."""
    units = text.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return h


def _improve(h: int) -> int:
    """`scala.collection.Hashing.improve` on unsigned 32-bit arithmetic."""
    mask = 0xFFFFFFFF
    h = (h + (~(h << 9) & mask)) & mask
    h ^= h >> 14
    h = (h + (h << 4)) & mask
    return h ^ (h >> 10)
