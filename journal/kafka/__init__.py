"""Everything that talks to Kafka: producing actions (`producer`, `group_commit`, `writer`),
reading them (`consumers`, `records`, `keys`, `poison`, `tail`, `subscription`), the fence a
read stops at (`fence`), a head folded from them (`head`), the topic (`topic`) and the guard
of its partition count (`guard`), replication into the store (`replicate`, `lag`), and the one
mapping of aiokafka's errors to the core's (`driver_errors`).

May import `journal.core`, `journal.codec`, `journal.store.base` (the store as replication and
indexes see it), the shared modules (`errors`, `metrics`, `version`) and `kjconfig`; never
`journal.client`. Nothing above `journal/` needs aiokafka's errors: they end here.
"""
