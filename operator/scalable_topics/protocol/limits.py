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

# The largest producer epoch a client or the control plane may ask for. A takeover raises a
# segment's epoch by one, so every epoch a segment can reach stays below 2**64, the first
# integer msgpack cannot carry: a stored epoch always has a wire form.
MAX_PRODUCER_EPOCH: Final = 2**63 - 1

# A topic_set_hash is a CRC32C: 32 bits.
MAX_TOPIC_SET_HASH: Final = 2**32 - 1

# The most property filters a WatchNamespace may carry (more is refused as InvalidRequest): a
# topic is tested against every one on each change of it, for every watch of its namespace.
MAX_NAMESPACE_WATCH_FILTERS: Final = 64
