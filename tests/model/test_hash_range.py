import pytest
from hypothesis import given
from hypothesis import strategies as st

from scalable_topics.model.errors import InvalidHashRange
from scalable_topics.model.hash_range import HashRange


@st.composite
def ranges(draw: st.DrawFn) -> HashRange:
    start = draw(st.integers(0, 0xFFFF))
    return HashRange(start, draw(st.integers(start, 0xFFFF)))


@pytest.mark.parametrize(("start", "end"), [(-1, 5), (5, 4), (0, 0x10000)])
def test_out_of_bounds_ranges_are_refused_with_their_values(start: int, end: int) -> None:
    with pytest.raises(InvalidHashRange, match="start <= end"):
        HashRange(start, end)


@given(ranges())
def test_split_halves_cover_the_range_exactly(hash_range: HashRange) -> None:
    if not hash_range.can_split():
        with pytest.raises(InvalidHashRange, match="one hash"):
            hash_range.split()
        return
    low, high = hash_range.split()
    assert low.start == hash_range.start and high.end == hash_range.end
    assert low.end + 1 == high.start
    assert low.size - high.size in (0, 1)
    assert low.is_adjacent(high) and high.is_adjacent(low)
    assert low.union(high) == hash_range == high.union(low)


@given(ranges(), ranges())
def test_union_only_of_adjacent_ranges(a: HashRange, b: HashRange) -> None:
    if a.is_adjacent(b):
        union = a.union(b)
        assert union.size == a.size + b.size
    else:
        with pytest.raises(InvalidHashRange, match="not adjacent"):
            a.union(b)


@given(ranges(), st.integers(0, 0xFFFF))
def test_contains_respects_inclusive_bounds(hash_range: HashRange, value: int) -> None:
    assert hash_range.contains(value) == (hash_range.start <= value <= hash_range.end)


@given(ranges())
def test_hex_form_round_trips(hash_range: HashRange) -> None:
    assert HashRange.parse(str(hash_range)) == hash_range


def test_parse_names_the_bad_text() -> None:
    with pytest.raises(InvalidHashRange, match="'00-ff'"):
        HashRange.parse("00-ff")
