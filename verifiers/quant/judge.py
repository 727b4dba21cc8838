"""The quant verdict from what the judge script measured: pure functions of its figures, the
criteria and the job's objective, in the verifier's process.

Checks, in order: every rule decides at least one module (a glob that matches nothing, or only
modules earlier rules took, is a recipe claiming what it does not do); every module a rule
quantizes was quantized (torchao leaves a layer fp32 with only a log line when a group size does
not divide it); the recipe quantized something; drift on the task's probes and on the held-out
ones within the criteria; the objective gained (size, or latency timed side by side: a slow
figure on a busy machine is inconclusive, never FAIL); the job's own budgets.
"""

from __future__ import annotations

from typing import Any

from assay.recipe import Recipe
from assay.verifiers.common.timing import interleaved_speed
from assay.verifiers.outcome import Bar, Check, Figures, Headline, Outcome
from assay.verifiers.quant.criteria import Criteria

CHECK_ORDER = (
    "measured",
    "recipe",
    "rules_match",
    "rules_applied",
    "quantizes_something",
    "quality_probes",
    "quality_heldout",
    "objective",
    "budget",
)


def _rule_text(i: int, rule: dict) -> str:
    args = ", ".join(f"{k}={v}" for k, v in rule.items() if k not in ("match", "config"))
    return f"rule {i} ({rule['match']!r} -> {rule['config']}{', ' + args if args else ''})"


def _quality(figures: dict, output: str, crit: Criteria) -> tuple[bool, str]:
    if not figures.get("finite", False):
        return False, "the quantized model's outputs are not all finite"
    if output == "logits":
        q = crit.quality.logits
        top1, kl = figures["top1_agreement"], figures["kl_mean"]
        ok = top1 >= q.min_top1_agreement and kl <= q.max_kl_mean
        ties = f", {figures['top1_ties']} flips at fp32 ties" if figures.get("top1_ties") else ""
        return ok, (
            f"top-1 agreement {top1:.4f} (need >= {q.min_top1_agreement}{ties}), KL mean {kl:.4g} (need <= {q.max_kl_mean}), "
            f"SQNR {figures['sqnr_db']:.1f} dB over {figures['rows']} rows"
        )
    if output == "generate":
        return _generate_quality(figures, crit)
    e = crit.quality.embeddings
    cos, low, nn = figures["cosine_mean"], figures["cosine_min"], figures.get("nn_agreement")
    ok = cos >= e.min_cosine_mean and low >= e.min_cosine_min and (nn is None or nn >= e.min_nn_agreement)
    nn_text = f", nearest-neighbour agreement {nn:.3f} (need >= {e.min_nn_agreement})" if nn is not None else ""
    return ok, (
        f"cosine mean {cos:.4f} (need >= {e.min_cosine_mean}), min {low:.4f} (need >= {e.min_cosine_min}){nn_text}, "
        f"SQNR {figures['sqnr_db']:.1f} dB over {figures['rows']} rows"
    )


def _generate_quality(f: dict, crit: Criteria) -> tuple[bool, str]:
    g = crit.quality.generate
    ok = (
        f["greedy_agreement"] >= g.min_greedy_agreement
        and f["top1_agreement"] >= g.min_top1_agreement
        and f["json_kept"] >= g.min_json_kept
        and f["tool_agreement"] >= g.min_tool_agreement
    )
    ties = f" ({f['greedy_ties']} divergences at fp32 ties)" if f["greedy_ties"] else ""
    return ok, (
        f"greedy agreement {f['greedy_agreement']:.3f} (need >= {g.min_greedy_agreement}; "
        f"{f['greedy_exact']:.0%} of {f['probes']} probes exact{ties}), "
        f"teacher-forced top-1 {f['top1_agreement']:.3f} (need >= {g.min_top1_agreement}), KL mean {f['kl_mean']:.3g}, "
        f"JSON valid {f['json_valid_quant']}/{f['json_probes']} against fp32's {f['json_valid_fp32']} "
        f"(kept {f['json_kept']:.2f}, need >= {g.min_json_kept}), "
        f"tool calls agreeing {f['tool_agreement']:.2f} of fp32's {f['tool_calls_fp32']} (need >= {g.min_tool_agreement}), "
        f"SQNR {f['sqnr_db']:.1f} dB over {f['rows']} positions"
    )


def judge(result: dict[str, Any], recipe: Recipe, options: Any, crit: Criteria) -> tuple[list[Check], dict, list[str]]:
    """(checks, metrics, inconclusive check names)."""
    rules = recipe.plan()
    checks: list[Check] = []
    inconclusive: list[str] = []
    metrics: dict[str, Any] = {}

    unmatched = [
        f"{_rule_text(i, r)} matches no Linear module"
        if per["matched"] == 0
        else f"{_rule_text(i, r)} decides no module: earlier rules took all {per['matched']} it matches"
        for i, (r, per) in enumerate(zip(rules, result["rules"], strict=True), 1)
        if per["decided"] == 0
    ]
    checks.append(
        Check(
            name="rules_match",
            passed=not unmatched,
            detail="; ".join(unmatched)
            or f"every rule decides at least one of the {result['linear_modules']} Linear modules",
        )
    )

    left = [
        f"{_rule_text(i, r)} failed to apply: {per['error']}"
        for i, (r, per) in enumerate(zip(rules, result["rules"], strict=True), 1)
        if per.get("error")
    ] + [
        f"{_rule_text(i, r)} left {len(per['left_fp32'])} of {per['decided']} fp32: "
        + ", ".join(f"{n!r} {per['shapes'].get(n, '')}" for n in per["left_fp32"][:4])
        + (" ..." if len(per["left_fp32"]) > 4 else "")
        for i, (r, per) in enumerate(zip(rules, result["rules"], strict=True), 1)
        if per["left_fp32"] and not per.get("error")
    ]
    checks.append(
        Check(
            name="rules_applied",
            passed=not left,
            detail="; ".join(left)
            + " (the config does not take those shapes: narrow the glob or give them another config)"
            if left
            else "every module a rule quantizes was quantized",
        )
    )
    done = result["quantized_modules"]
    checks.append(
        Check(
            name="quantizes_something",
            passed=bool(done),
            detail=f"{len(done)} of {result['linear_modules']} Linear modules quantized"
            if done
            else "the recipe quantized no module",
        )
    )

    output = result["output"]
    for name, key in (("quality_probes", "probes"), ("quality_heldout", "heldout")):
        ok, detail = _quality(result[key], output, crit)
        checks.append(Check(name=name, passed=ok, detail=detail))
        metrics[key] = result[key]

    size_ratio = result["bytes_quant"] / result["bytes_fp32"]
    metrics.update(bytes_fp32=result["bytes_fp32"], bytes_quant=result["bytes_quant"], size_ratio=round(size_ratio, 4))
    speed = None
    if result.get("timing"):
        speed = interleaved_speed(
            result["timing"],
            "quant",
            "fp32",
            result["machine"]["threads"],
            crit.timing.min_cpu_share,
            trusted=("fp32", "quant"),
        )
        metrics["speedup_vs_fp32"] = round(speed.speedup, 4)
        metrics["timing_cpu_share"] = None if speed.share is None else round(speed.share, 3)
        metrics["timing_contended"] = speed.contended

    objective = options.objective
    if objective == "size":
        need = 1 - crit.objective.min_size_gain
        checks.append(
            Check(
                name="objective",
                passed=size_ratio <= need,
                detail=f"size ratio {size_ratio:.3f} of fp32's bytes (need <= {need:.2f})",
            )
        )
    elif speed is not None:
        word, detail = speed.judge(crit.objective.min_speedup, "the fp32 model")
        checks.append(Check(name="objective", passed=word == "pass", detail=detail))
        if word == "inconclusive":
            inconclusive.append("objective")
    budgets = []
    if options.max_size_ratio is not None:
        budgets.append(
            (
                "size",
                size_ratio <= options.max_size_ratio,
                f"size ratio {size_ratio:.3f} (budget <= {options.max_size_ratio})",
            )
        )
    if options.min_speedup is not None and speed is not None:
        word, detail = speed.judge(options.min_speedup, "the fp32 model")
        budgets.append(("speed", word == "pass", detail + " (budget)"))
        if word == "inconclusive":
            inconclusive.append("budget")
    if budgets:
        checks.append(
            Check(name="budget", passed=all(ok for _, ok, _ in budgets), detail="; ".join(d for _, _, d in budgets))
        )
    metrics["rules"] = [{**per, "rule": r} for r, per in zip(rules, result["rules"], strict=True)]
    metrics["quantized_modules"] = len(done)
    metrics["linear_modules"] = result["linear_modules"]
    metrics["machine"] = result["machine"]
    metrics["versions"] = {"torch": result.get("torch"), "torchao": result.get("torchao")}
    metrics["apply_s"] = round(result.get("apply_s", 0.0), 3)
    return checks, metrics, inconclusive


def readiness(task: str, output: str, objective: str, metrics: dict, passed: bool, reasons: list[str]) -> dict:
    """The model x machine card a verdict carries: quality kept, speed, size, viable or not, why."""
    held = metrics.get("heldout", {})
    keys = (
        *("top1_agreement", "kl_mean", "cosine_mean", "nn_agreement", "sqnr_db"),
        *("greedy_agreement", "json_kept", "tool_agreement"),
    )
    kept = {k: held[k] for k in keys if k in held}
    m = metrics.get("machine", {})
    return {
        "model": task,
        "machine": {
            "cpu": m.get("cpu"),
            "isa": m.get("isa"),
            "capability": m.get("capability"),
            "threads": m.get("threads"),
        },
        "output": output,
        "objective": objective,
        "quality_kept": kept,
        "speedup_vs_fp32": metrics.get("speedup_vs_fp32"),
        "size_ratio": metrics.get("size_ratio"),
        "viable": passed,
        "why": "meets quant criteria and the objective on this machine" if passed else "; ".join(reasons),
    }


def outcome_of(
    checks: list[Check], metrics: dict, inconclusive: list[str], objective: str, hashes: tuple[str, str, str]
) -> Outcome:
    ordered = sorted(checks, key=lambda c: CHECK_ORDER.index(c.name) if c.name in CHECK_ORDER else 99)
    failed = [c for c in ordered if not c.passed]
    reasons = [f"{c.name}: {c.detail}" for c in failed]
    word = "pass" if not failed else "inconclusive" if all(c.name in inconclusive for c in failed) else "fail"
    bars = []
    if isinstance(metrics.get("speedup_vs_fp32"), float):
        bars.append(Bar(label="speed vs fp32", value=metrics["speedup_vs_fp32"], metric="speedup_vs_fp32"))
    if metrics.get("size_ratio"):
        bars.append(Bar(label="compression vs fp32", value=round(1 / metrics["size_ratio"], 3)))
    headline = (
        Headline(name="size vs fp32", value=metrics.get("size_ratio"), unit="x")
        if objective == "size"
        else Headline(name="speedup vs fp32", value=metrics.get("speedup_vs_fp32"), unit="x")
    )
    return Outcome(
        outcome=word,
        reasons=reasons,
        checks=ordered,
        metrics=metrics,
        headline=headline,
        figures=Figures(title="quantized vs fp32 (| marks 1.0x)", bars=bars) if bars else None,
        criteria_hash=hashes[0],
        task_hash=hashes[1],
        candidate_hash=hashes[2],
    )
