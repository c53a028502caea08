"""A tiny name -> function registry for the learner's small interchangeable parts.

Used for parts that share one signature and are chosen by a standard name: advantage
estimators (``grpo``, ``rloo``, ``dr_grpo``), loss reductions (``token_mean``, ...), per-token
loss types (``ppo``, ``cispo``) and KL estimators (``k1``, ``k2``, ``k3``). The valid names are
declared once, as a ``Literal`` in ``grpo.learner.choices``, and given to the registry:
registering a name that is not declared, or a name twice, raises; looking up an unknown name
raises a ``ValueError`` that lists the valid names; :meth:`Registry.unregistered` lists the
declared names without an implementation (a test keeps it empty).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

from grpo.learner.choices import names as literal_names

__all__ = ["Registry"]

F = TypeVar("F", bound=Callable[..., object])


class Registry(Generic[F]):
    """Maps standard names to functions of one signature.

    Args:
        kind: What the entries are (e.g. ``"reduction"``); used in error messages.
        declared: the ``Literal`` of valid names (``grpo.learner.choices``); None accepts any.
    """

    def __init__(self, kind: str, declared: Any = None) -> None:
        self.kind = kind
        self.declared: tuple[str, ...] | None = (
            None if declared is None else literal_names(declared)
        )
        self._entries: dict[str, F] = {}

    def register(self, name: str) -> Callable[[F], F]:
        """Decorator adding ``fn`` under ``name``.

        Raises:
            ValueError: ``name`` is already registered, or not one of ``declared``.
        """

        def add(fn: F) -> F:
            if self.declared is not None and name not in self.declared:
                raise ValueError(
                    f"{self.kind} {name!r} is not declared ({', '.join(self.declared)}); add "
                    "it to its Literal in grpo.learner.choices"
                )
            if name in self._entries:
                raise ValueError(f"{self.kind} {name!r} is already registered")
            self._entries[name] = fn
            return fn

        return add

    def get(self, name: str) -> F:
        """The function registered under ``name``.

        Raises:
            ValueError: ``name`` is unknown; the message lists the valid names.
        """
        try:
            return self._entries[name]
        except KeyError:
            valid = ", ".join(sorted(self._entries))
            raise ValueError(f"unknown {self.kind} {name!r}; valid: {valid}") from None

    def unregistered(self) -> tuple[str, ...]:
        """Declared names with no registered function (empty when complete)."""
        return tuple(n for n in self.declared or () if n not in self._entries)

    def names(self) -> tuple[str, ...]:
        """The registered names, sorted."""
        return tuple(sorted(self._entries))

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())
