"""Where a message sits in a segment: its log entry and its index within the producer batch."""

from __future__ import annotations

from typing import Final, NamedTuple

# Every batch index is below this: a batch is a msgpack array, which holds fewer than 2^32
# items. The broker packs a position into one int on that promise (dispatch/pending.py), so an
# index a client names must be checked against it before it reaches a dispatcher.
BATCH_INDEX_LIMIT: Final = 2**32


class Position(NamedTuple):
    """``entry_id`` numbers the segment log's records from 0; a producer batch is one record
    and ``batch_index`` picks one message out of it (0 for a message sent alone).

    A NamedTuple, not a dataclass: positions are compared, hashed and created for every
    message dispatched and acknowledged, and tuple operations run in C. Both parts are
    non-negative; the wire codec and the cursor check that at the boundaries.
    """

    entry_id: int
    batch_index: int = 0

    def __str__(self) -> str:
        return f"{self.entry_id}:{self.batch_index}"
