"""Check every use of vLLM in services/generation/vllm_backend.py against the installed vllm's
real signatures, without a GPU (``make vllm-contract``: the pinned release in its own venv).

The backend cannot run on the CPU machines the project is developed on, so what it asks of
vLLM is checked here statically, against the real objects:

1. every call in the module is parsed (``ast``) and the ones that reach vLLM are recognised by
   their callee (``vllm.LLM``, ``self._vllm.SamplingParams``, ``self._llm.<method>``, the
   names imported from ``vllm...``, the worker's ``model_runner.model.load_weights``, the
   weight group's ``broadcast``); a call on a vLLM object this table does not know fails the
   check (a new use must be added here);
2. each is bound to the real callable's ``inspect.signature`` with the call's positional count
   and keyword names: an unknown keyword, a missing required argument or too many positionals
   fails; ``LLM(**kwargs)`` is expanded from the module's ``kwargs`` dict literal and its
   ``kwargs["..."] = ...`` assignments, and the keys ``LLM`` forwards to ``EngineArgs`` are
   checked against its fields; a literal value is checked against a ``Literal`` annotation;
3. every attribute the backend reads on vLLM's results (``RequestOutput.outputs``,
   ``CompletionOutput.token_ids/logprobs/finish_reason``, ``Logprob.logprob``,
   ``LLM.llm_engine.model_config.max_model_len``, ``Worker.device/model_runner``,
   ``get_world_group().rank``) exists on the real classes.

Exit 0 when everything holds; 1 with one line per problem.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import importlib
import inspect
import sys
import typing
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
BACKEND = REPO / "services" / "generation" / "vllm_backend.py"


def callee(node: ast.AST) -> str:
    """Dotted text of a call's function (``self._llm.generate``)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{callee(node.value)}.{node.attr}"
    if isinstance(node, ast.Call):
        return f"{callee(node.func)}()"
    return "?"


def llm_kwargs(tree: ast.Module) -> dict[str, Any]:
    """The keys (and literal values) of the ``kwargs`` passed as ``vllm.LLM(**kwargs)``."""
    out: dict[str, Any] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.AnnAssign | ast.Assign):
            targets = [node.target] if isinstance(node, ast.AnnAssign) else node.targets
            names = [t.id for t in targets if isinstance(t, ast.Name)]
            if "kwargs" in names and isinstance(node.value, ast.Dict):
                for key, value in zip(node.value.keys, node.value.values, strict=True):
                    if isinstance(key, ast.Constant):
                        out[key.value] = value.value if isinstance(value, ast.Constant) else ...
            for t in targets:
                if (
                    isinstance(t, ast.Subscript)
                    and isinstance(t.value, ast.Name)
                    and t.value.id == "kwargs"
                    and isinstance(t.slice, ast.Constant)
                ):
                    out[t.slice.value] = ...
    return out


def bind(fn: Any, where: str, positional: int, keywords: list[str], problems: list[str]) -> None:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        problems.append(f"{where}: no signature for {fn!r}: {exc}")
        return
    try:
        sig.bind(*([None] * positional), **{k: None for k in keywords})
    except TypeError as exc:
        problems.append(f"{where}: {exc} (signature {sig})")


def literal_values(annotation: Any) -> tuple[Any, ...] | None:
    """The allowed values of a ``Literal`` annotation (through ``Optional``), else None."""
    if typing.get_origin(annotation) is typing.Literal:
        return typing.get_args(annotation)
    for arg in typing.get_args(annotation):
        found = literal_values(arg)
        if found is not None:
            return found
    return None


def annotation_literals(annotation: Any, namespace: dict[str, Any]) -> tuple[Any, ...] | None:
    """``literal_values`` of a field's annotation, a string one evaluated in its module (None
    when it cannot be: such a value is left unchecked)."""
    if isinstance(annotation, str):
        try:
            annotation = eval(annotation, namespace)
        except Exception:
            return None
    return literal_values(annotation)


def check(problems: list[str], backend: Path = BACKEND) -> int:
    import vllm
    from vllm.distributed.device_communicators.pynccl import PyNcclCommunicator
    from vllm.distributed.parallel_state import GroupCoordinator, get_world_group
    from vllm.distributed.utils import StatelessProcessGroup
    from vllm.engine.arg_utils import EngineArgs
    from vllm.logprobs import Logprob
    from vllm.outputs import CompletionOutput, RequestOutput

    tree = ast.parse(backend.read_text())
    llm_cls = vllm.LLM
    # a representative decoder the extension's load_weights runs on (the tiny model is Qwen2)
    qwen2 = importlib.import_module("vllm.model_executor.models.qwen2").Qwen2ForCausalLM
    known: dict[str, Any] = {
        "vllm.LLM": llm_cls,
        "self._vllm.SamplingParams": vllm.SamplingParams,
        "self._llm.generate": llm_cls.generate,
        "self._llm.collective_rpc": llm_cls.collective_rpc,
        "self._llm.reset_prefix_cache": llm_cls.reset_prefix_cache,
        "PyNcclCommunicator": PyNcclCommunicator,
        "get_world_group": get_world_group,
        "StatelessProcessGroup.create": StatelessProcessGroup.create,
        "group.broadcast": PyNcclCommunicator.broadcast,
        "self.model_runner.model.load_weights": qwen2.load_weights,
    }
    methods = {"self._llm.generate", "self._llm.collective_rpc", "self._llm.reset_prefix_cache",
               "group.broadcast", "self.model_runner.model.load_weights"}  # fmt: skip
    vllm_roots = ("vllm.", "self._vllm.", "self._llm.", "self.model_runner.", "group.")
    imported = {"PyNcclCommunicator", "get_world_group", "StatelessProcessGroup"}
    seen: set[str] = set()
    checked = 0
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = callee(node.func)
        head = name.split(".")[0]
        if not (name.startswith(vllm_roots) or head in imported):
            continue
        where = f"vllm_backend.py:{node.lineno} {name}(...)"
        if name not in known:
            problems.append(f"{where}: a use of vLLM this contract does not know; add it")
            continue
        seen.add(name)
        keywords = [k.arg for k in node.keywords if k.arg is not None]
        positional = len(node.args) + (1 if name in methods else 0)  # self of a method
        if name == "vllm.LLM":
            kwargs = llm_kwargs(tree)
            accepted = set(inspect.signature(llm_cls).parameters)
            fields = {f.name: f for f in dataclasses.fields(EngineArgs)}
            module_globals = vars(sys.modules[EngineArgs.__module__])
            for key, value in kwargs.items():
                if key not in accepted and key not in fields:
                    problems.append(f"{where}: LLM(... {key}=...): neither an LLM parameter "
                                    "nor an EngineArgs field")  # fmt: skip
                allowed = (
                    annotation_literals(fields[key].type, module_globals) if key in fields else None
                )
                if allowed is not None and value is not ... and value not in allowed:
                    problems.append(f"{where}: {key}={value!r} is not one of {allowed}")
            checked += len(kwargs)
            continue
        bind(known[name], where, positional, keywords, problems)
        checked += 1
    missing = set(known) - seen
    if missing:
        problems.append(f"the contract names calls the backend no longer makes: {sorted(missing)}")
    # attributes the backend reads on vLLM's objects
    attributes = [
        (RequestOutput, "outputs"),
        (CompletionOutput, "token_ids"),
        (CompletionOutput, "logprobs"),
        (CompletionOutput, "finish_reason"),
        (Logprob, "logprob"),
        (GroupCoordinator, "rank"),
    ]
    for cls, attr in attributes:
        names = set(getattr(cls, "__dataclass_fields__", {}))
        names |= set(getattr(cls, "__annotations__", {}))
        names |= set(getattr(cls, "__struct_fields__", ()))
        if attr not in names and not hasattr(cls, attr):
            with contextlib.suppress(TypeError, ValueError):
                names |= set(inspect.signature(cls.__init__).parameters)
            if attr not in names and f"self.{attr}" not in inspect.getsource(cls):
                problems.append(f"{cls.__name__}.{attr}: read by the backend, absent in vLLM")
        checked += 1
    llm_source = inspect.getsource(llm_cls.__init__)
    if "self.llm_engine" not in llm_source:
        problems.append("LLM.llm_engine: read by the backend, not set by LLM.__init__")
    from vllm.config import ModelConfig

    if "max_model_len" not in {f.name for f in dataclasses.fields(ModelConfig)}:
        problems.append("ModelConfig.max_model_len: read by the backend, absent in vLLM")
    from vllm.v1.worker.gpu_worker import Worker

    worker_source = inspect.getsource(Worker)
    for attr in ("self.device", "self.model_runner"):
        if f"{attr} =" not in worker_source and f"{attr}:" not in worker_source:
            problems.append(f"Worker {attr}: used by VllmWorkerExtension, not set by vLLM")
    return checked + 3


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    backend = Path(args[0]) if args else BACKEND  # another copy of the backend (to see it fail)
    problems: list[str] = []
    try:
        import vllm
    except ImportError as exc:
        print(f"vllm-contract: vllm is not installed here ({exc}): make vllm-contract installs it")
        return 1
    checked = check(problems, backend)
    for line in problems:
        print(f"vllm-contract: {line}")
    status = "FAILED" if problems else "ok"
    print(f"vllm-contract: vllm {vllm.__version__}: {checked} uses checked, "
          f"{len(problems)} problems: {status}")  # fmt: skip
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
