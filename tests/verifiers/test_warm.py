"""The verifier's warm-up: its caches built before a submission exists, then used by the
verification after it (agents.runner starts it beside the agent)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from assay.verifiers import kernel_runtime as rt
from assay.verifiers.kernel import prepare_reference, warm_task

SOFTMAX = Path(__file__).resolve().parents[2] / "examples" / "kernels" / "softmax.py"


@pytest.mark.slow
def test_warm_up_fills_what_the_verification_then_loads(backend, tmp_path):
    cache = tmp_path / "cache"
    warm_task(SOFTMAX, "kernel-test", backend, cache)
    assert rt.BACKGROUND["on"] is False  # only the warm-up's own sandboxes ran in the background
    assert len(list((cache / "opwatch").glob("*/build/assay_opwatch_*.so"))) == 1
    assert len(list((cache / "inductor").glob("*/.filled"))) == 1
    with prepare_reference(SOFTMAX, "kernel-test", backend, cache) as ref:
        assert ref.opwatch_dir is not None and ref.opwatch_dir.is_relative_to(cache)
        ref.warming.result()
        assert ref.compile_warm == {"ok": True, "cached": True}


def test_warm_of_an_unknown_run_is_one_line_exit_2(tmp_path):
    r = subprocess.run([sys.executable, "-m", "assay.verifiers", "warm", "--run", "no-such-run"],
                       capture_output=True, text=True, timeout=120, env={"ASSAY_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "no run 'no-such-run'" in r.stderr
