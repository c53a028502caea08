"""Put a run's initial policy in place: copy a ``save_pretrained`` folder from a mounted
volume, a model hub or object storage into a destination folder (``grpo model fetch``).

On Kubernetes the learner's init container runs it before the learner starts: the folder lands
on learner pod 0's claim at the run's model path, where the learner loads it and publishes it as
policy version 0 (docs/kubernetes.md, "Put the initial policy in place").

Sources (``parse_source``):

- a folder path (``/var/lib/grpo-model-source/qwen``): an existing claim mounted read-only;
- ``hf://<org>/<name>[@<revision>]``: a model hub repository (``huggingface_hub``'s
  ``snapshot_download``; the token from ``$HF_TOKEN``, the endpoint from ``$HF_ENDPOINT``);
- ``s3://<bucket>/<prefix>``: every object under the prefix (``boto3``; credentials from the
  environment or the pod's workload identity, an S3-compatible endpoint from
  ``$AWS_ENDPOINT_URL``).

The copy goes into a sibling folder first and is renamed into place only once complete, with
``DIGESTS.json`` (``grpo.integrity``) written into it: a pod killed mid-copy leaves no
half-folder behind, and a destination that is already there and intact is kept (a restarted
or replaced pod, a resumed run) without fetching again. A destination whose files differ
from its digests is fetched again.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grpo.errors import FailedPreconditionError, InvalidArgumentError, NotFoundError
from grpo.integrity import DamagedError, check_digests, write_digests

__all__ = ["FetchResult", "ModelSource", "fetch_model", "parse_source"]

log = logging.getLogger(__name__)

WEIGHT_PATTERNS = ("*.safetensors", "*.bin", "*.pt")
"""Files of which a ``save_pretrained`` folder has at least one (besides ``config.json``)."""


@dataclass(frozen=True)
class ModelSource:
    """Where an initial policy comes from.

    Attributes:
        kind: ``folder``, ``hub`` or ``s3``.
        location: the folder path, the hub repository id, or ``bucket/prefix``.
        revision: the hub revision (branch, tag or commit); '' = the default branch.
    """

    kind: str
    location: str
    revision: str = ""

    def __str__(self) -> str:
        if self.kind == "hub":
            return f"hf://{self.location}" + (f"@{self.revision}" if self.revision else "")
        if self.kind == "s3":
            return f"s3://{self.location}"
        return self.location


def parse_source(text: str) -> ModelSource:
    """A source from its text (module docstring).

    Raises:
        InvalidArgumentError: an empty text, an unknown scheme, or a hub id / bucket missing.
    """
    text = text.strip()
    if text.startswith("hf://"):
        repo, _, revision = text.removeprefix("hf://").partition("@")
        if repo.count("/") > 1 or not repo.strip("/"):
            raise InvalidArgumentError(f"model source {text!r}: want hf://<org>/<name>[@rev]")
        return ModelSource("hub", repo.strip("/"), revision)
    if text.startswith("s3://"):
        rest = text.removeprefix("s3://").strip("/")
        if not rest:
            raise InvalidArgumentError(f"model source {text!r}: want s3://<bucket>/<prefix>")
        return ModelSource("s3", rest)
    if text.startswith("/"):
        return ModelSource("folder", text)
    raise InvalidArgumentError(
        f"model source {text!r}: give a folder path (/...), hf://<org>/<name>[@rev] or "
        "s3://<bucket>/<prefix>"
    )


@dataclass(frozen=True)
class FetchResult:
    """What ``fetch_model`` did: ``fetched`` False when the destination was already in place."""

    dest: Path
    fetched: bool
    files: int
    bytes: int
    seconds: float


def _copy_folder(source: Path, into: Path) -> None:
    if not source.is_dir():
        raise NotFoundError(f"model source folder {source} does not exist (is its claim mounted?)")
    shutil.copytree(source, into, symlinks=False, dirs_exist_ok=True)


def _download_hub(source: ModelSource, into: Path) -> None:
    from huggingface_hub import snapshot_download

    snapshot_download(
        source.location,
        revision=source.revision or None,
        local_dir=into,
        token=os.environ.get("HF_TOKEN") or None,
    )
    shutil.rmtree(into / ".cache", ignore_errors=True)  # huggingface_hub's download metadata


def _download_s3(source: ModelSource, into: Path, client: Any = None) -> None:
    bucket, _, prefix = source.location.partition("/")
    prefix = prefix.rstrip("/") + "/" if prefix else ""
    if client is None:
        import boto3

        client = boto3.client("s3", endpoint_url=os.environ.get("AWS_ENDPOINT_URL") or None)
    keys = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        keys += [o["Key"] for o in page.get("Contents", []) if not o["Key"].endswith("/")]
    if not keys:
        raise NotFoundError(f"model source {source}: no object under that prefix")
    for key in keys:
        relative = Path(key[len(prefix) :])
        if relative.is_absolute() or ".." in relative.parts:
            raise InvalidArgumentError(
                f"model source {source}: object key {key!r} leaves the folder"
            )
        target = into / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        client.download_file(bucket, key, str(target))


def _check_model_folder(folder: Path, source: ModelSource) -> None:
    if not (folder / "config.json").is_file():
        raise FailedPreconditionError(
            f"model source {source} is no save_pretrained folder: it has no config.json"
        )
    if not any(any(folder.rglob(p)) for p in WEIGHT_PATTERNS):
        raise FailedPreconditionError(
            f"model source {source} has no weights ({', '.join(WEIGHT_PATTERNS)})"
        )


def _intact(dest: Path) -> bool:
    if not (dest / "config.json").is_file():
        return False
    try:
        check_digests(dest)
    except DamagedError as exc:
        log.warning("the model folder in place is damaged or unrecorded; fetching again: %s", exc)
        return False
    return True


def fetch_model(source: ModelSource | str, dest: Path, *, s3_client: Any = None) -> FetchResult:
    """Put the model of ``source`` at ``dest`` (see the module docstring).

    Args:
        source: where the model is (``parse_source`` text or a ``ModelSource``).
        dest: the folder to create (its parent must exist or be creatable).
        s3_client: a boto3 S3 client to use (default: one from the environment).

    Returns:
        What was done; ``fetched`` False when ``dest`` was already there and intact.

    Raises:
        InvalidArgumentError: a malformed source.
        NotFoundError: the folder, repository or prefix does not exist.
        FailedPreconditionError: what arrived is no ``save_pretrained`` folder.
        ImportError: ``boto3`` is missing for an ``s3://`` source (the ``fetch`` extra).
        OSError / the hub's and boto3's errors: the copy or a download failed.
    """
    src = parse_source(source) if isinstance(source, str) else source
    start = time.perf_counter()
    if _intact(dest):
        files = [p for p in dest.rglob("*") if p.is_file()]
        log.info("model already in place", extra={"dest": str(dest), "source": str(src)})
        return FetchResult(dest, False, len(files), sum(p.stat().st_size for p in files), 0.0)
    dest.parent.mkdir(parents=True, exist_ok=True)
    partial = dest.with_name(f".{dest.name}.partial-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir()
    try:
        if src.kind == "folder":
            _copy_folder(Path(src.location), partial)
        elif src.kind == "hub":
            _download_hub(src, partial)
        else:
            _download_s3(src, partial, s3_client)
        _check_model_folder(partial, src)
        (partial / "DIGESTS.json").unlink(missing_ok=True)  # the source's own, if any
        entries = write_digests(partial)
        old = dest.with_name(f".{dest.name}.old-{os.getpid()}")
        if dest.exists():
            dest.rename(old)  # a damaged folder: replaced, then removed
        partial.rename(dest)
        shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    seconds = time.perf_counter() - start
    size = sum(int(e["bytes"]) for e in entries.values())
    log.info(
        "model fetched",
        extra={"source": str(src), "dest": str(dest), "files": len(entries), "bytes": size,
               "seconds": round(seconds, 3)},
    )  # fmt: skip
    return FetchResult(dest, True, len(entries), size, seconds)
