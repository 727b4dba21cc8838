"""The compile kind's playbook brain: measure the symptom, rewrite the model's source by family
(rewrite.py), check the rewrite as the verifier will, write the diagnosis and submit. A
deterministic expert policy as a pydantic-ai FunctionModel function: it goes through the same
MCP tools, gateway and verifier as any other brain.

    compile_diagnose -> read_file task.py -> write_file fixed.py -> compile_check
                     -> write_file diagnosis.md -> submit

It stops without submitting when the symptom does not reproduce (nothing to fix), when no
rewrite applies, or when its check shows the rewrite still breaks, recompiles or diverges:
saying which, with the figures.
"""

from __future__ import annotations

from typing import Any

from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models.function import AgentInfo

from assay.agents.compile.rewrite import rewrite
from assay.agents.history import Reply, find, last_calls, returns, text

FIXED, DIAGNOSIS = "fixed.py", "diagnosis.md"
MAX_RECOMPILES = 1  # compile-default's: the automatic-dynamic one


def problems(f: dict[str, Any]) -> list[str]:
    """What the figures of one model show wrong, in the verifier's terms."""
    out = []
    if f.get("breaks"):
        first = (f.get("break_reasons") or [{}])[0]
        out.append(f"{f['breaks']} graph break(s): {first.get('reason', '')} at {first.get('where', '?')}")
    if f.get("graphs") == 0:
        out.append("no graph captured")
    if f.get("fullgraph") is False:
        out.append(f"fullgraph fails: {f.get('fullgraph_error', '')[:200]}")
    if (f.get("recompiles") or 0) > MAX_RECOMPILES:
        guards = ", ".join(f.get("recompile_guards") or [])[:200]
        out.append(f"{f['recompiles']} recompiles (guards: {guards})")
    if f.get("crash"):
        out.append(f"crashes in {f['crash']['stage']}: {f['crash']['message'][:200]}")
    div = f.get("divergence")
    if div and not div.get("ok"):
        out.append(f"compiled output differs from eager (max error {div.get('err')})")
    if f.get("opaque"):
        out.append(f"opaque calls: {', '.join(f['opaque'])}")
    if "coverage" in f and f["coverage"] < 0.95:
        out.append(f"coverage {f['coverage']}")
    bad = [p for p in f.get("parity") or [] if not p.get("ok")]
    if bad:
        out.append(f"{len(bad)} parity case(s) differ from Model eager ({bad[0].get('why') or bad[0].get('err')})")
    return out


def playbook(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    reply = Reply(messages)
    call, done = reply.call, reply.done
    answer = reply.to_human()
    if answer is not None:
        return answer

    results = returns(messages)
    if not results:
        return call("compile_diagnose", {})
    tool, content, failed = results[-1]
    if failed:
        return done(f"no fix: {tool} failed: {text(content)[:300]}")
    if tool == "compile_diagnose":
        if not problems(content["figures"]):
            return done(
                f"nothing to fix: on torch {content.get('torch')} Model compiles whole, without recompiles, and matches eager"
            )
        return call("read_file", {"path": "task.py"})
    symptom = find(results, "compile_diagnose")["figures"]
    if tool == "read_file":
        source, notes = rewrite(content["content"])
        if not notes:
            return done(
                "no fix: no rewrite in the playbook applies to this model; the symptom: " + "; ".join(problems(symptom))
            )
        header = "# ModelNew: task.py's Model rewritten by assay's compile playbook (see diagnosis.md)\n"
        return call("write_file", {"path": FIXED, "content": header + source})
    if tool == "write_file":
        previous = last_calls(messages)
        if previous and previous[0].args_as_dict().get("path") == DIAGNOSIS:
            return call("submit", {"entry": FIXED})
        return call("compile_check", {"path": FIXED})
    if tool == "compile_check":
        left = problems(content["figures"]) + [f"refused: {t}" for t in content.get("tamper", [])]
        if left:
            return done("no fix: the rewrite still shows: " + "; ".join(left))
        return call("write_file", {"path": DIAGNOSIS, "content": _diagnosis(messages, symptom, content["figures"])})
    if tool == "submit":
        return done(f"submitted {FIXED}; the verifier decides")
    return done(f"no fix: unexpected tool result from {tool}")


def _diagnosis(messages: list[ModelMessage], before: dict[str, Any], after: dict[str, Any]) -> str:
    source = ""
    for tool, content, _ in returns(messages):
        if tool == "read_file":
            source = content["content"]
    _, notes = rewrite(source)
    lines = ["# Diagnosis", "", "## Symptom", ""] + [f"- {p}" for p in problems(before)]
    lines += ["", "## Root cause and fix", ""] + [f"- {n}" for n in notes]
    rows = [
        ("graph breaks", before.get("breaks"), after.get("breaks")),
        ("graphs", before.get("graphs"), after.get("graphs")),
        ("fullgraph", before.get("fullgraph"), after.get("fullgraph")),
        ("recompiles over the sequence", before.get("recompiles"), after.get("recompiles")),
        ("coverage", before.get("coverage"), after.get("coverage")),
    ]
    lines += ["", "## Measured (the tools' seeds)", "", "| figure | Model | ModelNew |", "| --- | --- | --- |"]
    lines += [f"| {name} | {b} | {a} |" for name, b, a in rows]
    return "\n".join(lines) + "\n"
