"""The hash both ends of a namespace watch keep of a set of topic names.

CRC32C over the UTF-8 names in sorted order, each followed by a newline. The newline keeps
the hash of a set from being the hash of another whose names concatenate to the same text
(``{"ab", "c"}`` and ``{"a", "bc"}``); topic names never contain one. It is 32 bits: a
reconnect whose set differs and hashes the same (odds of 1 in 2**32) keeps the client's old
set until the next change, which is why a client never sends a hash it did not compute from a
complete snapshot and the diffs that followed it.
"""

from __future__ import annotations

from collections.abc import Iterable

from crc32c import crc32c


def topic_set_hash(names: Iterable[str]) -> int:
    checksum = 0
    for name in sorted(names):
        checksum = crc32c(name.encode() + b"\n", checksum)
    return checksum
