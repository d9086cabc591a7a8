"""The load history as Spark reads it, and the per-segment windowed rates (Spark SQL).

The brokers write Parquet files under ``<location>/date=YYYY-MM-DD/`` (the UTC date of the
rows' ``end``), each row one sample covering exactly [start, end]. A run reads only the date
partitions its longest window touches, and only rows that end inside it. Per segment and
window W ending at the run's time ``now``, a rate is the time-weighted average

    sum(rate_i * overlap_i) / sum(overlap_i),  overlap_i = |[start_i, end_i] ∩ [now - W, now]|

divided by the time the history covers, not by W, so a young segment is not diluted by the
time before it existed; a window the history does not cover has no value.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..model.autoscale_config import RATE_NAMES, Rates
from ..model.rate_windows import Window, partition_dates
from .policy_input import SegmentWindows

# The columns the brokers write, in their order, and the partition column.
RATE_COLUMNS = tuple(field for field, _ in RATE_NAMES)
HISTORY_SCHEMA = T.StructType(
    [
        T.StructField("namespace", T.StringType()),
        T.StructField("topic", T.StringType()),
        T.StructField("segment_id", T.LongType()),
        T.StructField("broker", T.StringType()),
        T.StructField("start", T.TimestampType()),
        T.StructField("end", T.TimestampType()),
        *(T.StructField(name, T.DoubleType()) for name in RATE_COLUMNS),
        T.StructField("date", T.StringType()),
    ]
)
_KEY = ("namespace", "topic", "segment_id")
_THRESHOLDS_SCHEMA = T.StructType(
    [
        T.StructField("namespace", T.StringType()),
        T.StructField("topic", T.StringType()),
        *(T.StructField(f"merge_{name}", T.DoubleType()) for name in RATE_COLUMNS),
    ]
)


@dataclass(frozen=True, slots=True)
class TopicThresholds:
    namespace: str
    topic: str
    merge: Rates


@dataclass(frozen=True, slots=True)
class HistoryRates:
    segments: list[SegmentWindows]
    rows: int  # the history rows inside the longest window


def read_history(spark: SparkSession, location: str, now: datetime, longest: Window) -> DataFrame:
    """The rows that end inside the longest window, reading only its date partitions; an
    empty frame when nothing has been written yet."""
    if _missing_local_directory(location):
        return spark.createDataFrame([], HISTORY_SCHEMA)  # without Spark's warning and trace
    try:
        frame = spark.read.schema(HISTORY_SCHEMA).parquet(location)
    except AnalysisException as error:
        if error.getCondition() == "PATH_NOT_FOUND":
            return spark.createDataFrame([], HISTORY_SCHEMA)
        raise
    since = now - timedelta(seconds=longest.seconds)
    return frame.where(F.col("date").isin(partition_dates(now, longest))).where(
        F.col("end") > F.lit(since)
    )


def _missing_local_directory(location: str) -> bool:
    parts = urlsplit(location)
    if parts.scheme not in ("", "file"):
        return False  # an object store: Spark finds out
    return not os.path.isdir(parts.path if parts.scheme else location)


def _seconds(column: str) -> Column:
    return F.unix_micros(F.col(column)) / F.lit(1e6)


def _valid_rates() -> Column:
    # NaN compares above every number in Spark, so "< inf" refuses NaN and infinity alike.
    checks = [(F.col(name) >= 0) & (F.col(name) < F.lit(float("inf"))) for name in RATE_COLUMNS]
    condition = checks[0]
    for check in checks[1:]:
        condition = condition & check
    present = [F.col(name).isNotNull() for name in ("segment_id", "start", "end")]
    return condition & present[0] & present[1] & present[2]


def _overlap(now_s: float, window: Window) -> Column:
    start, end = _seconds("start"), _seconds("end")
    covered = F.least(end, F.lit(now_s)) - F.greatest(start, F.lit(now_s - window.seconds))
    return F.greatest(F.lit(0.0), covered)


def windowed_rates(
    spark: SparkSession,
    history: DataFrame,
    thresholds: Sequence[TopicThresholds],
    windows: tuple[Window, ...],
    now: datetime,
) -> HistoryRates:
    """Per segment of the given topics: every window's rates and the cold-since inputs."""
    if not thresholds:
        return HistoryRates([], 0)
    limits = spark.createDataFrame(
        [
            (t.namespace, t.topic, *(float(getattr(t.merge, n)) for n in RATE_COLUMNS))
            for t in thresholds
        ],
        _THRESHOLDS_SCHEMA,
    )
    now_s = now.timestamp()
    ordered = sorted(windows)
    rows = history.where(_valid_rates()).join(F.broadcast(limits), ["namespace", "topic"])
    aggregates: list[Column] = [F.count(F.lit(1)).alias("rows")]
    for index, window in enumerate(ordered):
        overlap = _overlap(now_s, window)
        aggregates.append(F.sum(overlap).alias(f"covered_{index}"))
        aggregates += [
            F.sum(F.col(name) * overlap).alias(f"{name}_{index}") for name in RATE_COLUMNS
        ]
    in_longest = _overlap(now_s, ordered[-1]) > 0
    hot = F.lit(False)
    for name in RATE_COLUMNS:
        hot = hot | (F.col(name) > F.col(f"merge_{name}"))
    aggregates.append(F.max(F.when(in_longest & hot, F.unix_micros("end"))).alias("hot_end"))
    aggregates.append(F.min(F.when(in_longest, F.unix_micros("start"))).alias("first_start"))
    collected = rows.groupBy(*_KEY).agg(*aggregates).collect()
    segments = [_segment(row.asDict(), ordered) for row in collected]
    return HistoryRates(segments, sum(int(row["rows"]) for row in collected))


def _segment(row: dict[str, Any], windows: Iterable[Window]) -> SegmentWindows:
    rates: dict[str, Rates] = {}
    for index, window in enumerate(windows):
        covered = row[f"covered_{index}"]
        if not isinstance(covered, float) or covered <= 0:
            continue  # no coverage in this window: no value
        weighted = [row[f"{name}_{index}"] for name in RATE_COLUMNS]
        rates[window.label] = Rates(*(float(w) / covered for w in weighted))
    return SegmentWindows(
        namespace=str(row["namespace"]),
        topic=str(row["topic"]),
        segment_id=int(row["segment_id"]),
        rates=rates,
        last_hot_end=_time(row["hot_end"]),
        first_start=_time(row["first_start"]),
    )


def _time(micros: int | None) -> datetime | None:
    if micros is None:
        return None
    return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=int(micros))
