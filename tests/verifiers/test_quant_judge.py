"""The quant verdict from measured figures (judge.py), with the figures made here: rules that
decide nothing, rules torchao left undone, drift, the objective, budgets, and a slow figure on
a busy machine (inconclusive, with the contention named, never FAIL). No sandbox."""

from __future__ import annotations

from types import SimpleNamespace

from assay.recipe import parse_recipe
from assay.verifiers.quant.criteria import load_criteria
from assay.verifiers.quant.judge import judge, outcome_of

CRIT = load_criteria("quant-default")
LOGITS_OK = {
    "rows": 64,
    "finite": True,
    "sqnr_db": 40.0,
    "max_abs_err": 0.01,
    "top1_agreement": 0.99,
    "kl_mean": 1e-4,
    "kl_max": 1e-3,
}
RECIPE = parse_recipe(
    b'[[rule]]\nmatch = "blocks.*"\nconfig = "int8_weight_only"\n[[rule]]\nmatch = "*"\nconfig = "none"\n'
)


def rules(*per):
    return [{"matched": m, "decided": d, "left_fp32": left, "shapes": {}, "error": None} for m, d, left in per]


def result(**over):
    base = {
        "output": "logits",
        "linear_modules": 6,
        "quantized_modules": ["blocks.0", "blocks.1"],
        "rules": rules((2, 2, []), (4, 4, [])),
        "bytes_fp32": 1000,
        "bytes_quant": 400,
        "probes": LOGITS_OK,
        "heldout": LOGITS_OK,
        "machine": {"cpu": "test", "isa": [], "capability": "AVX2", "threads": 2},
    }
    return {**base, **over}


def options(objective="size", **kw):
    return SimpleNamespace(
        objective=objective, max_size_ratio=kw.get("max_size_ratio"), min_speedup=kw.get("min_speedup")
    )


def verdict(res, recipe=RECIPE, opts=None):
    opts = opts or options()
    checks, metrics, inc = judge(res, recipe, opts, CRIT)
    return outcome_of(checks, metrics, inc, opts.objective, ("c", "t", "s"))


def timing_log(fp32_s: float, quant_s: float, share: float):
    """Rounds as the harness writes them: `share` of 2 threads' CPU over wall in every flush."""
    log = []
    for r in range(8):
        for name, t in (("fp32", fp32_s), ("quant", quant_s)):
            n = 10 * (3 if r % 2 else 1)
            log.append(
                {
                    "subject": name,
                    "round": r,
                    "n": n,
                    "wall_s": t * n,
                    "cpu_s": t * n * share,
                    "flush_wall_s": 0.01,
                    "flush_cpu_s": 0.02 * share,
                }
            )
    return log


def test_an_honest_size_recipe_passes_with_its_figures():
    out = verdict(result())
    assert out.outcome == "pass", out.reasons
    assert out.metrics["size_ratio"] == 0.4 and out.headline.value == 0.4


def test_a_glob_that_matches_nothing_and_a_shadowed_rule_fail_by_name():
    out = verdict(result(rules=rules((0, 0, []), (4, 4, []))))
    assert out.outcome == "fail"
    assert any("rule 1 ('blocks.*' -> int8_weight_only) matches no Linear module" in r for r in out.reasons)
    out = verdict(result(rules=rules((2, 2, []), (2, 0, []))))
    assert any("rule 2" in r and "earlier rules took all 2" in r for r in out.reasons)


def test_a_rule_that_claims_more_than_it_did_fails():
    out = verdict(result(rules=rules((2, 2, ["blocks.1"]), (4, 4, []))))
    assert out.outcome == "fail" and any(
        r.startswith("rules_applied:") and "left 1 of 2 fp32" in r for r in out.reasons
    )


def test_quantizing_nothing_and_gaining_nothing_fail():
    out = verdict(result(quantized_modules=[], bytes_quant=1000))
    reasons = " | ".join(out.reasons)
    assert "quantizes_something: the recipe quantized no module" in reasons and "objective: size ratio 1.000" in reasons


def test_drift_on_held_out_probes_fails_even_when_the_task_probes_pass():
    bad = {**LOGITS_OK, "top1_agreement": 0.80}
    out = verdict(result(heldout=bad))
    assert [r.split(":")[0] for r in out.reasons] == ["quality_heldout"]
    out = verdict(result(probes={**LOGITS_OK, "finite": False}))
    assert "not all finite" in out.reasons[0]


def test_latency_on_a_quiet_machine_fails_a_slow_recipe():
    out = verdict(result(timing=timing_log(1.0e-3, 1.2e-3, 0.9)), opts=options("latency"))
    assert out.outcome == "fail" and out.reasons[0].startswith("objective: 0.833x")


def test_latency_on_a_busy_machine_is_inconclusive_with_the_contention_named():
    out = verdict(result(timing=timing_log(1.0e-3, 1.2e-3, 0.45)), opts=options("latency"))
    assert out.outcome == "inconclusive", out.reasons
    assert "too busy to time" in out.reasons[0] and "45%" in out.reasons[0]
    assert out.metrics["timing_contended"] is True


def test_a_fast_recipe_passes_latency_and_a_broken_one_still_fails_on_a_busy_machine():
    assert verdict(result(timing=timing_log(2.0e-3, 1.0e-3, 0.9)), opts=options("latency")).outcome == "pass"
    # contention excuses only the figure the load decided, never drift
    out = verdict(
        result(timing=timing_log(1.0e-3, 1.2e-3, 0.45), heldout={**LOGITS_OK, "kl_mean": 1.0}), opts=options("latency")
    )
    assert out.outcome == "fail"


def test_the_jobs_budgets_are_judged_beside_the_objective():
    out = verdict(result(), opts=options("size", max_size_ratio=0.3))
    assert out.outcome == "fail" and "budget <= 0.3" in out.reasons[0]
    out = verdict(result(timing=timing_log(1.0e-3, 0.9e-3, 0.9)), opts=options("size", min_speedup=1.5))
    assert out.outcome == "fail" and out.reasons[0].startswith("budget:")
