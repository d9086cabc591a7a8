"""The load history's files: the layout and schema the load job reads, whole-file writes, the
rows of deleted segments removed, expired dates deleted, another broker's files untouched."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pytest

from scalable_topics.broker.load_history_files import SCHEMA, HistoryFiles, open_location
from scalable_topics.broker.load_row import LoadRow

T0 = datetime(2026, 11, 25, 23, 59, 50, tzinfo=UTC)  # ten seconds before midnight


def row(segment_id: int, end: datetime, topic: str = "orders", rate: float = 1.0) -> LoadRow:
    return LoadRow("ns", topic, segment_id, "b-1", end - timedelta(seconds=10), end, rate, 0, 0, 0)


def files_of(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def read(root: Path) -> list[dict[str, object]]:
    dataset = ds.dataset(str(root), format="parquet", partitioning="hive")
    return sorted(
        dataset.to_table().to_pylist(), key=lambda r: (r["segment_id"], r["end"], r["topic"])
    )


def test_rows_are_written_per_date_with_the_schema_and_read_back(tmp_path: Path) -> None:
    files = HistoryFiles(*open_location(str(tmp_path)), "b-1")
    rows = [row(0, T0), row(1, T0), row(0, T0 + timedelta(seconds=10), rate=2.5)]
    written = files.write(rows)
    assert len(written) == 2
    first_ms = int(T0.timestamp() * 1000)
    midnight_ms = first_ms + 10_000
    assert files_of(tmp_path) == [
        f"date=2026-11-25/b-1-{first_ms}-1.parquet",
        f"date=2026-11-26/b-1-{midnight_ms}-2.parquet",
    ]
    table = ds.dataset(str(tmp_path / "date=2026-11-26"), format="parquet").to_table()
    assert table.schema.equals(SCHEMA)
    back = read(tmp_path)
    assert [(r["segment_id"], r["end"], r["msg_rate_in"]) for r in back] == [
        (0, T0, 1.0),
        (0, T0 + timedelta(seconds=10), 2.5),
        (1, T0, 1.0),
    ]
    assert str(back[0]["date"]) == "2026-11-25"


def test_removal_rewrites_only_own_files_and_keeps_a_later_segment_of_the_same_name(
    tmp_path: Path,
) -> None:
    mine = HistoryFiles(*open_location(str(tmp_path)), "b-1")
    other = HistoryFiles(*open_location(str(tmp_path)), "b")  # a prefix of b-1's name
    mine.write([row(0, T0), row(1, T0), row(2, T0, topic="other")])
    mine.write([row(0, T0 + timedelta(hours=1))])  # the topic made again later
    other.write([row(0, T0)])
    removed = mine.remove_segments({("ns", "orders", 0): T0 + timedelta(minutes=1)})
    assert removed == 1
    left = [(r["broker"], r["topic"], r["segment_id"], r["end"]) for r in read(tmp_path)]
    assert sorted(left) == sorted(
        [
            ("b-1", "orders", 1, T0),
            ("b-1", "other", 2, T0),
            ("b-1", "orders", 0, T0 + timedelta(hours=1)),
            ("b-1", "orders", 0, T0),  # b's row: not this broker's file
        ]
    )
    assert not [name for name in files_of(tmp_path) if name.endswith(".tmp")]
    # A file left with no rows is deleted.
    mine.remove_segments({("ns", "orders", 0): T0 + timedelta(days=1)})
    assert len([f for f in files_of(tmp_path) if "/b-1-" in f]) == 1


def test_expiry_deletes_whole_old_dates_of_own_files_only(tmp_path: Path) -> None:
    mine = HistoryFiles(*open_location(str(tmp_path)), "b-1")
    other = HistoryFiles(*open_location(str(tmp_path)), "b-2")
    mine.write([row(0, T0), row(0, T0 + timedelta(seconds=10))])
    other.write([row(0, T0)])
    leftover = tmp_path / "date=2026-11-26" / f".b-1-{int(T0.timestamp() * 1000)}-9.parquet.tmp"
    leftover.write_bytes(b"cut short")
    # 25 Nov ends at midnight: with one day kept it expires at midnight on the 27th.
    assert mine.expire(datetime(2026, 11, 26, 23, tzinfo=UTC), timedelta(days=1)) == 0
    assert mine.expire(datetime(2026, 11, 27, 0, tzinfo=UTC), timedelta(days=1)) == 1
    assert files_of(tmp_path) == [
        f"date=2026-11-25/b-2-{int(T0.timestamp() * 1000)}-1.parquet",
        f"date=2026-11-26/b-1-{int(T0.timestamp() * 1000) + 10_000}-2.parquet",
    ]
    other.expire(datetime(2026, 11, 27, 0, tzinfo=UTC), timedelta(days=1))
    assert not (tmp_path / "date=2026-11-25").exists()  # emptied: removed


def test_a_bad_location_or_broker_id_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="nosuch://x"):
        open_location("nosuch://x")
    with pytest.raises(ValueError, match="broker id 'a/b'"):
        HistoryFiles(pafs.LocalFileSystem(), str(tmp_path), "a/b")
