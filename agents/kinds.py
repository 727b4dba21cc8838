"""Job kinds on the agent side: each kind is a slice through the layers (agents/<kind>/,
tools/<kind>.py, verifiers/<kind>/, its manifest, criteria, examples and CLI verify), and this
is its one row here. The shared path (job files, runner, workflow) reaches a kind only through
the AgentKind protocol below and knows none by name.

    a kind's agent package:  agents/<kind>/kind.py  ->  KIND: AgentKind

Rows are import paths, imported when a job of that kind is loaded; kinds from outside assay
come from the operator's ASSAY_KINDS setting (their `agent` entry) or from `register` (tests).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from pydantic import BaseModel

from assay.errors import UserError

if TYPE_CHECKING:
    from pydantic_ai.messages import ModelMessage, ModelResponse
    from pydantic_ai.models.function import AgentInfo

    from assay.agents.job import Job

# kind -> "module:attribute" of its AgentKind.
SHIPPED: dict[str, str] = {
    "kernel": "assay.agents.kernel.kind:KIND",
    "quant": "assay.agents.quant.kind:KIND",
    "compile": "assay.agents.compile.kind:KIND",
}


@runtime_checkable
class AgentKind(Protocol):
    """What the shared path needs of a kind to run its jobs."""

    name: str
    # Validates the job's [<kind>] table; a job's `options` is an instance of it.
    options_model: type[BaseModel]
    # A job that names no manifest or criteria gets these (never another kind's).
    default_manifest: str
    default_criteria: str

    def stage(self, job: Job, workspace: Path) -> None:
        """Put what the agent works on into its fresh workspace (copies of the job's trusted
        files; the verifier reads the originals)."""
        ...

    def prompt(self, job: Job) -> str: ...

    def instructions(self, job: Job) -> str: ...

    def playbook(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        """The kind's deterministic expert brain, as a pydantic-ai FunctionModel function."""
        ...


_registered: dict[str, AgentKind] = {}
_loaded: dict[str, AgentKind] = {}


def register(kind: AgentKind) -> None:
    """A kind registered in this process (tests, embedders); shipped kinds are SHIPPED rows."""
    _registered[kind.name] = kind


def unregister(name: str) -> None:
    _registered.pop(name, None)
    _loaded.pop(name, None)


def _rows() -> dict[str, str]:
    from assay.settings import settings

    return {**SHIPPED, **{name: plugin.agent for name, plugin in settings().kinds.items()}}


def names() -> list[str]:
    return sorted({*_rows(), *_registered})


def agent_kind(name: str) -> AgentKind:
    """The kind named `name`; a UserError lists the kinds there are."""
    if name in _registered:
        return _registered[name]
    if name in _loaded:
        return _loaded[name]
    target = _rows().get(name)
    if target is None:
        raise UserError(f"unknown job kind {name!r}", f"use one of: {', '.join(names())}")
    module, _, attr = target.partition(":")
    try:
        found = getattr(importlib.import_module(module), attr or "KIND")
    except (ImportError, AttributeError) as exc:
        raise UserError(
            f"job kind {name!r} ({target}) cannot be imported: {exc}", "check the kind's installation (or ASSAY_KINDS)"
        ) from None
    if not isinstance(found, AgentKind) or found.name != name:
        raise UserError(f"{target} is not the AgentKind of {name!r}", "point the kind's row at its KIND object")
    _loaded[name] = found
    return found
