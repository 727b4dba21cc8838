"""The kernel verifier's sandboxes: where the kernel harness and the candidate are mounted, how
the supervisor and its workers are run, and the kernel verifier's caches (C++ builds,
torch.compile's inductor cache, the op recorder). The sandbox plumbing every kind shares is
assay.verifiers.common.sandboxes; the names below are that module's, re-exported for the
kernel's stages.
"""

from __future__ import annotations

import hashlib
import json
import sys
from importlib import resources
from pathlib import Path

from assay.errors import UserError
from assay.sandbox.base import ExecResult, Sandbox
from assay.verifiers.common.sandboxes import (  # noqa: F401  (re-exported for the kernel's stages)
    BACKGROUND,
    IN_COMMON,
    IN_TASK,
    PYTHON,
    RESULT_MARK,
    WORKDIR,
    base_env,
    common_harness_dir,
    copy_tree,
    harness_in,
    locked,
    open_verification_sandbox,
    parse_result,
    sandbox_limits,
    trusted_roots,
)
from assay.verifiers.common.sandboxes import submission_built as _submission_built

IN_HARNESS = harness_in("kernel")
IN_CANDIDATE = "/assay/candidate"
IN_INPUTS = "/assay/inputs"
IN_OPWATCH = "/assay/opwatch"
# Where a candidate can put files of its own: its workspace and the sandbox's private tmpfs.
CANDIDATE_ROOTS = [WORKDIR, "/tmp", "/dev/shm", IN_CANDIDATE]


def harness_dir() -> Path:
    return Path(str(resources.files("assay.verifiers").joinpath("kernel", "harness")))


def harness_binds() -> dict[str, Path]:
    """The kernel harness and the shared one it loads the candidate with."""
    return {IN_HARNESS: harness_dir(), IN_COMMON: common_harness_dir()}


def default_cache_dir() -> Path:
    from assay.settings import settings

    return settings().home / "cache" / "kernel-verifier"


def candidate_built(path: str) -> bool:
    """A file the candidate built or brought: under a candidate root and not part of the host
    toolchain bound there read-only. (harness/supervisor.py's mapped_files, a standalone script
    in the sandbox, applies the same rule to the candidate's memory maps.)"""
    return _submission_built(path, CANDIDATE_ROOTS)


def run_plain(sandbox: Sandbox, plan: dict, timeout: float, env: dict[str, str]) -> tuple[dict | None, ExecResult]:
    result = sandbox.exec(
        PYTHON + [f"{IN_HARNESS}/worker.py", "--plain"], timeout=timeout, stdin=json.dumps(plan) + "\n", env=env
    )
    return parse_result(result), result


def run_supervised(sandbox: Sandbox, plan: dict, timeout: float, env: dict[str, str]) -> tuple[dict | None, ExecResult]:
    result = sandbox.exec(PYTHON + [f"{IN_HARNESS}/supervisor.py"], timeout=timeout, stdin=json.dumps(plan), env=env)
    return parse_result(result), result


def worker_spec(plan: dict, env: dict[str, str]) -> dict:
    return {"argv": PYTHON + [f"{IN_HARNESS}/worker.py"], "env": env, "cwd": WORKDIR, "plan": plan}


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
            # NDEBUG as torch was built: RecordFunction's layout (its inputs) depends on it.
            "cmd = ['g++', '-std=c++17', '-O2', '-DNDEBUG', '-fPIC', '-shared', '-w',\n"
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
        sandbox = open_verification_sandbox(home, harness_binds(), limits, backend)
        try:
            result = sandbox.exec(PYTHON + ["-c", script], timeout=900, env=base_env(HOME=WORKDIR))
        finally:
            sandbox.close()
        if parse_result(result) is None or not built.is_file():
            tail = (result.stderr or result.stdout)[-2000:]
            raise UserError(
                f"the verifier's op recorder did not build in the sandbox: {tail.strip()}",
                "check that g++ and torch's headers are present (the sandbox binds /usr and the venv)",
            )
    return built.parent
