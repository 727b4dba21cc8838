"""Pieces of the verifier that run in its own process: comparisons, file reads, task parsing."""

from __future__ import annotations

import os
import random

import pytest
import torch

from assay.errors import UserError
from assay.verifiers.criteria import load_criteria
from assay.verifiers.kernel import _check_order, inspect_task, shape_variants
from assay.verifiers.kernel_judge import Checks, compare, read_inside, scaling, unwritten

CRITERIA = load_criteria("kernel-test")


def test_compare_uses_the_dtype_tolerance():
    want = torch.softmax(torch.randn(64, 32), -1)
    assert compare(want + 5e-5, want, CRITERIA)[0]
    ok, why, err = compare(want + 1e-3, want, CRITERIA)
    assert not ok and "elements off" in why and err == pytest.approx(1e-3, rel=1e-2)
    half = want.half()
    assert compare(half + 5e-3, half, CRITERIA)[0]
    assert not compare(want.double(), want, CRITERIA)[0]  # dtype must match
    assert not compare(want[:, :16], want, CRITERIA)[0]  # shape must match


def test_compare_nan_only_where_the_reference_has_nan():
    want = torch.tensor([1.0, float("nan"), 3.0])
    assert compare(want.clone(), want, CRITERIA)[0]
    assert not compare(torch.tensor([1.0, 2.0, 3.0]), want, CRITERIA)[0]
    assert not compare(torch.tensor([float("nan"), float("nan"), 3.0]), want, CRITERIA)[0]
    inf = torch.tensor([float("inf"), -float("inf")])
    assert compare(inf.clone(), inf, CRITERIA)[0]
    assert not compare(torch.tensor([3e38, -float("inf")]), inf, CRITERIA)[0]
    assert not compare(inf, torch.tensor([3e38, -float("inf")]), CRITERIA)[0]


def test_integer_outputs_must_match_exactly():
    want = torch.arange(10)
    assert compare(want.clone(), want, CRITERIA)[0]
    assert not compare(want + (torch.arange(10) == 3), want, CRITERIA)[0]


def test_unwritten_memory_is_named():
    want = torch.rand(1000) + 0.1
    poisoned = torch.empty(1000).view(torch.int32).fill_(0x7FC0FFEE).view(torch.float32)
    assert "poison" in unwritten(poisoned, want)
    assert "all zeros" in unwritten(torch.zeros(1000), want)
    assert unwritten(want * 2, want) is None


def test_read_inside_never_follows_links(tmp_path):
    ws = tmp_path / "ws"
    (ws / "out").mkdir(parents=True)
    (ws / "out" / "ok.bin").write_bytes(b"fine")
    secret = tmp_path / "host-secret"
    secret.write_bytes(b"do not read")
    os.symlink(secret, ws / "out" / "link.bin")
    os.symlink(tmp_path, ws / "dirlink")
    assert read_inside(ws, "out/ok.bin", 100) == b"fine"
    assert read_inside(ws, "out/link.bin", 100) is None
    assert read_inside(ws, "dirlink/host-secret", 100) is None
    assert read_inside(ws, "out/../out/ok.bin", 100) is None
    assert read_inside(ws, "out/ok.bin", 2) is None  # over the cap


def test_a_failed_check_stays_failed():
    checks = Checks()
    checks.fail("no_alias", "run 1 aliases")
    checks.ok("no_alias", "fine")
    checks.fail("no_alias", "run 2 aliases")
    [c] = checks.list()
    assert not c.passed and "run 1" in c.detail and "run 2" in c.detail


SOFTMAX_TASK = "ROWS = 4096\nCOLS = 1024\nSMALL = 3\nclass Model: pass\ndef get_inputs(): pass\ndef get_init_inputs(): pass\n"


def test_task_sizes_are_the_large_int_constants():
    info = inspect_task(SOFTMAX_TASK, CRITERIA)
    assert info.sizes == {"ROWS": 4096, "COLS": 1024}


@pytest.mark.parametrize("source", ["class Model: pass\n", "def get_inputs(): pass\n", "def broken(:\n"])
def test_a_task_without_model_or_inputs_is_a_user_error(source):
    with pytest.raises(UserError):
        inspect_task(source, CRITERIA)


def test_shape_variants_differ_from_the_task_and_each_other():
    sizes = {"ROWS": 4096, "COLS": 1024}
    variants = shape_variants(sizes, 3, random.Random(7))
    assert len(variants) == 3 and len({tuple(sorted(v.items())) for v in variants}) == 3
    for v in variants:
        for name, value in v.items():
            assert value != sizes[name] and value % 2 == 1 and 3 <= value < sizes[name]


def test_check_order_reuses_buffers_and_interleaves_shapes():
    trials = [{"id": i, "kind": "trial"} for i in range(5)]
    shapes = [{"id": 5 + i, "kind": "shape"} for i in range(2)]
    order = _check_order(trials, shapes)
    assert [r["id"] for r in order] == [0, 1, 2, 5, 3, 6, 4]
    reuse = {r["id"]: r["reuse_buffers_of"] for r in order}
    assert reuse[2] == 1 and reuse[4] == 3 and reuse[0] is None and reuse[5] is None


def _rounds(per_iter_ms: list[float], fixed_ms: float, n: int = 3) -> list[dict]:
    # Even rounds run n iterations, odd rounds 3n; each round's CPU is fixed + iterations * cost.
    return [{"round": r, "cpu_s": (fixed_ms + (n if r % 2 == 0 else 3 * n) * c) / 1e3} for r, c in enumerate(per_iter_ms)]


def test_scaling_follows_the_work_through_bursts_of_a_busy_machine():
    # The CI run that failed an honest kernel: 1.3 ms iterations, 20 ms ones in three short rounds.
    noisy = [20.0, 9.0, 1.3, 1.3, 7.0, 1.3, 10.0, 1.3, 1.3, 1.3]
    assert scaling(_rounds(noisy, fixed_ms=0.5)) > 2.0


def test_scaling_exposes_work_done_once_per_round():
    # A candidate that computes once per round and replays: the same CPU whatever the count.
    per_round = [{"round": r, "cpu_s": 0.005 + random.Random(r).random() * 0.002} for r in range(10)]
    assert scaling(per_round) < 1.5
