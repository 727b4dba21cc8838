"""Cheat: Runs a softmax's row sums as a matmul, a contraction the reference never makes: the
contraction allowance covers the reference's own convolutions and matmuls only.
"""

import ctypes
import hashlib
import os

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load

# A plain C++ row softmax, built without torch's headers (seconds, not a minute) and called
# through ctypes with data pointers, the way the kernels room's generated candidates do it.
_SOURCE = r"""
#include <math.h>
#include <string.h>
extern "C" int softmax_rows(const float* x, float* y, long rows, long cols) {
    #pragma omp parallel for schedule(static)
    for (long r = 0; r < rows; ++r) {
        const float* a = x + r * cols;
        float* b = y + r * cols;
        float m = a[0];
        for (long c = 1; c < cols; ++c) m = a[c] > m ? a[c] : m;
        float s = 0.f;
        #pragma omp simd reduction(+:s)
        for (long c = 0; c < cols; ++c) { float e = expf(a[c] - m); b[c] = e; s += e; }
        float inv = 1.f / s;
        #pragma omp simd
        for (long c = 0; c < cols; ++c) b[c] *= inv;
    }
    return 0;
}
extern "C" int copy_floats(const float* src, float* dst, long n) {
    memcpy(dst, src, (size_t)n * sizeof(float));
    return 0;
}
extern "C" float peek(const float* x, long i) {
    return x[i];
}
extern "C" int scribble(float* x, long n) {
    for (long i = 0; i < n; i += 7) x[i] = 0.f;
    return 0;
}
"""


def _build():
    tag = hashlib.sha256(_SOURCE.encode()).hexdigest()[:12]
    root = os.path.join(os.environ.get("TORCH_EXTENSIONS_DIR") or os.getcwd(), "cheat_" + tag)
    os.makedirs(root, exist_ok=True)
    src = os.path.join(root, "kernel.cpp")
    with open(src, "w") as f:
        f.write(_SOURCE)
    so = load(name="cheat_" + tag, sources=[src], extra_cflags=["-O3", "-march=native", "-ffast-math", "-fopenmp"],
              extra_ldflags=["-fopenmp"], build_directory=root, is_python_module=False, verbose=False)
    lib = ctypes.CDLL(so)
    for fn in (lib.softmax_rows, lib.copy_floats, lib.scribble):
        fn.restype = ctypes.c_int
    lib.peek.restype = ctypes.c_float
    lib.peek.argtypes = [ctypes.c_void_p, ctypes.c_long]
    lib.softmax_rows.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long, ctypes.c_long]
    lib.copy_floats.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long]
    lib.scribble.argtypes = [ctypes.c_void_p, ctypes.c_long]
    return lib


_lib = _build()


def softmax(x, out=None):
    out = torch.empty_like(x) if out is None else out
    cols = x.shape[-1]
    _lib.softmax_rows(x.data_ptr(), out.data_ptr(), x.numel() // cols, cols)
    return out


def copy(t):
    out = torch.empty_like(t)
    _lib.copy_floats(t.data_ptr(), out.data_ptr(), t.numel())
    return out


class ModelNew(nn.Module):
    def forward(self, x):
        out = softmax(x)
        ones = torch.empty(x.shape[-1], 1)
        torch.mm(out.view(-1, x.shape[-1]), ones)  # the sums, by MKL
        return out
