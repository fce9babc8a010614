"""`kafka-journal bench`: the product measured against raw baselines of the same run.

One scenario per module (`append`, `read`, `replication`, `huge`, `consumer`, `spark`), each
returning a `Section` of rows (`common`); `report` writes BENCHMARKS.md with PNG plots and
`run` orchestrates it all. A benchmark, not a test: nothing here fails on a missed goal.
"""
