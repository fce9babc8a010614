"""Host lists of the `KJ_*` settings (KJ_KAFKA_BOOTSTRAP, KJ_CASSANDRA_HOSTS): one parser for
`journal.settings` and `stack.settings`.

A list is comma-separated items, each `host`, `host:port` or, for an IPv6 literal, `[::1]` or
`[::1]:9042` (a bare `::1` is a host without a port). Blank items are ignored. A malformed item
raises ValueError naming it.
"""

from __future__ import annotations

HostPort = tuple[str, int | None]  # the port is None where the item names none


def host_items(raw: object) -> list[str]:
    """The list's items, stripped, blanks left out."""
    return [item.strip() for item in str(raw).split(",") if item.strip()]


def split_host_port(item: str) -> HostPort:
    """`host` or `host:port`; IPv6 literals are written `[::1]:9042`."""
    if item.startswith("["):
        host, _, rest = item[1:].partition("]")
        port = rest.removeprefix(":") or None
    elif item.count(":") == 1:
        host, port = item.split(":")
    else:
        host, port = item, None
    if not host:
        raise ValueError(f"empty host in {item!r}")
    if port is None:
        return host, None
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"bad port in {item!r}")
    return host, int(port)


def parse_hosts(raw: object) -> tuple[HostPort, ...]:
    """Every item of a list of contact points that share one port (Cassandra's: the driver
    takes one port for all hosts), so the items that name a port must name the same."""
    parsed = tuple(split_host_port(item) for item in host_items(raw))
    if len({port for _host, port in parsed if port is not None}) > 1:
        raise ValueError(f"{raw!r}: all hosts must use the same port")
    return parsed


def shared_port(hosts: tuple[HostPort, ...]) -> int | None:
    """The port the hosts name (`parse_hosts` made it one), None when none names a port."""
    return next((port for _host, port in hosts if port is not None), None)


def bootstrap_servers(raw: object) -> str:
    """A Kafka bootstrap list, normalized (`host:port,...`): every item needs its port."""
    items = host_items(raw)
    for item in items:
        if split_host_port(item)[1] is None:
            raise ValueError(f"{item!r} needs a port (host:port)")
    return ",".join(items)


def bootstrap_addresses(raw: str) -> list[tuple[str, int]]:
    """A bootstrap list's (host, port) pairs (Kafka's default port where an item names none)."""
    return [
        (host, 9092 if port is None else port)
        for host, port in map(split_host_port, host_items(raw))
    ]
