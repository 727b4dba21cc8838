"""Trace padding (invariant 5): what an outside observer sees stops depending on private data.

Sizes are padded up to a bucket and release times to a fixed per-tool ceiling (or the next
multiple of a quantum), so a passing and a failing test, or a short and a long secret file,
look the same on the wire. Padding lives outside content: the model never reads it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, Field, field_validator

PAD_KEY = "assay/padding"


# A ceiling or quantum is a wait the gateway will honour: an infinite or NaN one would hold
# every result forever (or, NaN, silently not at all).
MAX_WAIT_S = 3600.0


class PaddingPolicy(BaseModel):
    enabled: bool = False
    size_bucket: int = Field(
        default=4096, ge=256, le=1 << 24, description="pad every message up to a multiple of this many bytes"
    )
    time_quantum_s: float = Field(
        default=0.25,
        gt=0,
        le=MAX_WAIT_S,
        allow_inf_nan=False,
        description="release results at the next multiple of this",
    )
    # A fixed release time per tool; calls finishing later are released at the next quantum
    # after the ceiling and counted as ceiling overruns (a leak an operator should see).
    ceilings_s: dict[str, float] = Field(default_factory=dict)
    default_ceiling_s: float | None = Field(default=None, ge=0, le=MAX_WAIT_S, allow_inf_nan=False)

    @field_validator("ceilings_s")
    @classmethod
    def _finite_ceilings(cls, value: dict[str, float]) -> dict[str, float]:
        for tool, seconds in value.items():
            if not math.isfinite(seconds) or not 0 <= seconds <= MAX_WAIT_S:
                raise ValueError(f"ceiling for {tool!r} must be between 0 and {MAX_WAIT_S:g} seconds, got {seconds!r}")
        return value

    def padded_size(self, n: int) -> int:
        return max(1, math.ceil(n / self.size_bucket)) * self.size_bucket

    def ceiling_for(self, tool: str) -> float | None:
        return self.ceilings_s.get(tool, self.default_ceiling_s)

    def release_after(self, tool: str, elapsed_s: float) -> tuple[float, bool]:
        """Seconds since the call started at which its result may leave; and whether it overran."""
        ceiling = self.ceiling_for(tool)
        if ceiling is not None and elapsed_s <= ceiling:
            return ceiling, False
        start = ceiling or 0.0
        q = self.time_quantum_s
        return start + math.ceil(max(elapsed_s - start, 1e-9) / q) * q, ceiling is not None


def pad_to_bucket(size_of: Callable[[], int], set_padding: Callable[[str], None], policy: PaddingPolicy) -> int:
    """Grow a message's padding field until its serialized size is exactly a bucket multiple.

    `size_of()` measures the message as it will be written; `set_padding(s)` stores filler.
    The field is created empty first, so its framing is counted in the base size; the filler
    is ASCII spaces, which no JSON encoder escapes, so each space adds exactly one byte.
    """
    set_padding("")
    base = size_of()
    target = policy.padded_size(base)
    set_padding(" " * (target - base))
    return size_of()


def dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()
