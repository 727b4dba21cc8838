"""What a kind's playbook brain reads of its conversation: the tool results so far, the calls it
made last, a human's note, its prompt. Shared by every kind's playbook (pydantic-ai messages in,
plain values out)."""

from __future__ import annotations

import re
from typing import Any

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)


def returns(messages: list[ModelMessage]) -> list[tuple[str, Any, bool]]:
    """(tool name, content, failed) for every tool result so far, oldest first."""
    out = []
    for m in messages:
        if isinstance(m, ModelRequest):
            for p in m.parts:
                if isinstance(p, ToolReturnPart):
                    out.append((p.tool_name, p.content, getattr(p, "outcome", "success") != "success"))
                elif isinstance(p, RetryPromptPart) and p.tool_name:
                    out.append((p.tool_name, p.content, True))
    return out


def last_calls(messages: list[ModelMessage]) -> list[ToolCallPart]:
    for m in reversed(messages):
        if isinstance(m, ModelResponse):
            return [p for p in m.parts if isinstance(p, ToolCallPart)]
    return []


def human_note(messages: list[ModelMessage]) -> str | None:
    last = messages[-1] if messages else None
    if isinstance(last, ModelRequest):
        for p in last.parts:
            if isinstance(p, UserPromptPart) and isinstance(p.content, str) and p.content.startswith("A human "):
                return p.content
    return None


def prompt_value(messages: list[ModelMessage], pattern: str) -> str | None:
    """The first group of `pattern` in the first user prompt that has it (e.g. r"backend=(\\w+)")."""
    for m in messages:
        if isinstance(m, ModelRequest):
            for p in m.parts:
                if isinstance(p, UserPromptPart) and isinstance(p.content, str):
                    found = re.search(pattern, p.content)
                    if found:
                        return found.group(1)
    return None


def text(content: Any) -> str:
    return content if isinstance(content, str) else str(content)


def find(results: list[tuple[str, Any, bool]], tool: str) -> Any:
    """The newest successful result of `tool`, or None."""
    for name, content, failed in reversed(results):
        if name == tool and not failed:
            return content
    return None


class Reply:
    """How a playbook answers at step n: a tool call (with an id that is the same whenever the
    same history is replayed), a final text, or the answer to a human's note."""

    def __init__(self, messages: list[ModelMessage]) -> None:
        self.messages = messages
        self.n = sum(1 for m in messages if isinstance(m, ModelResponse)) + 1

    def call(self, tool: str, args: dict[str, Any]) -> ModelResponse:
        return ModelResponse(parts=[ToolCallPart(tool, args, tool_call_id=f"pb-{self.n}")])

    def done(self, message: str) -> ModelResponse:
        return ModelResponse(parts=[TextPart(message)])

    def to_human(self) -> ModelResponse | None:
        """A human's note on the last call: "approved" repeats it, anything else stops; None
        when there is no note."""
        note = human_note(self.messages)
        if note is None:
            return None
        previous = last_calls(self.messages)
        if "approved" in note.split(".")[0] and previous:
            return self.call(previous[0].tool_name, previous[0].args_as_dict())
        return self.done(f"stopping: {note}")
