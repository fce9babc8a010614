"""A three-node Kafka cluster of the stack's (KJ_KAFKA_BROKERS=3) on free ports in a directory
of its own: for the tests that kill brokers and the bench that compares it with one broker."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from stack import KafkaCluster, StackSettings
from stack.progress import no_progress


def free_node_ports() -> tuple[int, int]:
    """A broker and a controller base port whose +0/+2/+4 are all free now."""
    for _attempt in range(50):
        bases = [_ephemeral_port(), _ephemeral_port()]
        wanted = {base + step for base in bases for step in (0, 2, 4)}
        if len(wanted) == 6 and max(wanted) < 65536 and all(_bindable(p) for p in wanted):
            return bases[0], bases[1]
    raise RuntimeError("no six free ports found")


def _ephemeral_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _bindable(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


@contextmanager
def three_nodes(stack_dir: Path) -> Iterator[KafkaCluster]:
    """Three KRaft nodes (each broker and controller) started in `stack_dir`, stopped at exit
    (and tied to this process: they go if it dies)."""
    broker, controller = free_node_ports()
    settings = StackSettings.from_env(
        {
            "KJ_STACK_DIR": str(stack_dir),
            "KJ_KAFKA_BROKERS": "3",
            "KJ_KAFKA_PORT": str(broker),
            "KJ_KAFKA_CONTROLLER_PORT": str(controller),
            "KJ_KAFKA_HEAP": "256m",
        }
    )
    nodes = KafkaCluster(settings, progress=no_progress, tie_to_parent=True)
    try:
        assert nodes.start() is True
        yield nodes
    finally:
        nodes.stop()
        assert nodes.pid() is None, "a node outlived stop"
