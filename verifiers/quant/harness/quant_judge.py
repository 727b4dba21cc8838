"""The quant kind's judge script, inside a fresh verification sandbox (torch, torchao and the
standard library; never assay). It reads a plan on stdin, builds the task's model twice with
the verifier's held-out seed, applies the recipe's rules to one copy itself, and measures both
side by side in this one process: serialized bytes, drift on the task's probes and the
verifier's held-out probes, and latency, interleaved round by round. It prints one result line;
the verifier's process judges the figures (verifiers/quant/judge.py).

No submitted code reaches this process: the submission is a recipe the verifier validated, and
arrives here as plain JSON rules.
"""

from __future__ import annotations

import copy
import fnmatch
import io
import logging
import math
import os
import sys
import time
import traceback
import warnings
from typing import Any

sys.path.insert(
    0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "common", "harness")
)
# -I leaves the script's own folder off sys.path; the generate half lives beside it
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import quant_generate as gen  # noqa: E402
from assay_harness import emit, load_entry, read_plan  # noqa: E402
from assay_timing import flushed_rounds  # noqa: E402

SQNR_CAP = 200.0
# An argmax that flips where fp32's logits for the two classes lie within this many of the row's
# standard deviations is a tie, not a change of answer (random-init heads are full of them);
# quant-default sends its own figure, the agent's tools use this one.
LOGIT_TIE = 0.02


def fail(stage: str, message: str) -> None:
    emit({"ok": False, "stage": stage, "error": message[-4000:]})
    raise SystemExit(0)


# --------------------------------------------------------------------------- the recipe


def decide(names: list[str], rules: list[dict]) -> tuple[dict[str, int], list[dict]]:
    """module name -> index of the first rule whose glob matches it; and per rule what it
    matched and decided."""
    decided: dict[str, int] = {}
    per_rule = [{"matched": [], "decided": []} for _ in rules]
    for name in names:
        for i, rule in enumerate(rules):
            if fnmatch.fnmatchcase(name, rule["match"]):
                per_rule[i]["matched"].append(name)
                if name not in decided:
                    decided[name] = i
                    per_rule[i]["decided"].append(name)
    return decided, per_rule


def torchao_config(rule: dict):
    import torch
    from torchao.quantization import (
        Float8WeightOnlyConfig,
        Int8DynamicActivationInt8WeightConfig,
        Int8WeightOnlyConfig,
        IntxWeightOnlyConfig,
    )
    from torchao.quantization.granularity import PerAxis, PerGroup

    name = rule["config"]
    if name == "int8_weight_only":
        return Int8WeightOnlyConfig()
    if name == "int8_dynamic":
        return Int8DynamicActivationInt8WeightConfig()
    if name == "float8_weight_only":
        return Float8WeightOnlyConfig()
    if name == "intx_weight_only":
        dtype = getattr(torch, f"int{rule['bits']}")
        granularity = PerAxis(0) if rule["group_size"] == 0 else PerGroup(rule["group_size"])
        return IntxWeightOnlyConfig(weight_dtype=dtype, granularity=granularity)
    if name == "int4_weight_only":
        from torchao.prototype.quantization.int4.inference_workflow import PrototypeInt4WeightOnlyConfig

        return PrototypeInt4WeightOnlyConfig(group_size=rule["group_size"])
    raise ValueError(f"config {name!r} is not in the harness's vocabulary")


def apply_recipe(model, rules: list[dict], decided: dict[str, int]) -> dict[int, str]:
    """Apply each rule to the modules it decided; rule index -> the error a config raised (the
    other rules are applied all the same, so the verdict names every rule that failed)."""
    import torch
    from torchao.quantization import quantize_

    groups: dict[int, set[str]] = {}
    for name, i in decided.items():
        groups.setdefault(i, set()).add(name)
    errors: dict[int, str] = {}
    eager: dict[int, set[str]] = {}
    for i, names in sorted(groups.items()):
        rule = rules[i]
        if rule["config"] == "none":
            continue
        if rule["config"] == "eager_dynamic_int8":
            eager[i] = names
            continue
        try:
            quantize_(model, torchao_config(rule), filter_fn=lambda _m, fqn, names=names: fqn in names)
        except Exception as exc:
            errors[i] = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ''}"
    if eager:
        # after torchao's: the eager quantizer swaps modules, and swapped ones are no longer nn.Linear
        from torch.ao.quantization.qconfig import default_dynamic_qconfig, per_channel_dynamic_qconfig

        spec = {
            n: per_channel_dynamic_qconfig if rules[i].get("per_channel") else default_dynamic_qconfig
            for i, names in eager.items()
            for n in names
        }
        try:
            torch.ao.quantization.quantize_dynamic(model, spec, dtype=torch.qint8, inplace=True)
        except Exception as exc:
            for i in eager:
                errors[i] = f"{type(exc).__name__}: {str(exc).strip()[:300]}"
    return errors


def quantized(module, before: type, nn) -> bool:
    """Did a config change this module: its class (the eager quantizer swaps it) or its weight's
    tensor type (torchao's subclasses)? A module of its old class with a plain weight was left
    alone (a Linear subclass such as attention's out_proj is not a quantized module)."""
    if type(module) is not before:
        return True
    return type(module.weight) not in (nn.Parameter, nn.Parameter.__base__)


def serialized_bytes(model, torch) -> int:
    # torch.save of the state_dict: counts the inner tensors of torchao's subclasses and the
    # eager quantizer's _packed_params, which named_parameters() does not show
    buf = io.BytesIO()
    torch.save(model.state_dict(), buf)
    return len(buf.getvalue())


# --------------------------------------------------------------------------- probes and drift


def as_args(x) -> tuple:
    return tuple(x) if isinstance(x, (list, tuple)) else (x,)


def synthetic_probes(probes: list[tuple], count: int, seed: int, torch) -> list[tuple]:
    """Held-out probes like the task's: float tensors drawn with each probe position's mean and
    spread, integer tensors (token ids) uniform over the values the probes hold."""
    gen = torch.Generator().manual_seed(seed)
    out = []
    for k in range(count):
        like = probes[k % len(probes)]
        args = []
        for j, t in enumerate(like):
            if not isinstance(t, torch.Tensor):
                args.append(t)
                continue
            pool = [p[j] for p in probes if isinstance(p[j], torch.Tensor)]
            if t.dtype.is_floating_point:
                vals = torch.cat([p.flatten().double() for p in pool])
                mean, std = float(vals.mean()), float(vals.std()) if vals.numel() > 1 else 1.0
                args.append((torch.randn(t.shape, generator=gen, dtype=torch.float64) * std + mean).to(t.dtype))
            elif t.dtype == torch.bool:
                args.append(t.clone())  # masks: the probe's own
            else:
                lo = min(int(p.min()) for p in pool)
                hi = max(int(p.max()) for p in pool)
                args.append(torch.randint(lo, hi + 1, t.shape, generator=gen, dtype=t.dtype))
        out.append(tuple(args))
    return out


def run_all(model, probes: list[tuple], torch):
    with torch.inference_mode():
        return [gen.first_tensor(model(*p), torch).detach().float() for p in probes]


def drift(ref: list, got: list, output: str, torch, tie: float = LOGIT_TIE) -> dict:
    import torch.nn.functional as F

    r = torch.cat([t.reshape(-1, t.shape[-1]) if t.dim() > 1 else t.reshape(1, -1) for t in ref]).double()
    g = torch.cat([t.reshape(-1, t.shape[-1]) if t.dim() > 1 else t.reshape(1, -1) for t in got]).double()
    err = (g - r).pow(2).sum()
    finite = bool(torch.isfinite(g).all())
    out = {
        "rows": int(r.shape[0]),
        "finite": finite,
        # capped, so JSON carries a number: an output the module does not reach reads 200 dB
        "sqnr_db": min(SQNR_CAP, float(10 * torch.log10(r.pow(2).sum() / err))) if err > 0 else SQNR_CAP,
        "max_abs_err": float((g - r).abs().max()) if finite else math.inf,
    }
    if output == "logits":
        ra, ga = r.argmax(-1), g.argmax(-1)
        margin = (r.gather(1, ra[:, None]) - r.gather(1, ga[:, None])).squeeze(1)
        same = ra == ga
        tied = ~same & (margin <= tie * r.std(-1))
        out["top1_agreement"] = float((same | tied).double().mean())
        out["top1_exact"] = float(same.double().mean())
        out["top1_ties"] = int(tied.sum())
        kl = F.kl_div(F.log_softmax(g, -1), F.log_softmax(r, -1), log_target=True, reduction="none").sum(-1)
        out["kl_mean"] = float(kl.mean()) if finite else math.inf
        out["kl_max"] = float(kl.max()) if finite else math.inf
    else:
        cos = F.cosine_similarity(r, g, dim=-1)
        out["cosine_mean"] = float(cos.mean()) if finite else -1.0
        out["cosine_min"] = float(cos.min()) if finite else -1.0
        if r.shape[0] >= 3:

            def neighbours(e):
                e = F.normalize(e, dim=-1)
                sim = e @ e.T
                sim.fill_diagonal_(-math.inf)
                return sim.argmax(-1)

            out["nn_agreement"] = float((neighbours(r) == neighbours(g)).double().mean()) if finite else 0.0
    return out


# --------------------------------------------------------------------------- timing


def timed_rounds(subjects: dict, inputs: tuple, plan: dict, torch) -> list[dict]:
    """The subjects called on the timing inputs, in flushed interleaved rounds (assay_timing)."""
    calls = {name: (lambda m: lambda: m(*inputs))(model) for name, model in subjects.items()}
    return flushed_rounds(calls, plan, torch, torch.inference_mode)


def machine(torch) -> dict:
    info = {
        "cpu": "unknown",
        "isa": [],
        "capability": torch.backends.cpu.get_cpu_capability(),
        "threads": torch.get_num_threads(),
    }
    try:
        with open("/proc/cpuinfo") as f:
            text = f.read()
    except OSError:
        return info
    for line in text.splitlines():
        if line.startswith("model name") and info["cpu"] == "unknown":
            info["cpu"] = line.split(":", 1)[1].strip()
        if line.startswith("flags"):
            flags = set(line.split(":", 1)[1].split())
            wanted = ("avx2", "fma", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_int8", "amx_bf16")
            info["isa"] = [f for f in wanted if f in flags]
            break
    return info


# --------------------------------------------------------------------------- main


def load(plan: dict, torch, nn) -> Any:
    """The task's fp32 model (built after seeding with the plan's seed), its probes, held-out
    probes and timing inputs, and the model's outputs on both probe sets (for generate: the
    tokenizer; its references are made by the mode that needs them, generation is slow)."""
    try:
        task = load_entry(plan["task"], "assay_quant_task")
    except BaseException:
        fail("task", "the task failed to load: " + traceback.format_exc(limit=3))
    output = str(plan.get("output") or getattr(task, "OUTPUT", ""))
    if output not in ("logits", "embeddings", "generate"):
        fail("task", f"OUTPUT is {output!r}: the quant kind measures 'logits', 'embeddings' or 'generate'")
    if output == "generate" and not callable(getattr(task, "get_tokenizer", None)):
        fail("task", "OUTPUT = 'generate' needs get_tokenizer() (encode, decode, eos_token_id)")
    try:
        torch.manual_seed(plan["seed"])
        fp32 = task.get_model()
        if not isinstance(fp32, nn.Module):
            fail("task", f"get_model() returned {type(fp32).__name__}, not a torch.nn.Module")
        fp32 = fp32.eval()
        probes = task.get_probes()
        if not probes:
            fail("task", "get_probes() returned no probes")
        inputs = as_args(task.get_inputs())
        if output == "generate":
            tokenizer = task.get_tokenizer()
            new = plan.get("new_tokens") or {"text": 32, "json": 64, "tool_call": 64}
            probe_args = gen.probes_of(task, tokenizer, list(probes), new)
            held_args = gen.probes_of(task, tokenizer, plan.get("heldout_prompts", []), new)
            with torch.inference_mode():
                gen.first_tensor(fp32(torch.tensor([probe_args[0]["ids"]])), torch)  # fails here, in eager
            return fp32, (probe_args, held_args), inputs, None, output, tokenizer
        if all(isinstance(p, str) for p in probes):
            if not hasattr(task, "get_tokenizer"):
                fail("task", "get_probes() returned texts but the task has no get_tokenizer()")
            tokenizer = task.get_tokenizer()
            probe_args = [as_args(tokenizer([p])) for p in probes]
            held_args = [as_args(tokenizer([t])) for t in plan.get("heldout_texts", [])]
        else:
            probe_args = [as_args(p) for p in probes]
            count = plan.get("heldout_count", 0)
            held_args = synthetic_probes(probe_args, count, plan["heldout_seed"], torch) if count else []
        refs = (run_all(fp32, probe_args, torch), run_all(fp32, held_args, torch))
    except SystemExit:
        raise
    except BaseException:
        fail("eager", "the task's fp32 model failed: " + traceback.format_exc(limit=4))
    return fp32, (probe_args, held_args), inputs, refs, output, None


def generated(fp32, probes, tokenizer, torch) -> tuple[list, list]:
    """fp32's greedy continuations of both probe sets (a generate task's references)."""
    try:
        return gen.references(fp32, probes[0], tokenizer, torch), gen.references(fp32, probes[1], tokenizer, torch)
    except BaseException:
        fail("eager", "the task's fp32 model failed to generate: " + traceback.format_exc(limit=4))
        raise


def linear_names(model, nn) -> list[str]:
    return [n for n, m in model.named_modules() if isinstance(m, nn.Linear)]


def quantize(fp32, rules: list[dict], torch, nn):
    """A quantized copy of fp32 under `rules`, and what each rule matched, decided and did."""
    names = linear_names(fp32, nn)
    decided, per_rule = decide(names, rules)
    qmodel = copy.deepcopy(fp32)
    before = {n: type(fp32.get_submodule(n)) for n in names}
    errors = apply_recipe(qmodel, rules, decided)
    for i, rule in enumerate(rules):
        left = [
            n
            for n in per_rule[i]["decided"]
            if rule["config"] != "none" and not quantized(qmodel.get_submodule(n), before[n], nn)
        ]
        per_rule[i]["left_fp32"] = left
        per_rule[i]["error"] = errors.get(i)
        per_rule[i]["shapes"] = {n: list(torch.as_tensor(fp32.get_submodule(n).weight).shape) for n in left[:8]}
    done = [n for n in names if quantized(qmodel.get_submodule(n), before[n], nn)]
    return qmodel, per_rule, done


KERNEL_CONFIGS = (
    {"config": "int8_weight_only"},
    {"config": "int8_dynamic"},
    {"config": "intx_weight_only", "bits": 4, "group_size": 32},
    {"config": "int4_weight_only", "group_size": 32},
    {"config": "float8_weight_only"},
    {"config": "eager_dynamic_int8", "per_channel": True},
)


def kernel_table(fp32, torch, nn) -> list[dict]:
    """Which configs have fast kernels here: the model's most common Linear shape quantized
    alone with each config, timed against itself in fp32 at one row (decode) and 32 (prefill).
    Advice for the agent's search, never a verdict (the verifier times the whole model)."""
    import statistics
    from collections import Counter

    shapes = Counter((m.in_features, m.out_features) for _, m in fp32.named_modules() if isinstance(m, nn.Linear))
    if not shapes:
        return []
    (k, n), _ = shapes.most_common(1)[0]
    base = nn.Sequential(nn.Linear(k, n)).eval()

    def per_call(model, x) -> float:
        with torch.inference_mode():
            model(x)
            times = []
            for _ in range(7):  # advice, not a verdict: a rough median is enough, and cheap
                t = time.perf_counter()
                model(x)
                times.append(time.perf_counter() - t)
        return statistics.median(times)

    rows = []
    for config in KERNEL_CONFIGS:
        rules = [{**config, "match": "0"}]
        row: dict = {"config": config, "shape": [k, n]}
        try:
            q, per_rule, done = quantize(base, rules, torch, nn)
            if not done:
                row["error"] = per_rule[0].get("error") or "left fp32 (the config does not take this shape)"
            else:
                for rows_in in (1, 32):
                    x = torch.randn(rows_in, k)
                    row[f"speed_vs_fp32_{rows_in}"] = round(per_call(base, x) / per_call(q, x), 3)
        except Exception as exc:
            row["error"] = f"{type(exc).__name__}: {str(exc).strip()[:200]}"
        rows.append(row)
    return rows


def modules_mode(plan: dict, fp32, output: str, torch, nn) -> dict:
    """The quantizable modules, with shapes and parameter bytes, and the machine."""
    rows = []
    for name in linear_names(fp32, nn):
        m = fp32.get_submodule(name)
        w = torch.as_tensor(m.weight)
        rows.append(
            {
                "name": name,
                "class": type(m).__name__,
                "in_features": int(w.shape[1]),
                "out_features": int(w.shape[0]),
                "param_bytes": sum(p.numel() * p.element_size() for p in m.parameters(recurse=False)),
            }
        )
    total = sum(p.numel() * p.element_size() for p in fp32.parameters())
    return {
        "ok": True,
        "output": output,
        "modules": rows,
        "param_bytes": total,
        "bytes_fp32": serialized_bytes(fp32, torch),
        "kernels": kernel_table(fp32, torch, nn),
    }


def sensitivity_mode(plan: dict, fp32, probe_args, refs, output: str, torch, nn) -> dict:
    """Each module (or the plan's named groups) quantized alone with each config: the drift on
    the task's probes and the bytes it saves."""
    base = serialized_bytes(fp32, torch)
    groups = plan.get("groups") or {n: [n] for n in linear_names(fp32, nn)}
    rows = []
    for config in plan["configs"]:
        for group, members in groups.items():
            rules = [{**config, "match": m} for m in members]
            qmodel, per_rule, done = quantize(fp32, rules, torch, nn)
            row = {"group": group, "config": config, "quantized": len(done), "of": len(members)}
            errors = [r["error"] for r in per_rule if r.get("error")]
            if errors or not done:
                row["error"] = errors[0] if errors else "left fp32 (the config does not take this shape)"
            else:
                row["drift"] = drift(refs, run_all(qmodel, probe_args, torch), output, torch)
                row["bytes_saved"] = base - serialized_bytes(qmodel, torch)
            rows.append(row)
    return {"ok": True, "output": output, "bytes_fp32": base, "rows": rows}


def measure_mode(plan: dict, fp32, probes, inputs, refs, output: str, tokenizer, torch, nn) -> dict:
    """The recipe applied, and everything the verdict is judged on."""
    t0 = time.perf_counter()
    qmodel, per_rule, done = quantize(fp32, plan["rules"], torch, nn)
    apply_s = time.perf_counter() - t0
    try:
        tie = float(plan.get("tie_margin", LOGIT_TIE))
        if output == "generate":
            refs = generated(fp32, probes, tokenizer, torch)
            figures = [gen.compare(qmodel, p, r, tokenizer, tie, torch) for p, r in zip(probes, refs, strict=True)]
        else:
            got = (run_all(qmodel, probes[0], torch), run_all(qmodel, probes[1], torch))
            figures = [drift(refs[0], got[0], output, torch, tie), drift(refs[1], got[1], output, torch, tie)]
    except SystemExit:
        raise
    except BaseException:
        fail("quantized", "the quantized model failed on the probes: " + traceback.format_exc(limit=4))
    result = {
        "ok": True,
        "output": output,
        "linear_modules": len(linear_names(fp32, nn)),
        "quantized_modules": done,
        "rules": [
            {
                "matched": len(r["matched"]),
                "decided": len(r["decided"]),
                "left_fp32": r["left_fp32"],
                "shapes": r["shapes"],
                "error": r["error"],
            }
            for r in per_rule
        ],
        "bytes_fp32": serialized_bytes(fp32, torch),
        "bytes_quant": serialized_bytes(qmodel, torch),
        "probes": figures[0],
        "heldout": figures[1] if probes[1] else None,
        "apply_s": apply_s,
        "machine": machine(torch),
        "torch": torch.__version__,
    }
    try:
        import torchao

        result["torchao"] = torchao.__version__
    except ImportError:
        result["torchao"] = None
    if plan["rounds"]:
        try:
            result["timing"] = timed_rounds({"fp32": fp32, "quant": qmodel}, inputs, plan, torch)
        except BaseException:
            fail("timing", "timing failed: " + traceback.format_exc(limit=4))
    return result


def main() -> None:
    plan = read_plan()
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    import torch
    import torch.nn as nn

    torch.set_num_threads(plan["threads"])
    mode = plan.get("mode", "measure")
    # OUTPUT as the verifier read it from the task's source (a tool's plan leaves it to the task)
    fp32, probes, inputs, refs, output, tokenizer = load(plan, torch, nn)
    if mode == "modules":
        result = modules_mode(plan, fp32, output, torch, nn)
        result["machine"] = machine(torch)
    elif mode == "sensitivity":
        if output == "generate":
            # ranked by the next-token logits along fp32's own continuations: one pass a probe
            conts = generated(fp32, (probes[0], []), tokenizer, torch)[0]
            seqs = [(torch.tensor([p["ids"] + r["cont"]]),) for p, r in zip(probes[0], conts, strict=True)]
            result = sensitivity_mode(plan, fp32, seqs, run_all(fp32, seqs, torch), "logits", torch, nn)
            result["output"] = output
        else:
            result = sensitivity_mode(plan, fp32, probes[0], refs[0], output, torch, nn)
    else:
        result = measure_mode(plan, fp32, probes, inputs, refs, output, tokenizer, torch, nn)
    emit(result)


if __name__ == "__main__":
    main()
