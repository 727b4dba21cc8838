"""The quant playbook's decisions from scripted tool results (no sandbox): the ranking it
builds from a sensitivity table, the bisection for the largest recipe that keeps behaviour, the
latency choice timed once and held to its speed, and recipes the verifier's own format reads."""

from __future__ import annotations

from pydantic_ai.messages import ModelRequest, TextPart, ToolCallPart, ToolReturnPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo

from assay.agents.quant.playbook import TARGET_LOGITS, _space, playbook
from assay.recipe import parse_recipe

INFO = AgentInfo(
    function_tools=[],
    allow_text_output=True,
    output_tools=[],
    model_settings=None,
    model_request_parameters=None,
    instructions=None,
)
MODULES = [f"m{i}" for i in range(8)]
WRITTEN = {"path": "recipe.toml", "bytes_written": 1, "sha256": "x"}


def drift(sqnr, top1=1.0, kl=1e-5):
    return {"rows": 64, "finite": True, "sqnr_db": sqnr, "max_abs_err": 0.1, "top1_agreement": top1, "kl_mean": kl}


def sensitivity(aggressive, fallback=None):
    rows = []
    for i, m in enumerate(MODULES):
        rows.append(
            {
                "group": m,
                "config": aggressive,
                "quantized": 1,
                "of": 1,
                "drift": drift(40.0 - 3 * i),
                "bytes_saved": 100,
            }
        )
        if fallback:
            rows.append(
                {"group": m, "config": fallback, "quantized": 1, "of": 1, "drift": drift(45.0), "bytes_saved": 75}
            )
    return {"output": "logits", "bytes_fp32": 1000, "rows": rows}


def tried(k, *, good_up_to, speed=None):
    """What quant_try reports for recipe k on a model whose behaviour holds up to k = good_up_to."""
    top1 = 1.0 if k <= good_up_to else TARGET_LOGITS["top1_agreement"] - 0.1
    return {
        "quantized_modules": max(k, 1),
        "linear_modules": 8,
        "rules": [],
        "size_ratio": 0.5 - 0.02 * k,
        "probes": drift(30.0, top1),
        "heldout": drift(30.0, top1),
        "speedup_vs_fp32": speed,
    }


class Conversation:
    """Plays the tools' side: each call the playbook makes is answered by `answer(call)`."""

    def __init__(self, objective="size"):
        self.messages = [ModelRequest(parts=[UserPromptPart(f"Find a quantization recipe. objective={objective}.")])]

    def run(self, answer, limit=40) -> tuple[list[ToolCallPart], str]:
        calls = []
        response = playbook(self.messages, INFO)
        for _ in range(limit):
            self.messages.append(response)
            part = response.parts[0]
            if isinstance(part, TextPart):
                return calls, part.content
            assert isinstance(part, ToolCallPart)
            calls.append(part)
            self.messages.append(
                ModelRequest(
                    parts=[ToolReturnPart(part.tool_name, answer(part, calls), tool_call_id=part.tool_call_id)]
                )
            )
            response = playbook(self.messages, INFO)
        raise AssertionError("the playbook did not finish")


def k_of(content: str) -> int:
    """How many modules a written recipe gives the aggressive config ('*' is all of them)."""
    aggressive = ("int4_weight_only", "eager_dynamic_int8")
    rules = [r for r in parse_recipe(content.encode()).plan() if r["config"] in aggressive]
    return len(MODULES) if any(r["match"] == "*" for r in rules) else len(rules)


def tools(good_up_to, sens, speed=None):
    state = {"k": None}

    def answer(call, calls):
        if call.tool_name == "quant_modules":
            return {
                "output": "logits",
                "modules": [{"name": m} for m in MODULES],
                "param_bytes": 1,
                "bytes_fp32": 1,
                "machine": {},
                "configs": [],
            }
        if call.tool_name == "quant_sensitivity":
            return sens
        if call.tool_name == "write_file":
            state["k"] = k_of(call.args_as_dict()["content"])
            return WRITTEN
        if call.tool_name == "quant_try":
            return tried(state["k"], good_up_to=good_up_to, speed=speed if call.args_as_dict()["time"] else None)
        return {"submission": "s"}

    return answer


def test_the_ranking_puts_the_safest_modules_first_and_keeps_the_fallback_for_the_rest():
    space = _space(
        [
            (
                "quant_sensitivity",
                sensitivity({"config": "int4_weight_only", "group_size": 32}, {"config": "int8_weight_only"}),
                False,
            )
        ],
        "size",
    )
    assert space.ranked == tuple(MODULES) and space.kmin == 0
    r = space.recipe(3)
    assert [m for m, c in r.items() if c["config"] == "int4_weight_only"] == ["m0", "m1", "m2"] and len(r) == 8


def test_the_bisection_finds_the_largest_recipe_that_keeps_behaviour_and_submits_it():
    sens = sensitivity({"config": "int4_weight_only", "group_size": 32}, {"config": "int8_weight_only"})
    calls, final = Conversation().run(tools(good_up_to=5, sens=sens))
    ks = [k_of(c.args_as_dict()["content"]) for c in calls if c.tool_name == "write_file"]
    assert ks[0] == 8 and ks[-1] == 5  # the most aggressive first; the chosen one last
    assert len(ks) <= 6  # about log2(9) tries, then the choice
    chosen = [c for c in calls if c.tool_name == "write_file"][-1].args_as_dict()["content"]
    assert "the recipe chosen" in chosen and "| 5 | 5/8 |" in chosen  # the frontier, in its comments
    assert [c.tool_name for c in calls][-1] == "submit" and not any(
        c.args_as_dict().get("time") for c in calls if c.tool_name == "quant_try"
    )
    assert final.startswith("submitted recipe.toml")


def test_size_falls_back_to_the_all_int8_recipe_when_no_int4_module_keeps_behaviour():
    sens = sensitivity({"config": "int4_weight_only", "group_size": 32}, {"config": "int8_weight_only"})
    calls, _ = Conversation().run(tools(good_up_to=0, sens=sens))
    chosen = [c for c in calls if c.tool_name == "write_file"][-1].args_as_dict()["content"]
    assert parse_recipe(chosen.encode()).plan() == [{"match": "*", "config": "int8_weight_only"}]


def test_latency_times_only_the_choice_and_holds_it_to_its_speed():
    sens = sensitivity({"config": "eager_dynamic_int8", "per_channel": True})
    calls, final = Conversation("latency").run(tools(good_up_to=6, sens=sens, speed=1.4))
    timed = [c for c in calls if c.tool_name == "quant_try" and c.args_as_dict()["time"]]
    assert len(timed) == 1 and calls[-1].tool_name == "submit"
    chosen = [c for c in calls if c.tool_name == "write_file"][-1].args_as_dict()["content"]
    rules = parse_recipe(chosen.encode()).plan()
    assert len(rules) == 6 and all(r["per_channel"] for r in rules)  # the two most sensitive stay fp32: no '*'
    _, final = Conversation("latency").run(tools(good_up_to=6, sens=sens, speed=1.02))
    assert final.startswith("no recipe: the best recipe that keeps behaviour runs 1.02x fp32")


def test_a_failed_tool_ends_the_run_with_its_reason():
    c = Conversation()
    first = playbook(c.messages, INFO)
    c.messages += [
        first,
        ModelRequest(parts=[ToolReturnPart("quant_modules", "boom", tool_call_id="pb-1", outcome="failed")]),
    ]
    out = playbook(c.messages, INFO)
    assert isinstance(out.parts[0], TextPart) and "quant_modules failed" in out.parts[0].content


def test_a_generate_recipe_must_keep_the_smooth_figure_clear_not_only_greedy_agreement():
    from assay.agents.quant.playbook import TARGET_GENERATE, _keeps

    figures = {
        "finite": True,
        "greedy_agreement": 1.0,
        "top1_agreement": 0.995,
        "sqnr_db": 45.0,
        "json_kept": 1.0,
        "tool_agreement": 1.0,
    }
    assert _keeps({"probes": figures, "heldout": None}, "generate")
    # all four prompts agreed greedily on the tools' weights, but the teacher-forced noise is high:
    # on other weights and prompts (the verifier's) that recipe diverged
    noisy = {**figures, "sqnr_db": TARGET_GENERATE["sqnr_db"] - 7}
    assert not _keeps({"probes": noisy, "heldout": None}, "generate")
    assert not _keeps({"probes": {**figures, "json_kept": 0.5}, "heldout": None}, "generate")
