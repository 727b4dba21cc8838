"""Criteria profiles: the thresholds a verifier holds a submission to, kept as data.

Profiles are TOML files shipped as package data in assay/verifiers/criteria/ (and, for a kind
registered from outside assay, in the criteria folder its verifier kind names), looked up by
name only: no path ever comes from a job file or a workspace, so no agent-writable path reaches
them. A profile names its `kind`; loading it for a run of another kind is refused. A profile
may `extends` another and override some of its tables; its hash covers the bytes of every file
it was built from, so the verdict names exactly what was applied. What tables a profile holds
is each kind's own model (CriteriaBase's subclasses, in verifiers/<kind>/criteria.py).
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from assay.errors import UserError
from assay.typed import as_dict

NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CriteriaBase(StrictModel):
    """What every profile holds besides its kind's tables."""

    name: str
    kind: str
    # SHA-256 over the bytes of this profile and every profile it extends (set by the loader).
    sha256: str = ""


class FlushedTiming(StrictModel):
    """Tables of kinds timed by the shared harness's interleaved, cache-flushed rounds
    (assay_timing.flushed_rounds), judged by verifiers/common/timing.py."""

    rounds: int = Field(ge=0)
    target_round_s: float = Field(gt=0)
    warmup_s: float = Field(ge=0, le=10)
    max_iters: int = Field(ge=2)
    flush_mb: int = Field(ge=1)
    # The trusted subjects' CPU over wall time per thread below this: the machine was too busy,
    # and a speed check that fails says inconclusive.
    min_cpu_share: float = Field(gt=0, le=1)


class JudgeLimits(StrictModel):
    """One judge script's sandbox: how long it may run, its memory and its processes."""

    timeout_s: float = Field(gt=0)
    memory_mb: int = Field(ge=512)
    pids: int = Field(ge=16)


C = TypeVar("C", bound=CriteriaBase)


def _shipped_dir() -> Traversable:
    return resources.files("assay.verifiers").joinpath("criteria")


def _dirs() -> list[Traversable]:
    from assay.verifiers.kinds import extra_criteria_dirs

    return [_shipped_dir(), *extra_criteria_dirs()]


def _entry(name: str) -> Traversable | None:
    for d in _dirs():
        entry = d.joinpath(f"{name}.toml")
        if entry.is_file():
            return entry
    return None


def available(kind: str | None = None) -> list[str]:
    """Profile names, of one kind or of all."""
    names = sorted({p.name[:-5] for d in _dirs() if d.is_dir() for p in d.iterdir() if p.name.endswith(".toml")})
    if kind is None:
        return names
    return [n for n in names if _kind_of(n) == kind]


def _kind_of(name: str) -> str | None:
    try:
        data, _ = _read(name, ())
    except UserError:
        return None
    kind = data.get("kind")
    return kind if isinstance(kind, str) else None


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        inner, table = as_dict(out.get(key)), as_dict(value)
        out[key] = _merge(inner, table) if inner is not None and table is not None else value
    return out


def _read(name: str, chain: tuple[str, ...]) -> tuple[dict[str, Any], list[bytes]]:
    if not NAME.match(name):
        raise UserError(
            f"criteria name {name!r} is not a profile name",
            "give a profile name: lower-case letters, digits, - and _ (e.g. <kind>-default)",
        )
    if name in chain:
        raise UserError(
            f"criteria profile {name} extends itself ({' -> '.join(chain + (name,))})",
            "fix the extends chain in the shipped profiles",
        )
    entry = _entry(name)
    if entry is None:
        raise UserError(f"unknown criteria profile {name!r}", f"use one of: {', '.join(available())}")
    raw = entry.read_bytes()
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise UserError(f"criteria profile {name} is not valid TOML ({exc})", "repair the shipped profile") from None
    parent = data.pop("extends", None)
    if parent is None:
        return data, [raw]
    base, raws = _read(str(parent), chain + (name,))
    return _merge(base, data), raws + [raw]


def load_profile(name: str, model: type[C], *, kind: str) -> C:
    """The named profile validated by `model`, with its hash. A UserError names a bad or unknown
    profile, and one whose `kind` is not `kind` (one kind's job is never judged by another's criteria)."""
    data, raws = _read(name, ())
    digest = hashlib.sha256()
    for raw in raws:
        digest.update(hashlib.sha256(raw).digest())
    found = data.get("kind")
    if found != kind:
        others = available(kind)
        raise UserError(
            f"criteria profile {name} is for {found!r} jobs, not {kind!r}",
            f"name a {kind} profile" + (f": {', '.join(others)}" if others else ""),
        )
    data["name"] = name
    try:
        return model(**data, sha256=digest.hexdigest())
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise UserError(f"criteria profile {name}: {where}: {err['msg']}", "repair the shipped profile") from None


def criteria_path(name: str) -> Path:
    """Where the named profile lives (for display only; loading goes through load_profile)."""
    entry = _entry(name)
    return Path(str(entry if entry is not None else _shipped_dir().joinpath(f"{name}.toml")))
