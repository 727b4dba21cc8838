"""The toy kind's one tool: a hint (the solution's source). Importing this module registers it."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from assay.tools.registry import registry

SOLUTION = """class ModelNew:
    def __init__(self, power=2):
        self.power = power

    def __call__(self, xs):
        return [x ** self.power for x in xs]
"""


class NoArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Hint(BaseModel):
    source: str


@registry.tool(read_only=True, idempotent=True, kinds=("toy",))
def toy_hint(ctx, args: NoArgs) -> Hint:
    """A solution for the toy task."""
    return Hint(source=SOLUTION)
