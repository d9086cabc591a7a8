"""A checkpoint consumer's position: an opaque value the application stores and seeks back to.

It holds the layout epoch it was taken at, a *watermark* (every segment with a lower id
existed then) and, per segment the consumer read, the next message to read. A segment with an
id at or above the watermark was made later (by a split or merge) and is read from its
beginning after a seek; one below it that the checkpoint does not name was fully consumed.
The bytes are versioned JSON.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..protocol import MessageId

FORMAT_VERSION = 1


@dataclass(frozen=True)
class Checkpoint:
    epoch: int
    watermark: int
    positions: Mapping[int, MessageId] = field(default_factory=dict)

    def to_bytes(self) -> bytes:
        return json.dumps(
            {
                "version": FORMAT_VERSION,
                "epoch": self.epoch,
                "watermark": self.watermark,
                "positions": {
                    str(segment_id): [position.entry_id, position.batch_index]
                    for segment_id, position in sorted(self.positions.items())
                },
            },
            separators=(",", ":"),
        ).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> Checkpoint:
        """ValueError naming what is wrong when ``data`` is not a checkpoint this client reads."""
        try:
            raw: Any = json.loads(data)
            version = raw["version"]
        except (TypeError, KeyError, ValueError) as error:
            raise ValueError(f"not a checkpoint: {error!r}") from None
        if version != FORMAT_VERSION:
            raise ValueError(
                f"checkpoint format {version!r} is not readable by this client "
                f"(it reads format {FORMAT_VERSION}); upgrade the client"
            )
        try:
            positions = {
                int(segment_id): MessageId(int(segment_id), int(entry), int(index))
                for segment_id, (entry, index) in raw["positions"].items()
            }
            return cls(int(raw["epoch"]), int(raw["watermark"]), positions)
        except (TypeError, KeyError, ValueError, AttributeError) as error:
            raise ValueError(f"a damaged checkpoint: {error!r}") from None
