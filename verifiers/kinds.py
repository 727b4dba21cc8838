"""The verifier's own registry of job kinds: which checks a kind's submissions get.

Kept here, not taken from the agents' registry: the verifier decides for itself how a kind is
judged. Each row names the kind's VerifierKind by import path, imported only when a run of that
kind is verified; kinds from outside assay come from the operator's ASSAY_KINDS setting (their
`verifier` entry) or from `register` (tests).

    a kind's verifier package:  verifiers/<kind>/kind.py  ->  KIND: VerifierKind
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from assay.errors import UserError
from assay.verifiers.criteria import CriteriaBase
from assay.verifiers.outcome import Outcome

# kind -> "module:attribute" of its VerifierKind.
SHIPPED: dict[str, str] = {
    "kernel": "assay.verifiers.kernel.kind:KIND",
    "quant": "assay.verifiers.quant.kind:KIND",
    "compile": "assay.verifiers.compile.kind:KIND",
}

Progress = Callable[[str, float], None]


class VerifyRequest(BaseModel):
    """One verification's inputs, from a run's spec and submission or from `assay <kind> verify`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: str
    task_path: Path
    # The submitted entry file (in the submission's read-only snapshot); None: no submission.
    entry: Path | None
    criteria: str
    options: dict[str, Any] = Field(default_factory=dict)
    sandbox_backend: str = "auto"


@runtime_checkable
class VerifierKind(Protocol):
    """A kind's verifier: its criteria model and its checks."""

    name: str
    # The file a submission of this kind is entered by (kernel: candidate.py).
    entry: str
    # Validates a `<kind>-*` criteria profile's tables.
    criteria_model: type[CriteriaBase]
    # The verifier's options model for the kind's [<kind>] table (validated again here: the
    # verifier does not take the agent side's word for them).
    options_model: type[BaseModel]
    # Where profiles of a kind from outside assay live (None: the shipped folder).
    criteria_dir: Traversable | None

    def verify(self, request: VerifyRequest, criteria: CriteriaBase, progress: Progress | None) -> Outcome: ...

    def warm(self, request: VerifyRequest, criteria: CriteriaBase) -> None:
        """Build the caches a verification of the task will need, before any submission (may do
        nothing)."""
        ...


_registered: dict[str, VerifierKind] = {}
_loaded: dict[str, VerifierKind] = {}


def register(kind: VerifierKind) -> None:
    """A kind registered in this process (tests, embedders); shipped kinds are SHIPPED rows."""
    _registered[kind.name] = kind


def unregister(name: str) -> None:
    _registered.pop(name, None)
    _loaded.pop(name, None)


def _rows() -> dict[str, str]:
    from assay.settings import settings

    return {**SHIPPED, **{name: plugin.verifier for name, plugin in settings().kinds.items()}}


def names() -> list[str]:
    return sorted({*_rows(), *_registered})


def verifier_kind(name: str) -> VerifierKind:
    if name in _registered:
        return _registered[name]
    if name in _loaded:
        return _loaded[name]
    target = _rows().get(name)
    if target is None:
        raise UserError(f"no verifier for job kind {name!r}", f"use one of: {', '.join(names())}")
    kind = _load(target, name)
    _loaded[name] = kind
    return kind


def _load(target: str, name: str) -> VerifierKind:
    module, _, attr = target.partition(":")
    try:
        found = getattr(importlib.import_module(module), attr or "KIND")
    except (ImportError, AttributeError) as exc:
        raise UserError(
            f"the verifier of kind {name!r} ({target}) cannot be imported: {exc}",
            "check the kind's installation (or ASSAY_KINDS)",
        ) from None
    if not isinstance(found, VerifierKind) or found.name != name:
        raise UserError(f"{target} is not the VerifierKind of {name!r}", "point the kind's row at its KIND object")
    return found


def extra_criteria_dirs() -> list[Traversable]:
    """Criteria folders of kinds from outside assay (registered or ASSAY_KINDS)."""
    dirs: list[Traversable] = []
    for name in names():
        if name in SHIPPED:
            continue
        try:
            kind = verifier_kind(name)
        except UserError:
            continue
        if kind.criteria_dir is not None:
            dirs.append(kind.criteria_dir)
    return dirs


def load_criteria_for(kind: VerifierKind, name: str) -> CriteriaBase:
    from assay.verifiers.criteria import load_profile

    return load_profile(name, kind.criteria_model, kind=kind.name)
