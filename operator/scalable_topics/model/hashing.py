"""Key hashing into the 16-bit hash space that segments divide between them.

A key's hash is the low 16 bits of its unsigned 32-bit MurmurHash3 (x86_32 variant, seed 0)
computed over the key's UTF-8 bytes: ``mmh3.hash(key, 0, signed=False) & 0xFFFF``. Every
producer, broker and consumer must agree on this function: it decides which segment owns a
key, and Key_Shared dispatch inside a segment uses the same value. Keyless messages have no
hash at all; producers spread them round-robin over the active segments.
"""

from typing import Final

import mmh3

HASH_MIN: Final = 0x0000
HASH_MAX: Final = 0xFFFF
HASH_SPACE_SIZE: Final = HASH_MAX - HASH_MIN + 1


def hash_key(key: str | bytes) -> int:
    """Return the key's position in ``[HASH_MIN, HASH_MAX]`` (mmh3 hashes a str's UTF-8)."""
    return mmh3.hash(key, 0, signed=False) & HASH_MAX
