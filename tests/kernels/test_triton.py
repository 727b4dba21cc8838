"""The triton backend on a CPU: every template checked under TRITON_INTERPRET=1 (correctness
only: the benchmark refuses to time the interpreter)."""

from __future__ import annotations

import importlib.util

import pytest

from assay.kernels import benchmark, inspect_tasks, plan, quick_test, render

from .conftest import EXAMPLES, shrink

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        importlib.util.find_spec("triton") is None, reason="triton not installed (pip install assay[triton])"
    ),
]

ONE_PER_TEMPLATE = ["scale_clamp_mul", "bias_gelu_residual", "softmax", "layernorm", "rmsnorm", "linear_bias_relu"]


def test_triton_templates_match_eager_under_the_interpreter(ksb, task_dir):
    tasks = [shrink(EXAMPLES / f"{n}.py", task_dir) for n in ONE_PER_TEMPLATE]
    for task, info in zip(tasks, inspect_tasks(ksb, tasks), strict=False):
        p = plan(info, "triton")[0]
        assert p.template.name.startswith("triton.")
        cand = task.with_name(f"{task.stem}_triton.py")
        cand.write_text(render(p.template, p.space.configs[-1]))
        res = quick_test(ksb, task, cand, seeds=(0, 1))
        assert res.ok, (task.stem, res.error, res.detail[-1500:], res.trials)
    bench = benchmark(ksb, tasks[2], tasks[2].with_name("softmax_triton.py"), reps=2)
    assert bench.ok and bench.seconds == {} and "TRITON_INTERPRET" in bench.detail
