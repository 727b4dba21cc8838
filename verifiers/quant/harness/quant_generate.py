"""OUTPUT = "generate": what the quant judge measures on a causal language model (standalone,
like quant_judge.py beside it: torch and the standard library only, never assay).

Each probe is a prompt. The fp32 model continues it greedily; the quantized model continues it
greedily too, and both are compared three ways:

- greedy agreement: the share of fp32's continuation the quantized one reproduces before the
  first token that differs. Where fp32 itself was nearly indifferent at that token (its logit for
  its own choice within `tie_margin` standard deviations of its logits of the quantized model's
  choice, on the same prefix), the reference is not determined there, so the probe counts as
  agreeing and is marked a tie;
- teacher-forced drift: both models read the prompt plus fp32's continuation in one forward
  pass; top-1 agreement, KL and SQNR of the next-token logits at each continued position;
- structure: on prompts that expect JSON, whether each continuation holds a JSON value, and
  whether every probe fp32 answers with valid JSON stays valid; on tool-call prompts, whether
  the quantized model calls the same tool with the same arguments.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

EXPECTS = ("text", "json", "tool_call")
# A tool-call probe's answer starts with the call's opening, as an agentic application that
# constrains its small model's output does; the comparison reads opening + continuation.
TOOL_PREFIX = '{"tool": "'


def first_tensor(out, torch) -> Any:
    """What a model returned, as the tensor the quant judge reads: a tensor, `.logits`
    (transformers' ModelOutput) or a tuple's first item. quant_judge.py reads outputs with this
    one too."""
    if isinstance(out, torch.Tensor):
        return out
    if isinstance(getattr(out, "logits", None), torch.Tensor):
        return out.logits
    if isinstance(out, (list, tuple)) and out and isinstance(out[0], torch.Tensor):
        return out[0]
    raise TypeError(
        f"the model returned {type(out).__name__}; the quant verifier reads a tensor, `.logits`, "
        "or a tuple whose first item is a tensor"
    )


def render(task, tokenizer, text: str) -> str:
    """A user message as the model's prompt: the task's format_prompt(), else the tokenizer's
    chat template, else the text itself."""
    fmt = getattr(task, "format_prompt", None)
    if callable(fmt):
        return str(fmt(text))
    if getattr(tokenizer, "chat_template", None) and hasattr(tokenizer, "apply_chat_template"):
        return tokenizer.apply_chat_template(
            [{"role": "user", "content": text}], tokenize=False, add_generation_prompt=True
        )
    return text


def probes_of(task, tokenizer, raw: list, new_tokens: dict) -> list[dict]:
    """Probes as {"ids", "expect", "new", "prefix"}: a probe is a prompt string (expects text) or
    a dict with "prompt" and optional "expect" (text, json, tool_call), "max_new_tokens" and
    "prefix" (the answer's forced opening; tool_call's default is TOOL_PREFIX)."""
    out = []
    for i, p in enumerate(raw):
        spec: Any = {"prompt": p} if isinstance(p, str) else p
        if not isinstance(spec, dict) or not isinstance(spec.get("prompt"), str):
            raise TypeError(f"probe {i} is {type(p).__name__}: give a prompt string or a dict with 'prompt'")
        expect = spec.get("expect", "text")
        if expect not in EXPECTS:
            raise ValueError(f"probe {i}: expect is {expect!r}, not one of {', '.join(EXPECTS)}")
        new = int(spec.get("max_new_tokens", new_tokens[expect]))
        prefix = str(spec.get("prefix", TOOL_PREFIX if expect == "tool_call" else ""))
        ids = list(tokenizer.encode(render(task, tokenizer, spec["prompt"]) + prefix, add_special_tokens=False))
        if not ids:
            raise ValueError(f"probe {i}: the prompt encodes to no tokens")
        out.append({"ids": ids, "expect": expect, "new": max(1, min(new, 256)), "prefix": prefix})
    return out


def greedy(model, ids: list[int], new: int, eos: int | None, torch) -> list[int]:
    """fp32 and quantized alike: transformers' generate (with its KV cache) where the model has
    one, else argmax step by step over the whole sequence."""
    x = torch.tensor([ids])
    with torch.inference_mode():
        if callable(getattr(model, "generate", None)):
            out = model.generate(
                x,
                attention_mask=torch.ones_like(x),
                max_new_tokens=new,
                do_sample=False,
                num_beams=1,
                temperature=None,
                top_p=None,
                top_k=None,
                pad_token_id=eos if eos is not None else 0,
                eos_token_id=eos,
            )
            cont = [int(t) for t in out[0, len(ids) :]]
        else:
            cont = []
            for _ in range(new):
                nxt = int(first_tensor(model(x), torch)[0, -1].argmax())
                cont.append(nxt)
                if nxt == eos:
                    break
                x = torch.cat([x, torch.tensor([[nxt]])], 1)
    if eos is not None and eos in cont:
        cont = cont[: cont.index(eos) + 1]
    return cont


def forced(model, ids: list[int], cont: list[int], torch):
    """Next-token logits at each continued position, reading prompt + cont in one pass."""
    with torch.inference_mode():
        logits = first_tensor(model(torch.tensor([ids + cont])), torch)
    return logits[0, len(ids) - 1 : len(ids) + len(cont) - 1].double()


def first_json(text: str):
    """The first JSON object or array in a continuation (fences and prose around it allowed);
    None when there is none."""
    decoder = json.JSONDecoder()
    for i, ch in enumerate(text):
        if ch in "{[":
            try:
                return decoder.raw_decode(text[i:])[0]
            except ValueError:
                continue
    return None


def tool_call(text: str):
    """(tool name, arguments as canonical JSON) of a continuation that calls a tool; the
    arguments None when the call opens with a tool name but is not valid JSON; else None."""
    obj = first_json(text)
    if isinstance(obj, dict) and isinstance(obj.get("tool", obj.get("name")), str):
        args = obj.get("arguments", obj.get("parameters", obj.get("args", {})))
        return obj.get("tool", obj.get("name")), json.dumps(args, sort_keys=True)
    opening = re.match(r'\s*\{\s*"(?:tool|name)"\s*:\s*"([^"]+)"', text)
    return (opening.group(1), None) if opening else None


def references(model, probes: list[dict], tokenizer, torch) -> list[dict]:
    eos = getattr(tokenizer, "eos_token_id", None)
    refs = []
    for p in probes:
        cont = greedy(model, p["ids"], p["new"], eos, torch)
        text = p["prefix"] + tokenizer.decode(cont)
        refs.append({"cont": cont, "logits": forced(model, p["ids"], cont, torch), "text": text})
    return refs


def compare(model, probes: list[dict], refs: list[dict], tokenizer, tie_margin: float, torch) -> dict:
    """The quantized model against fp32's references, over all probes."""
    import torch.nn.functional as F

    eos = getattr(tokenizer, "eos_token_id", None)
    agree, ties, exact, rows, top1, kl_sum, kl_max, sig, err = [], 0, 0, 0, 0, 0.0, 0.0, 0.0, 0.0
    json_ref = json_got = json_kept = json_probes = 0
    calls = calls_same = 0
    finite = True
    for p, ref in zip(probes, refs, strict=True):
        cont = greedy(model, p["ids"], p["new"], eos, torch)
        want = ref["cont"]
        k = next((i for i, (a, b) in enumerate(zip(want, cont, strict=False)) if a != b), min(len(want), len(cont)))
        if cont[: len(want)] == want and len(cont) == len(want):
            exact += 1
            agree.append(1.0)
        elif k < len(want) and k < len(cont):
            row = ref["logits"][k]
            tie = float(row[want[k]] - row[cont[k]]) <= tie_margin * float(row.std())
            ties += tie
            agree.append(1.0 if tie else k / len(want))
        else:
            agree.append(k / len(want))
        got = forced(model, p["ids"], want, torch)
        finite = finite and bool(torch.isfinite(got).all())
        r = ref["logits"]
        rows += r.shape[0]
        top1 += int((r.argmax(-1) == got.argmax(-1)).sum())
        kl = F.kl_div(F.log_softmax(got, -1), F.log_softmax(r, -1), log_target=True, reduction="none").sum(-1)
        kl_sum += float(kl.sum())
        kl_max = max(kl_max, float(kl.max()))
        sig += float(r.pow(2).sum())
        err += float((got - r).pow(2).sum())
        text = p["prefix"] + tokenizer.decode(cont)
        if p["expect"] == "json":
            json_probes += 1
            ref_ok, got_ok = first_json(ref["text"]) is not None, first_json(text) is not None
            json_ref += ref_ok
            json_got += got_ok
            json_kept += ref_ok and got_ok
        elif p["expect"] == "tool_call":
            want_call = tool_call(ref["text"])
            if want_call is not None:
                calls += 1
                calls_same += tool_call(text) == want_call
    n = len(probes)
    return {
        "probes": n,
        "rows": rows,
        "finite": finite,
        "greedy_agreement": sum(agree) / n if n else 1.0,
        "greedy_exact": exact / n if n else 1.0,
        "greedy_ties": ties,
        "top1_agreement": top1 / rows if rows else 1.0,
        "kl_mean": kl_sum / rows if rows and finite else math.inf,
        "kl_max": kl_max if finite else math.inf,
        "sqnr_db": min(200.0, 10 * math.log10(sig / err)) if err > 0 and finite else (200.0 if finite else -200.0),
        "json_probes": json_probes,
        "json_valid_fp32": json_ref,
        "json_valid_quant": json_got,
        # every probe fp32 answers with valid JSON still does (1.0 when fp32 gave none)
        "json_kept": json_kept / json_ref if json_ref else 1.0,
        "tool_calls_fp32": calls,
        "tool_agreement": calls_same / calls if calls else 1.0,
    }
