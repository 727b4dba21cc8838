"""The compile verifier's judgement from figures alone (no sandbox): a symptom that does not
reproduce is a fail of its own; tampering stops the judgement; speed is held to eager, or to
compiled Model where torch.compile's overhead makes that slower than eager, and is inconclusive,
never FAIL, on a busy machine."""

from __future__ import annotations

from assay.verifiers.compile.criteria import load_criteria
from assay.verifiers.compile.judge import judge, outcome_of

CLEAN = {
    "graphs": 1,
    "breaks": 0,
    "break_reasons": [],
    "fullgraph": True,
    "recompiles": 0,
    "coverage": 1.0,
    "opaque": [],
}
BROKEN = {**CLEAN, "graphs": 2, "breaks": 1, "fullgraph": False, "fullgraph_error": "Unsupported: item()"}
PARITY = [{"ok": True, "err": 0.0, "allowed": 1e-4, "shapes": [[4, 4]]}] * 4


def rounds(per_call: dict[str, float], cpu_share: float = 0.97, threads: int = 2) -> list[dict]:
    log = []
    for r in range(8):
        for subject, t in per_call.items():
            n = 100 * (3 if r % 2 else 1)
            log.append(
                {
                    "subject": subject,
                    "round": r,
                    "n": n,
                    "wall_s": t * n,
                    "cpu_s": t * n * cpu_share * threads,
                    "flush_wall_s": 0.01,
                    "flush_cpu_s": 0.01 * cpu_share * threads,
                }
            )
    return log


def result(original=BROKEN, fixed=CLEAN, timing=None, tamper=()):
    return {
        "ok": True,
        "original": {**original, "crash": None, "divergence": {"ok": True, "err": 0.0, "allowed": 1e-4}},
        "fixed": {**fixed, "crash": None, "parity": PARITY, "drift": []},
        "tamper": list(tamper),
        "timing": timing or [],
        "threads": 2,
        "torch": "2.13.0+cpu",
    }


def verdict(res, profile="compile-default"):
    checks, metrics, inconclusive = judge(res, load_criteria(profile))
    return outcome_of(checks, metrics, inconclusive, ("c", "t", "s"))


def test_a_model_without_a_symptom_is_not_reproduced_even_when_the_fix_is_clean():
    out = verdict(result(original=CLEAN), "compile-test")
    assert out.outcome == "fail" and len(out.reasons) == 1 and "not reproduced on torch 2.13.0" in out.reasons[0]


def test_tampering_stops_the_judgement():
    out = verdict(result(tamper=["torch._dynamo.explain was replaced"]), "compile-test")
    assert out.outcome == "fail" and [c.name for c in out.checks if not c.passed] == ["isolation"]


def test_a_fix_faster_than_eager_passes_and_one_slower_than_both_fails():
    ok = verdict(result(timing=rounds({"eager": 1.0, "fixed": 0.8, "original": 1.2})))
    assert ok.outcome == "pass" and ok.metrics["fixed_vs_model_eager"] > 1.2
    slow = verdict(result(timing=rounds({"eager": 1.0, "fixed": 2.0, "original": 1.2})))
    assert slow.outcome == "fail" and "speed" in slow.reasons[0]


def test_where_compiling_costs_more_than_a_small_model_computes_the_fix_is_held_to_compiled_model():
    out = verdict(result(timing=rounds({"eager": 1.0, "fixed": 5.0, "original": 8.0})))
    assert out.outcome == "pass", out.reasons
    speed = next(c for c in out.checks if c.name == "speed")
    assert "torch.compile's overhead" in speed.detail and out.metrics["compiled_model_vs_eager"] < 0.2


def test_a_slow_figure_on_a_busy_machine_is_inconclusive():
    out = verdict(result(timing=rounds({"eager": 1.0, "fixed": 2.0, "original": 1.2}, cpu_share=0.4)))
    assert out.outcome == "inconclusive" and "too busy to time" in out.reasons[0]
