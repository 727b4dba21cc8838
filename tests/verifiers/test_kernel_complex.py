"""A task whose output is complex: the verdict compares both parts. Until this test the judge
compared `.double()` of the outputs, which keeps the real part only, and a candidate that got the
real part right and left the imaginary part at zero passed correctness with "max abs error 0"."""

from __future__ import annotations

from pathlib import Path

import pytest

from assay.verifiers.kernel import verify_kernel

TASK = Path(__file__).parent / "tasks" / "complex_rotate.py"

# Both use torch compute, so no_torch_compute fails them; kernel-test-runtime still runs them so
# that correctness is judged on its own.
RIGHT = """import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        return torch.complex(a - b, a + b)
"""
REAL_PART_ONLY = RIGHT.replace("torch.complex(a - b, a + b)", "torch.complex(a - b, torch.zeros_like(a))")


@pytest.mark.slow
@pytest.mark.parametrize("source, correct", [(RIGHT, True), (REAL_PART_ONLY, False)], ids=["right", "real_part_only"])
def test_complex_outputs_are_judged_on_both_parts(source, correct, backend, kernel_cache, tmp_path):
    cand = tmp_path / "candidate.py"
    cand.write_text(source)
    report = verify_kernel(TASK, cand, "kernel-test-runtime", backend=backend, cache_dir=kernel_cache)
    assert not report.passed  # torch compute
    check = report.check("correctness")
    assert check is not None and check.passed == correct, check.detail
    if not correct:
        assert "elements off" in check.detail and "max abs error 0 " not in check.detail
