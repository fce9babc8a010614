"""Kafka Journal's configuration, below `journal/` and `stack/`, which both import it; it
imports neither.

- `kjconfig.settings`: the one `KJ_*` settings loader (`KJSettings`), `SettingsError`.
- `kjconfig.access`: how to reach and log in to Kafka and Cassandra (`KafkaAccess`,
  `CassandraLogin`), the principals and the local stack's dev passwords.
- `kjconfig.hosts`: the host lists' parser (`host[:port],...`) both settings use.
- `kjconfig.errors`: the error root `JournalError` (re-exported by `journal.errors`).
"""
