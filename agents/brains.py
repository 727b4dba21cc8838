"""Brains: what decides the agent's next tool call. All drive the same pydantic-ai loop
through the same MCP tools, so policies, redaction and verifiers see no difference.

- `playbook`: the job kind's deterministic expert policy, as a FunctionModel (no model).
- `local`: SmolLM2-135M-Instruct in-process on the CPU (agents/local.py).
- a pydantic-ai model string (`openai-chat:...`, `anthropic:...`, `ollama:...`), or an
  OpenAI-compatible endpoint: `URL` or `MODEL@URL`, key from ASSAY_API_KEY / OPENAI_API_KEY.

Every brain is wrapped so that what assay sends to a model is redacted first (invariant 2),
and, with padding on, padded to a size bucket (invariant 5).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    RetryPromptPart,
    SystemPromptPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import Model
from pydantic_ai.models.wrapper import WrapperModel

from assay.agents.kinds import AgentKind
from assay.errors import UserError
from assay.policies.redaction import Redactor

API_KEY_ENVS = ("ASSAY_API_KEY", "OPENAI_API_KEY")


class RedactingModel(WrapperModel):
    """Redacts every outgoing message part before the wrapped model sees it."""

    def __init__(self, wrapped: Model, redactor: Redactor):
        super().__init__(wrapped)
        self.redactor = redactor

    def _clean(self, messages: list[ModelMessage]) -> list[ModelMessage]:
        out: list[ModelMessage] = []
        for m in messages:
            if isinstance(m, ModelRequest):
                parts = []
                for p in m.parts:
                    if isinstance(p, (UserPromptPart, SystemPromptPart)) and isinstance(p.content, str):
                        p = _replace(p, content=self.redactor.redact(p.content))
                    elif isinstance(p, ToolReturnPart):
                        p = _replace(p, content=self.redactor.redact_json(p.content))
                    elif isinstance(p, RetryPromptPart) and isinstance(p.content, str):
                        p = _replace(p, content=self.redactor.redact(p.content))
                    parts.append(p)
                m = _replace(m, parts=parts)
            out.append(m)
        return out

    async def request(self, messages, model_settings, model_request_parameters):
        return await self.wrapped.request(self._clean(messages), model_settings, model_request_parameters)

    @property
    def model_name(self) -> str:
        return self.wrapped.model_name

    @property
    def system(self) -> str:
        return self.wrapped.system


def _replace(obj: Any, **changes: Any) -> Any:
    import dataclasses

    return dataclasses.replace(obj, **changes)


@dataclass(frozen=True)
class BrainChoice:
    name: str
    kind: str  # playbook | local | provider | endpoint


def parse_brain(brain: str) -> BrainChoice:
    if brain in ("playbook", "local"):
        return BrainChoice(brain, brain)
    if brain.startswith(("http://", "https://")) or ("@http" in brain):
        return BrainChoice(brain, "endpoint")
    if ":" in brain:
        return BrainChoice(brain, "provider")
    raise UserError(
        f"unknown brain {brain!r}",
        "use playbook, local, a pydantic-ai model string like openai-chat:gpt-4o, or MODEL@URL",
    )


def api_key_from_env() -> str | None:
    for name in API_KEY_ENVS:
        if os.environ.get(name):
            return os.environ[name]
    return None


def make_model(brain: str, *, kind: AgentKind, redactor: Redactor, http_client: Any = None) -> Model:
    """The brain's pydantic-ai model, wrapped in redaction; `playbook` is the kind's own."""
    choice = parse_brain(brain)
    if choice.kind == "playbook":
        from pydantic_ai.models.function import FunctionModel

        model: Model = FunctionModel(kind.playbook, model_name=f"playbook:{kind.name}")
    elif choice.kind == "local":
        from assay.agents.local import LocalModel

        model = LocalModel()
    elif choice.kind == "endpoint":
        from pydantic_ai.models.openai import OpenAIChatModel
        from pydantic_ai.providers.openai import OpenAIProvider

        name, _, url = brain.rpartition("@") if "@http" in brain else ("default", "", brain)
        key = api_key_from_env()
        if key:
            redactor.add_secret(key, "api-key")
        from pydantic_ai.profiles import merge_profile
        from pydantic_ai.profiles.openai import OpenAIModelProfile

        provider = OpenAIProvider(base_url=url, api_key=key or "unused", http_client=http_client)
        # OpenAI-compatible servers (llama.cpp, Ollama, older vLLM) know `max_tokens`, not
        # OpenAI's newer `max_completion_tokens`, and silently ignore the latter: the run's
        # token cap would not reach them and a rambling model would fill its context window.
        profile = merge_profile(
            provider.model_profile(name or "default"),
            OpenAIModelProfile(openai_chat_supports_max_completion_tokens=False),
        )
        model = OpenAIChatModel(name or "default", provider=provider, profile=profile)
    else:
        from pydantic_ai.models import infer_model

        for env in API_KEY_ENVS + (
            "ANTHROPIC_API_KEY",
            "GOOGLE_API_KEY",
            "GEMINI_API_KEY",
            "GROQ_API_KEY",
            "MISTRAL_API_KEY",
        ):
            if os.environ.get(env):
                redactor.add_secret(os.environ[env], "api-key")
        try:
            model = infer_model(brain)
        except Exception as exc:
            raise UserError(
                f"brain {brain!r} cannot be used: {exc}", "check the model string and that its API key is set"
            ) from None
    return RedactingModel(model, redactor)
