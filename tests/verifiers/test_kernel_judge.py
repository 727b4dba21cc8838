"""Pieces of the verifier that run in its own process: comparisons, file reads, task parsing."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
import torch

from assay.errors import UserError
from assay.verifiers.kernel.criteria import load_criteria
from assay.verifiers.kernel.judge import (
    Checks,
    compare,
    cpu_share,
    inconclusive,
    judge_roofline,
    read_inside,
    scaling,
    unwritten,
)
from assay.verifiers.kernel.reference import _check_order, inspect_task, shape_variants

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


def test_complex_outputs_compare_both_parts():
    # .double() of a complex tensor keeps its real part: an imaginary part of anything once passed.
    want = torch.polar(torch.rand(64) + 0.5, torch.rand(64) * 6)
    assert compare(want.clone(), want, CRITERIA)[0]
    wrong_imag = torch.complex(want.real, torch.zeros(64))
    ok, why, _ = compare(wrong_imag, want, CRITERIA)
    assert not ok and why.startswith("64 of 64 elements off")
    assert not compare(want.conj(), want, CRITERIA)[0]  # a lazily conjugated tensor is read as its values
    # Each part gets the tolerance of its dtype (float32's for complex64), not an exact match.
    assert compare(want + 5e-5j, want, CRITERIA)[0]
    assert not compare(want + 1e-3j, want, CRITERIA)[0]
    nan = torch.tensor([complex(1, float("nan")), 2 + 0j])
    assert compare(nan.clone(), nan, CRITERIA)[0]
    assert not compare(torch.tensor([complex(float("nan"), 1), 2 + 0j]), nan, CRITERIA)[0]


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


SOFTMAX_TASK = (
    "ROWS = 4096\nCOLS = 1024\nSMALL = 3\nclass Model: pass\ndef get_inputs(): pass\ndef get_init_inputs(): pass\n"
)


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
    return [
        {"round": r, "cpu_s": (fixed_ms + (n if r % 2 == 0 else 3 * n) * c) / 1e3} for r, c in enumerate(per_iter_ms)
    ]


def test_scaling_follows_the_work_through_bursts_of_a_busy_machine():
    # The CI run that failed an honest kernel: 1.3 ms iterations, 20 ms ones in three short rounds.
    noisy = [20.0, 9.0, 1.3, 1.3, 7.0, 1.3, 10.0, 1.3, 1.3, 1.3]
    assert scaling(_rounds(noisy, fixed_ms=0.5)) > 2.0


def test_scaling_exposes_work_done_once_per_round():
    # A candidate that computes once per round and replays: the same CPU whatever the count.
    per_round = [{"round": r, "cpu_s": 0.005 + random.Random(r).random() * 0.002} for r in range(10)]
    assert scaling(per_round) < 1.5


def _timed(subject: str, r: int, cpu: float, wall: float, flush_cpu: float = 0.0, flush_wall: float = 0.0) -> dict:
    return {
        "subject": subject,
        "round": r,
        "cpu_s": cpu,
        "wall_s": wall,
        "flush_cpu_s": flush_cpu,
        "flush_wall_s": flush_wall,
    }


def test_cpu_share_reads_the_trusted_rounds_per_thread():
    # Quiet: the 2-thread reference ran on both CPUs (the main job's verdicts: 1.95-1.97 CPU per wall).
    quiet = [_timed(s, r, 0.195, 0.1, 0.0045, 0.006) for s in ("eager", "compiled", "copy") for r in range(8)]
    assert cpu_share(quiet, 2) == pytest.approx(0.975)
    # One busy process beside it: 0.98-1.01 CPU per wall for every subject (measured).
    busy = [_timed(s, r, 0.099, 0.1, 0.003, 0.006) for s in ("eager", "compiled", "copy") for r in range(8)]
    assert cpu_share(busy, 2) == pytest.approx(0.5, abs=0.01)


def test_cpu_share_falls_back_on_the_flushes_for_a_task_too_small_to_run_in_parallel():
    # Single-threaded subjects say 0.5 on a quiet machine; their flushes use both threads.
    small = [_timed(s, r, 0.1, 0.1, 0.0046, 0.003) for s in ("eager", "compiled", "copy") for r in range(8)]
    assert cpu_share(small, 2) == pytest.approx(0.767, abs=0.01)


def test_the_candidate_cannot_move_the_cpu_share():
    # Its own rounds are not read (it may run one thread, or many), and calibration rounds are not either.
    log = [_timed("eager", r, 0.099, 0.1) for r in range(8)]
    log += [_timed("candidate", r, 0.4, 0.1, 0.2, 0.1) for r in range(8)]
    log += [{"subject": "eager", "round": None, "cpu_s": 0.2, "wall_s": 0.1}]
    assert cpu_share(log, 2) == pytest.approx(0.495)


def test_cpu_share_unknown_without_a_thread_count_or_rounds():
    log = [_timed("eager", 0, 0.2, 0.1)]
    for threads in (None, 0, True, "2"):
        assert cpu_share(log, threads) is None
    assert cpu_share([], 2) is None
    assert cpu_share([{"subject": "eager", "round": 0, "cpu_s": 0.1, "wall_s": 0}], 2) is None


def test_only_load_decided_failures_are_inconclusive():
    roof = [{"name": "correctness", "passed": True}, {"name": "roofline", "passed": False}]
    assert inconclusive(roof, {"timing_contended": True})
    assert inconclusive(roof, {"timing_contended": False, "roofline_unsettled": "the copy's own rounds ranged 2x"})
    assert not inconclusive(roof, {"timing_contended": False, "roofline_unsettled": None})
    both = roof + [{"name": "speed", "passed": False}]
    assert inconclusive(both, {"timing_contended": True})
    # An unsteady copy says nothing about the speed figure, which has its own contention test.
    assert not inconclusive(both, {"timing_contended": False, "roofline_unsettled": "ranged 2x"})
    assert not inconclusive(roof + [{"name": "no_replay", "passed": False}], {"timing_contended": True})
    assert not inconclusive([], {"timing_contended": True})


MB = 2 * 1024 * 1024
COPY = [1e-3, 1.02e-3, 0.99e-3, 1.05e-3]  # seconds per copy of MB bytes: a steady baseline


def test_an_honest_kernel_at_copy_speed_passes_the_roofline():
    r = judge_roofline(1.0e-3, "warm", COPY, MB, MB, 1.5, None)
    assert r.passed and r.unsettled is None and r.copy_best_s == pytest.approx(0.99e-3)


def test_a_kernel_that_skips_the_work_fails_the_roofline_on_a_quiet_machine():
    r = judge_roofline(1e-5, "fresh", COPY, MB, MB, 1.5, None)
    assert not r.passed and r.unsettled is None
    assert "fresh rounds" in r.detail and "faster than copying" in r.detail and "inconclusive" not in r.detail


def test_the_bound_is_the_fastest_copy_round():
    # A neighbour slowed most copy rounds 3x: the median would call an honest kernel a cheat.
    slowed = [3e-3, 3.1e-3, 2.9e-3, 1e-3]
    r = judge_roofline(1.2e-3, "warm", slowed, MB, MB, 1.5, None)
    assert r.passed, r.detail


def test_a_roofline_failure_on_a_busy_machine_or_an_unsteady_copy_is_inconclusive():
    busy = "the reference got 52% of the 2 CPUs it ran on, need 80%"
    r = judge_roofline(0.5e-3, "warm", COPY, MB, MB, 1.5, busy)
    assert not r.passed and r.unsettled == busy and "inconclusive" in r.detail and "52%" in r.detail
    bursty = [1e-3, 4e-3, 2e-3]
    r = judge_roofline(0.5e-3, "warm", bursty, MB, MB, 1.5, None)
    assert not r.passed and "ranged 4.00x" in (r.unsettled or "") and "inconclusive" in r.detail
    assert inconclusive([{"name": "roofline", "passed": r.passed}], {"roofline_unsettled": r.unsettled})


def test_no_copy_rounds_no_roofline_failure():
    assert judge_roofline(1e-6, "warm", [], MB, MB, 1.5, None).passed


def test_only_a_speed_failure_under_contention_is_inconclusive():
    speed_only = [{"name": "correctness", "passed": True}, {"name": "speed", "passed": False}]
    assert inconclusive(speed_only, {"timing_contended": True})
    assert not inconclusive(speed_only, {"timing_contended": False})
    assert not inconclusive(speed_only, {})
    assert not inconclusive(speed_only, {"timing_contended": "yes"})  # metrics text is not a flag
    wrong_too = [{"name": "correctness", "passed": False}, {"name": "speed", "passed": False}]
    assert not inconclusive(wrong_too, {"timing_contended": True})
    cheat = [{"name": "consistent_when_timed", "passed": False}, {"name": "speed", "passed": False}]
    assert not inconclusive(cheat, {"timing_contended": True})
    assert not inconclusive([{"name": "speed", "passed": True}], {"timing_contended": True})  # a pass is not


def test_the_neighbours_share_is_summed_over_each_sides_timed_rounds():
    from assay.verifiers.common.timing import others_share

    log = [
        # calibration: no round number, not counted
        {"subject": "candidate", "n": 1, "wall_s": 0.1, "held_s": 0.0, "others_cpu_s": 0.2},
        {"subject": "candidate", "round": 0, "n": 4, "wall_s": 0.09, "held_s": 0.01, "others_cpu_s": 0.10},
        {"subject": "candidate", "fresh_round": 0, "n": 4, "wall_s": 0.1, "held_s": 0.0, "others_cpu_s": 0.02},
        {"subject": "eager", "round": 0, "n": 4, "wall_s": 0.2, "held_s": 0.0, "others_cpu_s": 0.0},
        {"subject": "copy", "round": 0, "n": 4, "wall_s": 0.2, "held_s": 0.0, "others_cpu_s": None},
    ]
    # (0.10 + 0.02) CPU-seconds of others over 0.2 s of rounds on 2 CPUs
    assert others_share(log, ("candidate",), 2) == pytest.approx(0.3)
    assert others_share(log, ("eager", "compiled", "copy"), 2) == 0.0
    assert others_share(log, ("compiled",), 2) is None
    assert others_share(log, ("candidate",), None) is None and others_share(log, ("candidate",), True) is None


def test_the_hosts_busy_time_is_read_for_the_sandboxs_cpus_only():
    import importlib.util
    import os

    path = Path(__file__).parents[2] / "verifiers" / "kernel" / "harness" / "supervisor.py"
    spec = importlib.util.spec_from_file_location("supervisor_for_test", path)
    sup = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sup)
    cpus = os.sched_getaffinity(0)
    busy = sup.busy_seconds(cpus)
    assert busy is not None and busy > 0
    assert sup.busy_seconds({max(cpus) + 4096}) is None  # no such CPU: nothing to read
    assert sup.sandbox_cpu_seconds() > 0
