"""`app.forwarding.Owners.workers`: the group's workers and their partitions, from the Faust
assignor's table metadata as `Owners.owner_of` reads it (a stand-in for Faust's router)."""

from __future__ import annotations

from types import SimpleNamespace

from app.forwarding import Owners
from tables.partitions import OwnedPartitions


class Router:
    def __init__(self, metadata: dict[str, dict[str, list[int]]] | None) -> None:
        self._metadata = metadata

    def table_metadata(self, table: str) -> dict[str, dict[str, list[int]]]:
        if self._metadata is None:
            raise KeyError(table)  # no such table (yet)
        return self._metadata


def owners(metadata: dict[str, dict[str, list[int]]] | None) -> Owners:
    app = SimpleNamespace(router=Router(metadata))
    return Owners(app, OwnedPartitions(), "appends", 4, "http://b:6066")


def test_each_worker_with_its_partitions_by_url() -> None:
    found = owners(
        {
            "http://b:6066": {"changelog": [3, 1]},
            "http://a:6066": {"changelog": [2, 0]},
        }
    ).workers()
    assert found == {"http://a:6066": (0, 2), "http://b:6066": (1, 3)}
    assert list(found) == ["http://a:6066", "http://b:6066"]


def test_no_workers_before_the_first_assignment() -> None:
    assert owners({}).workers() == {}
    assert owners(None).workers() == {}
