"""Reading JSONL input lines into tasks: the field map, the required fields, and bad lines.

One reader serves ``grpo score`` (each line a response to score) and ``grpo eval`` (each line a
problem to generate for). A line becomes a ``common_pb2.Task`` (+ the response text) or an
:class:`InvalidLine` carrying the reason; nothing is skipped silently except blank lines.

Canonical field names (``TASK_FIELDS``) and the ``Task`` field each fills:

- ``id`` -> ``Task.id`` (text or number; ``line-N`` when the line has none; an empty ``""``
  is a bad line, not ``line-N``: a typo'd id must not pass for a default one);
- ``response`` -> the response to score (``grpo score`` only);
- ``prompt`` -> ``Task.prompt`` (and ``CodeTests.program_prefix`` for code when
  ``program_prefix`` is absent);
- ``gold`` -> ``Task.gold_answer``;
- ``tests`` + ``entry_point`` (HumanEval ``check(candidate)``), ``test_list`` +
  ``test_imports`` (MBPP asserts), ``io_pairs`` (``{"stdin", "expected_stdout"}`` objects or
  ``[stdin, stdout]`` pairs), ``program_prefix`` -> ``Task.code_tests``;
- ``output_compare`` (``exact``, ``lines``, ``tokens`` or ``tokens_float``, any case, or the
  enum name ``OUTPUT_COMPARE_...``) and ``float_tolerance`` (a number in [0, 1)) ->
  ``CodeTests.output_compare`` / ``float_tolerance``: how an ``io_pairs`` task's stdout is
  compared (``grpo.verifiers.code.tests_format.output_rule``, the verifier's own rule, checks
  them; they are refused on tasks without ``io_pairs``);
- ``metadata`` -> ``Task.metadata`` (an object of text values).

A :class:`FieldMap` renames them (``gold=answer``: the gold answer is the line's ``answer``
key; a dotted key ``meta.level`` reads a nested object). Bad lines: not UTF-8, not JSON, not a
JSON object, a required field missing, a field of the wrong type, a string with a lone
surrogate (``"\\ud800"``: valid JSON, not valid Unicode, and refused by protobuf), an unknown
``output_compare`` or a ``float_tolerance`` out of range, an empty or duplicate id. Each is an
:class:`InvalidLine` whose ``reason`` names the field, and which keeps what could still be read
of the line (its id, and its metadata for ``grpo eval --by``).

A field map that names a field by its own key (``gold=gold``) is the default one: the map
keeps only real renames, so ``--field gold=gold`` and no ``--field`` are the same run.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from grpo.errors import InvalidArgumentError, UsageError
from grpo.services.runtime.jsonl import decode_line
from grpo.v1 import common_pb2

__all__ = [
    "CODE_TEST_FIELDS",
    "OUTPUT_COMPARE_NAMES",
    "OUTPUT_FIELDS",
    "TASK_FIELDS",
    "FieldMap",
    "InputSpec",
    "InvalidLine",
    "ScoreItem",
    "parse_line",
    "read_lines",
]

CODE_TEST_FIELDS = ("tests", "entry_point", "test_list", "test_imports", "io_pairs")
OUTPUT_FIELDS = ("output_compare", "float_tolerance")
TASK_FIELDS = (
    "id",
    "response",
    "prompt",
    "gold",
    *CODE_TEST_FIELDS,
    "program_prefix",
    *OUTPUT_FIELDS,
    "metadata",
)
"""Canonical input field names (see the module docstring)."""

OUTPUT_COMPARE_NAMES: dict[str, common_pb2.OutputCompare] = {
    "exact": common_pb2.OUTPUT_COMPARE_EXACT,
    "lines": common_pb2.OUTPUT_COMPARE_LINES,
    "tokens": common_pb2.OUTPUT_COMPARE_TOKENS,
    "tokens_float": common_pb2.OUTPUT_COMPARE_TOKENS_FLOAT,
}
"""The ``output_compare`` values an input line may give (each ``OUTPUT_COMPARE_<NAME>``
but UNSPECIFIED, lower case) -> ``common_pb2.OutputCompare``."""


@dataclass(frozen=True)
class FieldMap:
    """Canonical field name -> the JSON key (dotted for nested objects) it is read from.

    Attributes:
        keys: only the renamed fields; every other field is read from its canonical name (an
            entry ``name -> name`` is dropped: it is the default).
    """

    keys: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "keys", {n: k for n, k in self.keys.items() if n != k})
        unknown = sorted(set(self.keys) - set(TASK_FIELDS))
        if unknown:
            raise InvalidArgumentError(
                f"unknown field(s) {', '.join(unknown)} in the field map; valid: "
                f"{', '.join(TASK_FIELDS)}"
            )
        for name, key in self.keys.items():
            if not key or any(not part for part in key.split(".")):
                raise InvalidArgumentError(f"field map {name}={key!r}: the key is empty")

    @classmethod
    def parse(cls, specs: Iterable[str]) -> FieldMap:
        """Build from ``NAME=KEY`` strings (the ``--field`` option), e.g. ``gold=answer``.

        Raises:
            UsageError: (``option="--field"``) a spec without ``=``, an unknown NAME, an empty
                KEY, or a NAME given twice.
        """
        keys: dict[str, str] = {}
        for spec in specs:
            name, sep, key = spec.partition("=")
            name, key = name.strip(), key.strip()
            if not sep:
                raise UsageError(f"{spec!r} is not NAME=KEY (e.g. gold=answer)", option="--field")
            if name in keys:
                raise UsageError(f"{name} is given twice", option="--field")
            keys[name] = key
        try:
            return cls(keys)
        except InvalidArgumentError as exc:
            raise UsageError(str(exc), option="--field") from None

    def key(self, name: str) -> str:
        """The JSON key field ``name`` is read from."""
        return self.keys.get(name, name)

    def get(self, obj: Mapping[str, Any], name: str) -> Any:
        """The value of field ``name`` in ``obj`` (None when absent)."""
        value: Any = obj
        for part in self.key(name).split("."):
            if not isinstance(value, Mapping) or part not in value:
                return None
            value = value[part]
        return value

    def mapped_keys(self) -> set[str]:
        """Top-level JSON keys the canonical fields are read from."""
        return {self.key(name).split(".")[0] for name in TASK_FIELDS}


@dataclass(frozen=True)
class InputSpec:
    """What a line must carry, and the task type given to every task.

    Attributes:
        task_type: ``Task.type`` of every task (the verifier routing key, e.g. ``math``).
        require_response: ``response`` is required (``grpo score``), else not read.
        require_prompt: ``prompt`` is required (``grpo eval``).
        require_gold: ``gold`` is required (math outcome verifiers).
        require_code_tests: one of the code test forms is required (code verifiers).
        extra_metadata: copy every other top-level text/number field of the line into
            ``Task.metadata`` (``grpo eval`` slices results by them).
    """

    task_type: str
    require_response: bool = True
    require_prompt: bool = False
    require_gold: bool = False
    require_code_tests: bool = False
    extra_metadata: bool = False


@dataclass(frozen=True)
class ScoreItem:
    """One usable line: its 1-based line number, id, task and response ("" for eval)."""

    line: int
    id: str
    task: common_pb2.Task
    response: str = ""


@dataclass(frozen=True)
class InvalidLine:
    """A line that cannot be used: its line number, id (``line-N`` when unreadable), why, and
    the metadata that could still be read from it (``grpo eval --by`` slices it with them)."""

    line: int
    id: str
    reason: str
    metadata: Mapping[str, str] = field(default_factory=dict)


def _check_unicode(value: str, what: str) -> str:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidArgumentError(
            f"{what} holds a lone surrogate {value[exc.start]!r} at character {exc.start} "
            "(valid JSON, not valid Unicode)"
        ) from None
    return value


STRING_FIELDS = frozenset({"response", "prompt", "tests", "entry_point", "program_prefix"})
"""Fields that must be JSON strings (text to score or run); ``id``, ``gold`` and metadata
values may also be numbers (``"gold": 85``), read as their text."""


def _text(fields: FieldMap, obj: Mapping[str, Any], name: str, *, required: bool) -> str:
    value = fields.get(obj, name)
    key = fields.key(name)
    if value is None:
        if required:
            raise InvalidArgumentError(f"missing field {key!r}")
        return ""
    if name in STRING_FIELDS and not isinstance(value, str):
        raise InvalidArgumentError(
            f"field {key!r} must be a string, got {_json_type(value)} {_preview(value)}"
        )
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise InvalidArgumentError(
            f"field {key!r} must be text or a number, got {_json_type(value)}"
        )
    return _check_unicode(str(value), f"field {key!r}")


def _json_type(value: Any) -> str:
    """The JSON type name of a parsed value (``number``, ``boolean``, ``array``...)."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "null" if value is None else "string"


def _preview(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 40 else text[:37] + "..."


def _text_list(fields: FieldMap, obj: Mapping[str, Any], name: str) -> list[str]:
    value = fields.get(obj, name)
    key = fields.key(name)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InvalidArgumentError(f"field {key!r} must be a list of strings")
    return [_check_unicode(v, f"field {key!r}") for v in value]


def _io_pairs(fields: FieldMap, value: Any) -> list[common_pb2.IoPair]:
    key = fields.key("io_pairs")
    if not isinstance(value, list) or not value:
        raise InvalidArgumentError(f"field {key!r} must be a non-empty list (a task needs a test)")
    pairs = []
    for i, pair in enumerate(value):
        if isinstance(pair, dict):
            stdin, expected = pair.get("stdin", ""), pair.get("expected_stdout")
        elif isinstance(pair, list | tuple) and len(pair) == 2:
            stdin, expected = pair
        else:
            raise InvalidArgumentError(f"{key}[{i}] must be {{stdin, expected_stdout}}")
        if not isinstance(stdin, str) or not isinstance(expected, str):
            raise InvalidArgumentError(f"{key}[{i}] stdin and expected_stdout must be text")
        pairs.append(
            common_pb2.IoPair(
                stdin=_check_unicode(stdin, f"{key}[{i}]"),
                expected_stdout=_check_unicode(expected, f"{key}[{i}]"),
            )
        )
    return pairs


def _code_tests(fields: FieldMap, obj: Mapping[str, Any], required: bool) -> common_pb2.CodeTests:
    tests = common_pb2.CodeTests(
        program_prefix=_text(fields, obj, "program_prefix", required=False)
        or _text(fields, obj, "prompt", required=False)
    )
    if fields.get(obj, "tests") is not None:
        tests.test_code = _text(fields, obj, "tests", required=True)
        tests.entry_point = _text(fields, obj, "entry_point", required=True)
    elif fields.get(obj, "test_list") is not None:
        tests.test_list.extend(_text_list(fields, obj, "test_list"))
        if not tests.test_list:
            raise InvalidArgumentError(
                f"field {fields.key('test_list')!r} is empty (a task needs a test)"
            )
        tests.test_imports.extend(_text_list(fields, obj, "test_imports"))
        tests.entry_point = _text(fields, obj, "entry_point", required=False)
    elif fields.get(obj, "io_pairs") is not None:
        tests.io_pairs.extend(_io_pairs(fields, fields.get(obj, "io_pairs")))
        _output_settings(fields, obj, tests)
        return tests
    elif required:
        names = [fields.key(n) for n in ("tests", "entry_point", "test_list", "io_pairs")]
        raise InvalidArgumentError(
            f"code items need {names[0]!r} + {names[1]!r}, {names[2]!r} or {names[3]!r}"
        )
    given = [fields.key(n) for n in OUTPUT_FIELDS if fields.get(obj, n) is not None]
    if given:
        raise InvalidArgumentError(
            f"field {given[0]!r} applies to {fields.key('io_pairs')!r} tasks only ("
            f"{fields.key('tests')!r} and {fields.key('test_list')!r} are decided by their "
            "assertions)"
        )
    return tests


def _output_settings(fields: FieldMap, obj: Mapping[str, Any], tests: common_pb2.CodeTests) -> None:
    """Set ``tests.output_compare`` / ``float_tolerance`` from the line (io_pairs tasks).

    Raises:
        InvalidArgumentError: ``output_compare`` is not one of :data:`OUTPUT_COMPARE_NAMES`
            (or its enum name), ``float_tolerance`` is not a number, or the verifier's
            ``output_rule`` refuses the pair (out of [0, 1), tolerance without tokens_float).
    """
    from grpo.verifiers.code.tests_format import output_rule

    compare, tolerance = fields.get(obj, "output_compare"), fields.get(obj, "float_tolerance")
    if compare is not None:
        key = fields.key("output_compare")
        name = compare.lower().removeprefix("output_compare_") if isinstance(compare, str) else ""
        if name not in OUTPUT_COMPARE_NAMES:
            raise InvalidArgumentError(
                f"field {key!r} must be one of {', '.join(OUTPUT_COMPARE_NAMES)}, got {compare!r}"
            )
        tests.output_compare = OUTPUT_COMPARE_NAMES[name]
    if tolerance is not None:
        key = fields.key("float_tolerance")
        if isinstance(tolerance, bool) or not isinstance(tolerance, int | float):
            raise InvalidArgumentError(
                f"field {key!r} must be a number, got {type(tolerance).__name__}"
            )
        tests.float_tolerance = float(tolerance)
    output_rule(tests.output_compare, tests.float_tolerance, stdio=True)


def _metadata(fields: FieldMap, obj: Mapping[str, Any], spec: InputSpec) -> dict[str, str]:
    out: dict[str, str] = {}
    if spec.extra_metadata:
        mapped = fields.mapped_keys()
        for key, value in obj.items():
            if key in mapped or isinstance(value, bool) or not isinstance(value, str | int | float):
                continue
            out[_check_unicode(str(key), "a key")] = _check_unicode(str(value), f"field {key!r}")
    value = fields.get(obj, "metadata")
    if value is None:
        return out
    key = fields.key("metadata")
    if not isinstance(value, dict):
        raise InvalidArgumentError(f"field {key!r} must be an object of text values")
    for name, item in value.items():
        if isinstance(item, bool) or not isinstance(item, str | int | float):
            raise InvalidArgumentError(f"{key}.{name} must be text, got {type(item).__name__}")
        out[_check_unicode(str(name), f"a key of {key!r}")] = _check_unicode(
            str(item), f"{key}.{name}"
        )
    return out


def parse_line(spec: InputSpec, fields: FieldMap, line_no: int, raw: bytes) -> ScoreItem | None:
    """Parse one input line into a :class:`ScoreItem` (None for a blank line).

    Args:
        spec: required fields and the task type.
        fields: where each canonical field is read from.
        line_no: 1-based line number (the default id is ``line-<line_no>``).
        raw: the line's bytes (a trailing newline is allowed).

    Raises:
        InvalidArgumentError: not UTF-8, not a JSON object, a field missing or mistyped, or a
            lone surrogate; the message names the field. Lines are decoded by
            ``grpo.services.runtime.jsonl.decode_line`` (a byte-order mark on line 1 is dropped).
    """
    obj = decode_line(raw, line_no)
    if obj is None:
        return None
    item_id = _text(fields, obj, "id", required=False)
    if not item_id:
        if fields.get(obj, "id") is not None:
            raise InvalidArgumentError(
                f"field {fields.key('id')!r} is empty: give a non-empty id, or leave the field "
                f"out for the default line-{line_no}"
            )
        item_id = f"line-{line_no}"
    response = _text(fields, obj, "response", required=spec.require_response)
    task = common_pb2.Task(
        id=item_id,
        type=spec.task_type,
        prompt=_text(fields, obj, "prompt", required=spec.require_prompt),
        gold_answer=_text(fields, obj, "gold", required=spec.require_gold),
        metadata=_metadata(fields, obj, spec),
    )
    wants_tests = spec.require_code_tests or any(
        fields.get(obj, name) is not None for name in CODE_TEST_FIELDS
    )
    if wants_tests:
        task.code_tests.CopyFrom(_code_tests(fields, obj, spec.require_code_tests))
    return ScoreItem(line_no, item_id, task, response if spec.require_response else "")


def _unreadable_id(raw: bytes, fields: FieldMap, line_no: int) -> str:
    """The id of a bad line when it can still be read (so --resume recognises it)."""
    try:
        obj = decode_line(raw, line_no)
        value = fields.get(obj, "id") if obj is not None else None
        if isinstance(value, str | int) and not isinstance(value, bool):
            return _check_unicode(str(value), "id") or f"line-{line_no}"
    except (ValueError, InvalidArgumentError):
        pass
    return f"line-{line_no}"


def _readable_metadata(
    raw: bytes, spec: InputSpec, fields: FieldMap, line_no: int
) -> dict[str, str]:
    """The metadata of a bad line that can still be read: each value :func:`_metadata` would
    take that is valid on its own (a bad value, or a line that is no JSON object, gives none)."""
    try:
        obj = decode_line(raw, line_no)
    except (ValueError, InvalidArgumentError):
        return {}
    if obj is None:
        return {}
    out: dict[str, str] = {}
    candidates: list[tuple[Any, Any]] = []
    if spec.extra_metadata:
        mapped = fields.mapped_keys()
        candidates += [(k, v) for k, v in obj.items() if k not in mapped]
    nested = fields.get(obj, "metadata")
    if isinstance(nested, dict):
        candidates += list(nested.items())
    for key, value in candidates:
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            continue
        try:
            out[_check_unicode(str(key), "a key")] = _check_unicode(str(value), "a value")
        except InvalidArgumentError:
            continue
    return out


def read_lines(
    lines: Iterable[bytes], spec: InputSpec, fields: FieldMap
) -> Iterator[ScoreItem | InvalidLine]:
    """Parse every line; yield a :class:`ScoreItem` or an :class:`InvalidLine` per non-blank line.

    A second line with an id already seen is an :class:`InvalidLine` (``--resume`` and the
    per-sample results are keyed by id).

    Args:
        lines: the raw lines (a binary file object works).
        spec, fields: see :func:`parse_line`.
    """
    first_line: dict[str, int] = {}
    for line_no, raw in enumerate(lines, start=1):
        try:
            item = parse_line(spec, fields, line_no, raw)
        except InvalidArgumentError as exc:
            item_id = _unreadable_id(raw, fields, line_no)
            if item_id in first_line:
                item_id = f"line-{line_no}"
            first_line.setdefault(item_id, line_no)
            metadata = _readable_metadata(raw, spec, fields, line_no)
            yield InvalidLine(line_no, item_id, str(exc), metadata)
            continue
        if item is None:
            continue
        if item.id in first_line:
            yield InvalidLine(
                line_no,
                f"line-{line_no}",
                f"duplicate id {item.id!r} (first on line {first_line[item.id]})",
                dict(item.task.metadata),
            )
            continue
        first_line[item.id] = line_no
        yield item
