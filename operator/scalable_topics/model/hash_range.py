"""Inclusive ranges of the 16-bit key-hash space."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Self

from .errors import InvalidHashRange
from .hashing import HASH_MAX, HASH_MIN

_HEX_RANGE = re.compile(r"^([0-9a-f]{4})-([0-9a-f]{4})$")


@dataclass(frozen=True, order=True, slots=True)
class HashRange:
    """The hashes ``start..end``, both ends included."""

    start: int
    end: int

    def __post_init__(self) -> None:
        if not (HASH_MIN <= self.start <= self.end <= HASH_MAX):
            raise InvalidHashRange(
                f"a hash range needs {HASH_MIN:#06x} <= start <= end <= {HASH_MAX:#06x}, "
                f"got start={self.start:#x} end={self.end:#x}"
            )

    @classmethod
    def full(cls) -> Self:
        return cls(HASH_MIN, HASH_MAX)

    @classmethod
    def parse(cls, text: str) -> Self:
        """Read the ``ssss-eeee`` hex form that :meth:`__str__` writes."""
        match = _HEX_RANGE.match(text)
        if match is None:
            raise InvalidHashRange(f"{text!r} is not a hash range of the form 0000-7fff")
        return cls(int(match[1], 16), int(match[2], 16))

    @property
    def size(self) -> int:
        return self.end - self.start + 1

    def contains(self, hash_value: int) -> bool:
        return self.start <= hash_value <= self.end

    def can_split(self) -> bool:
        return self.start < self.end

    def split(self) -> tuple[HashRange, HashRange]:
        """Halve at the midpoint; the lower half gets the extra hash of an odd-sized range."""
        if not self.can_split():
            raise InvalidHashRange(f"the range {self} holds one hash and cannot be split")
        mid = self.start + (self.end - self.start) // 2
        return HashRange(self.start, mid), HashRange(mid + 1, self.end)

    def is_adjacent(self, other: HashRange) -> bool:
        return self.end + 1 == other.start or other.end + 1 == self.start

    def union(self, other: HashRange) -> HashRange:
        if not self.is_adjacent(other):
            raise InvalidHashRange(f"ranges {self} and {other} are not adjacent")
        return HashRange(min(self.start, other.start), max(self.end, other.end))

    def __str__(self) -> str:
        return f"{self.start:04x}-{self.end:04x}"
