"""Real Kafka (KRaft) and Cassandra for development, tests and the demo.

Servers run as child JVMs from Maven Central jars (cached once in ~/.cache/kafka-journal/jars),
as Docker containers when KJ_STACK=docker, or are someone else's (KJ_KAFKA_BOOTSTRAP,
KJ_CASSANDRA_HOSTS) and only probed. Entry points:

    stack = Stack()            # settings from KJ_* variables
    stack.up()                 # reuse what is healthy, start the rest in parallel
    # with KJ_SECURITY=on, app.provision.stack_up(stack) also gives the journal its rights
    stack.kafka_bootstrap, stack.cassandra_hosts, stack.cassandra_port
    stack.kafka.restart()      # fault tests: one server while the other runs
    stack.kafka.nodes[1].kill9()  # with KJ_KAFKA_BROKERS=3: one node of the cluster
    stack.cassandra.nodes[1].kill9()  # with KJ_CASSANDRA_NODES=3 likewise
    stack.down()

From the shell: `kafka-journal stack up|down|status`. It needs nothing of `journal/`: only
`kjconfig` (settings, logins) and `jars`.
"""

from stack.cassandra import CassandraCluster, CassandraServer
from stack.errors import StackError
from stack.kafka import KafkaCluster, KafkaServer
from stack.server import ExternalServer, JvmServer, Server, ServerStatus
from stack.settings import StackSettings
from stack.stack import Stack

__all__ = [
    "CassandraCluster",
    "CassandraServer",
    "ExternalServer",
    "JvmServer",
    "KafkaCluster",
    "KafkaServer",
    "Server",
    "ServerStatus",
    "Stack",
    "StackError",
    "StackSettings",
]
