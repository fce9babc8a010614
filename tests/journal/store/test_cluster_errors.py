"""The driver's connection errors as the store's: a refused login is told from an outage."""

from __future__ import annotations

from cassandra import AuthenticationFailed
from cassandra.cluster import NoHostAvailable

from journal.store.cluster import login_refused


def test_a_refused_login_is_found_in_the_drivers_dict_or_list_of_errors() -> None:
    refused = AuthenticationFailed("bad credentials")
    assert login_refused(NoHostAvailable("x", {"127.0.0.1:9042": refused}))
    assert login_refused(NoHostAvailable("x", [refused]))
    assert not login_refused(NoHostAvailable("x", {"127.0.0.1:9042": ConnectionRefusedError()}))
    assert not login_refused(NoHostAvailable("x", [ConnectionRefusedError()]))
    assert not login_refused(NoHostAvailable("x", None))
