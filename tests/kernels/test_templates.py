"""Every task in the suite gets a candidate that matches eager PyTorch (fp32, 1e-4), at shrunk
odd sizes, built and run in the sandbox; one task per template also checks EVERY configuration
of its search space (the tuner's own correctness gate runs on each)."""

from __future__ import annotations

import ast

import pytest

from assay.kernels import inspect_tasks, plan, quick_test, render
from assay.kernels.autotune import autotune
from assay.kernels.playbook import NoTemplate, SearchSpace

from .conftest import EXAMPLES, shrink

SUITE = sorted(p.stem for p in EXAMPLES.glob("*.py"))
ALL_CONFIGS = ["scale_clamp_mul", "bias_gelu_residual", "softmax", "log_softmax", "layernorm", "rmsnorm",
               "linear_bias_relu"]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def suite_infos(_kernel_sandbox_session, tmp_path_factory):
    sb, _ = _kernel_sandbox_session
    if sb is None:
        return None
    import tempfile
    from pathlib import Path

    d = Path(tempfile.mkdtemp(dir=Path(sb.spec.workspace) / "tasks"))
    tasks = [shrink(EXAMPLES / f"{name}.py", d) for name in SUITE]
    return dict(zip(SUITE, zip(tasks, inspect_tasks(sb, tasks))))


def test_suite_has_twelve_tasks_with_job_files():
    assert len(SUITE) >= 12
    for name in SUITE:
        job = (EXAMPLES / f"{name}.toml").read_text()
        assert f'task = "{name}.py"' in job and 'kind = "kernel"' in job and 'backend = "cpp"' in job


@pytest.mark.parametrize("name", SUITE)
def test_default_candidate_matches_eager(name, ksb, suite_infos):
    task, info = suite_infos[name]
    assert not isinstance(info, Exception), info
    plans = plan(info)
    assert not isinstance(plans, NoTemplate), plans.reason
    p = plans[0]
    cand = task.with_name(f"{name}_candidate.py")
    cand.write_text(render(p.template, p.space.configs[0]))
    res = quick_test(ksb, task, cand, seeds=(0, 3))
    assert res.ok, (res.error, res.detail[-2000:], res.trials)
    assert all(t["max_abs_err"] <= 1e-4 * 10 for t in res.trials)


@pytest.mark.parametrize("name", ALL_CONFIGS)
def test_every_configuration_is_correct(name, ksb, suite_infos):
    task, info = suite_infos[name]
    p = plan(info)[0]
    tuned = autotune(ksb, task, p.template, SearchSpace(p.space.configs), None, round_size=len(p.space), reps=1)
    bad = [(t.config, t.error) for t in tuned.trials if not t.ok]
    assert tuned.ok and not bad and len(tuned.trials) == len(p.space), (tuned.error, tuned.detail[-1500:], bad)


def test_candidate_forward_calls_no_torch_compute(ksb, suite_infos):
    """The rendered forward allocates with torch.empty and calls the kernel; nothing else of torch."""
    for name in SUITE:
        _, info = suite_infos[name]
        p = plan(info)[0]
        tree = ast.parse(render(p.template, p.space.configs[0]))
        cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ModelNew")
        fwd = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "forward")
        torch_calls = {ast.unparse(c.func) for c in ast.walk(fwd) if isinstance(c, ast.Call)
                       and ast.unparse(c.func).startswith(("torch.", "F.", "nn."))}
        assert torch_calls <= {"torch.empty"}, (name, torch_calls)
        assert "Model(" not in ast.unparse(tree), name
