"""Interleaved timing inside a verification sandbox, for any kind's judge script (standalone:
the standard library only). The trusted side judges what it records with
assay.verifiers.common.timing.

    log = interleave({"reference": ref_call, "submission": sub_call}, rounds=8, target_round_s=0.05)

Each round times every subject in turn (the order rotates), `n` calls each, with wall and
process CPU seconds; odd rounds make 3n calls, so work that does not follow the call count
shows (timing.scaling). Every subject is warmed up and sized by calibration first.
"""

from __future__ import annotations

import time


def _timed(fn, n: int) -> tuple[float, float]:
    c0, w0 = time.process_time(), time.perf_counter()
    for _ in range(n):
        fn()
    return time.perf_counter() - w0, time.process_time() - c0


def calibrate(fn, target_round_s: float, max_iters: int = 1 << 16) -> int:
    """Calls per round so one round takes about target_round_s."""
    n = 1
    while n < max_iters:
        wall, _ = _timed(fn, n)
        if wall >= target_round_s / 4:
            return max(1, min(max_iters, int(n * target_round_s / max(wall, 1e-9))))
        n *= 4
    return max_iters


def interleave(
    subjects: dict, rounds: int = 8, target_round_s: float = 0.05, warmup_iters: int = 3, max_iters: int = 1 << 16
) -> list[dict]:
    names = list(subjects)
    for name in names:
        for _ in range(warmup_iters):
            subjects[name]()
    sizes = {name: calibrate(subjects[name], target_round_s, max_iters) for name in names}
    log = []
    for r in range(rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        for name in order:
            n = sizes[name] * (3 if r % 2 else 1)
            wall, cpu = _timed(subjects[name], n)
            log.append({"subject": name, "round": r, "n": n, "wall_s": wall, "cpu_s": cpu})
    return log


def flushed_rounds(calls: dict, plan: dict, torch, grad_mode) -> list[dict]:
    """Rounds of each subject in turn (the order rotating), 3n calls in odd rounds, each after an
    untimed in-place add over a buffer larger than the caches on every thread (so no subject
    starts warm, and its CPU over wall time shows the share of the CPUs this process got).
    Subjects are warmed for plan["warmup_s"] (a fresh process starts slow), then sized to
    plan["target_round_s"]; `grad_mode` is the context they run under (torch.inference_mode,
    or torch.no_grad for compiled modules, whose guards check the mode they were compiled in)."""
    flush = torch.empty(plan["flush_mb"] << 18)
    with grad_mode():
        sizes = {}
        for name, fn in calls.items():
            start = time.perf_counter()
            while True:
                fn()
                if time.perf_counter() - start >= plan["warmup_s"]:
                    break
            n, wall = 1, 0.0
            while n < plan["max_iters"]:
                wall, _ = _timed(fn, n)
                if wall >= plan["target_round_s"] / 4:
                    break
                n *= 2
            sizes[name] = max(1, min(plan["max_iters"], int(n * plan["target_round_s"] / max(wall, 1e-9))))
        log, names = [], list(calls)
        for r in range(plan["rounds"]):
            for name in names[r % len(names) :] + names[: r % len(names)]:
                fw, fc = _timed(lambda: flush.add_(1.0), 1)
                n = sizes[name] * (3 if r % 2 else 1)
                wall, cpu = _timed(calls[name], n)
                log.append(
                    {
                        "subject": name,
                        "round": r,
                        "n": n,
                        "wall_s": wall,
                        "cpu_s": cpu,
                        "flush_wall_s": fw,
                        "flush_cpu_s": fc,
                    }
                )
    return log
