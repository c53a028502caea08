"""Strict typed codec for values crossing the sandbox boundary (stdlib only).

The code verifier never trusts anything a candidate program produces except plain data. Values
(call arguments going in, return values coming out) are written as a tagged JSON tree in which
every number is a string and every node names its exact builtin type::

    None -> ["N"]            bool -> ["B", true]        int -> ["I", "7b"] (hex)
    float -> ["F", "0.5"]    complex -> ["C", "1.0", "-2.0"]
    str -> ["S", "text"]     bytes -> ["Y", "<hex>"]
    list -> ["L", [...]]     tuple -> ["T", [...]]      dict -> ["D", [[k, v], ...]]
    set -> ["E", [...]]      frozenset -> ["Z", [...]]

:func:`encode` accepts exact builtin types only (``type(x) is int``, never a subclass), so an
object with a forged ``__eq__``/``__repr__`` cannot cross; :func:`decode` is a hand-written
validator over ``json.loads`` output: no ``eval``, no pickle, no user code, JSON numbers
rejected, unknown tags rejected, depth and size bounded. Integers travel in hexadecimal, whose
conversion is linear in the number of digits and exempt from CPython's 4300-digit limit on
decimal text (``sys.set_int_max_str_digits``), so ``10**6000`` crosses either way and a huge
result cannot cost the service quadratic time. This file is also bound into the
sandbox (the driver imports it by path), so it imports nothing outside the stdlib, and json
only inside :func:`encode`/:func:`decode` (importing json costs ~50 ms of interpreter start).
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing is not imported at run time: it pulls in re (slow start-up)
if TYPE_CHECKING:
    from typing import Any

__all__ = ["MAX_DEPTH", "CodecError", "decode", "decode_tree", "encode", "encode_tree"]

MAX_DEPTH = 100
"""Deepest nesting of containers accepted either way."""

_HEX_DIGITS = "0123456789abcdef"
_MAX_SAME_HASH = 16  # distinct set members / dict keys allowed to share one hash value


_CONTAINER_TAGS: dict[type, str] = {list: "L", tuple: "T", set: "E", frozenset: "Z"}


class CodecError(ValueError):
    """A value cannot be encoded (not plain builtin data) or a payload is malformed."""


def encode_tree(value: Any, depth: int = 0) -> list[Any]:
    """Return the tagged JSON-ready tree of ``value``.

    Raises:
        CodecError: ``value`` (or something inside it) is not an exact builtin type listed in
            the module docstring, or nests deeper than :data:`MAX_DEPTH`.
    """
    if depth > MAX_DEPTH:
        raise CodecError("value nests too deeply")
    kind = type(value)
    if value is None:
        return ["N"]
    if kind is bool:
        return ["B", value]
    if kind is int:
        return ["I", format(value, "x")]
    if kind is float:
        return ["F", repr(value)]
    if kind is complex:
        return ["C", repr(value.real), repr(value.imag)]
    if kind is str:
        return ["S", value]
    if kind is bytes:
        return ["Y", value.hex()]
    if kind is list or kind is tuple or kind is set or kind is frozenset:
        tag = _CONTAINER_TAGS[kind]
        return [tag, [encode_tree(item, depth + 1) for item in value]]
    if kind is dict:
        return [
            "D",
            [[encode_tree(k, depth + 1), encode_tree(v, depth + 1)] for k, v in value.items()],
        ]
    raise CodecError(f"type {kind.__name__} is not plain data")


def encode(value: Any) -> str:
    """Return ``value`` as tagged JSON text (one line, ASCII).

    Raises:
        CodecError: see :func:`encode_tree`.
    """
    import json  # imported here: the in-sandbox driver uses only the tree functions

    try:
        return json.dumps(encode_tree(value), separators=(",", ":"))
    except RecursionError as exc:
        raise CodecError("value nests too deeply") from exc


def _expect(cond: bool, what: str) -> None:
    if not cond:
        raise CodecError(f"malformed value: {what}")


def _text(node: list[Any], n: int) -> list[str]:
    _expect(len(node) == n + 1, f"tag {node[0]!r} takes {n} field(s)")
    fields = node[1:]
    _expect(all(type(f) is str for f in fields), f"tag {node[0]!r} takes text fields")
    return fields


def _check_hash_spread(keys: list[Any]) -> None:
    """Refuse set members / dict keys crafted to share one hash (quadratic insertion)."""
    buckets: dict[int, list[Any]] = {}
    for key in keys:
        members = buckets.setdefault(hash(key), [])
        if len(members) < _MAX_SAME_HASH and not any(key == m for m in members):
            members.append(key)
        elif len(members) >= _MAX_SAME_HASH and not any(key == m for m in members):
            raise CodecError("malformed value: too many distinct keys share one hash")


def _items(node: list[Any], depth: int) -> list[Any]:
    _expect(len(node) == 2 and type(node[1]) is list, f"tag {node[0]!r} takes one list")
    return [decode_tree(item, depth + 1) for item in node[1]]


def decode_tree(node: Any, depth: int = 0) -> Any:
    """Rebuild a value from a tagged tree made by :func:`encode_tree`.

    Raises:
        CodecError: the tree is malformed (unknown tag, wrong field types, unhashable set
            member or dict key, number text that does not parse, nesting past MAX_DEPTH).
    """
    _expect(depth <= MAX_DEPTH, "nests too deeply")
    _expect(type(node) is list and len(node) >= 1 and type(node[0]) is str, "node is not a tag")
    tag = node[0]
    try:
        if tag == "N":
            _expect(len(node) == 1, "None takes no field")
            return None
        if tag == "B":
            _expect(len(node) == 2 and type(node[1]) is bool, "bool takes true/false")
            return node[1]
        if tag == "I":
            (digits,) = _text(node, 1)
            magnitude = digits[1:] if digits.startswith("-") else digits
            _expect(bool(magnitude) and not magnitude.strip(_HEX_DIGITS), "int text")
            return int(digits, 16)
        if tag == "F":
            (text,) = _text(node, 1)
            return float(text)
        if tag == "C":
            real, imag = _text(node, 2)
            return complex(float(real), float(imag))
        if tag == "S":
            (text,) = _text(node, 1)
            return text
        if tag == "Y":
            (text,) = _text(node, 1)
            return bytes.fromhex(text)
        if tag == "L":
            return _items(node, depth)
        if tag == "T":
            return tuple(_items(node, depth))
        if tag == "E" or tag == "Z":
            members = _items(node, depth)
            _check_hash_spread(members)
            return set(members) if tag == "E" else frozenset(members)
        if tag == "D":
            _expect(len(node) == 2 and type(node[1]) is list, "dict takes a list of pairs")
            pairs = []
            for pair in node[1]:
                _expect(type(pair) is list and len(pair) == 2, "dict item is not a pair")
                pairs.append((decode_tree(pair[0], depth + 1), decode_tree(pair[1], depth + 1)))
            _check_hash_spread([k for k, _ in pairs])
            return dict(pairs)
    except (TypeError, ValueError, OverflowError) as exc:
        if isinstance(exc, CodecError):
            raise
        raise CodecError(f"malformed value: {exc}") from exc
    raise CodecError(f"malformed value: unknown tag {tag!r}")


def _no_numbers(text: str) -> Any:
    raise CodecError("bare JSON numbers are not allowed")


def decode(text: str | bytes) -> Any:
    """Parse tagged JSON text made by :func:`encode` back into the value.

    Raises:
        CodecError: the text is not JSON, contains bare numbers, or the tree is malformed.
    """
    import json

    try:
        tree = json.loads(
            text, parse_int=_no_numbers, parse_float=_no_numbers, parse_constant=_no_numbers
        )
    except CodecError:
        raise
    except (ValueError, RecursionError) as exc:
        raise CodecError(f"not JSON: {exc}") from exc
    return decode_tree(tree)
