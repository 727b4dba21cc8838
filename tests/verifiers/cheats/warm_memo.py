"""Cheat: remembers inputs only where it can tell the timing loop is reusing one (the same tensor call after call: the warm rounds), and there recomputes only the rows that changed; on any other input (the checks, the fresh rounds) it is an honest kernel that keeps nothing, so the fresh rounds see its honest speed. A red-team candidate of this kind passed at 3.1x eager measured, 0.67x on fresh inputs, credited 1.34x, while the warm rounds changed four elements per call.
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
static void softmax_row(const float* a, float* b, long cols) {
    float m = a[0];
    for (long c = 1; c < cols; ++c) m = a[c] > m ? a[c] : m;
    float s = 0.f;
    #pragma omp simd reduction(+:s)
    for (long c = 0; c < cols; ++c) { float e = expf(a[c] - m); b[c] = e; s += e; }
    float inv = 1.f / s;
    #pragma omp simd
    for (long c = 0; c < cols; ++c) b[c] *= inv;
}
// Rows whose bytes equal the cached input's keep their cached output; the rest are computed
// and cached. Returns how many rows were computed.
extern "C" long memo_softmax(const float* x, float* seen, float* y, long rows, long cols) {
    long computed = 0;
    #pragma omp parallel for schedule(static) reduction(+:computed)
    for (long r = 0; r < rows; ++r) {
        const float* a = x + r * cols;
        float* k = seen + r * cols;
        if (memcmp(a, k, (size_t)cols * sizeof(float)) == 0) continue;
        softmax_row(a, y + r * cols, cols);
        memcpy(k, a, (size_t)cols * sizeof(float));
        computed += 1;
    }
    return computed;
}
extern "C" int softmax_all(const float* x, float* y, long rows, long cols) {
    #pragma omp parallel for schedule(static)
    for (long r = 0; r < rows; ++r) softmax_row(x + r * cols, y + r * cols, cols);
    return 0;
}
extern "C" int fill_nan(float* x, long n) {
    for (long i = 0; i < n; ++i) x[i] = NAN;  // NaN bytes match no input's
    return 0;
}
extern "C" int copy_floats(const float* src, float* dst, long n) {
    memcpy(dst, src, (size_t)n * sizeof(float));
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
    lib.memo_softmax.restype = ctypes.c_long
    lib.memo_softmax.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_long, ctypes.c_long]
    lib.softmax_all.argtypes = [ctypes.c_void_p] * 2 + [ctypes.c_long, ctypes.c_long]
    lib.fill_nan.argtypes = [ctypes.c_void_p, ctypes.c_long]
    lib.copy_floats.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long]
    return lib


_lib = _build()


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.seen, self.out, self.ptrs = None, None, {}

    def forward(self, x):
        ptr = x.data_ptr()
        self.ptrs[ptr] = self.ptrs.get(ptr, 0) + 1
        cols = x.shape[-1]
        rows = x.numel() // cols
        if self.ptrs[ptr] < 8 or len(self.ptrs) > 4096:
            # An input it has not seen reused: computed in full, nothing kept (no copy to pay).
            y = torch.empty_like(x)
            _lib.softmax_all(x.data_ptr(), y.data_ptr(), rows, cols)
            return y
        if self.seen is None or self.seen.shape != x.shape:
            self.seen, self.out = torch.empty_like(x), torch.empty_like(x)
            _lib.fill_nan(self.seen.data_ptr(), x.numel())
        computed = _lib.memo_softmax(x.data_ptr(), self.seen.data_ptr(), self.out.data_ptr(), rows, cols)
        if computed * 8 > rows:
            fresh = torch.empty_like(x)
            _lib.copy_floats(self.out.data_ptr(), fresh.data_ptr(), x.numel())
            return fresh
        return self.out
