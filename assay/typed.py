"""Narrowing decoded JSON for the type checker.

`isinstance(x, dict)` tells pyright that `x` is a dict but leaves its keys and values unknown,
and strict mode (on the shared path) rejects unknowns. Decoded JSON has string keys and values
of any shape, which is what these say.
"""

from __future__ import annotations

from typing import Any, cast


def as_dict(value: object) -> dict[str, Any] | None:
    """`value` if it is a dict (typed as JSON's object), else None."""
    return cast("dict[str, Any]", value) if isinstance(value, dict) else None


def as_list(value: object) -> list[Any] | None:
    """`value` if it is a list, else None."""
    return cast("list[Any]", value) if isinstance(value, list) else None
