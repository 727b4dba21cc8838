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
ALL_CONFIGS = [
    "scale_clamp_mul",
    "bias_gelu_residual",
    "softmax",
    "log_softmax",
    "layernorm",
    "rmsnorm",
    "linear_bias_relu",
]

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
    return dict(zip(SUITE, zip(tasks, inspect_tasks(sb, tasks), strict=False), strict=False))


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
        torch_calls = {
            ast.unparse(c.func)
            for c in ast.walk(fwd)
            if isinstance(c, ast.Call) and ast.unparse(c.func).startswith(("torch.", "F.", "nn."))
        }
        assert torch_calls <= {"torch.empty"}, (name, torch_calls)
        assert "Model(" not in ast.unparse(tree), name


def _candidate(ksb, task_dir, name: str):
    """The default configuration's candidate, planned on the task shrunk into `task_dir`."""
    from assay.kernels import inspect_task

    p = plan(inspect_task(ksb, shrink(EXAMPLES / f"{name}.py", task_dir)))[0]
    cand = task_dir / f"{name}_candidate.py"
    cand.write_text(render(p.template, p.space.configs[0]))
    return cand


@pytest.mark.parametrize("name", ["scale_clamp_mul", "rmsnorm", "linear_bias_relu", "bias_gelu_residual"])
def test_candidate_rendered_at_one_size_runs_at_another(name, ksb, task_dir):
    """A verifier resizes the task (module constants) and reuses the agent's candidate: sizes and
    constructor constants must come from the arguments and shapes, not be baked in."""
    from assay.kernels.task import resized, size_constants

    src = EXAMPLES / f"{name}.py"
    cand = _candidate(ksb, task_dir, name)
    sizes = size_constants(src.read_text())
    other = {k: max(2, v // 64 + 5) for k, v in sizes.items()}  # different, still odd-ish sizes
    floats = {"SCALE": 0.75, "CLAMP_MIN": -0.5, "EPS": 1e-3}  # constructor constants move too
    other_task = resized(src, task_dir / f"{name}_other.py", other)
    extra = "".join(f"{k} = {v}\n" for k, v in floats.items() if k in src.read_text())
    other_task.write_text(other_task.read_text() + extra)
    res = quick_test(ksb, other_task, cand, seeds=(5,))
    assert res.ok, (res.error, res.detail[-1500:], res.trials)


# Shapes past the row reductions' parallel threshold (32768 elements), where the rows are claimed
# per thread: chunk and range boundaries that fall mid-range (37 rows of 1000: ranges of 19, chunks
# of 16), one row per chunk (3 rows of 20000), and a range left empty (1 row for two threads).
PARALLEL_ROW_SHAPES = [(37, 1000), (3, 20000), (1, 40000)]


@pytest.mark.parametrize("name", ["softmax", "rmsnorm"])
def test_row_reduction_claims_every_row_once_at_parallel_sizes(name, ksb, task_dir):
    from assay.kernels.task import resized

    cand = _candidate(ksb, task_dir, name)
    size_names = {"softmax": ("ROWS", "COLS"), "rmsnorm": ("ROWS", "HIDDEN")}[name]
    for rows, cols in PARALLEL_ROW_SHAPES:
        task = resized(
            EXAMPLES / f"{name}.py",
            task_dir / f"{name}_{rows}x{cols}.py",
            dict(zip(size_names, (rows, cols), strict=False)),
        )
        res = quick_test(ksb, task, cand, seeds=(3,))
        assert res.ok, (rows, cols, res.error, res.detail[-1500:], res.trials)


def test_softmax_with_masked_entries_matches_eager(ksb, task_dir):
    """Attention masks put -inf in rows: exp must give exactly 0 there with its one-sided clamp, and
    a row masked whole gives NaN, as eager's does."""
    from assay.kernels.task import resized

    cand = _candidate(ksb, task_dir, "softmax")
    task = resized(EXAMPLES / "softmax.py", task_dir / "softmax_masked.py", {"ROWS": 37, "COLS": 1000})
    task.write_text(
        task.read_text()
        + (
            "\n\ndef get_inputs():\n"
            "    x = torch.randn(ROWS, COLS) * 4\n"
            "    x[:, ::3] = float('-inf')\n"
            "    x[5, 2:] = float('-inf')  # one live entry: its probability is exactly 1\n"
            "    x[7] = float('-inf')  # no live entry: NaN\n"
            "    return [x]\n"
        )
    )
    res = quick_test(ksb, task, cand, seeds=(4,))
    assert res.ok, (res.error, res.detail[-1500:], res.trials)
