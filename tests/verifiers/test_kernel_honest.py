"""Honest candidates pass every correctness and anti-gaming check, and get timed against eager
and torch.compile in the same run. Whether one is *faster* than eager on a shared 2-core test
machine is measured, not assumed: the speed check is asserted to have run with real figures,
and test_kernel_cheats shows it failing a candidate that is plainly slower."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from assay.verifiers.kernel import verify_kernel

HERE = Path(__file__).parent
SOFTMAX = HERE.parent.parent / "examples" / "kernel" / "softmax.py"


@pytest.mark.slow
@pytest.mark.parametrize("name", ["softmax_ctypes", "softmax_omp", "softmax_atvec"])
def test_honest_softmax_passes_every_check_but_speed_is_measured(name, backend, kernel_cache):
    report = verify_kernel(
        SOFTMAX, HERE / "honest" / f"{name}.py", "kernel-test", backend=backend, cache_dir=kernel_cache
    )
    failed = [c for c in report.checks if not c.passed and c.name != "speed"]
    assert failed == [], report.reasons
    for name_ in (
        "correctness",
        "other_shapes",
        "no_torch_compute",
        "extension_symbols",
        "no_replay",
        "no_work_after_return",
        "consistent_when_timed",
        "timing_integrity",
        "roofline",
        "speed",
    ):
        assert report.check(name_) is not None, f"{name_} did not run"
    m = report.metrics
    for key in ("speedup_vs_eager", "speedup_vs_compile", "time_candidate_s", "time_eager_s", "copy_bandwidth_gbs"):
        assert math.isfinite(m[key]) and m[key] > 0
    assert m["speedup_vs_eager_measured"] == pytest.approx(m["time_eager_s"] / m["time_candidate_s"], rel=1e-3)
    # Credited: at most fresh_slack times the speedup on inputs no call saw before.
    assert m["speedup_vs_eager"] <= m["speedup_vs_eager_measured"] + 1e-9
    assert m["speedup_vs_eager"] <= 1.5 * m["speedup_vs_eager_fresh"] * (1 + 1e-3)
    # The timing sandbox loaded its reference during the checks and waited for their word.
    assert {"reference warm-up", "waiting for the checks", "import", "timed rounds"} <= set(m["timing_phases_s"])
    assert report.passed == report.check("speed").passed
    # Rounds measure the kernel, not page faults: the harness's audit copies are made before the
    # clock starts (a fault cost 17 us here, and a 16 MB output has 4096 pages).
    faults = sorted(r[3] for r in m["rounds"]["candidate"] + m["rounds_fresh"]["candidate"])
    assert faults[len(faults) // 2] < 1024, faults
    assert len(report.candidate_sha256) == 64 and len(report.task_sha256) == 64
    # Its CPU time, sampled while timed, is its own (Sleef's vector math counted apart): a few
    # percent in torch's glue, where a kernel of torch's reached by address reads 50%.
    assert m["cpu_samples"]["intervals"] >= 50 and m["cpu_samples"]["torch"] < 0.05, m["cpu_samples"]
    # CPU time of threads that ended inside a round counts as torch's: an honest candidate's
    # OpenMP team lives on, so there is none.
    assert m["cpu_samples"]["unplaced"] < 0.01, m["cpu_samples"]
    if name == "softmax_atvec":
        assert m["cpu_samples"]["sleef"] > 0.1, m["cpu_samples"]


@pytest.mark.slow
def test_an_honest_kernel_beside_a_cpu_hog_passes_or_is_inconclusive_never_fails(backend, kernel_cache, cpu_hog):
    """The KernelBench style that was once failed under load (load_inline, torch::empty_like, a
    plain OpenMP loop), verified beside two spinning processes per CPU: the load slows the
    reference, the copy baseline and the candidate, and not alike, so speed and roofline may not
    be judged. The verdict passes, or says inconclusive with the contention it measured; it
    never fails the kernel (bench/kernels.py --verify --hog runs the same over the corpus)."""
    with cpu_hog(2):
        report = verify_kernel(
            SOFTMAX, HERE / "honest" / "softmax_omp.py", "kernel-test", backend=backend, cache_dir=kernel_cache
        )
    failed = [c.name for c in report.checks if not c.passed]
    # Only the checks whose figures the load decides may fail, and then the verdict says why.
    assert set(failed) <= {"speed", "roofline"}, report.reasons
    assert report.passed or report.inconclusive, (report.reasons, report.metrics.get("reference_cpu_share"))
    for reason in report.reasons:
        assert "inconclusive" in reason, reason
