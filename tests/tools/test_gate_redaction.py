"""Redaction on its own: a stand-in tool returns secrets every way a tool can; none gets out.

The redactor is the run's real one (policies/redaction.py), with canaries registered the way
the session registers environment secrets; the tool in front of it is an async function.
"""

from __future__ import annotations

import json

import anyio
import pytest

from assay.policies.redaction import Redactor
from assay.tools.gate_redaction import Redaction
from assay.tools.seam import ToolCall, ToolOutcome

pytestmark = pytest.mark.anyio

PLAIN = "CANARYplain7Hq2Lw9Xz4Kp"
# Characters JSON escapes: a quote, a backslash, a non-ASCII letter, a tab.
ESCAPED = 'CANARY"esc\\aped-cänary\t42'


def redactor() -> Redactor:
    r = Redactor()
    r.add_environment({"AWS_SECRET_ACCESS_KEY": PLAIN, "DB_PASSWORD": ESCAPED})
    return r


def gate_returning(outcome_or_exc, r: Redactor | None = None):
    r = r or redactor()

    async def tool(call: ToolCall) -> ToolOutcome:
        if isinstance(outcome_or_exc, BaseException):
            raise outcome_or_exc
        return outcome_or_exc

    return Redaction(tool, r.redact, r.redact_json), r


def no_secret_in(text: str) -> None:
    for s in (PLAIN, ESCAPED, json.dumps(ESCAPED)[1:-1], json.dumps(ESCAPED, ensure_ascii=False)[1:-1]):
        assert s not in text
    assert "cänary" not in text and "c\\u00e4nary" not in text


def call() -> ToolCall:
    return ToolCall(name="read_file", arguments={"path": "x"}, key="k")


async def test_text_structured_and_errors_are_redacted():
    data = {"content": f"key={PLAIN}\n", "nested": [{"k": PLAIN}], PLAIN: 1}
    gate, _ = gate_returning(ToolOutcome(text=json.dumps(data, indent=1), structured=data))
    out = await gate(call())
    no_secret_in(out.text)
    no_secret_in(json.dumps(out.structured))
    assert "[[SECRET:env-AWS_SECRET_ACCESS_KEY:" in out.structured["content"]


async def test_a_secret_json_escapes_would_hide_is_still_found_in_the_text():
    # The registry serializes structured output as the text content; json.dumps escapes the
    # quote, the backslash and the non-ASCII letter, and the escaped form must not slip out.
    data = {"content": f"password: {ESCAPED}\n", "size": 3}
    gate, _ = gate_returning(ToolOutcome(text=json.dumps(data, indent=1), structured=data))
    out = await gate(call())
    no_secret_in(out.text)
    no_secret_in(json.dumps(json.loads(out.text), ensure_ascii=False))
    # ... and the model reads the same thing in both: the text is the structured result.
    assert json.loads(out.text) == out.structured


async def test_json_text_without_structured_output_is_decoded_too():
    gate, _ = gate_returning(ToolOutcome(text=json.dumps({"v": ESCAPED}), is_error=True))
    out = await gate(call())
    no_secret_in(json.dumps(json.loads(out.text), ensure_ascii=False))


async def test_same_value_same_placeholder_in_text_and_structured():
    data = {"a": PLAIN, "b": f"x {PLAIN} y"}
    gate, _ = gate_returning(ToolOutcome(text=json.dumps(data, indent=1), structured=data))
    out = await gate(call())
    decoded = json.loads(out.text)
    assert decoded == out.structured
    assert decoded["a"] in decoded["b"]


async def test_a_split_secret_gets_one_placeholder_everywhere():
    wrapped = PLAIN[:9] + "\n" + PLAIN[9:]
    data = {"content": f"token {wrapped} end"}
    gate, _ = gate_returning(ToolOutcome(text=json.dumps(data, indent=1), structured=data))
    out = await gate(call())
    assert PLAIN[:9] not in out.text and PLAIN[9:] not in out.text
    assert json.loads(out.text) == out.structured


async def test_an_exception_in_the_tool_becomes_a_redacted_tool_error():
    gate, _ = gate_returning(RuntimeError(f"could not connect with {PLAIN}"))
    out = await gate(call())
    assert out.is_error and "RuntimeError" in out.text
    no_secret_in(out.text)


async def test_error_text_is_redacted():
    gate, _ = gate_returning(ToolOutcome(text=f"read_file failed: {ESCAPED!r}? no, {PLAIN}", is_error=True))
    out = await gate(call())
    assert PLAIN not in out.text


async def test_clean_output_passes_unchanged():
    data = {"path": "a.txt", "content": "hello, world\n", "size": 13, "truncated": False}
    text = json.dumps(data, indent=1)
    gate, _ = gate_returning(ToolOutcome(text=text, structured=dict(data)))
    out = await gate(call())
    assert out.text == text and out.structured == data


async def test_non_json_text_that_looks_like_json_is_left_alone():
    text = "{ not json " + PLAIN
    gate, _ = gate_returning(ToolOutcome(text=text))
    out = await gate(call())
    assert out.text.startswith("{ not json [[SECRET:")


async def test_deeply_nested_json_text_does_not_break_the_wrapper():
    text = "[" * 5000 + json.dumps(PLAIN) + "]" * 5000
    gate, _ = gate_returning(ToolOutcome(text=text))
    out = await gate(call())
    assert PLAIN not in out.text


async def test_cancellation_is_not_swallowed():
    gate, _ = gate_returning(anyio.get_cancelled_exc_class()())
    with pytest.raises(anyio.get_cancelled_exc_class()):
        await gate(call())


async def test_redaction_runs_on_what_the_tool_returned_not_on_the_arguments():
    # Arguments are the client's; the audit redacts those for the ledger. The wrapper must not
    # rewrite the call a tool runs with.
    seen = []

    async def tool(c):
        seen.append(dict(c.arguments))
        return ToolOutcome(text="ok")

    r = redactor()
    c = ToolCall(name="write_file", arguments={"content": PLAIN}, key="k")
    await Redaction(tool, r.redact, r.redact_json)(c)
    assert seen == [{"content": PLAIN}]
