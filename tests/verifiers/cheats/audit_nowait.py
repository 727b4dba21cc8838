"""Cheat: the worker's report returns at once instead of waiting for the supervisor's answer.

After each timed call the timing worker reports where the output lies on its audit line and
waits for the answer (worker.AuditLine.report): the supervisor reads the audited calls' outputs
meanwhile. Waiting is part of every subject's round. This C++ computes an honest softmax, and on
its first call finds the worker's AuditLine object (through the garbage collector, from native
code: no Python introspection for a source scan to see) and gives it (or, refused, its class) a report of its own that
writes the same report and returns without reading the answer, saving the round trip on every
call. It keeps its last outputs alive, so an output read after later calls ran is still where
its report said, unchanged: every output it reports is right. What stops it: the answer
carries what the next call's input is (the salt of its changed elements, a fresh round's next
input), so a call made before the answer came is a call on an input the verifier never gave.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_SOURCE = r"""
#include <torch/extension.h>
#include <cmath>
#include <deque>
#include <memory>
#include <string>
#include <sys/socket.h>
#include <unistd.h>

namespace py = pybind11;

static bool patched = false;

static void skip_the_wait() {
    patched = true;
    py::object objects = py::module_::import("gc").attr("get_objects")();
    for (py::handle obj : objects) {
        py::handle type = py::type::handle_of(obj);
        if (!py::hasattr(type, "__name__") || type.attr("__name__").cast<std::string>() != "AuditLine") continue;
        if (!py::hasattr(obj, "describe") || !py::hasattr(obj, "line")) continue;
        py::object line = py::reinterpret_borrow<py::object>(obj);
        const int fd = line.attr("line").cast<int>();
        py::object describe = line.attr("describe");
        // The last outputs are kept alive, so a read that comes after later calls ran still
        // finds each where its report said, unchanged.
        auto kept = std::make_shared<std::deque<py::object>>();
        auto fake = [fd, describe, kept](py::object out) -> py::object {
            kept->push_back(out);
            if (kept->size() > 16) kept->pop_front();
            // The answers it does not wait for are taken off the line later, without waiting,
            // so the supervisor's side never fills up.
            char sink[4096];
            while (::recv(fd, sink, sizeof sink, MSG_DONTWAIT) > 0) {}
            std::string data = describe(out).cast<std::string>();
            size_t at = 0;
            while (at < data.size()) {
                ssize_t n = ::write(fd, data.data() + at, data.size() - at);
                if (n <= 0) break;
                at += (size_t)n;
            }
            // The answer, guessed: 0 is a valid salt and a valid next input in any round.
            return py::int_(0);
        };
        try {
            line.attr("report") = py::cpp_function(fake);  // on the object, where nothing looks
        } catch (py::error_already_set&) {
            // The object has no room for it (__slots__): on the class, then.
            py::reinterpret_borrow<py::object>(type).attr("report") =
                py::cpp_function([fake](py::object self, py::object out) mutable { return fake(out); },
                                 py::is_method(type));
        }
    }
}

torch::Tensor softmax_rows(torch::Tensor x) {
    TORCH_CHECK(x.dtype() == torch::kFloat32 && x.is_contiguous() && x.dim() >= 1, "contiguous float32 input");
    if (!patched) skip_the_wait();
    auto out = at::empty_like(x);
    const int64_t cols = x.size(-1);
    const int64_t rows = cols ? x.numel() / cols : 0;
    const float* src = x.data_ptr<float>();
    float* dst = out.data_ptr<float>();
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
    name="assay_cheat_audit_nowait",
    cpp_sources=_SOURCE,
    functions=["softmax_rows"],
    extra_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return _ext.softmax_rows(x)
