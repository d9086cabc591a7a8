import mmh3
from hypothesis import given
from hypothesis import strategies as st

from scalable_topics.model.hashing import HASH_MAX, hash_key


@given(st.text())
def test_hash_is_the_low_16_bits_of_unsigned_murmur3(key: str) -> None:
    value = hash_key(key)
    assert 0 <= value <= HASH_MAX
    assert value == mmh3.hash(key.encode("utf-8"), 0, signed=False) % 65536


@given(st.text())
def test_str_and_its_utf8_bytes_hash_alike(key: str) -> None:
    assert hash_key(key) == hash_key(key.encode("utf-8"))


def test_known_values_are_stable() -> None:
    # Producers, brokers and consumers in other processes must agree forever: pin a few values.
    assert hash_key("") == 0
    assert hash_key("orders-42") == mmh3.hash(b"orders-42", 0, signed=False) & 0xFFFF
    assert hash_key("key") == 0x6A44  # murmur3_32("key") = 0xE29C6A44, pinned as a regression check
