"""Root's launcher for bwrap: so that a sandbox started by root runs as host nobody, not root.

Not imported by assay: run as `python -I -S launcher.py <json>` by the bwrap backend when
the caller is root. bwrap maps the sandbox uid to the uid that starts it, and a sandbox
mapped to host root passes every permission check that only compares uids (sysctls under
/proc/sys, root-owned files). So this launcher, still root:

1. joins the sandbox's cgroups (so the limits hold from bwrap's first instruction),
2. enters a private mount namespace and bind-mounts every source the sandbox needs onto a
   fresh tmpfs: nobody may not be able to reach them where they are (/root is 0700, so is
   pytest's tmp dir), and bwrap resolves sources by path,
3. drops to nobody (no groups, no capabilities) and execs bwrap, which then builds the
   sandbox from the staged paths in an unprivileged user namespace.
"""

import ctypes
import json
import os
import sys

CLONE_NEWNS = 0x00020000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_BIND, MS_REC, MS_PRIVATE = 1, 2, 4, 4096, 16384, 1 << 18


def main():
    spec = json.loads(sys.argv[1])
    for procs in spec["cgroup_procs"]:
        with open(procs, "w") as f:
            f.write(str(os.getpid()))
    libc = ctypes.CDLL(None, use_errno=True)

    def check(ret, what):
        if ret != 0:
            err = ctypes.get_errno()
            raise SystemExit(f"assay launcher: {what}: {os.strerror(err)}")

    if spec["stage"]:
        check(libc.unshare(CLONE_NEWNS), "unshare(mount)")
        # Nothing we mount here may propagate back to the host.
        check(libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "make / private")
        root = spec["stage_root"].encode()
        check(libc.mount(b"tmpfs", root, b"tmpfs", MS_NOSUID | MS_NODEV, b"mode=0755,size=1m"), "stage tmpfs")
        for src, dst in spec["stage"]:
            if os.path.isdir(src):
                os.mkdir(dst, 0o755)
            else:
                os.close(os.open(dst, os.O_CREAT | os.O_WRONLY, 0o644))
            check(libc.mount(src.encode(), dst.encode(), None, MS_BIND | MS_REC, None), "bind " + src)
    uid, gid = spec["uid"], spec["gid"]
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)  # all capabilities go with uid 0
    argv = spec["argv"]
    os.execv(argv[0], argv)


if __name__ == "__main__":
    main()
