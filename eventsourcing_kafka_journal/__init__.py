"""Kafka Journal as a persistence module of the `eventsourcing` library.

`PERSISTENCE_MODULE=eventsourcing_kafka_journal` selects `Factory`, the module's one
InfrastructureFactory. Settings are the project's (`KJ_KAFKA_BOOTSTRAP`, `KJ_CASSANDRA_HOSTS`,
`KJ_TOPIC`, `KJ_KEYSPACE`, ... as in journal/settings.py, plus `KJ_RECORDER_TIMEOUT_S` and
`KJ_TRACKING_GROUP`), looked up through the library's Environment, so an application's
prefixed variables win; topic and keyspace default from the application's name.

Decisions:

- **One topic per application, one partition.** Its offsets are a total order of everything the
  application recorded. An aggregate is a journal (id `str(originator_id)`, wire.py); its events
  are one Append per insert, so an aggregate's part of an insert is all or nothing.
- **Notification ids** number the events of the topic's subscription (the Appends the one fold
  accepted, in offset order; log.py) 1, 2, 3, ...; a rejected Append takes none. So ids are
  contiguous and strictly increasing, known once Kafka acknowledged the record and the fold
  accepted it; the library's contiguity expectation holds. The numbering is an index in
  Cassandra (each record's first id), extended by inserts, so a read starts at the record of
  its first id: no fold from offset 0, nothing in memory per notification.
- **A taken version is refused before producing**: the conditional append (journal/
  conditional.py) looks at the journal through the reading flow, produces only if the insert
  continues it, and takes the fold's verdict of its own record; `SeqNrConflict` becomes the
  library's IntegrityError. An insert spanning several aggregates first looks at every one of
  them and produces nothing if any clashes. Atomic under concurrent writers: each aggregate's
  part. Not atomic: several aggregates together when a rival writes one of them between the
  look and our record; the earlier parts stay recorded and the insert raises IntegrityError
  saying so. Kafka transactions would not help here: each record's acceptance is still its own
  journal's fold, and the project's readers read uncommitted records.
- **Tracking** (tracking and process recorders): the position travels in the headers of the
  records of the events it was recorded with, so events and position are accepted or rejected
  together as one record by the one fold (atomic for an aggregate's events; with several
  aggregates each record carries it). A position without events is an Append to the journal
  `eventsourcing.tracking:<application>`. `max_tracking_id` is a Cassandra row per upstream
  application (its highest as of an offset, saved once an insert is accepted) plus the
  accepted records after that offset, usually none (tracking.py): no scan of the log per call.
  A lower or equal position is refused before producing (IntegrityError); two writers racing
  with the same position and different aggregates may both be accepted.
- **Snapshots** are the journals' snapshots (journal/client/snapshots.py): an aggregate's snapshot
  at version v is its journal's at v's seqNr (wire.seq_nr_of, the events' mapping), so the log
  orders puts and a Purge removes them. A taken version is replaced, not refused (the SQL
  modules' IntegrityError): a snapshot at v is a function of the events up to v. Every select
  pattern is supported: the library's (newest at or below a version: desc, limit 1) is one
  `latest`; the rest (`app.snapshots.get(id)`, ascending) walk down, one `latest` per snapshot
  (snapshots.py).
- **Instances of one follower take turns through a subscription group** (group.py): with
  `KJ_TRACKING_GROUP` in the upstream application's environment (the runner's), its
  recorder's `subscribe` joins that group over the upstream's topic. One partition, so one
  instance at a time is handed notifications and the others stand by; a group rather than a
  lock because the group also keeps the checkpoint a successor starts from, and notices a dead
  instance. A notification is acknowledged when the reader asks for the next one (its
  processing returned); a handover waits for the one in hand, so each is processed once.
  After a crash the downstream's tracking refuses what is delivered again (IntegrityError):
  never processed twice, but that runner stops.
- **Sync to async**: a factory runs one event loop on one thread (bridge.py); every recorder
  call runs a coroutine there and waits. `Factory.close` stops the subscriptions, the clients,
  the loop and its thread.

Seam: `log.NotificationSource`.
"""

from eventsourcing_kafka_journal.factory import Factory

__all__ = ["Factory"]
