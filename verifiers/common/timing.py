"""Interleaved side-by-side timing, judged on the trusted side.

A judge script times the trusted subjects (the task's own model, its compiled form) and the
submission round by round in one run (harness/assay_timing.py, or a kind's own supervisor),
each round recording iterations, wall and CPU seconds. Here those rounds become medians,
speedups, the share of its CPUs the trusted reference got, and the share of the sandbox's CPUs
that other processes kept busy while each side was timed: below the criteria's minimum (or above
its maximum) the machine was too busy to time, and a speed check that fails there is
inconclusive, never FAIL (a verifier never fails an honest submission on a figure the
machine's load decided).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass


def median_per_iter(log: list[dict], subject: str, kind: str = "round") -> tuple[float, list[dict]]:
    """A subject's median seconds per iteration over its timed rounds (kind "round") or its
    fresh rounds ("fresh_round"), and those rounds."""
    rounds = [e for e in log if e.get("subject") == subject and e.get(kind) is not None and e.get("n")]
    if not rounds:
        return float("nan"), []
    return statistics.median(float(e["wall_s"]) / int(e["n"]) for e in rounds), rounds


def median_cpu_per_iter(rounds: list[dict]) -> float | None:
    """The median CPU seconds per iteration of these rounds (cpu_s), or None."""
    per = [
        float(e["cpu_s"]) / int(e["n"])
        for e in rounds
        if isinstance(e.get("cpu_s"), (int, float)) and isinstance(e.get("n"), int) and e["n"] > 0
    ]
    return statistics.median(per) if per else None


def cpu_share(log: list[dict], threads: object, trusted: Iterable[str]) -> float | None:
    """The share of its CPUs the trusted subjects got while they were timed, per thread: the best
    of (a) CPU over wall time of their timed rounds, median per subject (0.95-0.98 quiet, when a
    subject runs on every thread) and (b) of the cache flushes before them, where the log has
    them (one large in-place add on every thread, so there even for work too small to run in
    parallel; 0.75 quiet). Both read about 0.5 with one busy process beside a 2-thread sandbox on
    two cores. The submission is not running while a trusted subject is timed, so it cannot
    lower this figure."""
    if not isinstance(threads, int) or isinstance(threads, bool) or threads < 1:
        return None
    trusted = tuple(trusted)
    mine = [e for e in log if e.get("subject") in trusted and e.get("round") is not None]

    def ratio(e: dict, cpu: str, wall: str) -> float | None:
        c, w = e.get(cpu), e.get(wall)
        if isinstance(c, (int, float)) and isinstance(w, (int, float)) and w > 0:
            return float(c) / float(w) / threads
        return None

    found = []
    for subject in trusted:
        rounds = [r for e in mine if e["subject"] == subject if (r := ratio(e, "cpu_s", "wall_s")) is not None]
        if rounds:
            found.append(statistics.median(rounds))
    flushes = [r for e in mine if (r := ratio(e, "flush_cpu_s", "flush_wall_s")) is not None]
    if flushes:
        found.append(statistics.median(flushes))
    return max(found) if found else None


def others_share(log: list[dict], subjects: Iterable[str], cpus: object) -> float | None:
    """The share of the sandbox's CPUs that processes outside it kept busy while these subjects'
    timed rounds ran, summed over the rounds (the host's counters tick at 100 Hz: one round is
    too coarse). It reads 0.00-0.05 on a quiet machine and 0.5-0.7 beside two spinning processes
    per CPU, also in the runs where the scheduler happened to give the reference its full share.
    Nothing in the sandbox can lower it: it is the host's busy time less the sandbox's own."""
    if not isinstance(cpus, int) or isinstance(cpus, bool) or cpus < 1:
        return None
    subjects = tuple(subjects)
    others = wall = 0.0
    for e in log:
        o, w, h = e.get("others_cpu_s"), e.get("wall_s"), e.get("held_s", 0.0)
        if e.get("subject") not in subjects or (e.get("round") is None and e.get("fresh_round") is None):
            continue
        if isinstance(o, (int, float)) and isinstance(w, (int, float)) and isinstance(h, (int, float)):
            others += float(o)
            wall += float(w) + float(h)
    return others / wall / cpus if wall > 0 else None


def scaling(rounds: list[dict], key: str = "cpu_s") -> float:
    """How much more the 3n-iteration rounds took than the n-iteration ones (about 3 when the
    work follows the count, less only by the rounds' fixed costs). CPU time by default: the kernel counts it, and it does not grow
    with the time a busy machine keeps the subject waiting. The fastest round of each kind,
    not the median: a shared machine only ever adds time, and a burst of it over a few of the
    short rounds (seen in CI: 20 ms iterations among 1.3 ms ones) made an honest kernel's medians
    look flat. Work done once per round instead of once per iteration keeps even the fastest
    rounds of both kinds equal, so the ratio still exposes it."""
    single = [float(e[key]) for e in rounds if int(e["round"]) % 2 == 0]
    double = [float(e[key]) for e in rounds if int(e["round"]) % 2 == 1]
    if not single or not double or min(single) <= 0:
        return float("nan")
    return min(double) / min(single)


@dataclass(frozen=True)
class Speed:
    """A submission's speed against one trusted subject, as one interleaved run measured it."""

    speedup: float  # trusted subject's seconds per call over the submission's
    share: float | None  # the CPU share the trusted subjects got (None: not measurable)
    threads: int
    min_share: float

    @property
    def contended(self) -> bool:
        return self.share is not None and self.share < self.min_share

    def busy(self) -> str:
        """The measured contention, in the words a reason gives."""
        return f"the reference got {self.share:.0%} of the {self.threads} CPUs it ran on, need {self.min_share:.0%}"

    def judge(self, need: float, what: str = "the reference") -> tuple[str, str]:
        """("pass" | "fail" | "inconclusive", detail) for a need of `need`x: a figure below it on
        a contended machine is inconclusive, with the contention measured."""
        detail = f"{self.speedup:.3f}x {what} (need >= {need}x)"
        if self.speedup >= need:
            return "pass", detail + (f"; taken on a busy machine ({self.busy()})" if self.contended else "")
        if self.contended:
            return (
                "inconclusive",
                f"{detail}; inconclusive: the machine was too busy to time ({self.busy()}): verify again when it is quieter",
            )
        return "fail", detail


def interleaved_speed(
    log: list[dict], subject: str, baseline: str, threads: int, min_share: float, trusted: Iterable[str] | None = None
) -> Speed:
    """The speed of `subject` against `baseline` from one interleaved log."""
    t_base, _ = median_per_iter(log, baseline)
    t_sub, _ = median_per_iter(log, subject)
    share = cpu_share(log, threads, trusted if trusted is not None else (baseline,))
    return Speed(t_base / t_sub if t_sub > 0 else float("nan"), share, threads, min_share)
