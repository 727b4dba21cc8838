"""A candidate may make the reference's own contractions and fuse what follows them; no more.

The task is KernelBench level 2's commonest form (a Conv2d, then elementwise ops). The honest
candidate keeps the reference's __init__ and its convolution, and runs the ReLU and the bias in
one C pass over the convolution's output: it passes every check, its convolution's CPU time is
counted as the contraction's (not as torch compute reached by address), and it is timed. The
hostile ones use the allowance for something else: a second convolution, a convolution on other
sizes, a matmul the reference never makes, torch compute after the contraction. Each is refused
by no_torch_compute with the contraction named. (verifiers/kernel/contractions.py)
"""

from __future__ import annotations

from pathlib import Path

import pytest

from assay.verifiers.kernel import prepare_reference, verify_candidate
from assay.verifiers.kernel.scan import SCAN_CHECKS

HERE = Path(__file__).parent
TASK = HERE / "tasks" / "conv_relu_bias.py"

CANDIDATE = r'''
import ctypes
import hashlib
import os

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load

_SOURCE = r"""
extern "C" void relu_bias(float* y, const float* b, long n, long c, long hw) {
    #pragma omp parallel for collapse(2) schedule(static)
    for (long i = 0; i < n; ++i)
        for (long k = 0; k < c; ++k) {
            float* p = y + (i * c + k) * hw;
            const float bk = b[k];
            #pragma omp simd
            for (long j = 0; j < hw; ++j) p[j] = (p[j] > 0.f ? p[j] : 0.f) + bk;
        }
}
extern "C" void bias_relu_bias(float* y, const float* cb, const float* b, long n, long c, long hw) {
    #pragma omp parallel for collapse(2) schedule(static)
    for (long i = 0; i < n; ++i)
        for (long k = 0; k < c; ++k) {
            float* p = y + (i * c + k) * hw;
            const float ck = cb[k], bk = b[k];
            #pragma omp simd
            for (long j = 0; j < hw; ++j) { float v = p[j] + ck; p[j] = (v > 0.f ? v : 0.f) + bk; }
        }
}
"""


def _build():
    tag = hashlib.sha256(_SOURCE.encode()).hexdigest()[:12]
    root = os.path.join(os.environ.get("TORCH_EXTENSIONS_DIR") or os.getcwd(), "epilogue_" + tag)
    os.makedirs(root, exist_ok=True)
    src = os.path.join(root, "epilogue.cpp")
    with open(src, "w") as f:
        f.write(_SOURCE)
    so = load(name="epilogue_" + tag, sources=[src], extra_cflags=["-O3", "-march=native", "-fopenmp"],
              extra_ldflags=["-fopenmp"], build_directory=root, is_python_module=False, verbose=False)
    lib = ctypes.CDLL(so)
    lib.relu_bias.restype = None
    lib.relu_bias.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long, ctypes.c_long, ctypes.c_long]
    lib.bias_relu_bias.restype = None
    lib.bias_relu_bias.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_long] * 3
    return lib


_lib = _build()


def epilogue(y, bias):
    n, c, h, w = y.shape
    _lib.relu_bias(y.data_ptr(), bias.data_ptr(), n, c, h * w)
    return y


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
FORWARD
'''

HONEST = {
    # KernelBench's usual candidate: the reference's convolution module, then a fused epilogue.
    "module": "        return epilogue(self.conv(x), self.bias)",
    # The convolution spelt as the functional op, its bias added in the epilogue's stead: the
    # same convolution (a bias is not a contraction's operand).
    "functional_no_bias": (
        "        y = F.conv2d(x, self.conv.weight)\n"
        "        n, c, h, w = y.shape\n"
        "        _lib.bias_relu_bias(y.data_ptr(), self.conv.bias.data_ptr(), self.bias.data_ptr(), n, c, h * w)\n"
        "        return y"
    ),
}

HOSTILE = {
    # The allowance used twice: a second convolution the reference does not make.
    "twice": "        self.conv(x)\n        return epilogue(self.conv(x), self.bias)",
    # On other sizes: the first image only, which is less work than the reference's.
    "other_sizes": "        return epilogue(self.conv(x[:1]), self.bias)",
    # A contraction of another kind: the channel mixing as a matmul the reference never makes.
    "other_op": (
        "        y = self.conv(x)\n"
        "        w = torch.empty(y.shape[1], y.shape[1])\n"
        "        return epilogue(torch.matmul(w, y.flatten(2)).view(y.shape), self.bias)"
    ),
}


def _write(tmp_path: Path, name: str, forward: str) -> Path:
    path = tmp_path / f"{name}.py"
    path.write_text(CANDIDATE.replace("FORWARD", forward), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def conv_reference(kernel_cache):
    import importlib.util

    spec = importlib.util.spec_from_file_location("verifier_conftest", HERE / "conftest.py")
    helpers = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(helpers)
    ok, backend = helpers.sandbox_backend()
    if not ok:
        yield None, backend
        return
    with prepare_reference(TASK, "kernel-test", backend, kernel_cache) as ref:
        yield ref, backend


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(HONEST))
def test_the_reference_convolution_with_a_fused_epilogue_passes(name, conv_reference, need, tmp_path):
    ref, detail = conv_reference
    need(ref is not None, detail)
    report = verify_candidate(ref, _write(tmp_path, name, HONEST[name]))
    failed = [c for c in report.checks if not c.passed and c.name != "speed"]
    assert failed == [], report.reasons
    assert "contractions" in report.check("no_torch_compute").detail
    m = report.metrics
    # The reference's contraction as recorded beside the candidate: the convolution on the task's sizes.
    first = m["contractions"]["reference"][str(ref.runs[0]["id"])]
    assert any(k.startswith("aten::conv2d([4,3,24,24];[16,3,3,3];[16]") for k in first["roots"]), first
    assert m["contractions"]["candidate_runs"]
    # Timed, the convolution's CPU time is the contraction's: oneDNN runs in libtorch_cpu, and
    # without the recorder's mark the sampler would call that torch compute reached by address.
    samples = m["cpu_samples"]
    assert samples["contraction"] > 0.05 and samples["torch"] < samples["contraction"], samples
    assert report.check("speed") is not None and m["speedup_vs_eager"] > 0


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_contraction_beyond_the_references_is_refused(name, conv_reference, need, tmp_path):
    ref, detail = conv_reference
    need(ref is not None, detail)
    report = verify_candidate(ref, _write(tmp_path, name, HOSTILE[name]))
    assert not report.passed
    # The scan lets every one through (a convolution module, F.conv2d and torch.matmul are
    # contractions a forward may call): the run-time record is what refuses them.
    assert all(report.check(n).passed for n in SCAN_CHECKS), report.reasons
    check = report.check("no_torch_compute")
    assert check is not None and not check.passed, report.reasons
    assert "contractions beyond the reference's own" in check.detail, check.detail
    assert "aten::convolution on [4,3,24,24], [16,3,3,3] x1" in check.detail, check.detail
