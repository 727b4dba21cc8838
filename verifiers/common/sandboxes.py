"""Fresh verification sandboxes, and the judge scripts that run in them.

Every piece of task or submission code a verifier looks at runs in a sandbox opened here; the
verifier process itself only writes plans, reads results and compares numbers. Inside, the
folders mirror the repository under /assay (a kind's harness at /assay/<kind>/harness, the
shared one at /assay/common/harness), so a judge script finds the shared harness by the same
relative path in the checkout and in the sandbox.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
from collections.abc import Generator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import Any

from assay.sandbox import background
from assay.sandbox.backends import open_sandbox
from assay.sandbox.base import (
    STEADY_MALLOC,
    ExecResult,
    Sandbox,
    SandboxLimits,
    SandboxSpec,
)

# Inside every verification sandbox.
IN_COMMON = "/assay/common/harness"
IN_TASK = "/assay/task"
IN_SUBMISSION = "/assay/submission"
WORKDIR = "/workspace"
# -I: no PYTHON* variables, no user site, no script folder on sys.path; -B: no .pyc written.
PYTHON = ["python", "-I", "-B"]
# Where submitted code can put files of its own: its workspace and the sandbox's private tmpfs.
SUBMISSION_ROOTS = [WORKDIR, "/tmp", "/dev/shm", IN_SUBMISSION]
RESULT_MARK = "@@ASSAY "
MAX_CACHE_COPY = 512 << 20

# Set in a process that only warms caches ahead of a verification: its sandboxes take CPU time
# nobody else wants.
BACKGROUND = {"on": False}


def common_harness_dir() -> Path:
    return Path(str(resources.files("assay.verifiers").joinpath("common", "harness")))


def harness_in(kind: str) -> str:
    """Where a kind's harness folder is bound inside its sandboxes."""
    return f"/assay/{kind}/harness"


@contextmanager
def locked(path: Path) -> Generator[None]:
    """Serialise builds of the same cache entry across verifier processes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def trusted_roots() -> list[str]:
    """The host toolchain the sandboxes bind read-only (/usr, the Python environment). A venv
    that lives under /tmp is bound over the sandbox's private /tmp: its libraries are the host's,
    not something the submission built there."""
    from assay.sandbox.toolchain import host_toolchain

    return list(host_toolchain().ro_dirs)


def submission_built(path: str, roots: list[str] | None = None) -> bool:
    """A file the submission built or brought: under a submission root and not part of the
    host toolchain bound there read-only."""
    from assay.sandbox.toolchain import covered

    return covered(path, roots or SUBMISSION_ROOTS) and not covered(path, trusted_roots())


def sandbox_limits(memory_mb: int, pids: int, timeout_s: float) -> SandboxLimits:
    return SandboxLimits(
        timeout_s=timeout_s,
        memory_mb=memory_mb,
        pids=pids,
        cpus=float(os.cpu_count() or 2),
        output_bytes=16 << 20,
        background=BACKGROUND["on"] and not background.hurried(),
    )


def open_verification_sandbox(workspace: Path, binds: dict[str, Path], limits: SandboxLimits, backend: str) -> Sandbox:
    """A fresh sandbox on `workspace` with every `binds` folder (inside path -> host path) bound
    read-only: the task, the submission, the harness. Nothing from an earlier sandbox is reused."""
    spec = SandboxSpec(
        workspace=workspace,
        limits=limits,
        ro_binds=tuple((path, inside) for inside, path in binds.items()),
        workdir=WORKDIR,
    )
    sandbox = open_sandbox(spec, backend=None if backend == "auto" else backend)
    if limits.background:
        background.register(sandbox)  # the verification may come to wait on it: see hurry()
    return sandbox


def base_env(**extra: str) -> dict[str, str]:
    """A judge script's environment inside a sandbox (on top of the sandbox's own small one)."""
    env = {
        "HOME": f"{WORKDIR}/home",
        "TMPDIR": "/tmp",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        "MAX_JOBS": str(os.cpu_count() or 2),
        "TORCHINDUCTOR_COMPILE_THREADS": "1",
        # inductor rebuilds its precompiled header (8 s here) under /tmp, the sandbox's private
        # tmpfs, on every start, even when every kernel comes from the cache; without it a warm
        # cache loads in 2 s and a cold compile costs the same.
        "TORCHINDUCTOR_CPP_CACHE_PRECOMPILE_HEADERS": "0",
        # (a candidate measured 5x slower for seconds at a time, then normal again, without it)
        **STEADY_MALLOC,
    }
    env.update(extra)
    return env


def parse_result(result: ExecResult) -> dict[str, Any] | None:
    """The judge script's one result line; None when it never printed one (it died first)."""
    for line in reversed(result.stdout.splitlines()):
        if line.startswith(RESULT_MARK):
            try:
                value = json.loads(line[len(RESULT_MARK) :])
            except ValueError:
                return None
            return value if isinstance(value, dict) else None
    return None


def run_judge(
    sandbox: Sandbox, script: str, plan: dict[str, Any], timeout: float, env: dict[str, str]
) -> tuple[dict[str, Any] | None, ExecResult]:
    """Run `script` (a path inside the sandbox) in an isolated interpreter with `plan` as JSON on
    stdin; its result is the last RESULT_MARK line it printed."""
    result = sandbox.exec(PYTHON + [script], timeout=timeout, stdin=json.dumps(plan) + "\n", env=env)
    return parse_result(result), result


def judge_in_fresh_sandbox(
    workspace: Path,
    binds: dict[str, Path],
    script: str,
    plan: dict[str, Any],
    *,
    timeout: float,
    memory_mb: int,
    pids: int,
    backend: str,
    env: dict[str, str] | None = None,
) -> tuple[dict[str, Any] | None, ExecResult]:
    """One judge script in a sandbox of its own, closed after: the common case of every stage
    that needs no second process beside it."""
    sandbox = open_verification_sandbox(workspace, binds, sandbox_limits(memory_mb, pids, timeout + 30), backend)
    try:
        return run_judge(sandbox, script, plan, timeout, env or base_env())
    finally:
        sandbox.close()


def copy_tree(src: Path, dst: Path) -> None:
    """Copy a cache folder; links stay links (never followed), a runaway size is refused, and
    stale build locks are left behind."""
    if not src.is_dir():
        dst.mkdir(parents=True, exist_ok=True)
        return
    total = 0
    for root, _dirs, files in os.walk(src):
        for name in files:
            p = Path(root) / name
            if not p.is_symlink():
                total += p.stat().st_size
    if total > MAX_CACHE_COPY:
        dst.mkdir(parents=True, exist_ok=True)
        return
    if dst.exists():
        shutil.rmtree(dst)
    # torch's build lock ("lock", a FileBaton) left by a killed build would stall every later one.
    shutil.copytree(src, dst, symlinks=True, ignore=shutil.ignore_patterns("lock", "*.lock"))


def submission_folder(root: Path, entry: Path, names: tuple[str, ...] = ()) -> Path:
    """The submission as a sandbox sees it (bound read-only at IN_SUBMISSION): the entry file and
    the named companions only, copied as plain files (no link followed, nothing else of the
    workspace). A sitecustomize.py, a .pth or a torch.py the agent left beside them never reaches
    the sandbox, and the judge loads the entry by path, so none would be imported anyway."""
    out = root / "submission"
    out.mkdir(parents=True, exist_ok=True)
    for name in (entry.name, *names):
        src = entry.parent / name
        if src.is_file() and not src.is_symlink():
            shutil.copyfile(src, out / name)
    return out
