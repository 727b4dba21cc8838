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
