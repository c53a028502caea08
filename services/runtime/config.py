"""Layered settings loading for every service: defaults < YAML file < environment < overrides.

Each service has one frozen pydantic settings model (fields documented once with
``Field(description=...)``) holding a ``server: ServerSettings`` block plus its own fields.
``load_settings(cls, config_file, overrides)`` builds it from, lowest precedence first:

1. the model's defaults;
2. a YAML file whose top level is a mapping of field names (nested blocks for nested models);
3. environment variables ``GRPO_<FIELD>`` with ``__`` between nesting levels, e.g.
   ``GRPO_SERVER__PORT=50061``; names are case-insensitive; values are strings that pydantic
   converts, except YAML flow collections (``GRPO_TASK_TYPES='[math, arith]'``). A nested
   variable (``__`` after the prefix) into a block of the model whose key names no setting
   is refused (``InvalidArgumentError``, one line naming it and the closest valid variable:
   ``GRPO_VERIFIER__RELTOL`` -> ``GRPO_VERIFIER__REL_TOL``), as YAML and ``--set`` typos
   are. A name that may be another's is logged as a warning (with the closest variable),
   not refused: one level (``GRPO_BENCH_ROUNDS``), or a block the model lacks
   (``GRPO_WORKER__NAMESPACE``, the rollout worker's, in an environment that several
   services share). The process-level names in ``PROCESS_ENV`` and variables of a longer
   prefix (``GRPO_RUN_*`` belongs to ``grpo run``) are skipped;
4. ``overrides`` (CLI flags): a mapping whose keys may be dotted paths (``"server.port"``).

One environment path: ``grpo run`` applies its ``GRPO_RUN_*`` variables to the RunConfig it
writes into the run dir and every service's YAML; the services it launches get
``child_environment()``, the parent's environment without ``GRPO_*`` settings variables, so
what the run dir says is what each service runs with.

``python -m grpo.services.runtime.config --markdown`` prints the configuration reference of every
settings model registered in ``grpo.services.runtime.registry`` (this is how docs/configuration.md
is made).
"""

from __future__ import annotations

import difflib
import enum
import hashlib
import logging
import os
import re
import sys
import types
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, TypeVar

import yaml
from pydantic import BaseModel, TypeAdapter, ValidationError

from grpo.errors import InvalidArgumentError, NotFoundError

__all__ = [
    "ENV_PREFIXES",
    "NESTED_DELIMITER",
    "PROCESS_ENV",
    "child_environment",
    "error_text",
    "load_settings",
    "mask_secrets",
    "model_at",
    "settings_digest",
    "settings_reference",
    "settings_text",
]

log = logging.getLogger(__name__)

SettingsT = TypeVar("SettingsT", bound=BaseModel)

PROCESS_ENV = frozenset({"GRPO_DATA_DIR", "GRPO_DEBUG"})
"""``GRPO_*`` variables that are not settings: the dataset folder (``grpo.services.tasks.datasets``)
and tracebacks instead of one-line errors (``grpo.cli.main``)."""

NESTED_DELIMITER = "__"
"""Between the nesting levels of a settings variable (``GRPO_VERIFIER__POOL__WORKERS``)."""

ENV_PREFIXES = ("GRPO_RUN_", "GRPO_")
"""Prefixes of settings variables, longest first: ``GRPO_RUN_`` feeds ``grpo run``'s RunConfig,
``GRPO_`` a service's settings."""


def child_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``environ`` (default ``os.environ``) without settings variables (``GRPO_*`` except
    ``PROCESS_ENV``): the environment of a service launched with a settings file written for
    it, so no inherited variable overrides what the file says."""
    source = os.environ if environ is None else environ
    return {
        k: v
        for k, v in source.items()
        if not k.upper().startswith("GRPO_") or k.upper() in PROCESS_ENV
    }


def _model_of(annotation: Any) -> type[BaseModel] | None:
    """The BaseModel class inside ``annotation`` (also through ``X | None``), else None."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            found = _model_of(arg)
            if found is not None:
                return found
    return None


def deep_merge(base: dict[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` updated by ``update``, recursively: nested mappings merge key by key, any other
    value (lists included) replaces; neither argument is modified and the result shares no
    nested mapping with them. The one deep-merge of settings layers (YAML, environment, flags,
    and ``grpo run``'s per-service extras)."""
    out = dict(base)
    for key, value in update.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = deep_merge({}, value) if isinstance(value, Mapping) else value
    return out


def _nest(path: list[str], value: Any) -> dict[str, Any]:
    out: dict[str, Any] = {path[-1]: value}
    for key in reversed(path[:-1]):
        out = {key: out}
    return out


def _resolve_path(cls: type[BaseModel], parts: list[str]) -> list[str] | None:
    """Map case-insensitive name parts to real field names of ``cls``; None if no such path."""
    resolved: list[str] = []
    model: type[BaseModel] | None = cls
    for depth, part in enumerate(parts):
        if model is None:
            return None
        by_lower = {name.lower(): name for name in model.model_fields}
        name = by_lower.get(part.lower())
        if name is None:
            return None
        resolved.append(name)
        if depth < len(parts) - 1:
            model = _model_of(model.model_fields[name].annotation)
    return resolved


def _env_layer(
    cls: type[BaseModel], env: Mapping[str, str], prefix: str, sources: dict[str, str]
) -> dict[str, Any]:
    """The environment's settings document for ``cls``; ``sources`` gets the variable that
    set each dotted key (``{"verifier.rel_tol": "GRPO_VERIFIER__REL_TOL"}``)."""
    layer: dict[str, Any] = {}
    plen = len(prefix)
    longer = [p for p in ENV_PREFIXES if len(p) > plen and p.startswith(prefix.upper())]
    for key, raw in env.items():
        upper = key.upper()
        if not upper.startswith(prefix.upper()) or len(key) == plen:
            continue
        parts = key[plen:].split(NESTED_DELIMITER)
        path = _resolve_path(cls, parts)
        if path is None:
            if upper in PROCESS_ENV or any(upper.startswith(p) for p in longer):
                continue
            if len(parts) > 1 and _resolve_path(cls, parts[:1]) is not None:
                # a block of ours with a name that is none of its keys: a typo, refused
                raise InvalidArgumentError(_unknown_variable(cls, key, prefix))
            # one level, or a block this model lacks (GRPO_WORKER__NAMESPACE is the rollout
            # worker's, in an environment shared by several services): maybe not ours
            log.warning("%s; ignored", _unknown_variable(cls, key, prefix))
            continue
        # Scalars stay strings (pydantic coerces "123"/"true" for int/bool fields and keeps
        # "on" or "007" intact for str fields); flow collections are parsed as YAML.
        value: Any = raw
        if raw.strip()[:1] in ("[", "{"):
            try:
                value = yaml.safe_load(raw)
            except yaml.YAMLError as exc:
                raise InvalidArgumentError(
                    f"environment variable {key} is not valid YAML: {exc}"
                ) from exc
        layer = deep_merge(layer, _nest(path, value))
        sources[".".join(path)] = key
    return layer


def _shadowed_env_values(
    cls: type[BaseModel],
    env_layer: dict[str, Any],
    overrides: dict[str, Any],
    sources: dict[str, str],
) -> None:
    """Check each environment value that an override hides against its field's type and
    constraints, so a bad variable is refused even under a flag
    (``GRPO_VERIFIER__POOL__WORKERS=abc`` with ``--workers 3``).

    Raises:
        InvalidArgumentError: naming the variable and what is wrong with its value.
    """
    over = _dotted_keys(overrides)
    for dotted, value in _dotted_items(env_layer):
        if not any(dotted == k or dotted.startswith(k + ".") for k in over):
            continue
        model: type[BaseModel] | None = cls
        *heads, leaf = dotted.split(".")
        for head in heads:
            model = _model_of(model.model_fields[head].annotation) if model else None
        if model is None or leaf not in model.model_fields:
            continue
        info = model.model_fields[leaf]
        try:
            kind: Any = (
                Annotated[(info.annotation, *info.metadata)] if info.metadata else info.annotation
            )
            TypeAdapter(kind).validate_python(value)
        except ValidationError as exc:
            text = "; ".join(str(e.get("msg", "")) for e in exc.errors())
            raise InvalidArgumentError(
                f"invalid {cls.__name__} settings: {dotted}: {text} (from environment "
                f"{sources.get(dotted, dotted)})"
            ) from None


def _dotted_items(tree: Mapping[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """``(dotted path, value)`` of the leaves of a nested mapping."""
    items: list[tuple[str, Any]] = []
    for key, value in tree.items():
        if isinstance(value, Mapping) and value:
            items += _dotted_items(value, f"{prefix}{key}.")
        else:
            items.append((f"{prefix}{key}", value))
    return items


def _env_names(cls: type[BaseModel], prefix: str, path: str = "") -> dict[str, str]:
    """Every settings variable of ``cls`` under ``prefix`` (upper case), to its dotted key:
    ``{"GRPO_VERIFIER__REL_TOL": "verifier.rel_tol", ...}``; nested blocks are listed with
    their leaves."""
    names: dict[str, str] = {}
    for name, field in cls.model_fields.items():
        dotted = f"{path}{name}"
        names[prefix.upper() + dotted.replace(".", NESTED_DELIMITER).upper()] = dotted
        nested = _model_of(field.annotation)
        if nested is not None:
            names |= _env_names(nested, prefix, dotted + ".")
    return names


def _unknown_variable(cls: type[BaseModel], key: str, prefix: str) -> str:
    """The one-line refusal of ``key``, a nested variable under ``prefix`` that names no
    setting of ``cls``, naming the closest valid variable (``difflib`` ratio, cutoff 0)."""
    names = _env_names(cls, prefix)
    closest = difflib.get_close_matches(key.upper(), list(names), n=1, cutoff=0.0)
    hint = f"; did you mean {closest[0]} ({names[closest[0]]})?" if closest else ""
    return f"environment variable {key} names no setting of {cls.__name__}{hint}"


def _override_layer(cls: type[BaseModel], overrides: Mapping[str, Any]) -> dict[str, Any]:
    layer: dict[str, Any] = {}
    for key, value in overrides.items():
        parts = key.split(".")
        path = _resolve_path(cls, parts) or parts  # unknown names reach pydantic, which names them
        layer = deep_merge(layer, _nest(path, value))
    return layer


def load_settings(
    cls: type[SettingsT],
    config_file: Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    env_prefix: str = "GRPO_",
    environ: Mapping[str, str] | None = None,
    base: Mapping[str, Any] | None = None,
) -> SettingsT:
    """Build ``cls`` from defaults < ``base`` < ``config_file`` (YAML) < environment <
    ``overrides``.

    Args:
        cls: the service's settings model (a pydantic ``BaseModel``).
        config_file: optional YAML file; its top level must be a mapping.
        overrides: highest-precedence values, keys may be dotted (``{"server.port": 0}``); a
            ``None`` value sets the field to null (``--set verifiers.process=null``), so callers
            leave unset CLI flags out of the mapping.
        env_prefix: prefix of the environment variables that feed the settings.
        environ: the environment to read (default ``os.environ``; tests pass a dict).
        base: a settings document below the file (``grpo serve --run-config``: the settings
            derived from the run, ``grpo.services.settings.services.load_service_settings``).

    Returns:
        The validated settings object.

    Raises:
        NotFoundError: ``config_file`` does not exist.
        InvalidArgumentError: the file is not valid YAML or not a mapping, or a value/name is
            invalid (the message lists every bad field with its dotted path).
    """
    merged: dict[str, Any] = deep_merge({}, base or {})
    if config_file is not None:
        path = Path(config_file)
        if not path.is_file():
            raise NotFoundError(f"config file {path} does not exist")
        try:
            loaded = yaml.safe_load(path.read_text()) or {}
        except yaml.YAMLError as exc:
            raise InvalidArgumentError(f"config file {path} is not valid YAML: {exc}") from exc
        if not isinstance(loaded, dict):
            raise InvalidArgumentError(
                f"config file {path} must hold a mapping of setting names, got "
                f"{type(loaded).__name__}"
            )
        merged = deep_merge(merged, loaded)
    sources: dict[str, str] = {}
    env_layer = _env_layer(cls, os.environ if environ is None else environ, env_prefix, sources)
    merged = deep_merge(merged, env_layer)
    override_layer = _override_layer(cls, overrides) if overrides else {}
    _shadowed_env_values(cls, env_layer, override_layer, sources)
    merged = deep_merge(merged, override_layer)
    try:
        return cls.model_validate(merged)
    except ValidationError as exc:
        layers = [
            (_dotted_keys(override_layer), "override"),
            (_dotted_keys(env_layer), f"environment {env_prefix}*"),
        ]

        def origin(loc: str) -> str:
            if not loc and any(keys for keys, _ in layers):
                return ""  # a check of the whole model: any layer may have caused it
            if loc in sources and loc not in layers[0][0]:
                return f" (from environment {sources[loc]})"
            for keys, name in layers:
                if any(
                    loc == k or loc.startswith(k + ".") or k.startswith(loc + ".") for k in keys
                ):
                    return f" (from {name})"
            if config_file:
                return f" (file {config_file})"
            return " (run config, placement or config files)" if base else ""

        problems = "; ".join(
            f"{text}{origin(loc)}"
            for err in exc.errors()
            for loc, text in [(".".join(str(p) for p in err["loc"]), error_text(cls, err))]
        )
        raise InvalidArgumentError(f"invalid {cls.__name__} settings: {problems}") from exc


def model_at(cls: type[BaseModel], path: Sequence[Any]) -> type[BaseModel] | None:
    """The model class reached from ``cls`` along a validation error's location ``path``
    (field names; list indices and dict keys are stepped through), or None when the path
    leaves the models (a free-form mapping, an unknown name)."""
    annotation: Any = cls
    for part in path:
        model = _model_of(annotation)
        if model is not None and isinstance(part, str) and part in model.model_fields:
            annotation = model.model_fields[part].annotation
            continue
        container = _container_item(annotation)
        if container is None:
            return None
        annotation = container
    return _model_of(annotation) or _model_of(_container_item(annotation))


def _container_item(annotation: Any) -> Any:
    """The item type of ``list[X]``/``dict[K, X]`` (also through ``| None``), else None."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            found = _container_item(arg)
            if found is not None:
                return found
        return None
    args = typing.get_args(annotation)
    if origin in (list, tuple, set, frozenset) and args:
        return args[0]
    if origin is dict and len(args) == 2:
        return args[1]
    return None


def error_text(cls: type[BaseModel], err: Mapping[str, Any]) -> str:
    """One pydantic error of validating ``cls`` as ``<dotted location>: <what is wrong>``;
    an unknown key names the valid keys of its block, a model check's ``Value error, `` prefix
    is dropped."""
    loc = tuple(err.get("loc", ()))
    where = ".".join(str(p) for p in loc)
    msg = str(err.get("msg", ""))
    if err.get("type") == "extra_forbidden":
        parent = model_at(cls, loc[:-1])
        valid = ", ".join(parent.model_fields) if parent is not None else ""
        msg = f"unknown key {loc[-1]!r}" + (f" (valid: {valid})" if valid else "")
    msg = msg.removeprefix("Value error, ")
    return f"{where}: {msg}" if where else msg


_URL_PASSWORD = re.compile(r"(?P<head>[a-z][a-z0-9+.-]*://[^:/@\s]*:)[^@\s]+(?P<at>@)")


def mask_secrets(value: Any) -> Any:
    """``value`` (a settings document) with the password of every ``scheme://user:pw@host``
    URL replaced by ``***`` (e.g. ``redis://:***@redis:6379/0``)."""
    if isinstance(value, dict):
        return {k: mask_secrets(v) for k, v in value.items()}
    if isinstance(value, list):
        return [mask_secrets(v) for v in value]
    if isinstance(value, str):
        return _URL_PASSWORD.sub(r"\g<head>***\g<at>", value)
    return value


def settings_text(settings: BaseModel) -> str:
    """Validated settings as YAML (keys sorted, passwords in URLs masked): what
    ``grpo serve ... --print-settings`` prints."""
    return yaml.safe_dump(mask_secrets(settings.model_dump(mode="json")), sort_keys=True)


def settings_digest(settings: BaseModel) -> str:
    """SHA-256 (hex) of ``settings_text``: logged by ``grpo serve`` at start, so two pods (or
    two restarts) can be told to run the same settings or not."""
    return hashlib.sha256(settings_text(settings).encode()).hexdigest()


def _dotted_keys(tree: dict[str, Any], prefix: str = "") -> set[str]:
    """Dotted paths of the leaves of a nested mapping."""
    keys: set[str] = set()
    for key, value in tree.items():
        path = f"{prefix}{key}"
        keys |= _dotted_keys(value, path + ".") if isinstance(value, dict) and value else {path}
    return keys


def _type_name(annotation: Any) -> str:
    text = getattr(annotation, "__name__", None) if isinstance(annotation, type) else None
    text = text or str(annotation).replace("typing.", "").replace("pathlib.", "")
    return text.replace("|", "\\|")


def _default_text(field: Any) -> str:
    if field.is_required():
        return "required"
    factory = field.default_factory
    if factory is not None and not isinstance(factory, type) and factory.__name__ != "<lambda>":
        # A named factory computes the default at run time (e.g. host-pid): name it instead.
        return f"computed by `{factory.__name__}()`"
    default = field.get_default(call_default_factory=True)
    if isinstance(default, enum.Enum):
        default = default.value
    if isinstance(default, BaseModel):
        return "see below"
    return f"`{default!r}`"


def _rows(
    cls: type[BaseModel], prefix: str, env_prefix: str, shared: tuple[type[BaseModel], ...]
) -> list[str]:
    rows: list[str] = []
    for name, field in cls.model_fields.items():
        dotted = f"{prefix}{name}"
        env = env_prefix + dotted.replace(".", "__").upper()
        desc = (field.description or "").replace("|", "\\|").replace("\n", " ")
        nested = _model_of(field.annotation)
        if nested is not None and nested in shared:
            rows.append(
                f"| `{dotted}.*` | {nested.__name__} | | `{env}__*` | {desc} "
                f"(see [{nested.__name__}](#{nested.__name__.lower()})) |"
            )
            continue
        if nested is not None:
            rows.extend(_rows(nested, f"{dotted}.", env_prefix, shared))
            continue
        rows.append(
            f"| `{dotted}` | {_type_name(field.annotation)} | {_default_text(field)} | `{env}` "
            f"| {desc} |"
        )
    return rows


def settings_reference(
    cls: type[BaseModel],
    title: str,
    env_prefix: str = "GRPO_",
    shared: tuple[type[BaseModel], ...] = (),
) -> str:
    """Markdown section documenting every field of ``cls`` (nested blocks flattened).

    Each row gives the dotted YAML path, type, default (``required`` when there is none),
    environment variable and the field's ``description``. Blocks whose model is in ``shared``
    get one row pointing at that model's own section instead of being expanded.
    """
    doc = (cls.__doc__ or "").strip().splitlines()
    lines = [f"## {title}", "", f"Settings model `{cls.__module__}.{cls.__qualname__}`."]
    if doc:
        lines += ["", doc[0]]
    lines += [
        "",
        "| key | type | default | environment | description |",
        "| --- | --- | --- | --- | --- |",
        *_rows(cls, "", env_prefix, shared),
        "",
    ]
    return "\n".join(lines)


def _markdown() -> str:
    from grpo.services.runtime import registry
    from grpo.services.runtime.server import ServerSettings

    parts = [
        "# Configuration reference",
        "",
        "Generated by `python -m grpo.services.runtime.config --markdown > docs/configuration.md`; "
        "do not edit by hand.",
        "",
        "Every service reads one settings object, layered lowest first: field defaults < the "
        "YAML file given with `--config` < environment variables (`GRPO_<FIELD>`, `__` between "
        "nesting levels) < command-line flags (`--port`, `--metrics-port`). YAML keys are the "
        "dotted paths below, written as nested blocks.",
        "",
        "`grpo score` and `grpo eval` build a verifier service in process (when they are not "
        "given an endpoint) with the same loader, so the `GRPO_*` variables of its section "
        "apply there too (`GRPO_VERIFIER__REL_TOL` for `grpo score math`); they take no "
        "`--config`. A flag they are given wins over the environment, which wins over the "
        "default: `--workers` over `GRPO_VERIFIER__POOL__WORKERS` / `GRPO_SCORING__CONCURRENCY` "
        "(unset, the variable applies, else the service's default); `--deadline` (which has a "
        "default, 300 s) always sets `scoring.request_timeout_s` (docs/evaluation.md).",
        "",
        "Every service has the same `server:` block, documented once here (keys below are "
        "under `server:`).",
        "",
        settings_reference(ServerSettings, "ServerSettings", env_prefix="GRPO_SERVER__"),
    ]
    for name in registry.service_names():
        try:
            spec = registry.load_spec(name)
        except Exception as exc:  # a service still being written: list it, do not fail
            parts += [f"## {name}", "", f"_Not available here: {type(exc).__name__}: {exc}_", ""]
            continue
        parts.append(
            settings_reference(spec.settings_cls, f"`grpo serve {name}`", shared=(ServerSettings,))
        )
    return "\n".join(parts)


if __name__ == "__main__":
    if sys.argv[1:] != ["--markdown"]:
        sys.exit("usage: python -m grpo.services.runtime.config --markdown")
    print(_markdown())
