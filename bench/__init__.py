"""`kafka-journal bench`: the product measured against raw baselines of the same run.

One scenario per module (`append`, `read`, `recovery`, `replication`, `huge`, `consumer`,
`subscription`, `tail_index`, `spark`), each returning a `Section` of rows (`common`); the raw
HTTP baselines run as child processes (`raw_http`, `raw_read_http`); `report` writes
BENCHMARKS.md with PNG plots and `run` orchestrates it all. A benchmark, not a test: nothing
here fails on a missed goal.
"""
