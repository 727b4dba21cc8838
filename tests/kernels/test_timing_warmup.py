"""The agent-side benchmark warms every subject up for a time before it samples: a candidate
fresh from its import paid 6-12 ms per call for about ten calls and 1.1 ms after, and three
warm-up calls left most of that start-up in the 20 samples. Subjects here sleep instead of
computing, so the test needs neither torch nor a sandbox."""

from __future__ import annotations

import time


class SlowStart:
    def __init__(self, slow_calls: int, start_s: float, steady_s: float):
        self.calls, self.slow_calls, self.start_s, self.steady_s = 0, slow_calls, start_s, steady_s

    def __call__(self):
        self.calls += 1
        time.sleep(self.start_s if self.calls <= self.slow_calls else self.steady_s)


def test_samples_start_after_the_slow_first_calls(harness_script):
    common = harness_script("kernels/harness/_common.py")
    cand = SlowStart(slow_calls=12, start_s=0.008, steady_s=0.001)
    ref = SlowStart(slow_calls=0, start_s=0.0, steady_s=0.002)
    t = common.time_interleaved({"candidate": cand, "eager": ref}, (), reps=10, warmup=3, flush=None, warmup_s=0.15)
    assert cand.calls - 10 > 12  # every slow call fell in the warm-up
    assert t["candidate"]["median_s"] < 0.004
    # The speedup the samples give is the steady one (2x), not the start-up's.
    assert t["eager"]["median_s"] / t["candidate"]["median_s"] > 1.4


def test_without_a_warm_up_time_the_start_up_is_sampled(harness_script):
    # The same subjects with the old warm-up (three calls): the test above can fail.
    common = harness_script("kernels/harness/_common.py")
    cand = SlowStart(slow_calls=12, start_s=0.008, steady_s=0.001)
    ref = SlowStart(slow_calls=0, start_s=0.0, steady_s=0.002)
    t = common.time_interleaved({"candidate": cand, "eager": ref}, (), reps=10, warmup=3, flush=None)
    assert cand.calls == 13
    assert t["candidate"]["median_s"] > 0.006
