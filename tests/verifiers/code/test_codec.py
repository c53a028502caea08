"""The strict typed codec: exact round trips, and refusal of anything but plain data."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grpo.verifiers.code import codec

_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.complex_numbers(allow_nan=False)
    | st.text()
    | st.binary()
)
_hashable = st.recursive(_scalars, lambda c: st.tuples(c, c) | st.frozensets(c), max_leaves=4)
_values = st.recursive(
    _scalars | _hashable,
    lambda c: st.lists(c) | st.tuples(c, c) | st.dictionaries(_hashable, c) | st.sets(_hashable),
    max_leaves=10,
)


def _shape(value: object) -> object:
    """Exact type tree of a value (set members sorted, since set order is not kept)."""
    if isinstance(value, list | tuple):
        return (type(value), [_shape(v) for v in value])
    if isinstance(value, set | frozenset):
        return (type(value), sorted(repr(_shape(v)) for v in value))
    if isinstance(value, dict):
        return (dict, sorted(repr((_shape(k), _shape(v))) for k, v in value.items()))
    return type(value)


@settings(max_examples=60, deadline=None)
@given(_values)
def test_round_trip_keeps_value_and_exact_types(value: object) -> None:
    back = codec.decode(codec.encode(value))
    assert back == value
    assert _shape(back) == _shape(value)


def test_nan_and_inf_round_trip() -> None:
    back = codec.decode(codec.encode([math.nan, math.inf, -math.inf]))
    assert math.isnan(back[0]) and back[1:] == [math.inf, -math.inf]


def test_bool_and_int_stay_distinct() -> None:
    assert codec.decode(codec.encode(True)) is True
    assert type(codec.decode(codec.encode(1))) is int
    assert codec.encode(1) != codec.encode(True)


class _AlwaysEqual:
    def __eq__(self, other: object) -> bool:
        return True


class _Int(int):
    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = int.__hash__


@pytest.mark.parametrize(
    "value",
    [_AlwaysEqual(), _Int(3), [1, _Int(2)], {"k": _AlwaysEqual()}, iter([1]), print, object()],
    ids=[
        "eq-object",
        "int-subclass",
        "nested-subclass",
        "dict-value",
        "iterator",
        "function",
        "object",
    ],
)
def test_encode_refuses_non_plain_data(value: object) -> None:
    with pytest.raises(codec.CodecError):
        codec.encode(value)


def test_encode_refuses_self_reference() -> None:
    loop: list[object] = []
    loop.append(loop)
    with pytest.raises(codec.CodecError):
        codec.encode(loop)


@pytest.mark.parametrize(
    "text",
    [
        "5",  # bare JSON number
        '["I", 5]',  # number not as text
        '["X", "1"]',  # unknown tag
        '["I", "1.5"]',  # not an int
        '["I", "٣"]',  # non-ASCII digit
        '["B", "true"]',
        '["D", [[["L", []], ["N"]]]]',  # unhashable key
        '["N", "extra"]',
        '{"k": 1}',
        "[" * 5000 + "]" * 5000,
        "not json",
        '["I", ""]',
        '["I", "-"]',
        '["I", "0x1f"]',  # hex without a prefix
        '["I", "1F"]',  # lower-case digits only
        '["I", " 1f"]',
    ],
)
def test_decode_rejects_malformed(text: str) -> None:
    with pytest.raises(codec.CodecError):
        codec.decode(text)


def test_decode_refuses_hash_flooding_but_keeps_big_sets() -> None:
    mersenne = 2**61 - 1  # int hash is x mod 2**61-1: these all share hash 0
    flood = codec.encode([k * mersenne for k in range(1, 2000)]).replace('["L"', '["E"', 1)
    with pytest.raises(codec.CodecError, match="share one hash"):
        codec.decode(flood)
    assert len(codec.decode(codec.encode(set(range(50_000))))) == 50_000
    assert codec.decode(codec.encode({k * mersenne: 0 for k in range(1, 10)})) == {
        k * mersenne: 0 for k in range(1, 10)
    }


def test_big_integers_cross_past_the_decimal_digit_limit() -> None:
    """Ints travel as hex: 10**6000 (past CPython's 4300-digit str limit) and a 200,000-digit
    number round-trip exactly, and the limit of this process stays as it was."""
    import sys

    for value in (10**6000, -(3**9000), 7 ** (10**5 * 2), 0, -1):
        assert codec.decode(codec.encode(value)) == value
    assert codec.encode_tree(255) == ["I", "ff"] and codec.encode_tree(-255) == ["I", "-ff"]
    assert sys.get_int_max_str_digits() in (0, 4300)
