"""Run a command under an OCI seccomp profile, loaded as runc loads a pod's Localhost profile.

    python seccomp_loader.py PROFILE.json -- COMMAND [ARG...]

What runc does with ``securityContext.seccompProfile: {type: Localhost}`` and
``allowPrivilegeEscalation: false``, and so does this: set no_new_privs, build a libseccomp
filter with the profile's default action (``SCMP_ACT_ERRNO`` without ``errnoRet``: EPERM),
add the profile's architectures, add one rule per listed name with its action (names this
libseccomp does not know are skipped), load it, and exec the command: the command and every
process it starts (the service, bubblewrap, the candidates) run under the filter. Rules with
``args`` are not supported (the chart's profile has none); an action other than ALLOW or
ERRNO is refused. Filters stack: the sandbox's own per-sample filter comes on top.
"""

from __future__ import annotations

import errno
import json
import os
import sys

import pyseccomp

_ARCHES = {"SCMP_ARCH_X86_64": pyseccomp.Arch.X86_64, "SCMP_ARCH_AARCH64": pyseccomp.Arch.AARCH64}


def _action(rule: dict[str, object], default_errno: int) -> int:
    name = rule["action"]
    if name == "SCMP_ACT_ALLOW":
        return pyseccomp.ALLOW
    if name == "SCMP_ACT_ERRNO":
        return pyseccomp.ERRNO(int(rule.get("errnoRet", default_errno)))  # type: ignore[call-overload]
    raise SystemExit(f"seccomp_loader: unsupported action {name!r}")


def build(profile: dict[str, object]) -> pyseccomp.SyscallFilter:
    """The libseccomp filter of an OCI profile (not loaded yet).

    Raises:
        SystemExit: an unsupported action, argument rule or architecture.
    """
    default_errno = int(profile.get("defaultErrnoRet", errno.EPERM))  # type: ignore[call-overload]
    default = _action({"action": profile["defaultAction"]}, default_errno)
    flt = pyseccomp.SyscallFilter(default)
    for arch in profile.get("architectures", []):  # type: ignore[attr-defined]
        if arch not in _ARCHES:
            raise SystemExit(f"seccomp_loader: unsupported architecture {arch!r}")
        if not flt.exist_arch(_ARCHES[arch]):
            flt.add_arch(_ARCHES[arch])
    for rule in profile["syscalls"]:  # type: ignore[attr-defined]
        if rule.get("args"):
            raise SystemExit("seccomp_loader: argument rules are not supported")
        action = _action(rule, default_errno)
        for name in rule["names"]:
            try:
                flt.add_rule(action, name)
            except (OSError, ValueError, RuntimeError):
                continue  # unknown to this libseccomp (runc skips it too)
    flt.set_attr(pyseccomp.Attr.CTL_NNP, 1)
    return flt


def main(argv: list[str]) -> None:
    """Load ``argv[1]`` and exec the command after ``--``."""
    if len(argv) < 4 or argv[2] != "--":
        raise SystemExit("usage: seccomp_loader.py PROFILE.json -- COMMAND [ARG...]")
    with open(argv[1]) as fh:
        flt = build(json.load(fh))
    flt.load()
    os.execvp(argv[3], argv[3:])


if __name__ == "__main__":
    main(sys.argv)
