"""assay.kernels: KernelBench-format tasks, the cpp and triton backends, templates, the
autotuner and its cache, and the harness that runs all of it inside a sandbox.

    from assay.kernels import inspect_task, plan, render, build, quick_test, benchmark, autotune
    info = inspect_task(sb, task)                 # graph of the reference, traced in the sandbox
    plans = plan(info)                            # [Plan(template, space)] or NoTemplate(reason)
    tuned = autotune(sb, task, plans[0].template, plans[0].space, AutotuneCache.open())
    candidate.write_text(render(plans[0].template, tuned.best))
    quick_test(sb, task, candidate); benchmark(sb, task, candidate)

kernels imports nothing from agents, tools, verifiers, tui or cli.
"""

from assay.kernels.autotune import Trial, TuneResult, autotune
from assay.kernels.cache import AutotuneCache, CacheEntry, CacheKey, CacheStore, LedgerStore, LocalStore, cache_key
from assay.kernels.playbook import NoTemplate, Plan, SearchSpace, Template, plan, render
from assay.kernels.runner import (
    BenchResult,
    BuildResult,
    HarnessError,
    TestResult,
    benchmark,
    build,
    inspect_task,
    inspect_tasks,
    kernel_binds,
    quick_test,
    sandbox_path,
)
from assay.kernels.task import TaskInfo

__all__ = [
    "AutotuneCache",
    "BenchResult",
    "BuildResult",
    "CacheEntry",
    "CacheKey",
    "CacheStore",
    "HarnessError",
    "LedgerStore",
    "LocalStore",
    "NoTemplate",
    "Plan",
    "SearchSpace",
    "TaskInfo",
    "Template",
    "TestResult",
    "Trial",
    "TuneResult",
    "autotune",
    "benchmark",
    "build",
    "cache_key",
    "inspect_task",
    "inspect_tasks",
    "kernel_binds",
    "plan",
    "quick_test",
    "render",
    "sandbox_path",
]
