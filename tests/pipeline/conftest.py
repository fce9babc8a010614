"""One SparkSession for the whole test session: local[2], small shuffles, loopback only."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from pipeline.session import SparkOptions, spark_session

SPARK_OPTIONS = SparkOptions(
    master="local[2]", app_name="kafka-journal-tests", shuffle_partitions=4
)


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    session = spark_session(SPARK_OPTIONS)
    try:
        yield session
    finally:
        session.stop()
