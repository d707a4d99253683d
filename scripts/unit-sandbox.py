#!/usr/bin/python3
"""Run a command inside the parts of systemd/visiond.service's sandbox that hold without
systemd as PID 1 (scripts/unit-sandbox-test.sh uses it; Debian's python3 and python3-seccomp):

    scripts/unit-sandbox.py --unit systemd/visiond.service --user nobody -- COMMAND...

As root it: drops every capability from the bounding set (CapabilityBoundingSet=), switches
to USER with no supplementary groups (User=), sets no_new_privs (NoNewPrivileges=), and loads a
seccomp filter built from the unit's SystemCallFilter= lines, expanded with
`systemd-analyze syscall-filter` as systemd expands them, whose calls outside the list fail with
the unit's SystemCallErrorNumber= (SystemCallArchitectures=native: only the native ABI is
allowed). Then it execs COMMAND, whose children inherit all of it, as the workers do under
systemd. Not covered: the mount and /proc namespaces (ProtectSystem=, ProtectProc=, ...), the
device cgroup and RestrictAddressFamilies= (systemd's own BPF).
"""
import argparse
import errno
import os
import pwd
import subprocess
import sys

import seccomp

PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38


def unit_settings(path):
    """The [Service] settings that matter here, in order (a key may repeat)."""
    out = []
    for line in open(path):
        line = line.strip()
        if not line or line[0] in "#;" or "=" not in line:
            continue
        key, value = line.split("=", 1)
        out.append((key.strip(), value.strip()))
    return out


def syscall_groups():
    """Every @group of this systemd, name -> members (groups not expanded)."""
    text = subprocess.run(["systemd-analyze", "syscall-filter", "--no-pager"], check=True,
                          capture_output=True, text=True).stdout
    groups, cur = {}, None
    for line in text.splitlines():
        if line.startswith("@"):
            cur = groups.setdefault(line.strip(), [])
        elif cur is not None and line.strip() and not line.strip().startswith("#"):
            cur.extend(line.split())
    return groups


def expand(names, groups, seen=None):
    seen = set() if seen is None else seen
    out = set()
    for n in names:
        if n.startswith("@"):
            if n in seen:
                continue
            seen.add(n)
            if n not in groups:
                sys.exit(f"unit-sandbox: unknown syscall group {n}")
            out |= expand(groups[n], groups, seen)
        else:
            out.add(n)
    return out


def allowed_syscalls(settings):
    """SystemCallFilter= as systemd reads it: the first line sets an allow list (or a deny list
    with ~); later allow lines add to it, later ~ lines take away."""
    groups = syscall_groups()
    allow = None
    for key, value in settings:
        if key != "SystemCallFilter":
            continue
        deny = value.startswith("~")
        names = expand(value.lstrip("~").split(), groups)
        if allow is None:
            if deny:
                sys.exit("unit-sandbox: a deny-list-only SystemCallFilter= is not handled here")
            allow = names
        elif deny:
            allow -= names
        else:
            allow |= names
    if allow is None:
        sys.exit("unit-sandbox: the unit has no SystemCallFilter=")
    return allow


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--unit", required=True)
    ap.add_argument("--user", required=True)
    ap.add_argument("command", nargs="+")
    a = ap.parse_args()
    settings = unit_settings(a.unit)
    errname = dict(settings).get("SystemCallErrorNumber")
    if not errname:
        sys.exit("unit-sandbox: the unit has no SystemCallErrorNumber= (a filtered call would kill)")
    err = getattr(errno, errname)
    allow = allowed_syscalls(settings)

    f = seccomp.SyscallFilter(defaction=seccomp.ERRNO(err))
    unknown = []
    for name in sorted(allow):
        try:
            f.add_rule(seccomp.ALLOW, name)
        except (RuntimeError, ValueError):
            unknown.append(name)  # not a syscall of this architecture (e.g. the *32 ones)
    print(f"unit-sandbox: {len(allow) - len(unknown)} syscalls allowed ({len(unknown)} names not on "
          f"this architecture), others fail with {errname}; no capabilities; user {a.user}",
          file=sys.stderr)

    pw = pwd.getpwnam(a.user)
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    last_cap = int(open("/proc/sys/kernel/cap_last_cap").read())
    for cap in range(last_cap + 1):
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            sys.exit(f"unit-sandbox: dropping capability {cap}: {os.strerror(ctypes.get_errno())}")
    os.setgroups([])
    os.setresgid(pw.pw_gid, pw.pw_gid, pw.pw_gid)
    os.setresuid(pw.pw_uid, pw.pw_uid, pw.pw_uid)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        sys.exit("unit-sandbox: no_new_privs: " + os.strerror(ctypes.get_errno()))
    f.load()
    os.execvp(a.command[0], a.command)


if __name__ == "__main__":
    main()
