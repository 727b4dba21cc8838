"""The harness's JSON contracts, as the MCP tools and the verifier will read them."""

from __future__ import annotations

import json

import pytest

from assay.errors import UserError
from assay.kernels import benchmark, build, inspect_task, inspect_tasks, plan, quick_test, render
from assay.kernels.runner import call_harness, sandbox_path

from .conftest import EXAMPLES, shrink

NAMES = ["scale_clamp_mul", "silu", "softmax", "gelu"]


@pytest.fixture(scope="module")
def inspected(_kernel_sandbox_session):
    """The tasks these tests use, shrunk and inspected in one sandboxed process."""
    import tempfile
    from pathlib import Path

    sb, _ = _kernel_sandbox_session
    if sb is None:
        return {}
    d = Path(tempfile.mkdtemp(dir=Path(sb.spec.workspace) / "tasks"))
    tasks = [shrink(EXAMPLES / f"{n}.py", d) for n in NAMES]
    return {n: (t, i) for n, t, i in zip(NAMES, tasks, inspect_tasks(sb, tasks), strict=False)}


def test_inspect_reports_normalised_graph_not_source(ksb, inspected):
    info = inspected["scale_clamp_mul"][1]
    assert [n["op"] for n in info.nodes] == ["mul", "clamp", "mul"]
    assert info.nodes[0]["args"] == {"input": "%in0", "other": 1.5}
    assert info.nodes[2]["args"]["other"] == "%p0"  # the multiplier, by position not by name
    assert info.inputs == [{"shape": [3, 5, 5, 5], "dtype": "float32"}]
    assert info.params == [{"name": "multiplier", "shape": [5, 1, 1], "dtype": "float32", "parameter": True}]
    assert info.init_signature == ["channels", "scale", "clamp_min", "clamp_max"]
    assert info.forward_signature == ["x"]
    recipe = info.init_recipe
    assert recipe["replays"] and recipe["steps"] == [{"param": "multiplier", "shape": [5, 1, 1], "init": "randn"}]
    # sizes and constants traced back to the constructor arguments that set them
    assert recipe["symbols"] == {"0.shape.0": 0}
    assert recipe["constants"] == {"0.other": 1, "1.min": 2, "1.max": 3}
    assert info.device["kind"] == "cpu" and info.device["threads"] >= 1
    # The task's text reaches the playbook in one place only, the constructor a candidate may
    # repeat (own_init), never in what patterns are read from.
    raw = json.dumps({k: v for k, v in info.raw.items() if k != "own_init"})
    assert "clamp_min" not in json.dumps(info.graph) and "self." not in raw
    assert "self.multiplier = nn.Parameter(torch.randn(channels, 1, 1))" in info.own_init["body"]


def test_inspect_of_a_broken_task_is_a_user_error(ksb, task_dir):
    bad = task_dir / "broken.py"
    bad.write_text("import torch\nraise RuntimeError('no')\n")
    with pytest.raises(UserError) as exc:
        inspect_task(ksb, bad)
    assert "could not be imported" in exc.value.problem


def test_build_failure_carries_the_compiler_log(ksb, task_dir, inspected):
    p = plan(inspected["silu"][1])[0]
    src = render(p.template, p.space.configs[0]).replace("vsilu(x0)", "vsilu_missing(x0)")
    cand = task_dir / "bad_candidate.py"
    cand.write_text(src)
    res = build(ksb, cand)
    assert not res.ok and res.error == "build"
    assert "vsilu_missing" in res.detail
    # The build_candidate tool builds and tests in one process: the same failure, from the test.
    tested = quick_test(ksb, inspected["silu"][0], cand)
    assert not tested.ok and tested.error == "build" and "vsilu_missing" in tested.detail
    assert tested.build_s is None


def test_build_test_bench_tune_contracts(ksb, task_dir, inspected):
    task, info = inspected["softmax"]
    p = plan(info)[0]
    cand = task_dir / "candidate.py"
    cand.write_text(render(p.template, p.space.configs[:3], selected=1))

    b = build(ksb, cand)
    assert b.ok and b.variants == 3 and b.seconds > 0

    out = call_harness(
        ksb, "run.py", ["test", sandbox_path(ksb, task), sandbox_path(ksb, cand), "--seeds", "0,1,2"], timeout=300
    )
    assert out["ok"] is True and [t["seed"] for t in out["trials"]] == [0, 1, 2]
    assert set(out["trials"][0]) >= {"ok", "max_abs_err", "mismatched", "reason"}
    tested = quick_test(ksb, task, cand, seeds=(4,))
    assert tested.ok and tested.build_s is not None and tested.build_s >= 0

    res = benchmark(ksb, task, cand, baselines=("eager",), reps=3, warmup=1, copy_bandwidth=True)
    assert res.ok, (res.error, res.detail)
    assert set(res.seconds) == {"candidate", "eager"} and all(v > 0 for v in res.seconds.values())
    assert res.speedup_vs_eager > 0 and res.speedup_vs_compile is None
    assert (
        res.copy_gbps > 0
        and res.bandwidth_fraction > 0
        and res.copy_gbps_large > 0
        and res.bandwidth_fraction_large > 0
    )
    assert set(res.raw["times"]) == {"candidate", "eager"}  # the copies are timed in the same rounds, reported apart
    assert res.bytes == 2 * 4 * 131 * 35  # input + output of the shrunk softmax

    out = call_harness(
        ksb,
        "run.py",
        ["tune", sandbox_path(ksb, task), sandbox_path(ksb, cand), "--variants", "2,0", "--reps", "2"],
        timeout=300,
    )
    assert [r["variant"] for r in out["results"]] == [2, 0]
    for r in out["results"]:
        assert r["ok"] and r["median_s"] > 0 and r["done_unix"] >= out["started_unix"]


def test_bench_flags_a_wrong_candidate(ksb, task_dir, inspected):
    task, info = inspected["gelu"]
    p = plan(info)[0]
    # a candidate that computes the tanh approximation instead of exact GELU
    src = render(p.template, p.space.configs[0]).replace("vgelu(x0)", "vgelu_tanh(x0)")
    cand = task_dir / "wrong.py"
    cand.write_text(src)
    res = benchmark(ksb, task, cand, baselines=(), reps=2, warmup=1)
    assert not res.ok and res.error == "incorrect" and "elements off" in res.detail


_LOGGING_CANDIDATE = """
import os
import torch
import torch.nn as nn

ASSAY_VARIANTS = [{"v": 0}, {"v": 1}, {"v": 2}]
_variant = 0
_LOG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "calls.log")


def assay_select(index):
    global _variant
    _variant = int(index)


class ModelNew(nn.Module):
    def forward(self, x):
        with open(_LOG, "a") as f:
            f.write(str(_variant))
        return torch.relu(x) + (1.0 if _variant == 1 else 0.0)
"""


def test_tune_times_its_variants_in_the_same_rounds_and_names_a_wrong_one(ksb, task_dir):
    """Variants timed one after another would each meet a different moment of the neighbours'
    load; the tuner interleaves them, so a burst hits every variant alike."""
    task = task_dir / "relu_task.py"
    task.write_text(
        "import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n"
        "    def forward(self, x):\n        return torch.relu(x)\n\n"
        "def get_inputs():\n    return [torch.randn(64, 64)]\n\ndef get_init_inputs():\n    return []\n"
    )
    cand = task_dir / "logging_candidate.py"
    cand.write_text(_LOGGING_CANDIDATE)
    log = task_dir / "calls.log"
    log.unlink(missing_ok=True)
    out = call_harness(
        ksb,
        "run.py",
        ["tune", sandbox_path(ksb, task), sandbox_path(ksb, cand), "--variants", "0,1,2", "--reps", "6"],
        timeout=300,
    )
    rows = {r["variant"]: r for r in out["results"]}
    assert rows[0]["ok"] and rows[2]["ok"] and rows[0]["reps"] == rows[2]["reps"] == 6
    assert rows[1]["ok"] is False and "elements off" in rows[1]["error"]
    calls = log.read_text()
    assert calls[:3] == "012"  # the correctness gate, once each
    timed = calls[3:]
    assert "1" not in timed  # a wrong variant is never timed
    switches = sum(1 for a, b in zip(timed, timed[1:], strict=False) if a != b)
    assert switches >= 6, timed  # alternating (9 here), not all of 0 then all of 2 (2)
