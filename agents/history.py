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
