"""Background sandboxes (SandboxLimits.background) whose work has become urgent.

The verifier's warm-up fills its caches beside the agent in background sandboxes, at the lowest
CPU priority, so the agent's own timings are undisturbed. Once the verification starts and waits
on what the warm-up is still building, that priority is an inversion: anything else on the
machine (another job, the verifier's own sandboxes) starves the work the verification waits for
(measured: one busy process beside a first `make demo` left the verifier 19 s waiting on a
torch.compile at the lowest weight). `hurry()` gives this process and every background sandbox
it has open, or opens later, normal CPU priority.

Lowering a nice value needs CAP_SYS_NICE (root here); without it the sandboxes' CPU weight is
still raised and the nice values stay as they were.
"""

from __future__ import annotations

import os
import threading
import weakref

_live: weakref.WeakSet = weakref.WeakSet()
_hurried = threading.Event()


def register(sandbox) -> None:
    """A background sandbox just opened; hurried at once if hurry() came first."""
    _live.add(sandbox)
    if _hurried.is_set():
        sandbox.boost()


def hurried() -> bool:
    return _hurried.is_set()


def hurry() -> None:
    _hurried.set()
    renice(os.getpid())
    for sandbox in list(_live):
        try:
            sandbox.boost()
        except Exception:  # a sandbox closing meanwhile: nothing left to hurry
            pass


def renice(pid: int) -> None:
    """Every thread of `pid` to nice 0 (nice is per thread on Linux), where allowed."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return
    for tid in tids:
        try:
            os.setpriority(os.PRIO_PROCESS, int(tid), 0)
        except (OSError, ValueError):
            pass
