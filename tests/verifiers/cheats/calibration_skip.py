"""Cheat: no work in the rounds that size the timed rounds, honest everywhere else.

The supervisor sizes each subject's timed rounds on calibration rounds of 1, 2, 4, ... calls
right after its warm-up. A candidate can tell where a round begins (the cache flush before it
leaves a gap of milliseconds between two calls; inside a round the gap is a report's round
trip), so it can count rounds. This one returns memory it never wrote in the first four rounds
after its warm-up (1 + 2 + 4 + 8 calls: far under the quarter of a round's target time that
ends the calibration, so all four are calibration rounds on any machine) and computes honestly
in every other call. Its calibration then says it is far faster than it is, and its timed
rounds are sized long (their fixed costs weigh less). What stops it: calibration rounds are
audited like the timed ones (each call read with chance 1/n, so the single-call round always).
"""

import ctypes
import hashlib
import os

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load

# A plain C++ row softmax, built without torch's headers (seconds, not a minute) and called
# through ctypes with data pointers, the way the kernels room's generated candidates do it;
# and the monotonic clock, which no harness function reaches.
_SOURCE = r"""
#include <math.h>
#include <string.h>
#include <time.h>
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
extern "C" long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
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
    for fn in (lib.softmax_rows, lib.copy_floats):
        fn.restype = ctypes.c_int
    lib.softmax_rows.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long, ctypes.c_long]
    lib.copy_floats.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long]
    lib.now_ns.restype = ctypes.c_longlong
    return lib


_lib = _build()


def softmax(x):
    out = torch.empty_like(x)
    cols = x.shape[-1]
    _lib.softmax_rows(x.data_ptr(), out.data_ptr(), x.numel() // cols, cols)
    return out


def copy(t):
    out = torch.empty_like(t)
    _lib.copy_floats(t.data_ptr(), out.data_ptr(), t.numel())
    return out


class ModelNew(nn.Module):
    # Subjects are warmed up one after another, then calibrated one after another, the candidate
    # last each time: while the others calibrate it is stopped, for a tenth of a second or more.
    CALIBRATION_GAP_NS = 50_000_000
    ROUND_GAP_NS = 1_000_000  # a flush between two calls; a report's round trip is far shorter
    SKIPPED_ROUNDS = 4        # 1 + 2 + 4 + 8 calls

    def __init__(self):
        super().__init__()
        self.calls, self.quick, self.rounds, self.last, self.ended = 0, 0, 0, None, 0

    def forward(self, x):
        start = _lib.now_ns()
        self.calls += 1
        gap = start - self.ended
        # The checks' worker never calls twice within a millisecond (it writes each output out);
        # a timing worker's warm-up calls back to back.
        self.quick += self.calls > 1 and gap < self.ROUND_GAP_NS
        if self.rounds == 0 and self.quick and gap > self.CALIBRATION_GAP_NS:
            self.rounds = 1
        elif self.rounds and gap > self.ROUND_GAP_NS:
            self.rounds += 1
        if 1 <= self.rounds <= self.SKIPPED_ROUNDS and self.last is not None and self.last.shape == x.shape:
            out = torch.empty_like(x)
        else:
            self.last = softmax(x)
            out = copy(self.last)
        self.ended = _lib.now_ns()
        return out
