"""The quant playbook's decisions from scripted tool results (no sandbox): the frontier it
builds from a sensitivity table, the first recipe that keeps behaviour chosen, the latency path
held to its speed, the recipes it writes readable by the verifier's own recipe format."""

from __future__ import annotations

from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo

from assay.agents.quant.playbook import TARGET_LOGITS, _frontier, playbook
from assay.recipe import parse_recipe

INFO = AgentInfo(
    function_tools=[],
    allow_text_output=True,
    output_tools=[],
    model_settings=None,
    model_request_parameters=None,
    instructions=None,
)  # type: ignore[call-arg]
MODULES = ["embed", "blocks.0.0", "blocks.0.2", "head"]


def drift(sqnr, top1=1.0, kl=1e-5):
    return {"rows": 64, "finite": True, "sqnr_db": sqnr, "max_abs_err": 0.1, "top1_agreement": top1, "kl_mean": kl}


def sensitivity(int4=None):
    int4 = int4 or {"embed": 30.0, "blocks.0.0": 25.0, "blocks.0.2": 20.0, "head": 10.0}
    rows = []
    for m in MODULES:
        rows.append(
            {
                "group": m,
                "config": {"config": "int4_weight_only", "group_size": 32},
                "quantized": 1,
                "of": 1,
                "drift": drift(int4[m]),
                "bytes_saved": 100,
            }
        )
        rows.append(
            {
                "group": m,
                "config": {"config": "int8_weight_only"},
                "quantized": 1,
                "of": 1,
                "drift": drift(45.0),
                "bytes_saved": 75,
            }
        )
    return {"output": "logits", "bytes_fp32": 1000, "rows": rows}


def tried(ratio, top1=1.0, speed=None):
    return {
        "quantized_modules": 4,
        "linear_modules": 4,
        "rules": [],
        "size_ratio": ratio,
        "probes": drift(30.0, top1),
        "heldout": drift(30.0, top1),
        "speedup_vs_fp32": speed,
    }


class Conversation:
    """Plays the tools' side: each call the playbook makes is answered with the next result."""

    def __init__(self, prompt="Find a quantization recipe for the model in task.py. objective=size."):
        self.messages = [ModelRequest(parts=[UserPromptPart(prompt)])]

    def step(self, answer=None):
        if answer is not None:
            call = self.last()
            self.messages.append(
                ModelRequest(parts=[ToolReturnPart(call.tool_name, answer, tool_call_id=call.tool_call_id)])
            )
        response = playbook(self.messages, INFO)
        self.messages.append(response)
        return response

    def last(self) -> ToolCallPart:
        resp = self.messages[-1]
        assert isinstance(resp, ModelResponse)
        part = resp.parts[0]
        assert isinstance(part, ToolCallPart), part
        return part


def modules_result():
    return {
        "output": "logits",
        "modules": [{"name": m} for m in MODULES],
        "param_bytes": 1000,
        "bytes_fp32": 1000,
        "machine": {},
        "configs": [],
    }


def test_the_frontier_runs_from_the_most_aggressive_recipe_down_by_sensitivity():
    frontier = _frontier([("quant_sensitivity", sensitivity(), False)], "size")
    int4 = [sorted(m for m, c in r.items() if c["config"] == "int4_weight_only") for r in frontier]
    assert int4[0] == sorted(MODULES)
    assert int4[1] == ["blocks.0.0", "blocks.0.2", "embed"]  # head, the most sensitive, back to int8 first
    assert int4[-1] == []  # and last, everything int8
    assert all(len(r) == 4 for r in frontier)


def test_the_first_recipe_that_keeps_behaviour_is_written_and_submitted():
    c = Conversation()
    assert c.step().parts[0].tool_name == "quant_modules"
    assert c.step(modules_result()).parts[0].tool_name == "quant_sensitivity"
    write = c.step(sensitivity())
    assert write.parts[0].tool_name == "write_file"
    first = write.parts[0].args_as_dict()["content"]
    assert "to try" in first and parse_recipe(first.encode()).plan()[0]["config"] == "int4_weight_only"
    assert c.step({"path": "recipe.toml", "bytes_written": 1, "sha256": "x"}).parts[0].tool_name == "quant_try"
    # the all-int4 recipe drifts too far: the next step of the frontier is written and tried
    again = c.step(tried(0.2, top1=TARGET_LOGITS["top1_agreement"] - 0.1))
    assert again.parts[0].tool_name == "write_file" and "to try" in again.parts[0].args_as_dict()["content"]
    assert c.step({"path": "recipe.toml", "bytes_written": 1, "sha256": "x"}).parts[0].tool_name == "quant_try"
    chosen = c.step(tried(0.25))
    content = chosen.parts[0].args_as_dict()["content"]
    assert "the recipe chosen" in content
    rules = parse_recipe(content.encode()).plan()
    assert {r["match"]: r["config"] for r in rules}["head"] == "int8_weight_only"
    assert c.step({"path": "recipe.toml", "bytes_written": 1, "sha256": "x"}).parts[0].tool_name == "submit"
    final = c.step({"submission": "s"})
    text = final.parts[0]
    assert (
        isinstance(text, TextPart)
        and "| 2: int4_weight_only/g32 x3, int8_weight_only x1 | 4/4 | 0.250 |" in text.content
    )


def test_latency_needs_its_speed_and_no_recipe_is_an_honest_end():
    c = Conversation("Find a quantization recipe for the model in task.py. objective=latency.")
    c.step()
    assert c.step(modules_result()).parts[0].args_as_dict()["configs"] == [{"config": "eager_dynamic_int8"}]
    rows = [
        {
            "group": m,
            "config": {"config": "eager_dynamic_int8"},
            "quantized": 1,
            "of": 1,
            "drift": drift(35.0 - i),
            "bytes_saved": 75,
        }
        for i, m in enumerate(MODULES)
    ]
    c.step({"output": "logits", "bytes_fp32": 1000, "rows": rows})
    for _ in range(4):  # every step of the frontier keeps behaviour but none is fast enough
        assert (
            c.step({"path": "recipe.toml", "bytes_written": 1, "sha256": "x"}).parts[0].args_as_dict()["time"] is True
        )
        last = c.step(tried(0.3, speed=1.02))
    assert isinstance(last.parts[0], TextPart) and last.parts[0].content.startswith(
        "no recipe: no recipe on the frontier"
    )


def test_a_failed_tool_ends_the_run_with_its_reason():
    c = Conversation()
    c.step()
    c.messages.append(
        ModelRequest(parts=[ToolReturnPart("quant_modules", "boom", tool_call_id="pb-1", outcome="failed")])
    )  # type: ignore[call-arg]
    out = playbook(c.messages, INFO)
    assert isinstance(out.parts[0], TextPart) and "quant_modules failed" in out.parts[0].content
