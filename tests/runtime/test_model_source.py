"""``grpo model fetch`` (the chart's learner init container): a folder on a mounted claim, a
hub repository through the real ``huggingface_hub`` client against a loopback stand-in of the
hub's HTTP API (``HF_ENDPOINT``; nothing reaches a hub), and object storage through the real
``boto3`` client against a loopback stand-in of S3's ListObjectsV2/GetObject."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse
from xml.sax.saxutils import escape

import pytest

from grpo.errors import FailedPreconditionError, InvalidArgumentError, NotFoundError
from grpo.integrity import check_digests
from grpo.services.runtime.model_source import fetch_model, parse_source

SHA = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from grpo.model import init_tiny_model

    return init_tiny_model(tmp_path_factory.mktemp("tiny") / "m", seed=0, hidden=32, layers=1)


def serve(handle: Callable[[BaseHTTPRequestHandler, bool], None]) -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            handle(self, True)

        def do_HEAD(self) -> None:
            handle(self, False)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def reply(h: BaseHTTPRequestHandler, code: int, data: bytes, body: bool, **headers: str) -> None:
    h.send_response(code)
    for key, value in headers.items():
        h.send_header(key.replace("_", "-"), value)
    h.send_header("Content-Length", str(len(data)))
    h.end_headers()
    if body:
        h.wfile.write(data)


def test_sources_parse_and_bad_ones_are_named() -> None:
    assert str(parse_source("hf://Qwen/Qwen2.5-0.5B@v1")) == "hf://Qwen/Qwen2.5-0.5B@v1"
    assert parse_source("hf://gpt2").location == "gpt2"
    assert parse_source("s3://bucket/models/qwen/").location == "bucket/models/qwen"
    assert parse_source("/mnt/src").kind == "folder"
    for bad in ("", "qwen", "hf://", "hf://a/b/c", "s3://", "gs://b/p"):
        with pytest.raises(InvalidArgumentError, match="model source"):
            parse_source(bad)


def test_a_folder_is_copied_in_place_once_with_digests(tiny: Path, tmp_path: Path) -> None:
    dest = tmp_path / "claim" / "model"
    first = fetch_model(str(tiny), dest)
    assert first.fetched and (dest / "config.json").is_file()
    check_digests(dest)  # DIGESTS.json of what arrived
    assert not [p for p in dest.parent.iterdir() if p.name.startswith(".")]  # no partial left
    again = fetch_model(str(tiny), dest)
    assert not again.fetched and again.files == first.files + 1  # kept (+ DIGESTS.json)
    # a damaged folder in place is fetched again
    weights = dest / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-8] + b"corrupt!")
    assert fetch_model(str(tiny), dest).fetched
    check_digests(dest)
    with pytest.raises(NotFoundError, match="is its claim mounted"):
        fetch_model(str(tmp_path / "nothing"), tmp_path / "other")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FailedPreconditionError, match=r"no config\.json"):
        fetch_model(str(tmp_path / "empty"), tmp_path / "other")
    assert not (tmp_path / "other").exists()


@pytest.fixture
def hub(tiny: Path) -> Iterator[tuple[str, list[tuple[str, str, str | None]]]]:
    """The hub's API for repository org/tiny holding ``tiny``'s files (revision main)."""
    files = sorted(p.name for p in tiny.iterdir() if p.is_file())
    seen: list[tuple[str, str, str | None]] = []

    def handle(h: BaseHTTPRequestHandler, body: bool) -> None:
        seen.append((h.command, h.path, h.headers.get("Authorization")))
        path = urlparse(h.path).path
        if path == "/api/models/org/tiny/revision/main":
            doc = {"id": "org/tiny", "sha": SHA, "siblings": [{"rfilename": f} for f in files]}
            return reply(h, 200, json.dumps(doc).encode(), body, Content_Type="application/json")
        if path == f"/api/models/org/tiny/tree/{SHA}":
            doc = [
                {"type": "file", "path": f, "size": (tiny / f).stat().st_size,
                 "oid": hashlib.sha1((tiny / f).read_bytes()).hexdigest()}
                for f in files
            ]  # fmt: skip
            return reply(h, 200, json.dumps(doc).encode(), body, Content_Type="application/json")
        prefix = f"/org/tiny/resolve/{SHA}/"
        if path.startswith(prefix) and path[len(prefix) :] in files:
            data = (tiny / path[len(prefix) :]).read_bytes()
            etag = '"' + hashlib.sha1(data).hexdigest() + '"'
            return reply(h, 200, data, body, ETag=etag, X_Repo_Commit=SHA)
        return reply(h, 404, b"", body)

    yield from ((url, seen) for url in serve(handle))


def test_a_hub_repository_is_downloaded_with_the_token(
    hub: tuple[str, list[Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiny: Path
) -> None:
    """Through ``grpo model fetch`` as the init container runs it: HF_HUB_OFFLINE=0, the token
    from the Secret as $HF_TOKEN, the hub at $HF_ENDPOINT."""
    url, seen = hub
    dest = tmp_path / "model"
    env = {"HF_ENDPOINT": url, "HF_HUB_OFFLINE": "0", "HF_TOKEN": "hf_secret", "PATH": "/usr/bin"}
    cmd = [sys.executable, "-m", "grpo.cli", "model", "fetch", "--from", "hf://org/tiny@main",
           "--dest", str(dest)]  # fmt: skip
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "fetched" in proc.stdout
    assert sorted(p.name for p in dest.iterdir()) == sorted(
        [p.name for p in tiny.iterdir() if p.is_file()] + ["DIGESTS.json"]
    )  # no download cache left in the model folder
    assert (dest / "model.safetensors").read_bytes() == (tiny / "model.safetensors").read_bytes()
    authed = [auth for _, path, auth in seen if "/org/tiny/" in path]
    assert authed and set(authed) == {"Bearer hf_secret"}
    # a rank > 0 of a data-parallel learner fetches nothing (rank 0 sends it the model)
    other = tmp_path / "rank1"
    proc = subprocess.run(
        [*cmd[:-1], str(other), "--only-rank0"], env={**env, "RANK": "1"}, capture_output=True,
        text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0 and not other.exists()


@pytest.fixture
def s3(tiny: Path) -> Iterator[tuple[str, list[str]]]:
    """S3's ListObjectsV2 and GetObject for bucket ``models`` with ``tiny`` under ``runs/tiny/``
    (and one object outside the prefix)."""
    objects = {f"runs/tiny/{p.name}": p.read_bytes() for p in tiny.iterdir() if p.is_file()}
    objects["runs/other/config.json"] = b"{}"
    auth: list[str] = []

    def handle(h: BaseHTTPRequestHandler, body: bool) -> None:
        auth.append(h.headers.get("Authorization", ""))
        parsed = urlparse(h.path)
        bucket, _, key = parsed.path.lstrip("/").partition("/")
        if bucket != "models":
            return reply(h, 404, b"", body)
        if not key:
            prefix = parse_qs(parsed.query).get("prefix", [""])[0]
            keys = sorted(k for k in objects if k.startswith(prefix))
            contents = "".join(
                f"<Contents><Key>{escape(k)}</Key><Size>{len(objects[k])}</Size>"
                f"<ETag>&quot;{hashlib.md5(objects[k]).hexdigest()}&quot;</ETag></Contents>"
                for k in keys
            )
            xml = (
                '<?xml version="1.0" encoding="UTF-8"?><ListBucketResult '
                'xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>models</Name>'
                f"<Prefix>{escape(prefix)}</Prefix><KeyCount>{len(keys)}</KeyCount>"
                f"<IsTruncated>false</IsTruncated>{contents}</ListBucketResult>"
            )
            return reply(h, 200, xml.encode(), body, Content_Type="application/xml")
        if key not in objects:
            return reply(h, 404, b"", body)
        data = objects[key]
        return reply(h, 200, data, body, ETag=f'"{hashlib.md5(data).hexdigest()}"',
                     Last_Modified=formatdate(usegmt=True),
                     Content_Type="application/octet-stream")  # fmt: skip

    yield from ((url, auth) for url in serve(handle))


def test_an_object_storage_prefix_is_downloaded_with_the_secrets_keys(
    s3: tuple[str, list[str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiny: Path
) -> None:
    url, auth = s3
    monkeypatch.setenv("AWS_ENDPOINT_URL", url)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDFROMSECRET")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s3cret")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    dest = tmp_path / "model"
    result = fetch_model("s3://models/runs/tiny", dest)
    assert result.fetched
    names = sorted(p.name for p in tiny.iterdir() if p.is_file())
    assert sorted(p.name for p in dest.iterdir()) == sorted([*names, "DIGESTS.json"])
    assert (dest / "model.safetensors").read_bytes() == (tiny / "model.safetensors").read_bytes()
    assert auth and all("Credential=AKIDFROMSECRET/" in a for a in auth)
    with pytest.raises(NotFoundError, match="no object under that prefix"):
        fetch_model("s3://models/runs/none", tmp_path / "none")
