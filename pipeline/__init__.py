"""Batch jobs on Spark: rebuild Cassandra from Kafka, audit one against the other, export.

Modules, one concept each:
- `jars`: Spark's Kafka source, resolved from Maven Central once and cached.
- `session`: the SparkSession these jobs run on (`local[*]` or a cluster's master).
- `offsets`: which offsets of the action topic a job reads (driver side).
- `source`: the action topic as a DataFrame, and its rows as the core's `RawRecord`s.
- `tasks`: running the core's asyncio code with a Cassandra store inside an executor.
- `rebuild`, `audit`, `export`: the jobs; `report`: their progress lines and counts.
- `commands`: `kafka-journal pipeline rebuild|audit|export`, a program of its own; `cli`: the
  jobs behind it; `bench`: rebuild throughput.

Nothing in `journal/` imports PySpark: the jobs call the core (the same `Replicator` the
agents run), never the other way round.
"""
