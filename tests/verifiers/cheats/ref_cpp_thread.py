"""Cheat: Calls at::softmax from a std::thread inside its C++ extension, where a dispatch mode or profiler armed on the calling thread does not look.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_SOURCE = r"""
#include <torch/extension.h>
#include <thread>

torch::Tensor direct(torch::Tensor x) {
    return at::softmax(x, -1);
}

torch::Tensor threaded(torch::Tensor x) {
    torch::Tensor out;
    std::thread worker([&] { out = at::softmax(x, -1); });
    worker.join();
    return out;
}
"""

_ext = load_inline(name="cheat_cpp_aten", cpp_sources=_SOURCE, functions=["direct", "threaded"],
                   extra_cflags=["-O2"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, x):
        return _ext.threaded(x)
