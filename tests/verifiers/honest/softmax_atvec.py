"""Honest candidate for examples/kernel/softmax.py: a row softmax on ATen's own vector math.

at::vec::Vectorized<float> is header code, but for exp it calls Sleef (Sleef_expf8_u10 on
AVX2), which libtorch_cpu exports; this kernel calls that function itself (the source scan
cannot tell a Vectorized's .exp() from a tensor's). So most of its time is spent inside torch's
library, in a function the symbol check allows, and the CPU samples must credit that time to
Sleef, not to torch's compute.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_SOURCE = r"""
#include <torch/extension.h>
#include <ATen/cpu/vec/vec.h>
#include <ATen/cpu/vec/functional.h>
#include <cmath>
#include <immintrin.h>

using Vec = at::vec::Vectorized<float>;
extern "C" __m256 Sleef_expf8_u10(__m256);

torch::Tensor softmax_rows(torch::Tensor x) {
    TORCH_CHECK(x.dtype() == torch::kFloat32 && x.is_contiguous() && x.dim() >= 1, "contiguous float32 input");
    auto out = at::empty_like(x);
    const int64_t cols = x.size(-1);
    const int64_t rows = cols ? x.numel() / cols : 0;
    const float* src = x.data_ptr<float>();
    float* dst = out.data_ptr<float>();
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float* a = src + r * cols;
        float* b = dst + r * cols;
        const float m = at::vec::reduce_all<float>([](Vec& p, Vec& q) { return at::vec::maximum(p, q); }, a, cols);
        const Vec vm(m);
        Vec acc(0.f);
        int64_t c = 0;
        for (; c + Vec::size() <= cols; c += Vec::size()) {
            const Vec e = Vec(Sleef_expf8_u10(Vec::loadu(a + c) - vm));
            e.store(b + c);
            acc = acc + e;
        }
        float s = at::vec::vec_reduce_all<float>([](Vec& p, Vec& q) { return p + q; }, acc);
        for (; c < cols; ++c) {
            b[c] = std::exp(a[c] - m);
            s += b[c];
        }
        const Vec inv(1.f / s);
        for (c = 0; c + Vec::size() <= cols; c += Vec::size()) (Vec::loadu(b + c) * inv).store(b + c);
        for (; c < cols; ++c) b[c] *= 1.f / s;
    }
    return out;
}
"""

_ext = load_inline(name="honest_softmax_atvec", cpp_sources=_SOURCE, functions=["softmax_rows"],
                   extra_cflags=["-O3", "-mavx2", "-mfma", "-DCPU_CAPABILITY_AVX2", "-DCPU_CAPABILITY=AVX2", "-fopenmp"],
                   extra_ldflags=["-fopenmp"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, x):
        return _ext.softmax_rows(x.contiguous())
