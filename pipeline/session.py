"""The SparkSession the pipeline's jobs run on.

Contract: `spark_session(options)` returns a session with Spark's Kafka source on its
classpath (`spark.jars`, see `pipeline.jars`: Spark ships them to a cluster's executors too),
UTC as its SQL time zone and small shuffles. For a master on this machine (`local`, `local[N]`,
`local[*]`, or a standalone `spark://` master on a loopback address, as `kafka-journal stack up`
starts with KJ_SPARK=standalone) the driver binds 127.0.0.1 and the Python workers run this
interpreter, unless PYSPARK_PYTHON says otherwise; a standalone worker's executors also get
this checkout on their PYTHONPATH, as they inherit the worker's environment, not the driver's.
For any other cluster all that is the cluster's business (its Python needs this project).

Spark reads `spark.jars` and the driver's addresses only when the process's first
SparkContext starts: `getOrCreate` hands back a running session unchanged (its `conf.get`
then even shows the new `spark.jars`, which were not loaded). So a session that is already
running without the Kafka source is refused with an error instead of failing later. Stopping
it does not help: a later session of the same process (the same JVM) still finds no Kafka
source (Spark 4.3.0, checked). One session per process, built here first.
"""

from __future__ import annotations

import ipaddress
import os
import sys
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import SparkSession

from jars import Progress, no_progress
from pipeline.jars import kafka_source_jars

PROJECT_ROOT = Path(__file__).resolve().parents[1]  # where `pipeline` and `journal` are found


@dataclass(frozen=True, slots=True)
class SparkOptions:
    master: str = "local[*]"
    app_name: str = "kafka-journal"
    shuffle_partitions: int = 8
    ui: bool = False
    log_level: str = "WARN"
    conf: Mapping[str, str] = field(default_factory=dict)  # anything else, applied last
    jar_cache: Path | None = None  # default: the stack's jar cache

    @property
    def local(self) -> bool:
        return self.master == "local" or self.master.startswith("local[")

    @property
    def on_this_machine(self) -> bool:
        """A local master, or a standalone one on a loopback address: the driver, the
        executors and their Python workers all run here."""
        if self.local:
            return True
        if not self.master.startswith("spark://"):
            return False
        host = urllib.parse.urlsplit(self.master).hostname or ""
        if host == "localhost":
            return True
        try:
            return ipaddress.ip_address(host).is_loopback
        except ValueError:
            return False


class SessionMismatch(RuntimeError):
    """A SparkSession already runs in this process without Spark's Kafka source."""


def spark_session(options: SparkOptions, progress: Progress = no_progress) -> SparkSession:
    """A session as the contract says; builds it, or reuses the running one if it fits."""
    jars = [str(jar) for jar in kafka_source_jars(options.jar_cache, progress)]
    if options.on_this_machine:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # else it warns and binds eth0
    builder = (
        SparkSession.builder.master(options.master)
        .appName(options.app_name)
        .config("spark.jars", ",".join(jars))
        .config("spark.sql.shuffle.partitions", str(options.shuffle_partitions))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", str(options.ui).lower())
        .config("spark.ui.showConsoleProgress", "false")
    )
    if options.on_this_machine:
        builder = builder.config("spark.driver.host", "127.0.0.1").config(
            "spark.driver.bindAddress", "127.0.0.1"
        )
    if options.on_this_machine and not options.local:
        builder = builder.config("spark.executorEnv.PYTHONPATH", str(PROJECT_ROOT))
    for name, value in options.conf.items():
        builder = builder.config(name, value)
    session: SparkSession = builder.getOrCreate()
    loaded = session.sparkContext.getConf().get("spark.jars", "") or ""
    missing = [jar for jar in jars if jar not in loaded]
    if missing:
        raise SessionMismatch(
            "a SparkSession already runs in this process without Spark's Kafka source "
            f"({', '.join(Path(m).name for m in missing)}); stop it first"
        )
    session.sparkContext.setLogLevel(options.log_level)
    return session
