"""The verifier's warm-up: its caches built before a submission exists, then used by the
verification after it (agents.runner starts it beside the agent)."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

from assay.verifiers.kernel import prepare_reference, warm_task
from assay.verifiers.kernel import runtime as rt

SOFTMAX = Path(__file__).resolve().parents[2] / "examples" / "kernel" / "softmax.py"


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


@pytest.mark.slow
def test_a_new_tasks_compile_starts_from_the_first_tasks_cache(backend, tmp_path):
    """Inductor's checks of the CPU's instructions live in its cache folder; the first filled task
    cache is kept whole as the seed of later tasks' compiles, so they are built once per machine."""
    cache = tmp_path / "cache"
    warm_task(SOFTMAX, "kernel-test", backend, cache)
    seed = cache / "inductor-seed"
    assert (seed / ".filled").is_file()
    planted = {p.relative_to(seed) for p in seed.rglob("*") if p.is_file() and p.name != ".filled"}
    assert any(p.suffix == ".so" for p in planted)
    silu = SOFTMAX.with_name("silu.py")
    warm_task(silu, "kernel-test", backend, cache)
    filled = cache / "inductor" / hashlib.sha256(silu.read_text(encoding="utf-8").encode()).hexdigest()[:32]
    assert (filled / ".filled").is_file()
    assert planted <= {p.relative_to(filled) for p in filled.rglob("*") if p.is_file()}


def test_warm_of_an_unknown_run_is_one_line_exit_2(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "assay.verifiers", "warm", "--run", "no-such-run"],
        capture_output=True,
        text=True,
        timeout=120,
        env={"ASSAY_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
    )
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "no run 'no-such-run'" in r.stderr
