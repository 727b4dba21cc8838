"""Normalisations over any one dimension (kernels/dimnorm.py): softmax and log-softmax over a
dim that is not the last, and norms written by hand (L1, L2, RMS, F.normalize), recognised
from the traced graph, rendered, built and run against the task's own Model, NaN included."""

from __future__ import annotations

from pathlib import Path

import pytest

from assay.kernels import NoTemplate, TaskInfo, plan, render
from assay.kernels.runner import inspect_tasks

from .conftest import load_module, one_expression_task

torch = pytest.importorskip("torch")

CASES = [
    "torch.softmax(x, dim=1)",
    "torch.log_softmax(x, dim=0)",
    "torch.softmax(x, dim=-2)",
    "x / torch.norm(x, p=2, dim=1, keepdim=True)",
    "x / torch.norm(x, p=2, dim=-1, keepdim=True)",
    "x / torch.sum(torch.abs(x), dim=1, keepdim=True)",
    "x / torch.norm(x, p=1, dim=2, keepdim=True)",
    "x / torch.sqrt(torch.mean(x**2, dim=1, keepdim=True) + 1e-5)",
    "x * torch.rsqrt(torch.mean(x * x, dim=0, keepdim=True) + 1e-6)",
    "torch.nn.functional.normalize(x, p=2.0, dim=1)",
]


def test_each_normalisation_matches_torch_over_its_dim_with_nan(ksb, task_dir, monkeypatch, tmp_path):
    monkeypatch.setenv("ASSAY_KERNEL_BUILD_DIR", str(tmp_path / "build"))
    tasks = [one_expression_task(task_dir, f"norm{n}", expr) for n, expr in enumerate(CASES)]
    for n, (expr, task, info) in enumerate(zip(CASES, tasks, inspect_tasks(ksb, tasks), strict=True)):
        p = plan(info)
        assert not isinstance(p, NoTemplate), (expr, p.reason)
        assert p[0].template.kind == "dimreduce", (expr, p[0].template.kind)
        ref = load_module(f"norm_task{n}", task).Model()
        # Every configuration (column block size) for one case; the first for the others.
        configs = p[0].space.configs if n == 0 else p[0].space.configs[:1]
        for k, config in enumerate(configs):
            cand = task_dir / f"norm{n}_new{k}.py"
            cand.write_text(render(p[0].template, config))
            new = load_module(f"norm_cand{n}_{k}", cand).ModelNew()
            # The task's size, a column count under one vector, a reduced dim of one, and NaN.
            for shape, nan in (((8, 300, 70), False), ((8, 300, 70), True), ((3, 5, 1), True), ((2, 1, 33), False)):
                x = torch.randn(*shape)
                if nan:
                    x.view(-1)[3] = float("nan")
                want, got = ref(x), new(x)
                assert got.shape == want.shape and got.dtype == want.dtype, (expr, shape)
                assert torch.allclose(got, want, rtol=1e-5, atol=1e-6, equal_nan=True), (
                    expr,
                    config,
                    shape,
                    (got - want).abs().nan_to_num(0).max(),
                )


def _info(nodes: list[dict], shape=(4, 8, 6)) -> TaskInfo:
    return TaskInfo.from_json(
        Path("synthetic.py"),
        {
            "graph": {"nodes": nodes, "output": [f"%n{len(nodes) - 1}"]},
            "inputs": [{"shape": list(shape), "dtype": "float32"}],
            "params": [],
            "init_inputs": [],
            "init_signature": [],
            "forward_signature": ["x"],
            "device": {},
            "init_recipe": {"steps": [], "replays": True, "symbols": {}, "constants": {}},
        },
    )


def _node(op: str, shape=(4, 8, 6), **args) -> dict:
    return {"op": op, "args": args, "shape": list(shape), "dtype": "float32"}


@pytest.mark.parametrize(
    "nodes, words",
    [
        # Divided by the norm of something else: not a normalisation of x.
        (
            [
                _node("linalg_vector_norm", (4, 1, 6), input="%in0", ord=2, dim=[1], keepdim=True, dtype=None),
                _node("div", input="%n0", other="%in0"),
            ],
            "no template for",
        ),
        # A p=3 norm is not one the template knows.
        (
            [
                _node("linalg_vector_norm", (4, 1, 6), input="%in0", ord=3, dim=[1], keepdim=True, dtype=None),
                _node("div", input="%in0", other="%n0"),
            ],
            "no template for linalg_vector_norm",
        ),
        # The statistic without keepdim cannot broadcast back along its dim.
        (
            [
                _node("abs", input="%in0"),
                _node("sum", (4, 6), input="%n0", dim=[1], keepdim=False, dtype=None),
                _node("div", input="%in0", other="%n1"),
            ],
            "no template for sum",
        ),
    ],
)
def test_what_is_not_a_normalisation_of_x_says_why(nodes, words):
    res = plan(_info(nodes))
    assert isinstance(res, NoTemplate) and words in res.reason, res


def test_softmax_over_the_last_dim_stays_with_the_row_template():
    p = plan(_info([_node("softmax", input="%in0", dim=-1, dtype=None)]))
    assert not isinstance(p, NoTemplate) and p[0].template.kind == "rowreduce"
    p = plan(_info([_node("softmax", input="%in0", dim=1, dtype=None)]))
    assert not isinstance(p, NoTemplate) and p[0].template.kind == "dimreduce"
    assert p[0].template.spec["op"] == "softmax" and p[0].template.spec["dim"] == 1
