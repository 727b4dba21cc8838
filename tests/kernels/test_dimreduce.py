"""Reductions over any one dimension (kernels/dimreduce.py): recognised from the traced graph,
rendered, built and run against the task's own Model, NaN and ties included."""

from __future__ import annotations

from pathlib import Path

import pytest

from assay.kernels import NoTemplate, TaskInfo, inspect_task, plan, render

from .conftest import load_module, one_expression_task

torch = pytest.importorskip("torch")

CASES = [
    "torch.sum(x, dim=1, keepdim=True)",
    "torch.mean(x, dim=-1)",
    "torch.prod(x, dim=0)",
    "torch.amax(x, dim=1)",
    "torch.max(x, dim=1)[0]",
    "torch.min(x, dim=2)[0]",
    "torch.max(x, dim=2)[1]",
    "torch.argmax(x, dim=1)",
    "torch.argmin(x, dim=-1, keepdim=True)",
]


def test_each_reduction_matches_torch_over_every_dim_with_nan_and_ties(ksb, task_dir, monkeypatch, tmp_path):
    monkeypatch.setenv("ASSAY_KERNEL_BUILD_DIR", str(tmp_path / "build"))
    for n, expr in enumerate(CASES):
        task = one_expression_task(task_dir, f"reduce{n}", expr)
        p = plan(inspect_task(ksb, task))
        assert not isinstance(p, NoTemplate), (expr, p.reason)
        assert p[0].template.kind == "dimreduce"
        ref = load_module(f"reduce_task{n}", task).Model()
        # Every configuration (column block size) for one case; the first for the others.
        configs = p[0].space.configs if "argmax" in expr else p[0].space.configs[:1]
        for k, config in enumerate(configs):
            cand = task_dir / f"reduce{n}_new{k}.py"
            cand.write_text(render(p[0].template, config))
            new = load_module(f"reduce_cand{n}_{k}", cand).ModelNew()
            for shape, nan in (((8, 300, 70), False), ((8, 300, 70), True), ((3, 5, 1), True), ((2, 1, 33), False)):
                x = torch.randn(*shape)
                x.view(-1)[5] = x.view(-1)[6] = 4.0  # a tie for the largest
                if nan:
                    x.view(-1)[3] = float("nan")
                want, got = ref(x), new(x)
                assert got.shape == want.shape and got.dtype == want.dtype, (expr, shape)
                if want.dtype == torch.int64:
                    assert torch.equal(got, want), (expr, config, shape)
                else:
                    assert torch.allclose(got, want, rtol=1e-5, atol=1e-5, equal_nan=True), (expr, config, shape)


def _info(op: str, args: dict, shape=(4, 8), dtype="float32") -> TaskInfo:
    return TaskInfo.from_json(
        Path("synthetic.py"),
        {
            "graph": {"nodes": [{"op": op, "args": {"input": "%in0", **args}, "dtype": "float32"}], "output": ["%n0"]},
            "inputs": [{"shape": list(shape), "dtype": dtype}],
            "params": [],
            "init_inputs": [],
            "init_signature": [],
            "forward_signature": ["x"],
            "device": {},
            "init_recipe": {"steps": [], "replays": True, "symbols": {}, "constants": {}},
        },
    )


@pytest.mark.parametrize(
    "op, args, dtype, words",
    [
        ("sum", {"dim": [0, 1]}, "float32", "over dims [0, 1], not one"),
        ("sum", {"dim": [1], "dtype": "float64"}, "float32", "dtype change"),
        ("argmax", {"dim": 1}, "float64", "float64 tensor"),
        ("mean", {"dim": None}, "float32", "over dim None"),
    ],
)
def test_what_is_not_a_one_dim_reduction_says_why(op, args, dtype, words):
    res = plan(_info(op, args, dtype=dtype))
    assert isinstance(res, NoTemplate) and words in res.reason, res


def test_the_triton_backend_says_it_has_none():
    res = plan(_info("sum", {"dim": [1]}), backend="triton")
    assert isinstance(res, NoTemplate) and "cpp backend has one" in res.reason
