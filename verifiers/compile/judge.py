"""The compile verifier's judgement: the judge script's figures -> checks, metrics, an Outcome.

The original Model's figures come first, as the symptom: a task whose Model breaks nothing,
recompiles nothing, compiles and matches eager is "not reproduced on this torch", an outcome of
its own (a fail naming it), never a pass of an untouched model. Speed under contention is
inconclusive, never FAIL.
"""

from __future__ import annotations

from typing import Any

from assay.verifiers.common.timing import interleaved_speed
from assay.verifiers.compile.criteria import Criteria
from assay.verifiers.outcome import Bar, Check, Figures, Headline, Outcome

CHECK_ORDER = (
    "submission",
    "imports",
    "isolation",
    "loads_weights",
    "runs_eager",
    "finished",
    "symptom",
    "graph_breaks",
    "fullgraph",
    "recompiles",
    "coverage",
    "opaque",
    "compiles",
    "parity",
    "speed",
)


def symptoms(original: dict, crit: Criteria) -> list[str]:
    """What is wrong with compiling the task's Model, as measured."""
    found = []
    if original.get("breaks"):
        found.append(f"{original['breaks']} graph break(s)" + _first_reason(original))
    if original.get("graphs") == 0:
        found.append("no graph captured")
    if not original.get("fullgraph"):
        found.append(f"fullgraph fails ({original.get('fullgraph_error', '')[:160]})")
    if (original.get("recompiles") or 0) > crit.graph.max_recompiles:
        found.append(f"{original['recompiles']} recompiles over the input sequence")
    crash = original.get("crash")
    if crash:
        found.append(f"crashes in {crash['stage']} ({crash['type']}: {crash['message'][:160]})")
    div = original.get("divergence")
    if div and not div.get("ok"):
        found.append(f"compiled output differs from eager ({_err(div)})")
    return found


def _first_reason(figures: dict) -> str:
    reasons = figures.get("break_reasons") or []
    if not reasons:
        return ""
    r = reasons[0]
    return f": {r['reason'][:140]}" + (f" at {r['where']}" if r.get("where") else "")


def _err(d: dict) -> str:
    if d.get("why"):
        return d["why"]
    text = f"max error {d.get('err', float('nan')):.3g}, allowed {d.get('allowed', float('nan')):.3g}"
    if "eager_vs_fp64" in d:
        text += f"; vs fp64: compiled {d['got_vs_fp64']:.3g}, eager {d['eager_vs_fp64']:.3g}"
    return text


def judge(result: dict[str, Any], crit: Criteria) -> tuple[list[Check], dict, list[str]]:
    """(checks, metrics, inconclusive check names)."""
    original = result["original"]
    found = symptoms(original, crit)
    metrics: dict[str, Any] = {"original": _figures(original), "symptoms": found, "torch": result.get("torch")}
    checks = [
        Check(
            name="symptom",
            passed=bool(found),
            detail="; ".join(found)
            if found
            else f"not reproduced on torch {result.get('torch')}: Model compiles whole, recompiles no more than allowed "
            "and matches eager, so there is nothing to fix",
        )
    ]
    if result.get("tamper"):
        checks.append(
            Check(
                name="isolation",
                passed=False,
                detail="the submission changed what the verifier measures with: " + "; ".join(result["tamper"][:12]),
            )
        )
        return checks, metrics, []
    fixed = result["fixed"]
    g = crit.graph
    breaks = fixed.get("breaks")
    checks.append(
        Check(
            name="graph_breaks",
            passed=breaks is not None and breaks <= g.max_breaks and (fixed.get("graphs") or 0) >= 1,
            detail=(
                f"{breaks} graph break(s) in {fixed.get('graphs')} graph(s) (allowed {g.max_breaks})"
                + _first_reason(fixed)
                if breaks is not None
                else f"explain failed: {fixed.get('explain_error')}"
            )
            + ("; no graph was captured at all" if fixed.get("graphs") == 0 else ""),
        )
    )
    if g.fullgraph:
        checks.append(
            Check(
                name="fullgraph",
                passed=bool(fixed.get("fullgraph")),
                detail="torch.compile(fullgraph=True) traces ModelNew"
                if fixed.get("fullgraph")
                else f"fullgraph=True fails: {fixed.get('fullgraph_error', '')[:300]}",
            )
        )
    rec = fixed.get("recompiles", 0)
    checks.append(
        Check(
            name="recompiles",
            passed=rec <= g.max_recompiles,
            detail=f"{rec} recompile(s) over the input sequence (allowed {g.max_recompiles})"
            + (
                f"; guards that failed: {', '.join(fixed['recompile_guards'][:3])}"
                if fixed.get("recompile_guards")
                else ""
            ),
        )
    )
    cov = float(fixed.get("coverage", 0.0))
    checks.append(
        Check(
            name="coverage",
            passed=cov >= g.min_coverage,
            detail=f"{cov:.3f} of the aten ops ModelNew runs eagerly are traced into compiled graphs (need >= {g.min_coverage})"
            + (f"; not covered: {', '.join(fixed['not_covered'][:8])}" if fixed.get("not_covered") else ""),
        )
    )
    opaque = fixed.get("opaque") or []
    checks.append(
        Check(
            name="opaque",
            passed=len(opaque) <= g.max_opaque,
            detail=f"{len(opaque)} opaque call(s) in the compiled graphs (allowed {g.max_opaque})"
            + (f": {', '.join(opaque[:5])}" if opaque else ""),
        )
    )
    crash = fixed.get("crash")
    checks.append(
        Check(
            name="compiles",
            passed=crash is None,
            detail="compiled ModelNew runs with the job's backend"
            if crash is None
            else f"compiled ModelNew crashes in {crash['stage']}: {crash['type']}: {crash['message'][:300]}",
        )
    )
    parity = fixed.get("parity") or []
    bad = [p for p in parity if not p.get("ok")]
    ill = [p for p in parity if p.get("ill_conditioned")]
    if crash is None:
        worst = max(parity, key=lambda p: p.get("err", float("inf")) / max(p.get("allowed", 0.0), 1e-30), default=None)
        checks.append(
            Check(
                name="parity",
                passed=bool(parity) and not bad,
                detail=(
                    f"{len(parity) - len(bad)} of {len(parity)} held-out cases match Model eager"
                    + (f" ({len(ill)} judged against fp64: the model is ill-conditioned)" if ill else "")
                    + (f"; worst {_err(worst)}" if worst else "")
                    + (f"; first failing, shapes {bad[0].get('shapes')}: {_err(bad[0])}" if bad else "")
                ),
            )
        )
    metrics["fixed"] = _figures(fixed)
    metrics["parity"] = parity
    inconclusive: list[str] = []
    if result.get("timing"):
        log, threads = result["timing"], result.get("threads") or 1
        trusted = ("eager", "original") if any(e["subject"] == "original" for e in log) else ("eager",)
        vs_eager = interleaved_speed(log, "fixed", "eager", threads, crit.speed.min_cpu_share, trusted=trusted)
        metrics["fixed_vs_model_eager"] = round(vs_eager.speedup, 4)
        metrics["timing_cpu_share"] = None if vs_eager.share is None else round(vs_eager.share, 3)
        vs_orig = vs_eager
        if "original" in trusted:
            vs_orig = interleaved_speed(log, "fixed", "original", threads, crit.speed.min_cpu_share, trusted=trusted)
            metrics["fixed_vs_compiled_model"] = round(vs_orig.speedup, 4)
        if crit.speed.min_vs_eager > 0:
            need = crit.speed.min_vs_eager
            word, detail = vs_eager.judge(need, "Model eager")
            if "original" in trusted:
                detail += f"; {vs_orig.speedup:.3f}x compiled Model"
                # torch.compile's own cost (guards, a call into compiled code) can outweigh a small
                # model's work: when compiled Model is itself slower than eager, the fix is held to
                # compiled Model, not blamed for the compiler's overhead
                model_vs_eager = vs_eager.speedup / vs_orig.speedup if vs_orig.speedup > 0 else float("nan")
                metrics["compiled_model_vs_eager"] = round(model_vs_eager, 4)
                if word != "pass" and model_vs_eager < 1.0:
                    word, detail = vs_orig.judge(need, "compiled Model")
                    detail += (
                        f"; compiled Model runs {model_vs_eager:.3f}x eager on this model (torch.compile's overhead), "
                        f"so the fix is held to it; {vs_eager.speedup:.3f}x Model eager"
                    )
            checks.append(Check(name="speed", passed=word == "pass", detail=detail))
            if word == "inconclusive":
                inconclusive.append("speed")
    metrics["judge_s"] = result.get("judge_s")
    return checks, metrics, inconclusive


def _figures(f: dict) -> dict:
    keys = ("graphs", "breaks", "fullgraph", "recompiles", "coverage", "opaque", "break_reasons", "recompile_guards")
    out = {k: f.get(k) for k in keys if k in f}
    if f.get("crash"):
        out["crash"] = {k: f["crash"][k] for k in ("stage", "type", "message")}
    if f.get("divergence"):
        out["divergence"] = {k: v for k, v in f["divergence"].items() if k != "output"}
    return out


def outcome_of(checks: list[Check], metrics: dict, inconclusive: list[str], hashes: tuple[str, str, str]) -> Outcome:
    ordered = sorted(checks, key=lambda c: CHECK_ORDER.index(c.name) if c.name in CHECK_ORDER else 99)
    failed = [c for c in ordered if not c.passed]
    reasons = [f"{c.name}: {c.detail}" for c in failed]
    word = "pass" if not failed else "inconclusive" if all(c.name in inconclusive for c in failed) else "fail"
    bars = [
        Bar(label=label, value=float(metrics[key]), metric=key)
        for key, label in (("fixed_vs_model_eager", "vs eager"), ("fixed_vs_compiled_model", "vs compiled Model"))
        if isinstance(metrics.get(key), float)
    ]
    fixed = metrics.get("fixed") or {}
    return Outcome(
        outcome=word,
        reasons=reasons,
        checks=ordered,
        metrics=metrics,
        headline=Headline(
            name=f"graph breaks (Model: {metrics['original'].get('breaks')})", value=float(fixed["breaks"])
        )
        if isinstance(fixed.get("breaks"), int)
        else None,
        figures=Figures(title="compiled ModelNew speed (| marks 1.0x)", bars=bars) if bars else None,
        criteria_hash=hashes[0],
        task_hash=hashes[1],
        candidate_hash=hashes[2],
    )
