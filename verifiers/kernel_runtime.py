"""Sandbox plumbing for the kernel verifier: where things are mounted, how the harness is run,
and the verifier's caches (C++ builds, torch.compile's inductor cache, the op recorder).

Every piece of task or candidate code runs in a sandbox opened here; the verifier process
itself only writes plans, reads results and compares tensors.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import sys
from contextlib import contextmanager
from importlib import resources
from pathlib import Path

from assay.errors import UserError
from assay.sandbox import background
from assay.sandbox.backends import open_sandbox
from assay.sandbox.base import STEADY_MALLOC, ExecResult, Sandbox, SandboxLimits, SandboxSpec

# Inside every verification sandbox.
IN_HARNESS = "/assay/harness"
IN_TASK = "/assay/task"
IN_CANDIDATE = "/assay/candidate"
IN_INPUTS = "/assay/inputs"
IN_OPWATCH = "/assay/opwatch"
WORKDIR = "/workspace"
PYTHON = ["python", "-I", "-B"]
# Where a candidate can put files of its own: its workspace and the sandbox's private tmpfs.
CANDIDATE_ROOTS = [WORKDIR, "/tmp", "/dev/shm", IN_CANDIDATE]
RESULT_MARK = "@@ASSAY "
MAX_CACHE_COPY = 512 << 20


def harness_dir() -> Path:
    return Path(str(resources.files("assay.verifiers").joinpath("harness")))


def default_cache_dir() -> Path:
    from assay.settings import settings

    return settings().home / "cache" / "kernel-verifier"


@contextmanager
def locked(path: Path):
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
    not something the candidate built there."""
    from assay.sandbox.toolchain import host_toolchain

    return list(host_toolchain().ro_dirs)


def candidate_built(path: str) -> bool:
    """A file the candidate built or brought: under a candidate root and not part of the host
    toolchain bound there read-only. (harness/supervisor.py's mapped_files, a standalone script
    in the sandbox, applies the same rule to the candidate's memory maps.)"""
    from assay.sandbox.toolchain import covered

    return covered(path, CANDIDATE_ROOTS) and not covered(path, trusted_roots())


# Set in a process that only warms caches ahead of a verification (kernel.warm_task): its
# sandboxes take CPU time nobody else wants.
BACKGROUND = {"on": False}


def sandbox_limits(memory_mb: int, pids: int, timeout_s: float) -> SandboxLimits:
    return SandboxLimits(timeout_s=timeout_s, memory_mb=memory_mb, pids=pids, cpus=float(os.cpu_count() or 2),
                         output_bytes=16 << 20, background=BACKGROUND["on"] and not background.hurried())


def open_verification_sandbox(workspace: Path, binds: dict[str, Path], limits: SandboxLimits,
                              backend: str) -> Sandbox:
    spec = SandboxSpec(workspace=workspace, limits=limits,
                       ro_binds=tuple((path, inside) for inside, path in binds.items()), workdir=WORKDIR)
    sandbox = open_sandbox(spec, backend=None if backend == "auto" else backend)
    if limits.background:
        background.register(sandbox)  # the verification may come to wait on it: see hurry()
    return sandbox


def base_env(**extra: str) -> dict[str, str]:
    """The harness's environment inside a sandbox (on top of the sandbox's own small one)."""
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


def parse_result(result: ExecResult) -> dict | None:
    """The harness's one result line; None when it never printed one (it died first)."""
    for line in reversed(result.stdout.splitlines()):
        if line.startswith(RESULT_MARK):
            try:
                value = json.loads(line[len(RESULT_MARK):])
            except ValueError:
                return None
            return value if isinstance(value, dict) else None
    return None


def run_plain(sandbox: Sandbox, plan: dict, timeout: float, env: dict[str, str]) -> tuple[dict | None, ExecResult]:
    result = sandbox.exec(PYTHON + [f"{IN_HARNESS}/worker.py", "--plain"], timeout=timeout,
                          stdin=json.dumps(plan) + "\n", env=env)
    return parse_result(result), result


def run_supervised(sandbox: Sandbox, plan: dict, timeout: float, env: dict[str, str]) -> tuple[dict | None, ExecResult]:
    result = sandbox.exec(PYTHON + [f"{IN_HARNESS}/supervisor.py"], timeout=timeout,
                          stdin=json.dumps(plan), env=env)
    return parse_result(result), result


def worker_spec(plan: dict, env: dict[str, str]) -> dict:
    return {"argv": PYTHON + [f"{IN_HARNESS}/worker.py"], "env": env, "cwd": WORKDIR, "plan": plan}


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


# ------------------------------------------------------------------------- the op recorder

def _torch_version() -> str:
    from importlib.metadata import version

    return version("torch")


# The verifier's own native code for the candidate's processes, built into one library.
HARNESS_NATIVE = ("opwatch.cpp", "sampler.cpp")


def opwatch_library(cache_dir: Path, backend: str) -> Path:
    """The compiled op recorder (harness/opwatch.cpp) and CPU sampler (harness/sampler.cpp) in
    one library, built once per source, torch and Python in a sandbox of its own; returns the
    folder holding `assay_opwatch_<key>.so`."""
    source = b"".join((harness_dir() / name).read_bytes() for name in HARNESS_NATIVE)
    key = hashlib.sha256(source + _torch_version().encode() + sys.version.encode()).hexdigest()[:16]
    name = f"assay_opwatch_{key}"
    home = cache_dir / "opwatch" / key
    built = home / "build" / f"{name}.so"
    if built.is_file():
        return built.parent
    with locked(cache_dir / "opwatch" / f"{key}.lock"):
        if built.is_file():
            return built.parent
        home.mkdir(parents=True, exist_ok=True)
        # g++ straight on the source (no cpp_extension, no ninja): torch is imported only for
        # its header and library paths and the C++ ABI it was built with.
        script = (
            "import os, subprocess, sys, torch\n"
            "from torch.utils import cpp_extension as ce\n"
            f"os.makedirs('{WORKDIR}/build', exist_ok=True)\n"
            "libs = ce.library_paths()\n"
            "cmd = ['g++', '-std=c++17', '-O2', '-fPIC', '-shared', '-w',\n"
            "       f'-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}',\n"
            "       *[f'-I{p}' for p in ce.include_paths()],\n"
            f"       *{[f'{IN_HARNESS}/{n}' for n in HARNESS_NATIVE]!r}, '-o', '{WORKDIR}/build/{name}.so.tmp',\n"
            "       *[f'-L{p}' for p in libs], *[f'-Wl,-rpath,{p}' for p in libs], '-lc10', '-ltorch_cpu', '-lrt']\n"
            "done = subprocess.run(cmd, capture_output=True, text=True)\n"
            "if done.returncode:\n"
            "    sys.exit(done.stderr[-3000:] or 'g++ failed')\n"
            f"os.replace('{WORKDIR}/build/{name}.so.tmp', '{WORKDIR}/build/{name}.so')\n"
            "import ctypes\n"
            f"lib = ctypes.CDLL('{WORKDIR}/build/{name}.so')\n"
            "lib.assay_opwatch_install(); assert lib.assay_opwatch_installed()\n"
            "assert lib.assay_sampler_start(1000) == 0 and lib.assay_sampler_intact()\n"
            "print('@@ASSAY {\"ok\": true}')\n"
        )
        limits = sandbox_limits(4096, 256, 900)
        sandbox = open_verification_sandbox(home, {IN_HARNESS: harness_dir()}, limits, backend)
        try:
            result = sandbox.exec(PYTHON + ["-c", script], timeout=900, env=base_env(HOME=WORKDIR))
        finally:
            sandbox.close()
        if parse_result(result) is None or not built.is_file():
            tail = (result.stderr or result.stdout)[-2000:]
            raise UserError(f"the verifier's op recorder did not build in the sandbox: {tail.strip()}",
                            "check that g++ and torch's headers are present (the sandbox binds /usr and the venv)")
    return built.parent
