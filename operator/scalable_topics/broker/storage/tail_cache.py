"""The newest durable entries of a log, kept in memory for readers that follow the tail."""

from __future__ import annotations

from .log_file import LogEntry


class TailCache:
    """Consecutive entries up to the log's last one, at most ``capacity_bytes`` of payload."""

    def __init__(self, capacity_bytes: int) -> None:
        self._capacity = capacity_bytes
        self._entries: list[LogEntry] = []
        self._head = 0  # entries before it are evicted; the list is compacted now and then
        self._bytes = 0

    def add(self, entry: LogEntry) -> None:
        """Add the entry after the newest one."""
        self._entries.append(entry)
        self._bytes += len(entry.payload)
        while self._bytes > self._capacity and self._head < len(self._entries):
            self._bytes -= len(self._entries[self._head].payload)
            self._head += 1
        if self._head > len(self._entries) // 2:
            del self._entries[: self._head]
            self._head = 0

    def read(self, from_entry_id: int, max_entries: int, max_bytes: int) -> list[LogEntry] | None:
        """Entries from ``from_entry_id`` as a log read returns them, or None when the cache
        does not reach back to it."""
        if self._head >= len(self._entries):
            return None
        first = self._entries[self._head].entry_id
        if from_entry_id < first:
            return None
        entries: list[LogEntry] = []
        total = 0
        at = self._head + from_entry_id - first
        for entry in self._entries[at : at + max_entries]:
            total += len(entry.payload)
            if entries and total > max_bytes:
                break
            entries.append(entry)
        return entries
