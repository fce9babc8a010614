"""Replication into the eventual store: the `Replicator` that folds a partition's records onto
the stored rows and moves the store's pointer (`replicate`), the quarantine of records that
cannot be replicated (`quarantine`), and replication's lag per partition (`lag`).

May import `journal.kafka`, `journal.store`, `journal.codec`, `journal.core` and the shared
modules; never `journal.client` or `journal.subscriptions`.
"""
