"""OUTPUT = "generate": the comparison of greedy continuations, JSON validity and tool calls
(the judge script's generate half, loaded by path as the sandbox runs it), and `assay quant
verify` end to end on the smallest generate task (examples/quant/tiny_lm.py, random init)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
import torch
import torch.nn as nn
from typer.testing import CliRunner

from assay.cli.verify import kind_app

ROOT = Path(__file__).resolve().parents[2]
HARNESS = ROOT / "assay" / "verifiers" / "quant" / "harness"
TINY = ROOT / "examples" / "quant" / "tiny_lm.py"
runner = CliRunner()


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


gen = _load(HARNESS / "quant_generate.py", "quant_generate_under_test")
tiny = _load(TINY, "tiny_lm_under_test")
TOK = tiny.CharTokenizer()


class Scripted(nn.Module):
    """Answers every prompt of `prompt_len` tokens with `text` then end of text: a model whose
    continuation is known, so the comparison's figures are too."""

    def __init__(self, prompt_len: int, text: str, margin: float = 5.0):
        super().__init__()
        ids = TOK.encode(text) + [tiny.EOS]
        self.table = torch.zeros(prompt_len + len(ids) + 64, tiny.VOCAB)
        for i, t in enumerate(ids):
            self.table[prompt_len - 1 + i, t] = margin

    def forward(self, input_ids):
        return self.table[: input_ids.shape[1]].unsqueeze(0)


def _probes(*specs):
    return gen.probes_of(None, TOK, list(specs), {"text": 32, "json": 48, "tool_call": 48})


def test_json_and_tool_calls_are_found_in_prose_and_fences():
    assert gen.first_json('Sure:\n```json\n{"a": [1, 2]}\n```') == {"a": [1, 2]}
    assert gen.first_json('{"a": 1') is None and gen.first_json("no json here") is None
    assert gen.tool_call('{"tool": "get_weather", "arguments": {"city": "Oslo"}}') == (
        "get_weather",
        json.dumps({"city": "Oslo"}),
    )
    assert gen.tool_call('{"tool": "search", "arguments": {...}}') == ("search", None)
    assert gen.tool_call("I cannot call tools.") is None


def test_a_bad_probe_names_itself():
    with pytest.raises(ValueError, match="probe 0: expect is 'yaml'"):
        _probes({"prompt": "x", "expect": "yaml"})
    with pytest.raises(TypeError, match="probe 1"):
        _probes("ok", 3)


def test_identical_models_agree_on_everything():
    probes = _probes({"prompt": "Give JSON: ", "expect": "json"})
    fp32 = Scripted(len(probes[0]["ids"]), '{"city": "Rome"}')
    figures = gen.compare(fp32, probes, gen.references(fp32, probes, TOK, torch), TOK, 0.02, torch)
    assert figures["greedy_agreement"] == 1.0 and figures["greedy_exact"] == 1.0
    assert figures["json_valid_fp32"] == figures["json_valid_quant"] == 1 and figures["json_kept"] == 1.0


def test_broken_json_and_a_different_tool_are_counted():
    probes = _probes({"prompt": "Give JSON: ", "expect": "json"}, {"prompt": "Call: ", "expect": "tool_call"})
    n_json, n_tool = len(probes[0]["ids"]), len(probes[1]["ids"])
    refs = gen.references(Scripted(n_json, '{"city": "Rome"}'), probes[:1], TOK, torch)
    got = gen.compare(Scripted(n_json, '{"city": "Rome"'), probes[:1], refs, TOK, 0.02, torch)
    assert got["json_valid_fp32"] == 1 and got["json_valid_quant"] == 0 and got["json_kept"] == 0.0
    # the last character differs: 15 of 17 tokens (16 characters and end of text) agree
    assert got["greedy_agreement"] == pytest.approx(15 / 17)
    # tool-call probes open with '{"tool": "' themselves; the model writes the rest
    refs = gen.references(Scripted(n_tool, 'search", "arguments": {"q": "x"}}'), probes[1:], TOK, torch)
    got = gen.compare(Scripted(n_tool, 'open_url", "arguments": {"q": "x"}}'), probes[1:], refs, TOK, 0.02, torch)
    assert got["tool_calls_fp32"] == 1 and got["tool_agreement"] == 0.0


def test_a_divergence_where_fp32_was_indifferent_is_a_tie_not_a_failure():
    probes = _probes("Say: ")
    n = len(probes[0]["ids"])
    fp32 = Scripted(n, "abcdefgh")
    fp32.table[n - 1 + 3, TOK.encode("x")[0]] = 5.0 - 1e-4  # fp32 nearly as happy with 'x' as 'd'
    quant = Scripted(n, "abcxefgh")
    refs = gen.references(fp32, probes, TOK, torch)
    tied = gen.compare(quant, probes, refs, TOK, 0.02, torch)
    assert tied["greedy_ties"] == 1 and tied["greedy_agreement"] == 1.0
    strict = gen.compare(quant, probes, refs, TOK, 0.0, torch)
    assert strict["greedy_ties"] == 0 and strict["greedy_agreement"] == pytest.approx(3 / 9)


def _verify(tmp_path: Path, recipe: str, backend: str):
    path = tmp_path / "recipe.toml"
    path.write_text(recipe)
    result = runner.invoke(kind_app("quant"), ["verify", str(TINY), str(path), "--backend", backend, "--json"])
    return result, json.loads(result.stdout) if result.stdout.strip() else None


def test_an_honest_int8_recipe_keeps_the_generations_and_passes(backend, tmp_path):
    result, obj = _verify(tmp_path, '[[rule]]\nmatch = "*"\nconfig = "int8_weight_only"\n', backend)
    assert result.exit_code == 0, result.output
    checks = {c["name"]: c for c in obj["checks"]}
    assert "greedy agreement" in checks["quality_heldout"]["detail"]
    card = obj["metrics"]["readiness"]
    assert card["output"] == "generate" and card["quality_kept"]["greedy_agreement"] >= 0.9
    assert obj["metrics"]["heldout"]["probes"] == 6  # quant-default's held-out prompts reached the judge


def test_two_bit_weights_change_the_generations_and_fail_on_them(backend, tmp_path):
    result, obj = _verify(tmp_path, '[[rule]]\nmatch = "*"\nconfig = "intx_weight_only"\nbits = 2\n', backend)
    assert result.exit_code == 1, result.output
    assert obj["outcome"] == "fail"
    assert any(r.startswith("quality_heldout: greedy agreement") for r in obj["reasons"]), obj["reasons"]


def test_sensitivity_on_a_generate_task_ranks_modules_along_fp32s_own_continuations():
    """The agent's per-module table for a generate task: one teacher-forced pass per probe, the
    judge script run as the sandbox runs it (isolated interpreter, plan on stdin)."""
    import subprocess

    plan = {
        "mode": "sensitivity",
        "task": str(TINY),
        "seed": 1234,
        "heldout_seed": 5678,
        "threads": 1,
        "configs": [{"config": "intx_weight_only", "bits": 2, "group_size": 0}, {"config": "int8_weight_only"}],
    }
    run = subprocess.run(
        [sys.executable, "-I", "-B", str(HARNESS / "quant_judge.py")],
        input=json.dumps(plan) + "\n",
        capture_output=True,
        text=True,
        timeout=300,
    )
    line = [x for x in run.stdout.splitlines() if x.startswith("@@ASSAY ")][-1]
    result = json.loads(line[len("@@ASSAY ") :])
    assert result["ok"] and result["output"] == "generate", result
    rows = {(r["group"], r["config"]["config"]): r for r in result["rows"]}
    assert {g for g, _ in rows} == {"mix", "blocks.0.0", "blocks.0.2", "blocks.1.0", "blocks.1.2", "head"}
    for group in ("mix", "head"):
        # two bits drift further than eight, module by module
        assert (
            rows[(group, "intx_weight_only")]["drift"]["sqnr_db"]
            < rows[(group, "int8_weight_only")]["drift"]["sqnr_db"]
        )
        assert "top1_agreement" in rows[(group, "int8_weight_only")]["drift"]


def test_a_measurement_past_the_time_limit_is_inconclusive_not_a_verdict_or_bad_input(backend, tmp_path):
    """SmolLM2 under CPU int4 does not finish generating in quant-default's 300 s here: that says
    nothing about the recipe's quality, so the outcome is inconclusive and names the limit."""
    from assay.verifiers.quant.criteria import load_criteria
    from assay.verifiers.quant.kind import QuantVerifyOptions
    from assay.verifiers.quant.verify import verify_quant

    crit = load_criteria()
    short = crit.model_copy(update={"limits": crit.limits.model_copy(update={"timeout_s": 1.0})})
    recipe = tmp_path / "recipe.toml"
    recipe.write_text('[[rule]]\nmatch = "*"\nconfig = "int8_weight_only"\n')
    out = verify_quant(TINY, recipe, short, QuantVerifyOptions(objective="size"), backend=backend)
    assert out.outcome == "inconclusive" and out.reasons[0].startswith("measured: the measurement ran past")
