"""Honest candidate for examples/kernel/softmax.py: a row softmax in C++ with OpenMP.

One parallel loop over rows; per row a max pass, an exp-and-sum pass that stores the
exponentials, and a scaling pass. -ffast-math lets GCC vectorise expf through glibc's vector
math (libmvec), which is what it takes to keep up with ATen's vectorised softmax.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_SOURCE = r"""
#include <torch/extension.h>
#include <cmath>

torch::Tensor softmax_rows(torch::Tensor x) {
    TORCH_CHECK(x.dtype() == torch::kFloat32 && x.is_contiguous() && x.dim() >= 1, "contiguous float32 input");
    auto out = torch::empty_like(x);  // the C++ frontend's factory, as most load_inline kernels allocate
    const int64_t cols = x.size(-1);
    const int64_t rows = cols ? x.numel() / cols : 0;
    const float* src = x.data_ptr<float>();
    float* dst = out.data_ptr<float>();
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float* a = src + r * cols;
        float* b = dst + r * cols;
        float m = a[0];
        #pragma omp simd reduction(max:m)
        for (int64_t c = 1; c < cols; ++c) m = a[c] > m ? a[c] : m;
        float s = 0.f;
        #pragma omp simd reduction(+:s)
        for (int64_t c = 0; c < cols; ++c) { const float e = expf(a[c] - m); b[c] = e; s += e; }
        const float inv = 1.f / s;
        #pragma omp simd
        for (int64_t c = 0; c < cols; ++c) b[c] *= inv;
    }
    return out;
}
"""

_ext = load_inline(
    name="assay_honest_softmax_omp",
    cpp_sources=_SOURCE,
    functions=["softmax_rows"],
    extra_cflags=["-O3", "-march=native", "-ffast-math", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return _ext.softmax_rows(x)
