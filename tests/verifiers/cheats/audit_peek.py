"""Cheat: computes the softmax only on the call the harness will audit.

The harness picks one call per timed round whose output it audits. While that choice lived in
the worker's memory before the call (a local of the timing loop), native code could read it:
this C++ walks the Python frames above forward through the C API (no Python-level
introspection for the source scan to see), finds the timing loop's `i` and `audit`, and on
every call but the audited one writes a copy of the input: as fast as memory allows, so inside
the roofline, and wrong. Honest wherever it is not timed, so its checks pass. Against the
harness before worker.AuditLine it passed at about 3x eager; now the loop holds no such
local (each call's flag is read after it returns), it cheats on every timed call, and the
audited output is wrong.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_SOURCE = r"""
#include <torch/extension.h>
#include <cmath>
#include <cstring>

// 1 when the harness's timing loop above will keep this call's output, 0 when it will not,
// -1 when no timing loop is found (the correctness runs).
static int audited_here() {
    PyFrameObject* f = PyThreadState_GetFrame(PyThreadState_Get());
    int found = -1;
    for (int depth = 0; f != nullptr && depth < 16 && found < 0; ++depth) {
        PyObject* locals = PyFrame_GetLocals(f);
        if (locals != nullptr) {
            PyObject* i = PyDict_GetItemString(locals, "i");
            PyObject* audit = PyDict_GetItemString(locals, "audit");
            if (i != nullptr && audit != nullptr && PyLong_Check(i) && PyLong_Check(audit))
                found = PyLong_AsLong(i) == PyLong_AsLong(audit) ? 1 : 0;
            // A timing loop that does not say which call it audits: cheat on every call.
            else if (PyDict_GetItemString(locals, "fn") != nullptr &&
                     (PyDict_GetItemString(locals, "perturb") != nullptr || PyDict_GetItemString(locals, "sets") != nullptr))
                found = 0;
            Py_DECREF(locals);
        }
        PyFrameObject* back = PyFrame_GetBack(f);
        Py_DECREF(f);
        f = back;
    }
    Py_XDECREF(f);
    return found;
}

torch::Tensor softmax_rows(torch::Tensor x) {
    TORCH_CHECK(x.dtype() == torch::kFloat32 && x.is_contiguous() && x.dim() >= 1, "contiguous float32 input");
    auto out = at::empty_like(x);
    const int64_t cols = x.size(-1);
    const int64_t rows = cols ? x.numel() / cols : 0;
    const float* src = x.data_ptr<float>();
    float* dst = out.data_ptr<float>();
    if (audited_here() == 0) {
        #pragma omp parallel for schedule(static)
        for (int64_t r = 0; r < rows; ++r) std::memcpy(dst + r * cols, src + r * cols, cols * sizeof(float));
        return out;
    }
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float* a = src + r * cols;
        float* b = dst + r * cols;
        float m = a[0];
        for (int64_t c = 1; c < cols; ++c) m = a[c] > m ? a[c] : m;
        float s = 0.f;
        for (int64_t c = 0; c < cols; ++c) { const float e = std::exp(a[c] - m); b[c] = e; s += e; }
        const float inv = 1.f / s;
        for (int64_t c = 0; c < cols; ++c) b[c] *= inv;
    }
    return out;
}
"""

_ext = load_inline(
    name="assay_cheat_audit_peek",
    cpp_sources=_SOURCE,
    functions=["softmax_rows"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return _ext.softmax_rows(x)
