"""Driver that runs INSIDE the sandbox: load the candidate program, run it, report plain data.

Started as ``python3 -I -S -B -c "...; import driver; driver.main()" RESULT_FD`` (or as a
script) by :mod:`grpo.verifiers.code.sandbox`
(stdlib only; it imports ``codec.py`` from its own directory, and not ``json``, whose import
of ``re``/``enum`` would double the start-up time). It reads one ``marshal``-encoded job from
stdin (written by the trusted side), then replaces stdin with /dev/null, lowers its rlimits
(hard limits, so the candidate cannot raise them again) and only then touches untrusted code.
Records go to ``RESULT_FD`` as one JSON object per line:

- ``{"k": "hello"}`` first thing, before any candidate code (proves the sandbox started);
- ``{"k": "loaded"}`` or ``{"k": "load_error", "type": ..., "msg": ...}`` after executing the
  program text as module ``__candidate__``;
- ``{"k": "call", "i": I, "v": TREE}`` / ``{"k": "call", "i": I, "raised": TYPE, "msg": ...}``
  / ``{"k": "call", "i": I, "unencodable": TYPE}``: result of planned call I of the entry
  point (replay mode: the verdict is decided outside by replaying the tests on these values);
- ``{"k": "case", "i": I, "outcome": "passed"|"failed"|"error", ...}``: a test case that had to
  run inside (results depend on earlier calls; forgeable, flagged weaker by the verifier);
- ``{"k": "io", "i": I, "v": TREE}`` / ``{"k": "io", "i": I, "raised": ...}``: captured stdout
  of stdin/stdout pair I;
- ``{"k": "done"}``.

The candidate can write to the same fd: nothing written here is trusted except as plain typed
values, which are checked outside against expectations the sandbox never sees.
"""

import builtins
import io
import marshal
import os
import resource
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import codec  # stdlib-only sibling module, bound next to this file in the sandbox

_OUT_FD = int(sys.argv[1])
_MSG_CHARS = 300


_ESCAPES = {i: f"\\u{i:04x}" for i in range(32)}
_ESCAPES[ord('"')] = '\\"'
_ESCAPES[ord("\\")] = "\\\\"


def _json_str(text):
    text = text.translate(_ESCAPES)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: escape them so the line stays valid UTF-8
        text = "".join(f"\\u{ord(c):04x}" if 0xD800 <= ord(c) <= 0xDFFF else c for c in text)
    return '"' + text + '"'


def _json(value):
    """JSON text of records made of dict/list/str/int/bool/None (no json import)."""
    kind = type(value)
    if value is None:
        return "null"
    if kind is bool:
        return "true" if value else "false"
    if kind is int:
        return str(value)
    if kind is str:
        return _json_str(value)
    if kind is list:
        return "[" + ",".join(_json(v) for v in value) + "]"
    if kind is dict:
        return "{" + ",".join(_json_str(k) + ":" + _json(v) for k, v in value.items()) + "}"
    raise TypeError(kind.__name__)


def _emit(record):
    data = (_json(record) + "\n").encode("utf-8")
    view = memoryview(data)
    while view:
        written = os.write(_OUT_FD, view)
        view = view[written:]


def _exc_record(exc):
    try:
        msg = str(exc)[:_MSG_CHARS]
    except BaseException:
        msg = "<unprintable>"
    return {"raised": type(exc).__name__, "msg": msg}


def _set_limits(limits):
    pairs = {
        "memory_bytes": resource.RLIMIT_AS,
        "cpu_s": resource.RLIMIT_CPU,
        "processes": resource.RLIMIT_NPROC,
        "open_files": resource.RLIMIT_NOFILE,
        "file_bytes": resource.RLIMIT_FSIZE,
    }
    for key, which in pairs.items():
        value = int(limits[key])
        resource.setrlimit(which, (value, value))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


class _CappedBytes(io.BytesIO):
    def __init__(self, cap):
        super().__init__()
        self._cap = cap

    def write(self, data):
        if self.tell() + len(data) > self._cap:
            raise OSError("stdout capture limit reached")
        return super().write(data)


def _load(program):
    namespace = {"__name__": "__candidate__", "__builtins__": builtins}
    try:
        code = compile(program, "<candidate>", "exec")
        exec(code, namespace)
    except BaseException as exc:
        rec = _exc_record(exc)
        _emit({"k": "load_error", "type": rec["raised"], "msg": rec["msg"]})
        return None
    _emit({"k": "loaded"})
    return namespace


def _run_calls(namespace, job):
    entry = namespace.get(job["entry_point"])
    for i, (args_tree, kwargs_tree) in enumerate(job["calls"]):
        args = codec.decode_tree(args_tree)
        kwargs = codec.decode_tree(kwargs_tree)
        if not callable(entry):
            _emit({"k": "call", "i": i, "raised": "NameError", "msg": "entry point not defined"})
            continue
        try:
            value = entry(*args, **kwargs)
        except BaseException as exc:
            _emit({"k": "call", "i": i, **_exc_record(exc)})
            continue
        try:
            tree = codec.encode_tree(value)
        except BaseException:
            _emit({"k": "call", "i": i, "unencodable": type(value).__name__[:80]})
            continue
        _emit({"k": "call", "i": i, "v": tree})


def _run_cases(namespace, job):
    script = job["script"]
    namespace[script["arg"]] = namespace.get(job["entry_point"])
    try:
        exec(compile(script["setup"], "<tests>", "exec"), namespace)
    except BaseException as exc:
        for i in script["report"]:
            _emit({"k": "case", "i": i, "outcome": "error", **_exc_record(exc)})
        return
    for i, source in enumerate(script["cases"]):
        try:
            exec(compile(source, "<tests>", "exec"), namespace)
            outcome = {"outcome": "passed"}
        except AssertionError:
            outcome = {"outcome": "failed"}
        except BaseException as exc:
            outcome = {"outcome": "error", **_exc_record(exc)}
        if i in script["report"]:
            _emit({"k": "case", "i": i, **outcome})


def _run_stdio(job):
    try:
        code = compile(job["program"], "<candidate>", "exec")
    except BaseException as exc:
        rec = _exc_record(exc)
        _emit({"k": "load_error", "type": rec["raised"], "msg": rec["msg"]})
        return
    _emit({"k": "loaded"})
    real_in, real_out = sys.stdin, sys.stdout
    for i, text in enumerate(job["stdin"]):
        sink = _CappedBytes(int(job["stdout_cap_bytes"]))
        sys.stdin = io.TextIOWrapper(io.BytesIO(text.encode()), encoding="utf-8")
        sys.stdout = io.TextIOWrapper(sink, encoding="utf-8", write_through=True)
        raised: BaseException | None = None
        try:
            exec(code, {"__name__": "__main__", "__builtins__": builtins})
        except SystemExit as exc:
            if exc.code not in (None, 0):
                raised = exc
        except BaseException as exc:
            raised = exc
        try:
            sys.stdout.flush()
        except BaseException:
            raised = raised or OSError("stdout flush failed")
        try:
            output = sink.getvalue().decode("utf-8", "replace")
        except BaseException as exc:  # the program closed its stdout
            output, raised = "", raised or exc
        sys.stdin, sys.stdout = real_in, real_out
        if raised is not None:
            _emit({"k": "io", "i": i, **_exc_record(raised)})
        else:
            _emit({"k": "io", "i": i, "v": ["S", output]})


def main():
    _emit({"k": "hello"})
    job = marshal.loads(sys.stdin.buffer.read())
    devnull = os.open("/dev/null", os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    _set_limits(job["limits"])
    sys.setrecursionlimit(int(job.get("recursion_limit", 3000)))
    if job["mode"] == "stdio":
        _run_stdio(job)
    else:
        namespace = _load(job["program"])
        if namespace is not None:
            _run_calls(namespace, job)
            if job.get("script"):
                _run_cases(namespace, job)
    _emit({"k": "done"})
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
