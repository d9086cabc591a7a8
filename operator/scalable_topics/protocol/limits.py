"""Size limits a connection starts from; the broker announces its own in Connected."""

from __future__ import annotations

from typing import Final

DEFAULT_MAX_FRAME_BYTES: Final = 5 * 1024 * 1024
# Room a frame keeps beside one message of the largest size: the command's other fields and
# the msgpack headers, so a message that passes the message limit always fits in a frame alone.
FRAME_OVERHEAD_RESERVE_BYTES: Final = 64 * 1024
DEFAULT_MAX_MESSAGE_BYTES: Final = DEFAULT_MAX_FRAME_BYTES - FRAME_OVERHEAD_RESERVE_BYTES

# The largest int msgpack carries: every uint field's bound.
MAX_UINT: Final = 2**64 - 1

# The largest producer epoch anything stores or fences with: the topic status keeps it as a
# Kubernetes int64, and the segment admin API refuses a fence above it.
MAX_PRODUCER_EPOCH: Final = 2**63 - 1

# The largest producer epoch a client may ask a segment for. Every epoch above it is kept for
# what raises an epoch by one: a takeover, and the controller's fence past a segment that is
# ahead of the topic. With 2**62 such raises left, a client that asks for its largest epoch
# cannot push a topic to where the controller's next fence would have no epoch to use.
MAX_REQUESTED_PRODUCER_EPOCH: Final = 2**62

# A topic_set_hash is a CRC32C: 32 bits.
MAX_TOPIC_SET_HASH: Final = 2**32 - 1

# The most property filters a WatchNamespace may carry (more is refused as InvalidRequest): a
# topic is tested against every one on each change of it, for every watch of its namespace.
MAX_NAMESPACE_WATCH_FILTERS: Final = 64
