"""Subscriptions: every accepted event of a topic in log order, resumable from a position
(`subscription`), and subscription groups that share a topic's partitions and resume at a
committed checkpoint (`groups`).

May import `journal.kafka`, `journal.store`, `journal.codec`, `journal.core` and the shared
modules; never `journal.client` or `journal.replication`.
"""
