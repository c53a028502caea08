"""No god functions in ``learner/`` and ``grpo/`` (issue 34; STYLE.md "No god files or god
methods").

A function's size is the lines its statements span after its signature and docstring (first
body statement to the end of the last; comments and blank lines between them count, nested
functions count in their parent and on their own). Over ``MAX_LINES`` fails, except for the
functions in ``ALLOWED`` — today's offenders in ``grpo/``, to be shortened. The allow-list is
checked to be exact: an entry whose function shrank under the limit or moved must be removed,
so the list only ever gets shorter. ``learner/`` has no exceptions.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MAX_LINES = 80
ROOTS = ("learner", "grpo")

# path:qualified name -> statement lines when listed (issue 34: shrink, then delete the entry).
ALLOWED: dict[str, int] = {}


def statement_lines(function: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Lines from the first statement after the docstring to the end of the last one."""
    body = function.body
    first = body[0]
    if (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    ):
        body = body[1:]
    if not body:
        return 0
    end = body[-1].end_lineno
    assert end is not None
    return end - body[0].lineno + 1


def functions(tree: ast.AST, prefix: str = "") -> Iterator[tuple[str, int]]:
    """(qualified name, statement lines) of every function and method under ``tree``."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield prefix + node.name, statement_lines(node)
            yield from functions(node, f"{prefix}{node.name}.")
        elif isinstance(node, ast.ClassDef):
            yield from functions(node, f"{prefix}{node.name}.")
        else:
            yield from functions(node, prefix)


def source_files() -> Iterator[Path]:
    """The project's own Python files under ``ROOTS``: symlinked folders (``grpo/learner``
    points at ``learner/``) are not followed, generated stubs (``grpo/v1``) are skipped."""
    for root in ROOTS:
        for path in sorted((REPO / root).rglob("*.py")):
            relative = path.relative_to(REPO)
            inside = relative.parents[:-1]  # the folders between the repository and the file
            if any((REPO / p).is_symlink() for p in inside) or relative.parts[:2] == ("grpo", "v1"):
                continue
            yield relative


def sizes() -> dict[str, int]:
    """``path:qualified name`` -> statement lines, for every function over ``MAX_LINES``."""
    over: dict[str, int] = {}
    for relative in source_files():
        tree = ast.parse((REPO / relative).read_text(), filename=str(relative))
        for name, lines in functions(tree):
            if lines > MAX_LINES:
                over[f"{relative.as_posix()}:{name}"] = lines
    return over


def test_no_function_is_longer_than_the_limit_outside_the_allow_list() -> None:
    over = sizes()
    new = {k: v for k, v in over.items() if k not in ALLOWED}
    assert not new, (
        f"functions with more than {MAX_LINES} lines of statements: {new}; split them into "
        "named steps (the allow-list is for the grpo/ offenders of issue 34 only)"
    )
    grown = {k: (v, ALLOWED[k]) for k, v in over.items() if k in ALLOWED and v > ALLOWED[k]}
    assert not grown, f"allowed offenders grew (now, listed): {grown}; shorten them"


def test_the_allow_list_is_exact() -> None:
    over = sizes()
    stale = sorted(k for k in ALLOWED if k not in over)
    assert not stale, (
        f"{stale} are no longer over {MAX_LINES} lines (or moved): delete them from ALLOWED"
    )
    assert not any(k.startswith("learner/") for k in ALLOWED), "learner/ has no exceptions"


def test_the_counter_counts_statements_after_the_docstring() -> None:
    source = (
        "def f(x):\n"
        '    """Doc.\n\n    More doc.\n    """\n'
        "    y = x\n"
        "    # a comment\n"
        "\n"
        "    return (\n"
        "        y\n"
        "    )\n"
        "class C:\n"
        "    def g(self):\n"
        "        pass\n"
    )
    assert dict(functions(ast.parse(source))) == {"f": 6, "C.g": 1}
