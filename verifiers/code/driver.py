"""Driver that runs INSIDE the sandbox: load the candidate program, run it, report plain data.

Stdlib only (it imports ``codec.py`` from its own directory). Two ways in, chosen by argv:

- ``spawn JOB TESTS RESULT VERDICT`` — started by :mod:`grpo.verifiers.code.sandbox` in a fresh
  bubblewrap per sample (``mode: spawn``): runs one sample (:func:`_sample`) and exits.
- ``runtime JOB TESTS RESULT VERDICT`` — the same without bubblewrap (``isolation: runtime``:
  a gVisor/Kata pod is the boundary), as the slot uid in its private work dir, with a seccomp
  filter that also refuses sockets, io_uring and SysV/POSIX-queue IPC.
- ``zygote CTRL SIZE`` — the warm interpreter of one slot (``mode: warm``, the default). It
  pre-imports the modules programs commonly use, then for every ``run`` message on the control
  socket CTRL (which carries the sample's fds by ``SCM_RIGHTS``) forks a child that unshares NEW
  mount, PID, network, IPC, UTS and cgroup namespaces, forks again to become pid 1 of the new
  PID namespace, mounts fresh size-capped tmpfs at ``/home/sandbox``, ``/tmp`` and ``/dev/shm``
  and a new ``/proc``, drops every capability (bounding set included) and only then runs the
  sample. It answers ``done STATUS`` when that child has exited, which implies that every
  process of the sample is gone (the PID namespace dies with its init). The zygote itself never
  runs candidate or test code and never reads anything a sample wrote.

One sample (:func:`_sample`), in both ways: the process forks a TEST process T first and the
PROGRAM process P second, then waits for both.

- T (non-dumpable: P cannot ptrace it, read its memory or its ``/proc`` fds) reads the inside
  test cases from TESTS — P never holds that fd — executes the task's ``program_prefix`` (for
  trusted helpers such as HumanEval's ``poly``) and the test setup in a namespace of its own,
  with the real builtins and the real modules of a process no candidate code has run in, and
  calls the candidate only through a pipe to P with plain data (``codec``). Its verdicts go to
  VERDICT, which P never holds: ``{"k": "case", "i": I, "outcome": ...}``.
- P reads the job from JOB, lowers its rlimits (hard = soft), installs ``exit``/``quit`` (as
  ``site`` would), lifts the int/str digit limit and only then runs the program. Records go to
  RESULT as one JSON object per line:

  - ``{"k": "hello"}`` first (proves the sandbox started);
  - ``{"k": "loaded"}`` or ``{"k": "load_error", "type": ..., "msg": ...}``;
  - ``{"k": "call", "i": I, "v": TREE}`` / ``..."raised": TYPE, "msg": ...`` /
    ``..."unencodable": TYPE``: planned call I of the entry point (decided outside by replay);
  - ``{"k": "io", "i": I, "out": B64}`` / ``..."raised": ...``: stdin/stdout pair I, run in
    a fresh fork of P with fd 0 holding the input and fd 1 a capture file, as
    ``python3 sol.py < in > out`` would; B64 is the base64 of the raw stdout bytes (at most
    ``stdout_cap_bytes``; 4/3 of them on the pipe whatever they hold, where JSON escapes
    would cost up to 6x). More output is ``"raised": "OutputLimit"``: in this mode the
    file-size rlimit is raised to ``stdout_cap_bytes + 1`` when it is below, so the capture
    file can show the excess;
  - ``{"k": "done"}``.

Nothing P writes is trusted except as plain typed values checked outside against expectations
the sandbox never sees; case verdicts are read from T's fd only.
"""

# ruff: noqa: SIM105, SIM115  (no contextlib: start-up cost; stdin/stdout files stay open)
import binascii
import builtins
import ctypes
import fcntl
import marshal
import os
import resource
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import codec  # stdlib-only sibling module, bound next to this file in the sandbox

_MSG_CHARS = 300
_STATUS_CAP = 4096
_NULL, _OUT, _ERR, _JOB, _TESTS, _RESULT, _VERDICT = 0, 1, 2, 3, 4, 5, 6
_FIRST_FREE = 7

# Modules the zygote imports once; every sample gets a private copy-on-write copy of them.
_PREIMPORT = (
    "json", "math", "cmath", "re", "collections", "collections.abc", "itertools", "functools",
    "operator", "string", "heapq", "bisect", "typing", "random", "hashlib", "fractions",
    "decimal", "statistics", "datetime", "copy", "array", "dataclasses", "enum", "textwrap",
    "unicodedata", "struct", "socket", "select",
)  # fmt: skip

_ESCAPES = {i: f"\\u{i:04x}" for i in range(32)}
_ESCAPES[ord('"')] = '\\"'
_ESCAPES[ord("\\")] = "\\\\"

_libc = ctypes.CDLL(None, use_errno=True)


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


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _emit(fd, record):
    _write_all(fd, (_json(record) + "\n").encode("utf-8"))


def _read_all(fd):
    """The whole content of the (memfd) ``fd`` from offset 0, whatever its file offset."""
    chunks: list = []
    offset = 0
    while True:
        chunk = os.pread(fd, 1 << 20, offset)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        offset += len(chunk)


def _exc_record(exc):
    try:
        msg = str(exc)[:_MSG_CHARS]
    except BaseException:
        msg = "<unprintable>"
    return {"raised": type(exc).__name__, "msg": msg}


def _check(ret, what):
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _prctl(option, arg=0):
    _check(_libc.prctl(option, ctypes.c_ulong(arg), 0, 0, 0), f"prctl({option})")


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


# --- seccomp: keyrings (per user namespace, so they would outlive a warm sample), ptrace and
# cross-process memory access are refused with EPERM; other ABIs (x32, i386) are refused too.
# Under isolation 'runtime' (no bwrap: no network, IPC or user namespace of the sample's own)
# also every socket (and io_uring, which can open sockets), SysV / POSIX message-queue IPC
# objects (they would outlive the sample's processes), and new namespaces: unshare, setns,
# clone with a CLONE_NEW* flag (clone3, whose flags sit in memory a filter cannot read, gets
# ENOSYS so that libc falls back to clone).
_SYSCALLS = {  # machine -> (audit arch, syscall name -> number); checked by a test (libseccomp)
    "x86_64": (
        0xC000003E,
        {
            "add_key": 248, "request_key": 249, "keyctl": 250, "ptrace": 101,
            "process_vm_readv": 310, "process_vm_writev": 311, "socket": 41,
            "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
            "shmget": 29, "semget": 64, "msgget": 68, "mq_open": 240, "unshare": 272,
            "setns": 308, "clone": 56, "clone3": 435,
        },
    ),
    "aarch64": (
        0xC00000B7,
        {
            "add_key": 217, "request_key": 218, "keyctl": 219, "ptrace": 117,
            "process_vm_readv": 270, "process_vm_writev": 271, "socket": 198,
            "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
            "shmget": 194, "semget": 190, "msgget": 186, "mq_open": 180, "unshare": 97,
            "setns": 268, "clone": 220, "clone3": 435,
        },
    ),
}  # fmt: skip
DENIED = ("add_key", "request_key", "keyctl", "ptrace", "process_vm_readv", "process_vm_writev")
DENIED_RUNTIME = (
    *DENIED, "socket", "io_uring_setup", "io_uring_enter", "io_uring_register",
    "shmget", "semget", "msgget", "mq_open", "unshare", "setns",
)  # fmt: skip
_CLONE_NEW_ALL = 0x7E020000  # every CLONE_NEW* flag (NEWNS ... NEWNET, NEWCGROUP)


class _SockFilter(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_ushort),
        ("jt", ctypes.c_ubyte),
        ("jf", ctypes.c_ubyte),
        ("k", ctypes.c_uint),
    ]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def _filter_program(arch, numbers, names, namespaces):
    """Classic BPF (code, jt, jf, k) tuples: refuse ``names`` with EPERM; with
    ``namespaces`` also clone with a CLONE_NEW* flag (EPERM) and clone3 (ENOSYS)."""
    ld, jeq, jge, jset, ret = 0x20, 0x15, 0x35, 0x45, 0x06
    allow, eperm, enosys = 0x7FFF0000, 0x00050000 | 1, 0x00050000 | 38
    body = [("jeq", numbers[name], "deny") for name in names]  # (op, k, label if true)
    if namespaces:
        body += [("jeq", numbers["clone3"], "enosys"), ("jeq", numbers["clone"], "clone")]
    # layout: 0 ld arch, 1 jeq arch, 2 ld nr, 3 jge x32, body, allow, [clone checks], deny,
    # enosys (classic BPF jumps forward only)
    n = len(body)
    clone = 3 if namespaces else 0
    at = {"allow": 4 + n, "clone": 5 + n, "deny": 5 + n + clone, "enosys": 6 + n + clone}
    prog = [(ld, 0, 0, 4), (jeq, 0, at["deny"] - 2, arch), (ld, 0, 0, 0)]
    prog.append((jge, at["deny"] - 4, 0, 0x40000000))
    for i, (_, k, label) in enumerate(body):
        prog.append((jeq, at[label] - (4 + i) - 1, 0, k))
    prog.append((ret, 0, 0, allow))
    if namespaces:  # clone: low 32 bits of args[0] (the flags) at offset 16, little endian
        prog.append((ld, 0, 0, 16))
        prog.append((jset, at["deny"] - (at["clone"] + 2), 0, _CLONE_NEW_ALL))
        prog.append((ret, 0, 0, allow))
    prog += [(ret, 0, 0, eperm), (ret, 0, 0, enosys)]
    return prog


def _install_seccomp(names=DENIED, namespaces=False):
    """Install :func:`_filter_program` (needs no_new_privs, which bwrap/setpriv set); False on
    a machine without a syscall table."""
    table = _SYSCALLS.get(os.uname().machine)
    if table is None or sys.byteorder != "little":
        return False
    prog = _filter_program(*table, names, namespaces)
    filters = (_SockFilter * len(prog))(*[_SockFilter(*ins) for ins in prog])
    fprog = _SockFprog(len(prog), filters)
    _check(_libc.prctl(22, 2, ctypes.byref(fprog), 0, 0), "seccomp")  # PR_SET_SECCOMP, FILTER
    return True


# --- the warm zygote's per-sample namespaces --------------------------------------------------
_CLONE_NEW = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x20000000 | 0x40000000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 32, 4096, 16384, 1 << 18
_TMPFS_MOUNTS = ("/home/sandbox", "/tmp", "/dev/shm")


def _mount(source, target, fstype, flags, data=None):
    enc = [None if v is None else v.encode() for v in (source, target, fstype, data)]
    _check(_libc.mount(enc[0], enc[1], enc[2], ctypes.c_ulong(flags), enc[3]), f"mount {target}")


def _fresh_mounts(tmpfs_bytes):
    """New tmpfs mounts and a /proc of the new PID namespace (as bwrap's --tmpfs/--proc)."""
    _mount(None, "/", None, _MS_REC | _MS_PRIVATE)
    for target in _TMPFS_MOUNTS:
        _mount("tmpfs", target, "tmpfs", _MS_NOSUID | _MS_NODEV, f"size={tmpfs_bytes},mode=1777")
    _mount("proc", "/proc", "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)
    for sub in ("sys", "sysrq-trigger", "irq", "bus"):  # what bwrap covers read-only
        path = "/proc/" + sub
        if os.path.exists(path):
            _mount(path, path, None, _MS_BIND | _MS_REC)
            _mount(None, path, None, _MS_BIND | _MS_REMOUNT | _MS_RDONLY)
    os.chdir("/home/sandbox")


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint),
        ("permitted", ctypes.c_uint),
        ("inheritable", ctypes.c_uint),
    ]


def _drop_capabilities(last_cap):
    """Empty the bounding and ambient sets, then effective/permitted/inheritable (capset)."""
    for cap in range(last_cap + 1):
        _prctl(24, cap)  # PR_CAPBSET_DROP
    _check(_libc.prctl(47, 4, 0, 0, 0), "ambient clear")  # PR_CAP_AMBIENT, CLEAR_ALL
    header = _CapHeader(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3
    data = (_CapData * 2)()
    _check(_libc.capset(ctypes.byref(header), data), "capset")


def _layout_fds(fds):
    """Move (null, out, err, job, tests, result, verdict) to fds 0..6 and close every other."""
    null = os.open("/dev/null", os.O_RDONLY)
    high = [fcntl.fcntl(fd if fd >= 0 else null, fcntl.F_DUPFD_CLOEXEC, 100) for fd in fds]
    for target, fd in enumerate(high):
        os.dup2(fd, target, inheritable=False)
    os.set_inheritable(_OUT, True)
    os.set_inheritable(_ERR, True)
    os.set_inheritable(_NULL, True)
    os.closerange(_FIRST_FREE, 1 << 16)


# --- one sample --------------------------------------------------------------------------------
def _end_slot(*_):
    """SIGKILL every other process of this uid (isolation 'runtime': the sample's), then exit."""
    try:
        os.kill(-1, signal.SIGKILL)
    except OSError:
        pass
    os._exit(0)


def _sample(reaper=False):
    """Fork T (tests) then P (program) with fds 0..6 laid out; wait for both; return.

    With ``reaper`` (isolation 'runtime', no PID namespace) this process then ends every other
    process of its uid (daemons the program left), and does so at once on SIGUSR1 (the
    service's wall clock).
    """
    req_r, req_w = os.pipe()  # T -> P requests
    resp_r, resp_w = os.pipe()  # P -> T responses
    tester = os.fork()
    if tester == 0:
        _prctl(4, 0)  # PR_SET_DUMPABLE 0: no ptrace, /proc/T/mem or /proc/T/fd for P
        for fd in (_JOB, _RESULT, req_r, resp_w):
            os.close(fd)
        _exit_after(_tester, req_w, resp_r)
    for fd in (_TESTS, _VERDICT, req_w, resp_r):
        os.close(fd)
    program = os.fork()
    if program == 0:
        _prctl(4, 1)  # the program's own process is dumpable, as under python3
        _exit_after(_program, req_r, resp_w)
    for fd in (_JOB, _RESULT, req_r, resp_w):
        os.close(fd)
    if reaper:
        signal.signal(signal.SIGUSR1, _end_slot)
    waiting = {tester, program}
    while waiting:  # as pid 1 (warm) this also reaps orphans re-parented here
        try:
            pid, _ = os.wait()
        except ChildProcessError:
            break
        waiting.discard(pid)
    if reaper:
        _end_slot()


def _exit_after(fn, *args):
    try:
        fn(*args)
    except BaseException:
        os._exit(70)
    os._exit(0)


def _quitter(name):
    class Quitter:
        def __repr__(self):
            return f"Use {name}() or Ctrl-D (i.e. EOF) to exit"

        def __call__(self, code=None):
            try:
                sys.stdin.close()
            except BaseException:
                pass
            raise SystemExit(code)

    return Quitter()


def _program(req_r, resp_w):
    _emit(_RESULT, {"k": "hello"})
    job = marshal.loads(_read_all(_JOB))
    os.close(_JOB)
    limits = job["limits"]
    if job["mode"] == "stdio":  # the capture file must hold cap + 1 bytes to see an excess
        limits = {**limits, "file_bytes": max(limits["file_bytes"], job["stdout_cap_bytes"] + 1)}
    _set_limits(limits)
    sys.setrecursionlimit(int(job.get("recursion_limit", codec.RECURSION_LIMIT)))
    sys.argv = ["main.py"]
    builtins.exit = _quitter("exit")
    builtins.quit = _quitter("quit")
    if job["mode"] == "stdio":
        os.close(req_r)
        os.close(resp_w)
        _run_stdio(job)
    else:
        namespace = _load(job["program"])
        if namespace is not None:
            _run_calls(namespace, job)
            _serve(namespace, job["entry_point"], req_r, resp_w)
    _emit(_RESULT, {"k": "done"})
    try:
        sys.stdout.flush()
    except BaseException:
        pass


def _load(program):
    namespace = {"__name__": "__candidate__", "__builtins__": builtins}
    try:
        code = compile(program, "<candidate>", "exec", dont_inherit=True)
        exec(code, namespace)
    except BaseException as exc:
        rec = _exc_record(exc)
        _emit(_RESULT, {"k": "load_error", "type": rec["raised"], "msg": rec["msg"]})
        return None
    _emit(_RESULT, {"k": "loaded"})
    return namespace


def _call(fn, args_tree, kwargs_tree):
    """Call ``fn`` on decoded args; return the reply record (value tree or what went wrong)."""
    args = codec.decode_tree(args_tree)
    kwargs = codec.decode_tree(kwargs_tree)
    if not callable(fn):
        return {"raised": "NameError", "msg": "entry point not defined"}
    try:
        value = fn(*args, **kwargs)
    except BaseException as exc:
        return _exc_record(exc)
    try:
        return {"v": codec.encode_tree(value)}
    except BaseException:
        return {"unencodable": type(value).__name__[:80]}


def _run_calls(namespace, job):
    entry = namespace.get(job["entry_point"])
    for i, (args_tree, kwargs_tree) in enumerate(job["calls"]):
        _emit(_RESULT, {"k": "call", "i": i, **_call(entry, args_tree, kwargs_tree)})


def _serve(namespace, entry_point, req_r, resp_w):
    """Answer T's requests (marshal frames from a trusted process) until T closes the pipe."""
    reader = os.fdopen(req_r, "rb")
    while True:
        head = reader.read(4)
        if len(head) < 4:
            return
        request = marshal.loads(reader.read(int.from_bytes(head, "little")))
        name = request["name"]
        missing = object()
        value = namespace.get(name, missing)
        if request["op"] == "call":
            reply = _call(value if value is not missing else None, request["a"], request["kw"])
        elif value is missing:
            reply = {"undefined": True}
        elif callable(value):
            reply = {"callable": True}
        else:
            try:
                reply = {"v": codec.encode_tree(value)}
            except BaseException:
                reply = {"unencodable": type(value).__name__[:80]}
        _emit(resp_w, reply)


def _memfd(name, data=b""):
    fd = os.memfd_create(name, 0)
    _write_all(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _run_stdio(job):
    program = job["program"]
    try:
        code = compile(program, "<candidate>", "exec", dont_inherit=True)
    except BaseException as exc:
        rec = _exc_record(exc)
        _emit(_RESULT, {"k": "load_error", "type": rec["raised"], "msg": rec["msg"]})
        return
    _emit(_RESULT, {"k": "loaded"})
    cap = int(job["stdout_cap_bytes"])
    for i, text in enumerate(job["stdin"]):
        in_fd = _memfd("stdin", text.encode("utf-8", "surrogatepass"))
        out_fd = _memfd("stdout")
        status_r, status_w = os.pipe()
        child = os.fork()
        if child == 0:
            os.close(status_r)
            os.dup2(in_fd, 0)
            os.dup2(out_fd, 1)
            os.close(in_fd)
            os.close(out_fd)
            os.close(_RESULT)
            _exit_after(_run_main, code, status_w)
        os.close(status_w)
        os.close(in_fd)
        status = _read_capped(status_r, _STATUS_CAP)
        os.close(status_r)
        _, wait_status = os.waitpid(child, 0)
        output = os.pread(out_fd, cap + 1, 0)
        os.close(out_fd)
        record = _pair_record(status, wait_status, output, cap)
        del output
        if "out" in record:  # base64 is plain ASCII: written as bytes, no JSON escaping copies
            _write_all(_RESULT, b'{"k":"io","i":%d,"out":"%s"}\n' % (i, record["out"]))
        else:
            _emit(_RESULT, {"k": "io", "i": i, **record})


def _read_capped(fd, cap):
    data = b""
    while len(data) <= cap:
        chunk = os.read(fd, 1 << 12)
        if not chunk:
            break
        data += chunk
    return data[:cap]


def _pair_record(status, wait_status, output, cap):
    if len(output) > cap:
        return {"raised": "OutputLimit", "msg": f"more than {cap} bytes on stdout"}
    code = os.waitstatus_to_exitcode(wait_status)
    if status:
        kind, _, msg = status.decode("utf-8", "replace").partition("\0")
        return {"raised": kind[:80], "msg": msg[:_MSG_CHARS]}
    if code != 0:
        what = f"killed by signal {-code}" if code < 0 else f"exit status {code}"
        return {"raised": "ProgramExit", "msg": what}
    return {"out": binascii.b2a_base64(output, newline=False)}


def _run_main(code, status_w):
    """Run the program as ``__main__`` with fd 0/1 as its stdin/stdout; report an exception."""
    sys.stdin = open(0, encoding="utf-8", errors="surrogateescape", closefd=False)
    sys.stdout = open(1, "w", encoding="utf-8", errors="surrogateescape", closefd=False)
    setattr(sys, "__stdin__", sys.stdin)  # noqa: B010  (a Final name for mypy)
    setattr(sys, "__stdout__", sys.stdout)  # noqa: B010
    exit_code = 0
    raised: BaseException | None = None
    try:
        exec(code, {"__name__": "__main__", "__builtins__": builtins})
    except SystemExit as exc:
        if exc.code is not None and exc.code != 0:
            exit_code = exc.code if type(exc.code) is int else 1
            if type(exc.code) is not int:
                raised = exc
    except BaseException as exc:
        raised = exc
    try:  # interpreter shutdown as under python3: join threads, run atexit hooks
        if "threading" in sys.modules:
            sys.modules["threading"]._shutdown()
        import atexit

        atexit._run_exitfuncs()
    except BaseException as exc:
        raised = raised or exc
    try:
        sys.stdout.flush()
    except BaseException as exc:
        raised = raised or exc
    if raised is not None:
        rec = _exc_record(raised)
        _write_all(status_w, f"{rec['raised']}\0{rec['msg']}".encode("utf-8", "replace"))
        exit_code = exit_code or 1
    os._exit(exit_code & 0xFF or (1 if exit_code else 0))


# --- T: the test process ----------------------------------------------------------------------
class _CandidateRaised(Exception):
    """Marks an exception that the program raised in P (re-raised here as its builtin type)."""


class _Unsupported(BaseException):
    """A test passed something that is not plain data to the program: cannot cross."""


_RAISABLE = {
    name: obj
    for name, obj in vars(builtins).items()
    if isinstance(obj, type) and issubclass(obj, Exception)
}


class _Link:
    def __init__(self, req_w, resp_r):
        self.req_w = req_w
        self.resp = os.fdopen(resp_r, "rb")

    def ask(self, request):
        import json

        data = marshal.dumps(request)
        _write_all(self.req_w, len(data).to_bytes(4, "little") + data)
        line = self.resp.readline(1 << 24)
        if not line.endswith(b"\n"):
            raise _CandidateRaised("missing", "the program ended before answering")
        try:
            reply = json.loads(line)
        except (ValueError, RecursionError):
            reply = None
        if type(reply) is not dict:
            raise _CandidateRaised("ProtocolError", "malformed reply")
        return reply


class _Remote:
    """A program function, called in P on plain data."""

    def __init__(self, link, name):
        self._link = link
        self._name = name

    def __call__(self, *args, **kwargs):
        try:
            a, kw = codec.encode_tree(args), codec.encode_tree(kwargs)
        except codec.CodecError as exc:
            raise _Unsupported(
                f"{self._name}() got an argument that is not plain data ({exc})"
            ) from exc
        reply = self._link.ask({"op": "call", "name": self._name, "a": a, "kw": kw})
        return _value_of(reply)


class _Opaque:
    __slots__ = ("type_name",)

    def __init__(self, type_name):
        self.type_name = type_name

    def __repr__(self):
        return f"<non-data result of type {self.type_name}>"


def _value_of(reply):
    if "v" in reply:
        try:
            return codec.decode_tree(reply["v"])
        except codec.CodecError as exc:
            raise _CandidateRaised("ProtocolError", f"malformed value: {exc}") from None
    if "unencodable" in reply:
        return _Opaque(str(reply["unencodable"])[:80])
    kind = str(reply.get("raised", "Error"))[:80]
    message = str(reply.get("msg", ""))[:_MSG_CHARS]
    marker = _CandidateRaised(kind, message)
    exc_type = _RAISABLE.get(kind)
    if exc_type is not None:
        try:
            raise exc_type(message) from marker
        except TypeError:
            pass
    raise marker


def _tester(req_w, resp_r):
    tests = marshal.loads(_read_all(_TESTS))
    os.close(_TESTS)
    if not tests:
        return
    _set_limits(tests["limits"])
    sys.setrecursionlimit(codec.RECURSION_LIMIT)  # results may nest codec.MAX_DEPTH deep
    link = _Link(req_w, resp_r)
    namespace = {"__name__": "__tests__", "__builtins__": builtins}
    try:  # the task's own prefix: its helpers (HumanEval's poly) are the trusted ones
        exec(compile(tests["prefix"], "<prefix>", "exec", dont_inherit=True), namespace)
    except BaseException:
        namespace = {"__name__": "__tests__", "__builtins__": builtins}
    for name in tests["names"]:
        if name in namespace and name != tests["entry_point"]:
            continue
        try:
            reply = link.ask({"op": "get", "name": name})
        except BaseException:
            break
        if reply.get("callable") is True:
            namespace[name] = _Remote(link, name)
        elif "v" in reply or "unencodable" in reply:
            try:
                namespace[name] = _value_of(reply)
            except BaseException:
                pass
    namespace[tests["arg"]] = _Remote(link, tests["entry_point"])
    report = set(tests["report"])
    try:
        exec(compile(tests["setup"], "<tests>", "exec", dont_inherit=True), namespace)
    except BaseException as exc:
        for i in sorted(report):
            _emit(_VERDICT, {"k": "case", "i": i, **_outcome(exc)})
        return
    for i, source in enumerate(tests["cases"]):
        try:
            exec(compile(source, "<tests>", "exec", dont_inherit=True), namespace)
            outcome = {"outcome": "passed"}
        except BaseException as exc:
            outcome = _outcome(exc)
        if i in report:
            _emit(_VERDICT, {"k": "case", "i": i, **outcome})


def _outcome(exc):
    cause = exc if isinstance(exc, _CandidateRaised) else exc.__cause__
    if isinstance(cause, _CandidateRaised):
        kind, message = (*cause.args, "", "")[:2]
        return {"outcome": "error", "raised": str(kind)[:80], "msg": str(message)[:_MSG_CHARS]}
    if isinstance(exc, _Unsupported):
        return {"outcome": "unsupported", "msg": str(exc)[:_MSG_CHARS]}
    if isinstance(exc, AssertionError):
        return {"outcome": "failed"}
    return {"outcome": "failed", "raised": type(exc).__name__}


# --- entry points ------------------------------------------------------------------------------
def _zygote(ctrl_fd, tmpfs_bytes):
    import socket

    os.chdir("/")
    for name in _PREIMPORT:
        try:
            __import__(name)
        except ImportError:
            pass
    with open("/proc/sys/kernel/cap_last_cap") as fh:
        last_cap = int(fh.read())
    sock = socket.socket(fileno=ctrl_fd)
    seccomp = _SYSCALLS.get(os.uname().machine) is not None
    machine = os.uname().machine.encode()
    sock.send(b"ready" if seccomp else b"error: no seccomp filter for " + machine)
    while True:
        try:
            message, fds, _, _ = socket.recv_fds(sock, 64, 8)
        except OSError:
            os._exit(0)
        if not message.startswith(b"run") or len(fds) != 6:
            for fd in fds:
                os.close(fd)
            if not message:
                os._exit(0)
            continue
        life_r, life_w = os.pipe()
        child = os.fork()
        if child == 0:
            sock.close()
            os.close(life_r)
            _exit_after(_namespaced_sample, fds, tmpfs_bytes, last_cap)
        os.close(life_w)
        for fd in fds:
            os.close(fd)
        _wait_or_kill(sock, child, life_r)
        os.close(life_r)


def _wait_or_kill(sock, child, life_r):
    """Wait for the sample's first child; a ``kill`` message SIGKILLs it (its PID namespace
    init dies with it by PDEATHSIG); answer ``done STATUS``."""
    import select

    while True:
        ready, _, _ = select.select([sock, life_r], [], [])
        if sock in ready:
            message = sock.recv(64)
            if not message:
                os.kill(child, signal.SIGKILL)
                os.waitpid(child, 0)
                os._exit(0)
            if message == b"kill":
                os.kill(child, signal.SIGKILL)
        if life_r in ready:
            _, status = os.waitpid(child, 0)
            sock.send(b"done %d" % status)
            return


def _namespaced_sample(fds, tmpfs_bytes, last_cap):
    """First child of the zygote: new namespaces, then pid 1 of the new PID namespace."""
    _check(_libc.unshare(_CLONE_NEW), "unshare")
    init = os.fork()
    if init == 0:
        _prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: die (and take the namespace) with us
        _prctl(4, 0)  # not dumpable while it holds the sample's fds
        _fresh_mounts(tmpfs_bytes)
        _install_seccomp()
        _drop_capabilities(last_cap)
        os.environ.clear()
        os.environ["HOME"] = "/home/sandbox"
        _layout_fds([-1, *fds[4:6], *fds[0:4]])
        _exit_after(_sample)
    for fd in fds:
        os.close(fd)
    _, status = os.waitpid(init, 0)
    os._exit(os.waitstatus_to_exitcode(status) & 0xFF)


def main():
    """Entry point: ``spawn|runtime JOB TESTS RESULT VERDICT`` or ``zygote CTRL TMPFS_BYTES``.

    ``runtime`` (isolation 'runtime': no bwrap, the pod's runtime is the boundary) is
    ``spawn`` with the wider seccomp filter, this process not dumpable while it holds the
    tests' fd (the program process, forked later, makes itself dumpable again), and this
    process ending every other process of its uid when the sample is over (or on SIGUSR1).
    """
    sys.set_int_max_str_digits(0)
    if sys.argv[1] == "zygote":
        _zygote(int(sys.argv[2]), int(sys.argv[3]))
        return
    if sys.argv[1] == "runtime":
        _prctl(4, 0)  # PR_SET_DUMPABLE 0
        if not _install_seccomp(DENIED_RUNTIME, namespaces=True):
            sys.stderr.write(f"no seccomp table for {os.uname().machine}\n")
            os._exit(71)
    else:
        _install_seccomp()
    job, tests, result, verdict = (int(a) for a in sys.argv[2:6])
    _layout_fds([-1, 1, 2, job, tests, result, verdict])
    _sample(reaper=sys.argv[1] == "runtime")
    os._exit(0)


if __name__ == "__main__":
    main()
