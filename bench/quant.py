"""The quant kind against its baselines, in one run, as JSON (and a RESULTS.md section).

    python bench/quant.py [--write-results] [--summarise RUN.json] [--skip-playbook]

MiniLM-L6 (real weights, objective latency): the playbook through `assay run
examples/quant/minilm.toml` (its verdict's figures, on the verifier's held-out sentences), and
whole-model baselines judged by the same verifier in the same run: torchao int8 weight-only,
torchao int8 dynamic, the eager dynamic int8 quantizer (per tensor and per channel), and INC
3.x's autotune where it installs (it is reported as not run otherwise, with why). Every figure
is the verifier's: speedup timed side by side with the fp32 model in one sandbox, held-out
cosine and neighbour agreement, serialized bytes. SmolLM2 (OUTPUT "generate") is not verified
yet, and the JSON says so rather than leaving it out.
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


def verify(recipe_text: str) -> dict:
    from assay.verifiers.quant.criteria import load_criteria
    from assay.verifiers.quant.kind import QuantVerifyOptions
    from assay.verifiers.quant.verify import verify_quant

    with tempfile.TemporaryDirectory() as d:
        recipe = Path(d) / "recipe.toml"
        recipe.write_text(recipe_text)
        out = verify_quant(MINILM, recipe, load_criteria(), QuantVerifyOptions(objective="latency"))
    return figures(out.metrics, out.outcome, out.reasons)


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
    m = out["machine"]
    lines = [
        f"### MiniLM-L6, objective latency ({out['date']}, {m['cpu']}, {m['nproc']} CPUs, torch {m['torch']})",
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
    lines += ["", f"SmolLM2: {out['smollm2']['status']}.", f"The whole run: {out['seconds']} s."]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--write-results", action="store_true")
    ap.add_argument("--skip-playbook", action="store_true", help="the baselines only")
    ap.add_argument("--summarise", metavar="RUN.json", help="write a saved run's figures, run nothing")
    args = ap.parse_args()
    if args.summarise:
        out = json.loads(Path(args.summarise).read_text())
    else:
        t0 = time.time()
        baselines: dict[str, dict] = {}
        with progress() as prog:
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
        out = {
            "minilm": {"playbook": pb, "baselines": baselines, "goal": GOAL},
            "smollm2": {"status": "not verified yet: OUTPUT = 'generate' (greedy match, JSON validity) is not built"},
            "machine": machine(),
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "seconds": round(time.time() - t0, 1),
        }
        err.print(f"playbook: {pb.get('outcome')} {pb.get('speedup')}x cosine {pb.get('cosine_mean')}")
    if args.write_results:
        write_section(markdown(out), heading="## Quant")
    print(json.dumps(out, indent=1, default=str))


if __name__ == "__main__":
    main()
