"""Writing to and reading from Kafka: producing actions (`producer`, `group_commit`, `writer`),
reading them (`consumers`, `records`, `keys`, `poison`, `tail`), the fence a read stops at
(`fence`), a head folded from them (`head`), the topic (`topic`), and the one mapping of
aiokafka's errors to the core's (`driver_errors`). Replication and subscriptions, which read
Kafka too, are rooms of their own above this one (`journal.replication`,
`journal.subscriptions`).

May import `journal.core`, `journal.codec`, `journal.store.base` (the store as indexes see it),
the shared modules (`errors`, `metrics`, `version`) and `kjconfig`; never `journal.client`,
`journal.replication` or `journal.subscriptions`. Nothing above `journal/` needs aiokafka's
errors: they end here.
"""
