"""The cpp candidate's C entry (kernels/cpp_entry.py) from the caller's side: it computes what
the Python forward did, at other shapes too, and refuses operands its kernel would read out
of bounds (wrong sizes, strides, dtypes, non-tensors) with an error instead of a crash."""

from __future__ import annotations

import pytest

from assay.kernels import NoTemplate, inspect_task, plan, render

from .conftest import load_module

torch = pytest.importorskip("torch")

ADD_BIAS = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, y):
        return torch.relu(x + y)


def get_inputs():
    return [torch.randn(4, 6, 16), torch.randn(16)]


def get_init_inputs():
    return []
"""

LINEAR = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, k: int = 16, n: int = 8):
        super().__init__()
        self.fc = nn.Linear(k, n)

    def forward(self, x):
        return torch.relu(self.fc(x))


def get_inputs():
    return [torch.randn(5, 16)]


def get_init_inputs():
    return []
"""


def _candidate(ksb, task_dir, name: str, text: str):
    task = task_dir / f"{name}.py"
    task.write_text(text)
    p = plan(inspect_task(ksb, task))
    assert not isinstance(p, NoTemplate), p.reason
    cand = task_dir / f"{name}_new.py"
    cand.write_text(render(p[0].template, p[0].space.configs[0]))
    return load_module(f"{name}_task", task), load_module(f"{name}_cand", cand)


def test_the_entry_matches_the_task_and_refuses_what_it_cannot_read(ksb, task_dir, monkeypatch, tmp_path):
    monkeypatch.setenv("ASSAY_KERNEL_BUILD_DIR", str(tmp_path / "build"))
    task, cand = _candidate(ksb, task_dir, "entry_add", ADD_BIAS)
    ref, new = task.Model(), cand.ModelNew()
    for shape in ((4, 6, 16), (1, 16), (3, 2, 5, 16)):
        x, y = torch.randn(*shape), torch.randn(16)
        assert torch.equal(new(x, y), ref(x, y)), shape
    x, y = torch.randn(4, 6, 16), torch.randn(16)
    with pytest.raises(ValueError, match="wrong size"):
        new(x, torch.randn(15))
    with pytest.raises(ValueError, match="contiguous float32"):
        new(x.transpose(0, 1), y)
    with pytest.raises(ValueError, match="contiguous float32"):
        new(x.double(), y)
    with pytest.raises(TypeError, match="tensors"):
        new(x, [1.0] * 16)
    with pytest.raises(TypeError, match="takes 2 tensors"):
        cand._KERNEL(0, (), x)
    with pytest.raises(RuntimeError, match="variant 99 does not exist"):
        cand._KERNEL(99, (), x, y)
    # A Parameter is a tensor subclass the entry takes as it is.
    assert torch.equal(new(x, torch.nn.Parameter(y)), ref(x, y))


def test_the_matmul_entry_checks_the_inner_size(ksb, task_dir, monkeypatch, tmp_path):
    monkeypatch.setenv("ASSAY_KERNEL_BUILD_DIR", str(tmp_path / "build"))
    task, cand = _candidate(ksb, task_dir, "entry_linear", LINEAR)
    torch.manual_seed(3)
    ref = task.Model()
    torch.manual_seed(3)
    new = cand.ModelNew()
    with torch.no_grad():
        for shape in ((5, 16), (2, 3, 16)):
            x = torch.randn(*shape)
            assert torch.allclose(new(x), ref(x), rtol=1e-5, atol=1e-5), shape
        with pytest.raises(ValueError, match="inner sizes differ"):
            new(torch.randn(5, 12))


LAYERNORM_TUPLE = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, normalized_shape: tuple):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)

    def forward(self, x):
        return self.ln(x)


dim = 48


def get_inputs():
    return [torch.randn(6, dim)]


def get_init_inputs():
    return [(dim,)]
"""


def test_a_tuple_constructor_argument_sizes_the_candidates_module(ksb, task_dir, monkeypatch, tmp_path):
    """The verifier builds both models at other sizes: a weight rendered at the task's literal
    size would be refused by the entry (or, before it, read past its end)."""
    monkeypatch.setenv("ASSAY_KERNEL_BUILD_DIR", str(tmp_path / "build"))
    task, cand = _candidate(ksb, task_dir, "entry_ln", LAYERNORM_TUPLE)
    for d in (48, 80):
        ref, new = task.Model((d,)), cand.ModelNew((d,))
        assert new.ln.weight.shape == (d,)
        x = torch.randn(6, d)
        with torch.no_grad():
            assert torch.allclose(new(x), ref(x), rtol=1e-5, atol=1e-5), d


CONV = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, c_in, c_out, k, stride, bias_shape):
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, k, stride=stride, padding=1)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        return torch.tanh(self.conv(x) - 0.5) * self.bias


def get_inputs():
    return [torch.randn(2, 3, 17, 17)]


def get_init_inputs():
    return [3, 8, 3, 2, (8, 1, 1)]
"""


def test_a_convolution_epilogue_runs_in_place_on_the_convolutions_output(ksb, task_dir, monkeypatch, tmp_path):
    """The candidate makes the reference's own convolution (its module, so its stride and
    padding whatever the sizes) and overwrites that output with the fused epilogue."""
    monkeypatch.setenv("ASSAY_KERNEL_BUILD_DIR", str(tmp_path / "build"))
    task, cand = _candidate(ksb, task_dir, "entry_conv", CONV)
    assert "y = self.conv(x)" in (task_dir / "entry_conv_new.py").read_text()
    for init, shape in (([3, 8, 3, 2, (8, 1, 1)], (2, 3, 17, 17)), ([4, 5, 3, 1, (5, 1, 1)], (1, 4, 9, 12))):
        torch.manual_seed(5)
        ref = task.Model(*init)
        torch.manual_seed(5)
        new = cand.ModelNew(*init)
        x = torch.randn(*shape)
        with torch.no_grad():
            assert torch.allclose(new(x), ref(x), rtol=1e-5, atol=1e-6), shape
            y = new.conv(x)
            out = cand._KERNEL(cand._variant, new._k, y, new.bias)
        assert out.data_ptr() == y.data_ptr()
    with pytest.raises(ValueError, match="wrong size"):
        cand._KERNEL(cand._variant, new._k, y, torch.randn(4, 1, 1))
