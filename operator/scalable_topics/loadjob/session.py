"""The job's SparkSession: small shuffles (a run aggregates one row per segment), UTC."""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import SparkSession

# A run groups a few thousand segments: Spark's default of 200 shuffle partitions would be
# 200 near-empty tasks.
SETTINGS: Mapping[str, str] = {
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.session.timeZone": "UTC",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
}


def spark_session(master: str | None, app_name: str = "scalable-topics-load") -> SparkSession:
    """A session on ``master``, or the one spark-submit configured when None."""
    builder = SparkSession.builder.appName(app_name)
    if master is not None:
        builder = builder.master(master)
    for key, value in SETTINGS.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark
