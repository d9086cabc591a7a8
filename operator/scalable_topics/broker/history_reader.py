"""One topic's recent rows of the load history, read with pyarrow for ``topics load``.

Bounded: only the ``date=`` partitions the longest window touches are opened, and only the
topic's rows that end inside that window are materialised (the filter is pushed into the
Parquet scan). Files of every broker of the system are read: they all write to one location.
Blocking I/O, and pyarrow is imported with this module: the broker calls it from a worker
thread, and only when it keeps a load history.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.fs as pafs

from ..model.autoscale_config import RATE_NAMES, Rates
from ..model.rate_windows import Window, partition_dates
from ..model.window_rates import Span
from .load_history_files import SCHEMA, open_location

_RATE_COLUMNS = [field for field, _ in RATE_NAMES]


@dataclass(frozen=True, slots=True)
class TopicHistory:
    spans: list[Span]
    files: int  # the Parquet files opened


def read_topic_history(
    location: str, namespace: str, topic: str, now: datetime, longest: Window
) -> TopicHistory:
    filesystem, base = open_location(location)
    since = now - timedelta(seconds=longest.seconds)
    condition = (
        (ds.field("namespace") == namespace)
        & (ds.field("topic") == topic)
        & (ds.field("end") > pa.scalar(since, type=pa.timestamp("us", tz="UTC")))
    )
    columns = ["segment_id", "start", "end", *_RATE_COLUMNS]
    spans: list[Span] = []
    files = 0
    for day in partition_dates(now, longest):
        directory = f"{base}/date={day}"
        if filesystem.get_file_info(directory).type != pafs.FileType.Directory:
            continue  # nothing written that day
        # Names starting with "." or "_" (a write in progress) are skipped by the dataset.
        dataset = ds.dataset(directory, schema=SCHEMA, format="parquet", filesystem=filesystem)
        files += len(dataset.files)
        table = dataset.to_table(columns=columns, filter=condition)
        for row in table.to_pylist():
            if any(value is None for value in row.values()):
                continue  # the schema forbids it, but another writer may not have
            spans.append(
                Span(
                    int(row["segment_id"]),
                    row["start"],
                    row["end"],
                    Rates(*(float(row[name]) for name in _RATE_COLUMNS)),
                )
            )
    return TopicHistory(spans, files)
