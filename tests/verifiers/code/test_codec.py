"""The strict typed codec: exact round trips, and refusal of anything but plain data."""

from __future__ import annotations

import math
import subprocess
import sys
from typing import Any

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
        '["B", "true"]',  # a bool is "1" or "0"
        '["D", "1", "L", "0", "N"]',  # unhashable key
        '["E", "2", "I", "1", "L", "0"]',  # unhashable member
        '["N", "extra"]',  # tokens left over
        '["L", "1", "N", "N"]',
        '{"k": 1}',
        "[]",
        '["L", ["N"]]',  # nested JSON: every token is a string
        "[" * 5000 + "]" * 5000,
        "not json",
        '["I", ""]',
        '["I", "-"]',
        '["I", "0x1f"]',  # hex without a prefix
        '["I", "1F"]',  # lower-case digits only
        '["I", " 1f"]',
        '["I"]',  # a field missing
        '["L"]',  # a count missing
        '["L", "2", "N"]',  # a count past the tokens left
        '["L", "-1"]',
        '["L", "1e3", "N"]',
        '["L", "99999999999999", "N"]',
        '["D", "1", "N"]',  # a key without its value
    ],
)
def test_decode_rejects_malformed(text: str) -> None:
    with pytest.raises(codec.CodecError):
        codec.decode(text)


def _nested(depth: int, kind: type = list) -> object:
    value: object = 0
    for _ in range(depth):
        value = kind([value]) if kind is not dict else {"k": value}
    return value


@pytest.mark.parametrize("depth", [200, 1000, codec.MAX_DEPTH])
@pytest.mark.parametrize("kind", [list, tuple, dict])
def test_deep_plain_data_round_trips(depth: int, kind: type) -> None:
    """Issue 28: a 200-deep and a 1,000-deep nested value are plain data (up to MAX_DEPTH).
    Compared through the flat tokens, which need no recursion (``==`` on the values would)."""
    value = _nested(depth, kind)
    tokens = codec.encode_tree(value)
    tags: dict[type, str] = {list: "L", tuple: "T", dict: "D"}
    assert tokens[:2] == [tags[kind], "1"]
    back: Any = codec.decode(codec.encode(value))
    assert codec.encode_tree(back) == tokens
    for _ in range(depth):  # the exact shape: depth containers of the same type, then 0
        assert type(back).__name__ == kind.__name__  # (no narrowing of back for mypy)
        back = back["k"] if kind is dict else back[0]
    assert back == 0


def test_deeper_than_the_limit_is_a_clear_error_either_way() -> None:
    with pytest.raises(codec.CodecError, match=f"more than {codec.MAX_DEPTH} containers"):
        codec.encode(_nested(codec.MAX_DEPTH + 1))
    hostile = "[" + '"L","1",' * 1_000_000 + '"N"]'  # a million levels, 9 MB of text
    with pytest.raises(codec.CodecError, match=f"more than {codec.MAX_DEPTH} containers"):
        codec.decode(hostile)


def test_no_recursion_whatever_the_depth() -> None:
    """Encode and decode walk an explicit stack: with the recursion limit at 60 (a recursive
    codec fails near depth 60), MAX_DEPTH-deep values still cross, and hostile depths are
    refused with a CodecError, not a RecursionError or a crash."""
    script = (
        "import sys\n"
        "from grpo.verifiers.code import codec\n"
        "v = 0\n"
        "for i in range(codec.MAX_DEPTH): v = ([v], (v,), {'k': v})[i % 3]\n"
        "sys.setrecursionlimit(60)\n"
        "t = codec.encode(v)\n"
        "assert codec.encode_tree(codec.decode(t)) == codec.encode_tree(v)\n"
        "for bad in ('[' + '\"L\",\"1\",' * 300000 + '\"N\"]', '[' * 100000):\n"
        "    try:\n"
        "        codec.decode(bad)\n"
        "    except codec.CodecError:\n"
        "        pass\n"
        "loop = []\n"
        "loop.append(loop)\n"
        "try:\n"
        "    codec.encode(loop)\n"
        "except codec.CodecError as exc:\n"
        "    print('ok', exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ok value nests more than"), done.stdout


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
    for value in (10**6000, -(3**9000), 7 ** (10**5 * 2), 0, -1):
        assert codec.decode(codec.encode(value)) == value
    assert codec.encode_tree(255) == ["I", "ff"] and codec.encode_tree(-255) == ["I", "-ff"]
    assert sys.get_int_max_str_digits() in (0, 4300)
