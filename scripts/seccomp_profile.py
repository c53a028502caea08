"""Write the code verifier's Localhost seccomp profile (OCI / runc JSON) for `isolation:
bubblewrap` pods: helm/grpo-pipeline/files/code-sandbox-seccomp.json (`make seccomp-profile`).

What the profile is. An allowlist (default action: EPERM) of every system call the kernel
offers on x86_64 and aarch64 (libseccomp's table), less the ones this pod never needs and
that widen the kernel surface for untrusted code (`DENIED`, each with its reason). The
container runtime's RuntimeDefault profile refuses `unshare`, `clone` with CLONE_NEW* flags,
`mount`, `umount2`, `pivot_root` and `setns` to a process without CAP_SYS_ADMIN, and the pod
rightly has none: bubblewrap builds its sandbox in a new *user* namespace, where it holds
those capabilities over its own namespaces only. This profile allows those calls
unconditionally (the kernel still checks the capability in the namespace that owns the
target) and refuses `setns` and the new mount API, which bubblewrap does not use.

Why an allowlist of the general-purpose calls and not of the calls traced in one run: the
candidates are arbitrary Python programs; a standard-library call refused with EPERM would
score an honest program 0. The red-team suite, HumanEval's canonical solutions and the
service's own tests run under this profile (tests/verifiers/code/test_seccomp_profile.py).

Names unknown to a node's libseccomp are skipped by runc; calls newer than every name listed
get ENOSYS from runc >= 1.0.2 (so libc falls back), not EPERM.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pyseccomp

OUT = Path(__file__).resolve().parent.parent / "helm" / "grpo-pipeline" / "files"
PROFILE = OUT / "code-sandbox-seccomp.json"
ARCHES = {"SCMP_ARCH_X86_64": pyseccomp.Arch.X86_64, "SCMP_ARCH_AARCH64": pyseccomp.Arch.AARCH64}

DENIED: dict[str, str] = {
    # kernel, modules, boot, swap, accounting
    "init_module": "load kernel modules",
    "finit_module": "load kernel modules",
    "delete_module": "unload kernel modules",
    "create_module": "obsolete module call",
    "get_kernel_syms": "obsolete module call",
    "query_module": "obsolete module call",
    "kexec_load": "boot another kernel",
    "kexec_file_load": "boot another kernel",
    "reboot": "reboot the node",
    "swapon": "node swap",
    "swapoff": "node swap",
    "acct": "process accounting",
    "syslog": "kernel log",
    "uselib": "obsolete a.out loader",
    "nfsservctl": "obsolete NFS daemon call",
    "_sysctl": "obsolete sysctl",
    "sysfs": "obsolete filesystem-type query",
    "ustat": "obsolete",
    "vhangup": "hang up terminals",
    "quotactl": "disk quotas",
    "quotactl_fd": "disk quotas",
    "ioperm": "raw I/O ports",
    "iopl": "raw I/O ports",
    "modify_ldt": "x86 segment tables (old exploit vector)",
    "personality": "execution domains (e.g. turning ASLR off)",
    "lookup_dcookie": "profiling",
    # clocks
    "settimeofday": "set the node's clock",
    "clock_settime": "set the node's clock",
    "clock_adjtime": "adjust the node's clock",
    "adjtimex": "adjust the node's clock",
    # tracing and other processes' memory
    "ptrace": "trace other processes (the sandbox refuses it to samples too)",
    "process_vm_readv": "read other processes' memory",
    "process_vm_writev": "write other processes' memory",
    "process_madvise": "advise on other processes' memory",
    "kcmp": "compare other processes' kernel objects",
    "pidfd_getfd": "take another process's file descriptors",
    "perf_event_open": "performance counters (side channels, kernel surface)",
    "bpf": "eBPF programs",
    "userfaultfd": "page-fault handling in user space (race exploitation aid)",
    "fanotify_init": "filesystem-wide notifications",
    "name_to_handle_at": "open files by handle (escapes bind mounts)",
    "open_by_handle_at": "open files by handle (escapes bind mounts)",
    # keyrings: per user namespace, so they would outlive a warm sample
    "add_key": "kernel keyrings",
    "request_key": "kernel keyrings",
    "keyctl": "kernel keyrings",
    # namespaces and mounts beyond what bubblewrap uses
    "setns": "join other namespaces (bubblewrap makes new ones only)",
    "open_tree": "new mount API (bubblewrap uses mount(2))",
    "move_mount": "new mount API",
    "fsopen": "new mount API",
    "fsconfig": "new mount API",
    "fsmount": "new mount API",
    "fspick": "new mount API",
    "mount_setattr": "new mount API",
    # large kernel surface, unused here
    "io_uring_setup": "io_uring (large kernel surface)",
    "io_uring_enter": "io_uring",
    "io_uring_register": "io_uring",
    "memfd_secret": "secret memory areas",
}
"""System calls the profile refuses (EPERM), with why."""


def known_syscalls() -> set[str]:
    """Every system call name libseccomp knows for the profile's architectures."""
    names: set[str] = set()
    for arch in ARCHES.values():
        for number in range(1024):
            try:
                name = pyseccomp.resolve_syscall(arch, number)
            except (ValueError, OSError, TypeError):
                continue
            names.add(name.decode() if isinstance(name, bytes) else name)
    return names


def profile() -> dict[str, object]:
    """The OCI seccomp profile (the JSON runc reads from the kubelet's seccomp directory)."""
    allowed = sorted(known_syscalls() - set(DENIED))
    return {
        "defaultAction": "SCMP_ACT_ERRNO",
        "architectures": list(ARCHES),
        "syscalls": [{"names": allowed, "action": "SCMP_ACT_ALLOW"}],
    }


def main() -> int:
    """Write ``PROFILE``; print how many calls it allows and refuses."""
    data = profile()
    OUT.mkdir(parents=True, exist_ok=True)
    PROFILE.write_text(json.dumps(data, indent=1) + "\n")
    allowed = data["syscalls"][0]["names"]  # type: ignore[index]
    print(f"{PROFILE}: {len(allowed)} allowed, {len(DENIED)} refused by name, the rest EPERM")
    return 0


if __name__ == "__main__":
    sys.exit(main())
