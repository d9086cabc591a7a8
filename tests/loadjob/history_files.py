"""Load history files as the brokers write them: Parquet under date=YYYY-MM-DD/ (the UTC date
of the rows' end), exactly the brokers' schema. The load job's tests write their own."""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

SCHEMA = pa.schema(
    [
        ("namespace", pa.string()),
        ("topic", pa.string()),
        ("segment_id", pa.int64()),
        ("broker", pa.string()),
        ("start", pa.timestamp("us", tz="UTC")),
        ("end", pa.timestamp("us", tz="UTC")),
        ("msg_rate_in", pa.float64()),
        ("msg_rate_out", pa.float64()),
        ("byte_rate_in", pa.float64()),
        ("byte_rate_out", pa.float64()),
    ]
)
_sequence = itertools.count()


@dataclass(frozen=True)
class Sample:
    """One history row: a segment's four rates over exactly [start, end]."""

    topic: str
    segment_id: int
    start: datetime
    end: datetime
    msg_rate_in: float = 0.0
    msg_rate_out: float = 0.0
    byte_rate_in: float = 0.0
    byte_rate_out: float = 0.0
    namespace: str = "default"
    broker: str = "broker-0"


def table(samples: Iterable[Sample]) -> pa.Table:
    rows = list(samples)
    return pa.table(
        {name: [getattr(s, name) for s in rows] for name in SCHEMA.names}, schema=SCHEMA
    )


def write_history(location: Path, samples: Iterable[Sample], broker: str = "broker-0") -> None:
    """One file per date partition, named as a broker names its files."""
    by_date: defaultdict[str, list[Sample]] = defaultdict(list)
    for sample in samples:
        by_date[sample.end.date().isoformat()].append(sample)
    for date, rows in by_date.items():
        write_file(location / f"date={date}", rows, broker)


def write_file(directory: Path, rows: list[Sample], broker: str = "broker-0") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    first_ms = int(min(s.start for s in rows if s.start is not None).timestamp() * 1000)
    path = directory / f"{broker}-{first_ms}-{next(_sequence)}.parquet"
    pq.write_table(table(rows), path)
    return path
