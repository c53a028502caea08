"""Strict typed codec for values crossing the sandbox boundary (stdlib only).

The code verifier never trusts anything a candidate program produces except plain data. Values
(call arguments going in, return values coming out) are written as a FLAT list of strings in
prefix order, in which every number is text and every node names its exact builtin type::

    None -> "N"              bool -> "B", "1" | "0"     int -> "I", "7b" (hex)
    float -> "F", "0.5"      complex -> "C", "1.0", "-2.0"
    str -> "S", "text"       bytes -> "Y", "<hex>"
    list -> "L", n, <n items>           tuple -> "T", n, <n items>
    set -> "E", n, <n members>          frozenset -> "Z", n, <n members>
    dict -> "D", n, <n (key, value) pairs, key first>

where ``n`` is a count in decimal digits. ``[1, [True]]`` is ``["L", "2", "I", "1", "L",
"1", "B", "1"]``. The form is flat so that nesting costs no recursion anywhere: not in
:func:`encode_tree`/:func:`decode_tree` (both walk an explicit stack), not in ``json`` or
``marshal`` (the tokens travel inside JSON records and marshal jobs as one flat list). Plain
data may nest :data:`MAX_DEPTH` containers deep; a deeper value is refused with a
:class:`CodecError` naming the limit, before any work proportional to its depth beyond it, so
a hostile argument or result can exhaust neither the Python nor the C stack.

:func:`encode_tree` accepts exact builtin types only (``type(x) is int``, never a subclass),
so an object with a forged ``__eq__``/``__repr__`` cannot cross; :func:`decode_tree` is a
hand-written validator over the token list: no ``eval``, no pickle, no user code, JSON numbers
rejected, unknown tags rejected, counts checked against the tokens left, depth bounded.
Integers travel in hexadecimal, whose conversion is linear in the number of digits and exempt
from CPython's 4300-digit limit on decimal text (``sys.set_int_max_str_digits``), so
``10**6000`` crosses either way and a huge result cannot cost the service quadratic time. This
file is also bound into the sandbox (the driver imports it by path), so it imports nothing
outside the stdlib, and json only inside :func:`encode`/:func:`decode` (importing json costs
~50 ms of interpreter start).
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing is not imported at run time: it pulls in re (slow start-up)
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "MAX_DEPTH",
    "RECURSION_LIMIT",
    "CodecError",
    "decode",
    "decode_tree",
    "encode",
    "encode_tree",
]

MAX_DEPTH = 2000
"""Deepest nesting of containers accepted either way: a value whose innermost item sits
inside more than this many containers is refused (``[[0]]`` nests 2 deep)."""

RECURSION_LIMIT = 2 * MAX_DEPTH + 1000
"""``sys.setrecursionlimit`` a process needs to use a decoded value of :data:`MAX_DEPTH` as
Python does (``==``, ``repr`` and ``copy`` recurse one level per container, in C or Python)
with room for its caller's frames. The code verifier raises its own limit to at least this,
and the driver sets it in the program and test processes. In C each level costs well under
1 KiB of stack (a 20,000-deep ``==`` runs in a thread of 8 MiB here)."""

_HEX_DIGITS = "0123456789abcdef"
_DIGITS = "0123456789"
_MAX_SAME_HASH = 16  # distinct set members / dict keys allowed to share one hash value

_CONTAINER_TAGS: dict[type, str] = {list: "L", tuple: "T", set: "E", frozenset: "Z", dict: "D"}
_SCALAR_FIELDS = {"N": 0, "B": 1, "I": 1, "F": 1, "S": 1, "Y": 1, "C": 2}


class CodecError(ValueError):
    """A value cannot be encoded (not plain builtin data) or a payload is malformed."""


def _scalar(value: Any, kind: type, out: list[str]) -> None:
    if value is None:
        out.append("N")
    elif kind is bool:
        out += ("B", "1" if value else "0")
    elif kind is int:
        out += ("I", format(value, "x"))
    elif kind is float:
        out += ("F", repr(value))
    elif kind is complex:
        out += ("C", repr(value.real), repr(value.imag))
    elif kind is str:
        out += ("S", value)
    elif kind is bytes:
        out += ("Y", value.hex())
    else:
        raise CodecError(f"type {kind.__name__} is not plain data")


def encode_tree(value: Any) -> list[str]:
    """Return the flat tagged token list of ``value`` (format in the module docstring).

    Walks an explicit stack, never recursing, so any depth is refused cleanly; a value that
    contains itself is refused as too deep.

    Raises:
        CodecError: ``value`` (or something inside it) is not an exact builtin type listed in
            the module docstring, or nests deeper than :data:`MAX_DEPTH` containers.
    """
    out: list[str] = []
    # iterators of the containers being written, innermost last (dict items flattened)
    stack: list[Any] = []
    item = value
    while True:
        kind = type(item)
        tag = _CONTAINER_TAGS.get(kind)  # type: ignore[arg-type]
        if tag is None:
            _scalar(item, kind, out)
        else:
            if len(stack) >= MAX_DEPTH:
                raise CodecError(f"value nests more than {MAX_DEPTH} containers deep")
            # a snapshot: the count written is the number of items that follow
            parts = [p for pair in list(item.items()) for p in pair] if kind is dict else list(item)
            out += (tag, str(len(parts) // 2 if kind is dict else len(parts)))
            stack.append(iter(parts))
        while stack:
            item = next(stack[-1], _END)
            if item is not _END:
                break
            stack.pop()
        else:
            return out


_END = object()


def encode(value: Any) -> str:
    """Return ``value`` as tagged JSON text (one line, ASCII): the JSON list of
    :func:`encode_tree`'s tokens.

    Raises:
        CodecError: see :func:`encode_tree`.
    """
    import json  # imported here: the in-sandbox driver uses only the tree functions

    return json.dumps(encode_tree(value), separators=(",", ":"))


def _expect(cond: bool, what: str) -> None:
    if not cond:
        raise CodecError(f"malformed value: {what}")


def _check_hash_spread(keys: list[Any]) -> None:
    """Refuse set members / dict keys crafted to share one hash (quadratic insertion)."""
    buckets: dict[int, list[Any]] = {}
    for key in keys:
        members = buckets.setdefault(hash(key), [])
        if len(members) < _MAX_SAME_HASH and not any(key == m for m in members):
            members.append(key)
        elif len(members) >= _MAX_SAME_HASH and not any(key == m for m in members):
            raise CodecError("malformed value: too many distinct keys share one hash")


def _read_scalar(tag: str, fields: list[str]) -> Any:
    if tag == "N":
        return None
    if tag == "B":
        _expect(fields[0] in ("0", "1"), "bool takes '1' or '0'")
        return fields[0] == "1"
    if tag == "I":
        digits = fields[0]
        magnitude = digits[1:] if digits.startswith("-") else digits
        _expect(bool(magnitude) and not magnitude.strip(_HEX_DIGITS), "int text")
        return int(digits, 16)
    if tag == "F":
        return float(fields[0])
    if tag == "C":
        return complex(float(fields[0]), float(fields[1]))
    if tag == "S":
        return fields[0]
    return bytes.fromhex(fields[0])  # "Y"


def _build(tag: str, items: list[Any]) -> Any:
    if tag == "L":
        return items
    if tag == "T":
        return tuple(items)
    if tag == "D":
        keys = items[0::2]
        _check_hash_spread(keys)
        return dict(zip(keys, items[1::2], strict=True))
    _check_hash_spread(items)
    return set(items) if tag == "E" else frozenset(items)


def decode_tree(tokens: Any) -> Any:
    """Rebuild a value from the flat token list made by :func:`encode_tree`.

    Walks an explicit stack, never recursing.

    Raises:
        CodecError: the tokens are malformed: not a list of strings, an unknown tag, a field
            or count that does not parse, a count past the tokens left, tokens left over, an
            unhashable set member or dict key, keys crafted to share one hash, or nesting past
            :data:`MAX_DEPTH` containers.
    """
    _expect(type(tokens) is list and len(tokens) >= 1, "not a non-empty token list")
    _expect(all(type(t) is str for t in tokens), "a token is not a string")
    total = len(tokens)
    pos = 0
    stack: list[tuple[str, int, list[Any]]] = []  # (tag, items expected, items so far)
    try:
        while True:
            _expect(pos < total, "the tokens end inside a value")
            tag = tokens[pos]
            pos += 1
            n_fields = _SCALAR_FIELDS.get(tag)
            if n_fields is not None:
                _expect(pos + n_fields <= total, f"tag {tag!r} takes {n_fields} field(s)")
                value = _read_scalar(tag, tokens[pos : pos + n_fields])
                pos += n_fields
            else:
                _expect(tag in ("L", "T", "E", "Z", "D"), f"unknown tag {tag[:20]!r}")
                _expect(pos < total, f"tag {tag!r} takes a count")
                count = tokens[pos]
                pos += 1
                _expect(0 < len(count) <= 12 and not count.strip(_DIGITS), f"count {count[:20]!r}")
                expected = int(count) * (2 if tag == "D" else 1)
                _expect(expected <= total - pos, "a count runs past the tokens left")
                _expect(len(stack) < MAX_DEPTH, f"nests more than {MAX_DEPTH} containers deep")
                if expected:
                    stack.append((tag, expected, []))
                    continue
                value = _build(tag, [])
            while stack:
                tag, expected, items = stack[-1]
                items.append(value)
                if len(items) < expected:
                    break
                stack.pop()
                value = _build(tag, items)
            else:
                _expect(pos == total, "tokens left after the value")
                return value
    except (TypeError, ValueError, OverflowError) as exc:
        if isinstance(exc, CodecError):
            raise
        raise CodecError(f"malformed value: {exc}") from exc


def _no_numbers(text: str) -> Any:
    raise CodecError("bare JSON numbers are not allowed")


def decode(text: str | bytes) -> Any:
    """Parse tagged JSON text made by :func:`encode` back into the value.

    Raises:
        CodecError: the text is not JSON, contains bare numbers, or the tokens are malformed.
    """
    import json

    try:
        tokens = json.loads(
            text, parse_int=_no_numbers, parse_float=_no_numbers, parse_constant=_no_numbers
        )
    except CodecError:
        raise
    except (ValueError, RecursionError) as exc:
        raise CodecError(f"not JSON: {exc}") from exc
    return decode_tree(tokens)
