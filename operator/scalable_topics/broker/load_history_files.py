"""The load history's files: one broker's Parquet files in a date-partitioned dataset.

Layout (the load job reads it; docs/architecture.md, "Load history"):

    <location>/date=YYYY-MM-DD/<broker-id>-<first-sample-ms>-<seq>.parquet

``date`` is the UTC date of the rows' ``end``; ``first-sample-ms`` the earliest ``end`` in
the file, in milliseconds since the epoch. A file is written whole and never appended to: on
a local file system under a temporary name starting with ``.`` (which dataset readers skip)
and then renamed, on an object store in one upload, which becomes visible only when complete.
A broker recognises its own files by name and never touches another's.

Blocking I/O: the broker calls these from a worker thread.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable, Sequence
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from .load_row import LoadRow, RowKey

SCHEMA = pa.schema(
    [
        pa.field("namespace", pa.string(), nullable=False),
        pa.field("topic", pa.string(), nullable=False),
        pa.field("segment_id", pa.int64(), nullable=False),
        pa.field("broker", pa.string(), nullable=False),
        pa.field("start", pa.timestamp("us", tz="UTC"), nullable=False),
        pa.field("end", pa.timestamp("us", tz="UTC"), nullable=False),
        pa.field("msg_rate_in", pa.float64(), nullable=False),
        pa.field("msg_rate_out", pa.float64(), nullable=False),
        pa.field("byte_rate_in", pa.float64(), nullable=False),
        pa.field("byte_rate_out", pa.float64(), nullable=False),
    ]
)

_KEY_COLUMNS = ["namespace", "topic", "segment_id", "end"]
_PARTITION = re.compile(r"^date=(\d{4}-\d{2}-\d{2})$")


def open_location(location: str) -> tuple[pafs.FileSystem, str]:
    """The file system and base path of ``location``: a local directory, or a URI that
    pyarrow's file systems accept (``s3://bucket/prefix``, ``gs://...``); a ValueError names
    what is wrong."""
    if not location:
        raise ValueError("the load history location is empty")
    if "://" not in location:
        return pafs.LocalFileSystem(), Path(location).absolute().as_posix()
    try:
        filesystem, path = pafs.FileSystem.from_uri(location)
    except (pa.ArrowException, ValueError, OSError) as error:
        raise ValueError(f"the load history location {location!r} is unusable: {error}") from None
    return filesystem, path.rstrip("/")


def check_broker_id(broker: str) -> None:
    if not broker or "/" in broker or broker.startswith((".", "_")):
        raise ValueError(
            f"broker id {broker!r} cannot name load history files: it must be non-empty, "
            "contain no '/' and not start with '.' or '_'"
        )


class HistoryFiles:
    def __init__(self, filesystem: pafs.FileSystem, base: str, broker: str) -> None:
        check_broker_id(broker)
        self._fs = filesystem
        self._base = base
        self._broker = broker
        self._local = isinstance(filesystem, pafs.LocalFileSystem)
        self._own = re.compile(rf"^{re.escape(broker)}-(\d+)-(\d+)\.parquet$")
        # What a write cut short (a crash between writing and renaming) leaves behind.
        self._own_temporary = re.compile(rf"^\.{re.escape(broker)}-(\d+)-(\d+)\.parquet\.tmp$")
        self._seq = 0

    def prepare(self) -> None:
        self._fs.create_dir(self._base, recursive=True)

    def write(self, rows: Sequence[LoadRow]) -> list[str]:
        """Write ``rows`` as one new file per UTC date of their ``end``; the paths written."""
        by_date: dict[date, list[LoadRow]] = {}
        for row in rows:
            by_date.setdefault(row.end.astimezone(UTC).date(), []).append(row)
        written = []
        for day, group in sorted(by_date.items()):
            first_ms = min(int(row.end.timestamp() * 1000) for row in group)
            self._seq += 1
            path = f"{self._partition(day)}/{self._broker}-{first_ms}-{self._seq}.parquet"
            self._put(path, _table(group))
            written.append(path)
        return written

    def own_files(self, temporary: bool = False) -> list[tuple[date, str]]:
        """This broker's files (or the temporary ones it left), with their partition's date."""
        try:
            infos = self._fs.get_file_info(pafs.FileSelector(self._base, recursive=True))
        except FileNotFoundError:
            return []
        pattern = self._own_temporary if temporary else self._own
        found = []
        for info in infos:
            if info.type != pafs.FileType.File or not pattern.match(info.base_name):
                continue
            parent = info.path.rsplit("/", 2)[-2] if info.path.count("/") else ""
            match = _PARTITION.match(parent)
            if match is not None:
                found.append((date.fromisoformat(match.group(1)), info.path))
        return found

    def remove_segments(self, deleted: dict[RowKey, datetime]) -> int:
        """Remove the rows of deleted segments (those that ended at or before the deletion,
        so a segment of a topic made again under the same name keeps its own) from this
        broker's files, rewriting each affected file whole; the rows removed."""
        removed = 0
        for _, path in self.own_files():
            keys = pq.read_table(path, filesystem=self._fs, columns=_KEY_COLUMNS)
            if _rows_of(keys, deleted) is None:
                continue
            table = pq.read_table(path, filesystem=self._fs)
            drop = _rows_of(table, deleted)
            assert drop is not None
            keep = table.filter(pc.invert(drop))
            removed += table.num_rows - keep.num_rows
            if keep.num_rows == 0:
                self._fs.delete_file(path)
            else:
                self._put(path, keep)
        return removed

    def expire(self, now: datetime, retention: timedelta) -> int:
        """Delete this broker's files of every date partition wholly older than
        ``retention``; the files deleted."""
        horizon = now - retention
        deleted = 0
        emptied = set()
        for day, path in self.own_files():
            ends = datetime(day.year, day.month, day.day, tzinfo=UTC) + timedelta(days=1)
            if ends <= horizon:
                self._fs.delete_file(path)
                deleted += 1
                emptied.add(self._partition(day))
        for _, path in self.own_files(temporary=True):
            _delete_quietly(self._fs, path)
        if self._local:  # object stores have no directories to leave behind
            for directory in emptied:
                infos = self._fs.get_file_info(pafs.FileSelector(directory))
                if not infos:  # another broker's files keep it
                    self._fs.delete_dir(directory)
        return deleted

    def _partition(self, day: date) -> str:
        return f"{self._base}/date={day.isoformat()}"

    def _put(self, path: str, table: pa.Table) -> None:
        directory, name = path.rsplit("/", 1)
        if not self._local:
            pq.write_table(table, path, filesystem=self._fs)
            return
        self._fs.create_dir(directory, recursive=True)
        temporary = f"{directory}/.{name}.tmp"
        try:
            pq.write_table(table, temporary, filesystem=self._fs)
            self._fs.move(temporary, path)
        except BaseException:
            _delete_quietly(self._fs, temporary)
            raise


def _table(rows: Iterable[LoadRow]) -> pa.Table:
    listed = list(rows)
    columns = {name: [getattr(row, name) for row in listed] for name in SCHEMA.names}
    return pa.table(columns, schema=SCHEMA)


def _rows_of(table: pa.Table, deleted: dict[RowKey, datetime]) -> pa.ChunkedArray | None:
    """A mask of the rows of ``deleted`` segments in ``table``, or None when it has none."""
    mask = None
    for (namespace, topic, segment_id), at in deleted.items():
        match = pc.and_(
            pc.and_(pc.equal(table["namespace"], namespace), pc.equal(table["topic"], topic)),
            pc.and_(
                pc.equal(table["segment_id"], segment_id),
                pc.less_equal(table["end"], pa.scalar(at, type=SCHEMA.field("end").type)),
            ),
        )
        mask = match if mask is None else pc.or_(mask, match)
    if mask is None or not pc.any(mask).as_py():
        return None
    return mask


def _delete_quietly(filesystem: pafs.FileSystem, path: str) -> None:
    with contextlib.suppress(FileNotFoundError, OSError):
        filesystem.delete_file(path)
