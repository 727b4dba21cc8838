"""The KernelBench-style corpus (examples/kernel/corpus): tasks written as KernelBench writes
them, one family per prefix. Every one gets a plan from the playbook and a candidate that
renders, and an autotune cache key; bench/kernels.py --corpus builds, tunes and times them all."""

from __future__ import annotations

from collections import Counter

from assay.kernels import NoTemplate, inspect_tasks, plan, render
from assay.kernels.cache import shape_bucket

from .conftest import EXAMPLES

CORPUS = sorted((EXAMPLES / "corpus").glob("*.py"))


def test_the_corpus_covers_the_families_with_forty_tasks():
    families = Counter(p.stem.split("_")[0] for p in CORPUS)
    assert len(CORPUS) >= 40, len(CORPUS)
    assert {"act", "reduce", "row", "norm", "gemm", "conv", "fused"} <= set(families), families


def test_every_corpus_task_gets_a_plan_and_a_candidate(ksb):
    infos = inspect_tasks(ksb, CORPUS)
    misses = []
    for task, info in zip(CORPUS, infos, strict=True):
        p = plan(info)
        if isinstance(p, NoTemplate):
            misses.append(f"{task.stem}: {p.reason}")
            continue
        # The autotuner keys its cache on this: every template kind must have one.
        assert all(d >= 1 for d in shape_bucket(p[0].template)), task.stem
        src = render(p[0].template, p[0].space.configs[0])
        compile(src, task.name, "exec")
        assert "class ModelNew" in src
    assert not misses, "\n".join(misses)
