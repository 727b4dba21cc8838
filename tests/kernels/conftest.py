"""Kernel test plumbing: one sandbox for the session (the harness bound read-only), a build
cache that outlives the session so reruns do not recompile, and tasks shrunk for tests."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "kernel"


def load_module(name: str, path: Path):
    """A task or candidate file imported under its own module name, in this process."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, path
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def one_expression_task(folder: Path, name: str, expr: str, shape: str = "8, 300, 70") -> Path:
    """A task whose Model returns `expr` of its one input x, of this shape."""
    path = folder / f"{name}.py"
    path.write_text(
        "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
        f"    def forward(self, x):\n        return {expr}\n\n\n"
        f"def get_inputs():\n    return [torch.randn({shape})]\n\n\ndef get_init_inputs():\n    return []\n"
    )
    return path


def shrink(task: Path, dest: Path, name: str | None = None) -> Path:
    """Copy a task with its module-level integer sizes made small and odd."""
    from assay.kernels.task import shrunk

    return shrunk(task, dest / (name or task.name))


@pytest.fixture(scope="session")
def _kernel_sandbox_session():
    """(sandbox, None) or (None, why not). Opened once: every exec reuses it."""
    try:
        from assay.kernels import kernel_binds
        from assay.sandbox import SandboxLimits, SandboxSpec, open_sandbox
    except ImportError as exc:
        yield None, f"sandbox package unavailable: {exc}"
        return
    cache = Path(os.environ.get("ASSAY_KERNEL_TEST_WORKSPACE") or Path(tempfile.gettempdir()) / "assay-kernel-tests")
    cache.mkdir(parents=True, exist_ok=True)
    os.chmod(cache, 0o777)  # whichever uid the backend runs as (nobody, or root) builds in here
    tasks = cache / "tasks"
    shutil.rmtree(tasks, ignore_errors=True)
    tasks.mkdir()
    limits = SandboxLimits(
        timeout_s=600, memory_mb=8192, pids=512, cpus=float(os.cpu_count() or 1), output_bytes=8 << 20
    )
    spec = SandboxSpec(workspace=cache, limits=limits, ro_binds=kernel_binds() + ((EXAMPLES, "/examples"),))
    try:
        sb = open_sandbox(spec)
    except Exception as exc:  # no backend here: the tests that need one skip (or fail in CI)
        yield None, f"no sandbox backend: {exc}"
        return
    try:
        yield sb, None
    finally:
        sb.close()


@pytest.fixture
def ksb(_kernel_sandbox_session, need):
    sb, why = _kernel_sandbox_session
    need(sb is not None, why or "")
    return sb


@pytest.fixture
def task_dir(ksb, tmp_path_factory) -> Path:
    """A fresh folder inside the sandbox's workspace for this test's task and candidate files."""
    d = Path(tempfile.mkdtemp(dir=Path(ksb.spec.workspace) / "tasks"))
    os.chmod(d, 0o777)  # the sandbox user writes build logs next to candidates
    return d
