"""The quant kind against its baselines, in one run, as JSON (and a RESULTS.md section).

    python bench/quant.py [--write-results] [--summarise RUN.json] [--skip-playbook]

MiniLM-L6 (real weights, objective latency): the playbook through `assay run
examples/quant/minilm.toml` (its verdict's figures, on the verifier's held-out sentences), and
whole-model baselines judged by the same verifier in the same run: torchao int8 weight-only,
torchao int8 dynamic, the eager dynamic int8 quantizer (per tensor and per channel), and INC
3.x's autotune where it installs (it is reported as not run otherwise, with why). Every figure
is the verifier's: speedup timed side by side with the fp32 model in one sandbox, held-out
cosine and neighbour agreement, serialized bytes.

SmolLM2-135M-Instruct (real weights, OUTPUT "generate", objective size): whole-model recipes
judged by the same verifier: greedy agreement, teacher-forced top-1, JSON validity and tool-call
agreement on the verifier's held-out prompts, serialized bytes. `--only smollm2` runs this part
alone (its own RESULTS.md section). The playbook is not run on SmolLM2 (see SMOLLM2_PLAYBOOK).

    python bench/quant.py --only smollm2 --write-results
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _kernels_common import ROOT, err, machine, progress, write_section  # noqa: E402

# off the path again: bench/kernels.py would shadow huggingface's `kernels`, which transformers
# looks for by name when it loads MiniLM in this process (INC's run)
# (python puts a script's folder first on the path itself)
sys.path[:] = [p for p in sys.path if p and Path(p).resolve() != Path(__file__).resolve().parent]

MINILM = ROOT / "examples" / "quant" / "minilm.py"
BASELINES = {
    "torchao_int8_weight_only": '[[rule]]\nmatch = "*"\nconfig = "int8_weight_only"\n',
    "torchao_int8_dynamic": '[[rule]]\nmatch = "*"\nconfig = "int8_dynamic"\n',
    "eager_dynamic_int8": '[[rule]]\nmatch = "*"\nconfig = "eager_dynamic_int8"\n',
    "eager_dynamic_int8_per_channel": '[[rule]]\nmatch = "*"\nconfig = "eager_dynamic_int8"\nper_channel = true\n',
}
GOAL = {"min_speedup": 1.3, "min_cosine_mean": 0.99, "min_nn_agreement": 0.9}
SMOLLM2 = ROOT / "examples" / "quant" / "smollm2.py"
# lm_head is tied to the embedding: quantizing it stores a second, int8 copy (bytes grow)
SMOLLM2_BASELINES = {
    "torchao_int8_weight_only": '[[rule]]\nmatch = "*"\nconfig = "int8_weight_only"\n',
    "int8_weight_only_untied_head_fp32": (
        '[[rule]]\nmatch = "lm_head"\nconfig = "none"\n\n[[rule]]\nmatch = "*"\nconfig = "int8_weight_only"\n'
    ),
    "intx8_group32_head_fp32": (
        '[[rule]]\nmatch = "lm_head"\nconfig = "none"\n\n'
        '[[rule]]\nmatch = "*"\nconfig = "intx_weight_only"\nbits = 8\ngroup_size = 32\n'
    ),
    "int4_group32_head_fp32": (
        '[[rule]]\nmatch = "lm_head"\nconfig = "none"\n\n[[rule]]\nmatch = "*"\nconfig = "int4_weight_only"\ngroup_size = 32\n'
    ),
}
SMOLLM2_GOAL = {"max_size_ratio": 0.5, "min_greedy_agreement": 0.9}
SMOLLM2_PLAYBOOK = (
    "not run: the playbook's per-module sensitivity over SmolLM2's 211 Linear modules and its tries "
    "(about 75 s each here) do not fit quant-agent's 60 s tool timeout; grouping modules by role is not built"
)


def figures(metrics: dict, outcome: str, reasons: list[str]) -> dict:
    held = metrics.get("heldout") or {}
    return {
        "outcome": outcome,
        "speedup": metrics.get("speedup_vs_fp32"),
        "cosine_mean": held.get("cosine_mean"),
        "cosine_min": held.get("cosine_min"),
        "nn_agreement": held.get("nn_agreement"),
        "size_ratio": metrics.get("size_ratio"),
        "quantized_modules": metrics.get("quantized_modules"),
        "timing_cpu_share": metrics.get("timing_cpu_share"),
        "reasons": reasons,
    }


def judged(task: Path, recipe_text: str, objective: str):
    """The verifier's outcome for a recipe given as text, on `task`."""
    from assay.verifiers.quant.criteria import load_criteria
    from assay.verifiers.quant.kind import QuantVerifyOptions
    from assay.verifiers.quant.verify import verify_quant

    with tempfile.TemporaryDirectory() as d:
        recipe = Path(d) / "recipe.toml"
        recipe.write_text(recipe_text)
        return verify_quant(task, recipe, load_criteria(), QuantVerifyOptions(objective=objective))


def verify(recipe_text: str) -> dict:
    out = judged(MINILM, recipe_text, "latency")
    return figures(out.metrics, out.outcome, out.reasons)


def verify_smollm2(recipe_text: str) -> dict:
    from assay.errors import UserError

    t0 = time.time()
    try:
        out = judged(SMOLLM2, recipe_text, "size")
    except UserError as exc:  # a verification that did not finish is a figure of its own
        return {"outcome": "error", "reasons": [exc.problem[:300]], "verify_seconds": round(time.time() - t0, 1)}
    held, probes = out.metrics.get("heldout") or {}, out.metrics.get("probes") or {}
    return {
        "outcome": out.outcome,
        "size_ratio": out.metrics.get("size_ratio"),
        "greedy_agreement": held.get("greedy_agreement"),
        "greedy_agreement_task_probes": probes.get("greedy_agreement"),
        "greedy_exact": held.get("greedy_exact"),
        "top1_forced": held.get("top1_agreement"),
        "sqnr_db": held.get("sqnr_db"),
        "json_validity": None if held.get("json_probes") is None else [held["json_valid_quant"], held["json_probes"]],
        "json_validity_fp32": None
        if held.get("json_probes") is None
        else [held["json_valid_fp32"], held["json_probes"]],
        "tool_agreement": held.get("tool_agreement"),
        "tool_calls_fp32": held.get("tool_calls_fp32"),
        "reasons": out.reasons,
        "verify_seconds": round(time.time() - t0, 1),
    }


def smollm2_part(prog) -> dict:
    subprocess.run([str(ROOT / "scripts" / "ensure-smollm2-float.sh"), sys.executable], check=True, capture_output=True)
    bar = prog.add_task("smollm2", total=len(SMOLLM2_BASELINES))
    rows = {}
    for name, recipe in SMOLLM2_BASELINES.items():
        prog.update(bar, description=f"SmolLM2 {name}")
        rows[name] = verify_smollm2(recipe)
        prog.advance(bar)
    return {"playbook": {"outcome": SMOLLM2_PLAYBOOK}, "baselines": rows, "goal": SMOLLM2_GOAL}


def heading(title: str, out: dict) -> str:
    m = out["machine"]
    return f"### {title} ({out['date']}, {m['cpu']}, {m['nproc']} CPUs, torch {m['torch']})"


def smollm2_markdown(out: dict) -> str:
    lines = [
        heading("SmolLM2-135M-Instruct, objective size", out),
        "",
        "Every figure is the verifier's, from `python bench/quant.py --only smollm2`, on its held-out prompts",
        "(text, JSON, tool-call; the task's own probes in brackets): greedy agreement is the share of fp32's",
        "continuation reproduced before the first differing token (ties at fp32 excepted).",
        f"Goal: size ratio <= {SMOLLM2_GOAL['max_size_ratio']} with greedy agreement >= {SMOLLM2_GOAL['min_greedy_agreement']} and JSON validity unchanged.",
        "",
        "| recipe | verdict | size ratio | greedy (task probes) | exact | forced top-1 | SQNR dB | JSON valid (fp32) | tool calls kept (of fp32's) | s |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, r in out["smollm2"]["baselines"].items():
        if r.get("size_ratio") is None:
            lines.append(f"| {name} | {r['outcome']} | - | - | - | - | - | - | - | {'; '.join(r['reasons'])[:160]} |")
            continue
        j, jf = r["json_validity"], r["json_validity_fp32"]
        lines.append(
            f"| {name} | {r['outcome']} | {r['size_ratio']:.3f} | {r['greedy_agreement']:.3f} "
            f"({r['greedy_agreement_task_probes']:.3f}) | {r['greedy_exact']:.2f} | {r['top1_forced']:.3f} | "
            f"{r['sqnr_db']:.1f} | {j[0]}/{j[1]} ({jf[0]}/{jf[1]}) | {r['tool_agreement']:.2f} ({r['tool_calls_fp32']}) | "
            f"{r['verify_seconds']} |"
        )
    lines += ["", f"Playbook: {out['smollm2']['playbook']['outcome']}.", f"The whole run: {out['seconds']} s."]
    return "\n".join(lines)


def playbook() -> dict:
    with tempfile.TemporaryDirectory() as d:
        report = Path(d) / "report.json"
        t0 = time.time()
        run = subprocess.run(
            [
                sys.executable,
                "-m",
                "assay",
                "run",
                str(ROOT / "examples" / "quant" / "minilm.toml"),
                "--json",
                str(report),
            ],
            capture_output=True,
            text=True,
        )
        seconds = round(time.time() - t0, 1)
        if not report.exists():
            return {"outcome": "error", "reasons": [run.stderr.strip()[-500:]], "job_seconds": seconds}
        doc = json.loads(report.read_text())["runs"][0]
    out = figures(
        doc.get("metrics", {}), doc.get("outcome", "fail" if not doc.get("passed") else "pass"), doc.get("reasons", [])
    )
    out["job_seconds"] = seconds
    return out


def inc_autotune() -> dict:
    """INC 3.x autotune (tolerable_loss=0.01 on mean cosine over the task's probes, its default
    dynamic and RTN configs) where it imports; otherwise, or when it fails, why. Its model is
    outside the recipe vocabulary, so its figures are this bench's own (cosine on the task's
    probes, speed median of 20 calls each), not the verifier's."""
    try:
        from neural_compressor.torch.export import export
        from neural_compressor.torch.quantization import (
            TuningConfig,
            autotune,
            get_default_dynamic_config,
            get_default_rtn_config,
        )
    except Exception as exc:  # INC is optional and heavy; its absence is a figure of its own
        return {
            "outcome": "not run",
            "reasons": [f"neural_compressor does not import: {type(exc).__name__}: {str(exc)[:200]}"],
        }
    import copy
    import importlib.util
    import statistics

    import torch

    spec = importlib.util.spec_from_file_location("minilm_task", MINILM)
    assert spec is not None and spec.loader is not None
    task = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(task)
    model, encode = task.get_model(), task.get_tokenizer()
    probes = encode(task.SENTENCES)
    with torch.inference_mode():
        ref = model(*probes)

    def cosine(m) -> float:
        with torch.inference_mode():
            return torch.nn.functional.cosine_similarity(ref, m(*probes)).mean().item()

    try:
        exported = export(copy.deepcopy(model), example_inputs=probes)
        config = TuningConfig(config_set=[get_default_dynamic_config(), get_default_rtn_config()], tolerable_loss=0.01)
        tuned = autotune(exported, tune_config=config, eval_fn=cosine, example_inputs=probes)
    except Exception as exc:
        return {"outcome": "error", "reasons": [f"autotune failed: {type(exc).__name__}: {str(exc)[:200]}"]}
    x = task.get_inputs()

    def median_s(m) -> float:
        with torch.inference_mode():
            for _ in range(3):
                m(*x)
            times = []
            for _ in range(20):
                t = time.perf_counter()
                m(*x)
                times.append(time.perf_counter() - t)
        return statistics.median(times)

    return {
        "outcome": "measured by the bench",
        "speedup": median_s(model) / median_s(tuned),
        "cosine_mean": cosine(tuned),
        "reasons": [],
    }


def meets(row: dict) -> bool:
    return bool(
        row.get("speedup")
        and row["speedup"] >= GOAL["min_speedup"]
        and (row.get("cosine_mean") or 0) >= GOAL["min_cosine_mean"]
        and (row.get("nn_agreement") or 0) >= GOAL["min_nn_agreement"]
    )


def markdown(out: dict) -> str:
    lines = [
        heading("MiniLM-L6, objective latency", out),
        "",
        "Every figure is the verifier's, from `python bench/quant.py`: speed timed side by side with the fp32",
        "model in one sandbox, cosine and neighbour agreement on held-out paraphrase pairs, serialized bytes.",
        f"Goal: at least {GOAL['min_speedup']}x with cosine >= {GOAL['min_cosine_mean']} and neighbours >= {GOAL['min_nn_agreement']}.",
        "",
        "| recipe | verdict | speedup | cosine mean (min) | neighbours | size ratio | meets the goal |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    rows = {"playbook": out["minilm"]["playbook"], **out["minilm"]["baselines"]}
    for name, r in rows.items():
        if r.get("speedup") is None or r.get("cosine_min") is None:
            speed = f"{r['speedup']:.2f}x" if r.get("speedup") else "-"
            cos = f"{r['cosine_mean']:.4f} (task probes)" if r.get("cosine_mean") else "-"
            why = "; ".join(r.get("reasons", []))[:160]
            lines.append(f"| {name} | {r['outcome']} | {speed} | {cos} | - | - | {why or 'not judged'} |")
            continue
        lines.append(
            f"| {name} | {r['outcome']} | {r['speedup']:.2f}x | {r['cosine_mean']:.4f} ({r['cosine_min']:.4f}) | "
            f"{r['nn_agreement']:.2f} | {r['size_ratio']:.3f} | {'yes' if meets(r) else 'no'} |"
        )
    lines += ["", f"The whole run: {out['seconds']} s."]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--write-results", action="store_true")
    ap.add_argument("--skip-playbook", action="store_true", help="the baselines only")
    ap.add_argument("--only", choices=("minilm", "smollm2"), help="one model's part (and its RESULTS.md section)")
    ap.add_argument("--summarise", metavar="RUN.json", help="write a saved run's figures, run nothing")
    args = ap.parse_args()
    if args.summarise:
        out = json.loads(Path(args.summarise).read_text())
    else:
        t0 = time.time()
        out: dict = {}
        with progress() as prog:
            if args.only != "smollm2":
                baselines: dict[str, dict] = {}
                bar = prog.add_task("quant", total=len(BASELINES) + 2)
                for name, recipe in BASELINES.items():
                    prog.update(bar, description=f"baseline {name}")
                    baselines[name] = verify(recipe)
                    prog.advance(bar)
                prog.update(bar, description="INC autotune")
                baselines["inc_autotune"] = inc_autotune()
                prog.advance(bar)
                prog.update(bar, description="playbook (assay run examples/quant/minilm.toml)")
                pb = {"outcome": "skipped"} if args.skip_playbook else playbook()
                prog.advance(bar)
                out["minilm"] = {"playbook": pb, "baselines": baselines, "goal": GOAL}
                err.print(f"playbook: {pb.get('outcome')} {pb.get('speedup')}x cosine {pb.get('cosine_mean')}")
            if args.only != "minilm":
                out["smollm2"] = smollm2_part(prog)
        out.update(
            machine=machine(),
            date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            seconds=round(time.time() - t0, 1),
        )
    if args.write_results:
        if "minilm" in out:
            write_section(markdown(out), heading="## Quant")
        if "smollm2" in out:
            write_section(smollm2_markdown(out), heading="## Quant, generate (SmolLM2)")
    print(json.dumps(out, indent=1, default=str))


if __name__ == "__main__":
    main()
