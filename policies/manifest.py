"""Capability manifests: one TOML file per role, validated into a `Manifest`.

A manifest lists the tools a role may call. Per tool it holds hard constraints (path
patterns, executables, a timeout and output cap, rate limits), what the tool may see
(restored placeholders) and where its output goes (egress), and an ordered list of rules;
the first rule whose conditions match a call decides it, and `default` decides the rest.
A tool the manifest does not list is denied.

This module only parses and validates. Signature checks live in `signing`, decisions in
`capabilities`, proofs in `analysis`.
"""

from __future__ import annotations

import math
import os
import tomllib
import types
import typing
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
)

from assay.errors import UserError
from assay.policies.paths import pattern_problem

FORMAT_VERSION = 1
MAX_MANIFEST_BYTES = 1 << 20
# TOML integers are signed 64-bit; nothing larger can be written, so nothing larger is valid.
INT64_MAX = (1 << 63) - 1
PATH_ARG = "path"
COMMAND_ARG = "command"
TIMEOUT_ARG = "timeout_s"

Effect = Literal["allow", "deny", "approve"]


def _as_list(value: Any) -> Any:
    # `path = "src/**"` reads better than a one-element list; both mean the same.
    return [value] if isinstance(value, str) else value


def _check_glob(pattern: str) -> str:
    problem = pattern_problem(pattern)
    if problem:
        raise ValueError(f"pattern {pattern!r}: {problem}")
    return pattern


def _check_executable(name: str) -> str:
    # Bare names only: '/usr/bin/python' or './python' would name a file, not the toolchain's
    # program, and the executable check compares argv[0] to these strings exactly.
    if not name or name in (".", "..") or "/" in name or "\\" in name:
        raise ValueError(f"executable {name!r} must be a bare program name like 'python', without '/'")
    if any(ord(ch) < 0x21 or ord(ch) == 0x7F or ord(ch) > 0x2FFFF for ch in name):
        raise ValueError(f"executable {name!r} must not contain spaces or control characters")
    return name


Glob = Annotated[str, AfterValidator(_check_glob)]
Globs = Annotated[list[Glob], BeforeValidator(_as_list), Field(min_length=1, max_length=256)]
Executable = Annotated[str, AfterValidator(_check_executable)]
Executables = Annotated[list[Executable], BeforeValidator(_as_list), Field(min_length=1, max_length=256)]
Count = Annotated[int, Field(ge=1, le=INT64_MAX)]
Seconds = Annotated[float, Field(ge=0.001, le=1e9, allow_inf_nan=False)]
Name = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_-]{0,63}$")]


class _Strict(BaseModel):
    # strict: `timeout_s = "60"` is a mistake to report, not a string to coerce.
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class SecondsRange(_Strict):
    """Inclusive bounds on a duration argument, compared in whole milliseconds."""

    min: Annotated[float, Field(ge=0, le=1e9, allow_inf_nan=False)] | None = None
    max: Annotated[float, Field(ge=0, le=1e9, allow_inf_nan=False)] | None = None


class Rate(_Strict):
    per_minute: Count | None = None
    per_run: Count | None = None


class Rule(_Strict):
    """A conditional decision. All given conditions must hold; a list matches any entry."""

    effect: Effect
    name: Annotated[str, Field(max_length=80)] | None = None
    reason: Annotated[str, Field(max_length=500)] | None = None
    path: Globs | None = None
    executable: Executables | None = None
    timeout_s: SecondsRange | None = None

    @property
    def unconditional(self) -> bool:
        return self.path is None and self.executable is None and self.timeout_s is None


class ToolCapability(_Strict):
    """What a role may do with one tool."""

    default: Effect = "deny"
    rules: Annotated[list[Rule], Field(max_length=256)] = []
    # Hard constraints: a call outside them is denied before any rule is read.
    paths: Globs | None = None
    executables: Executables | None = None
    max_timeout_s: Seconds | None = None
    max_output_bytes: Count | None = None
    rate: Rate = Rate()
    # May the gateway put real secret values back into this tool's arguments?
    restore_placeholders: bool = False
    # Does this tool's output leave the trust boundary (network, publish)?
    egress: bool = False


class Manifest(_Strict):
    format: Literal[1] = FORMAT_VERSION
    role: Name
    description: Annotated[str, Field(max_length=2000)] = ""
    tools: dict[Name, ToolCapability] = {}

    # How this manifest was loaded (signed by which key, or through the escape hatch).
    _provenance: Any = PrivateAttr(default=None)

    @property
    def provenance(self):
        return self._provenance

    def rule_id(self, tool: str, index: int) -> str:
        """`exec#2`: the second rule of exec, counted from 1 as a human reads the file."""
        return f"{tool}#{index + 1}"


# ---------------------------------------------------------------------------------------
# Loading

SHIPPED_DIR = Path(__file__).parent / "manifests"


def shipped_manifest_path(role: str) -> Path:
    """The manifest assay ships for `role` (e.g. workspace-agent); sign it before use."""
    path = SHIPPED_DIR / f"{role}.toml"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in SHIPPED_DIR.glob("*.toml"))) or "none"
        raise UserError(f"no shipped manifest for role {role!r}", f"use one of: {known}, or write your own")
    return path


def resolve_manifest(name_or_path: str) -> Path:
    """A manifest named by its path (a .toml, or anything with a folder in it) or by a shipped
    role name; a UserError says which was not found."""
    p = Path(name_or_path)
    if p.suffix == ".toml" or os.sep in name_or_path:
        if not p.is_file():
            raise UserError(
                f"manifest {p} not found", "give the path of a signed manifest .toml or a shipped role name"
            )
        return p
    return shipped_manifest_path(name_or_path)


def parse_manifest(data: bytes, source: str = "<manifest>") -> Manifest:
    """Validate manifest bytes; every failure is a UserError naming the field and the fix."""
    if len(data) > MAX_MANIFEST_BYTES:
        raise UserError(f"manifest {source} is larger than {MAX_MANIFEST_BYTES} bytes", "split it or trim it")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"manifest {source} is not UTF-8 (byte {exc.start})", "save it as UTF-8") from None
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"manifest {source} is not valid TOML: {exc}", "fix the TOML syntax at that line") from None
    except (RecursionError, ValueError, OverflowError) as exc:
        raise UserError(f"manifest {source} is not valid TOML: {type(exc).__name__}", "simplify the file") from None
    try:
        return Manifest.model_validate(raw)
    except ValidationError as exc:
        raise _user_error(exc, source) from None
    except RecursionError:
        raise UserError(f"manifest {source} is nested too deeply", "flatten it") from None


def load_manifest(path: str | Path) -> Manifest:
    """Parse a manifest file without checking its signature (for `check` and `sign`)."""
    return parse_manifest(read_manifest_bytes(path), str(path))


def read_manifest_bytes(path: str | Path) -> bytes:
    p = Path(path)
    try:
        with p.open("rb") as fh:
            data = fh.read(MAX_MANIFEST_BYTES + 1)
    except FileNotFoundError:
        raise UserError(f"manifest {p} does not exist", "give the path of a .toml manifest") from None
    except IsADirectoryError:
        raise UserError(f"manifest {p} is a directory", "give the path of a .toml manifest") from None
    except OSError as exc:
        raise UserError(f"manifest {p} cannot be read ({exc.strerror})", "check its permissions") from None
    return data


def _user_error(exc: ValidationError, source: str) -> UserError:
    err = exc.errors(include_url=False)[0]
    loc = tuple(err["loc"])
    where = _render_loc(loc)
    kind = err["type"]
    if kind == "extra_forbidden":
        known = _known_fields(loc[:-1])
        fix = f"remove it or fix its spelling; known here: {', '.join(known)}" if known else "remove it"
        return UserError(f"manifest {source}: unknown field {where}", fix)
    if kind == "missing":
        return UserError(f"manifest {source}: {where} is required", f"add {loc[-1]} = ...")
    msg = err["msg"]
    if kind == "value_error":
        msg = msg.removeprefix("Value error, ")
    more = f" (and {exc.error_count() - 1} more problems)" if exc.error_count() > 1 else ""
    return UserError(f"manifest {source}: {where}: {msg}{more}", _fix_for(kind, loc))


_FIX_BY_KIND = {
    "literal_error": "use one of the values listed",
    "int_type": "write an integer without quotes, e.g. 60",
    "float_type": "write a number without quotes, e.g. 30 or 2.5",
    "bool_type": "write true or false without quotes",
    "string_type": "write a quoted string",
    "list_type": 'write an array, e.g. ["a", "b"]',
    "dict_type": "write a table, e.g. [tools.read_file]",
    "model_type": "write a table, e.g. [tools.read_file]",
    "greater_than_equal": "use a larger value",
    "less_than_equal": "use a smaller value",
    "too_short": "give at least one entry, or leave the field out",
    "too_long": "give fewer entries",
    "string_too_long": "shorten it",
    "finite_number": "use a finite number",
}


def _fix_for(kind: str, loc: tuple) -> str:
    last = str(loc[-1]) if loc else ""
    parent = next((str(p) for p in reversed(loc) if isinstance(p, str)), "")
    if kind == "string_pattern_mismatch":
        if loc and loc[0] == "role":
            return "use lower-case letters, digits, '-' or '_', e.g. role = \"workspace-agent\""
        return "tool names are lower-case letters, digits, '-' or '_', as the gateway registers them"
    if kind == "value_error" and parent in ("executables", "executable"):
        return 'write the bare program name, e.g. "python"; the sandbox finds it on its PATH'
    if kind == "value_error" and parent in ("paths", "path"):
        return 'write a glob relative to the workspace, e.g. "src/**" or "**/*.py"'
    if last == "format":
        return f"set format = {FORMAT_VERSION}"
    return _FIX_BY_KIND.get(kind, "correct the value as described")


def _render_loc(loc: tuple) -> str:
    out = ""
    for i, part in enumerate(loc):
        if part == "[key]":
            out += " (the name)"
        elif isinstance(part, int):
            # Rules are counted from 1, as in rule ids; other lists from 0 as TOML indexes them.
            out += f"[#{part + 1}]" if i > 0 and loc[i - 1] == "rules" else f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "(top level)"


def _known_fields(loc: tuple) -> list[str]:
    """The field names of the model at `loc`, to suggest the intended spelling."""
    tp: Any = Manifest
    for part in loc:
        tp = _strip(tp)
        if typing.get_origin(tp) in (list, dict):
            tp = typing.get_args(tp)[-1]  # `part` is an index or a key
        elif isinstance(tp, type) and issubclass(tp, BaseModel) and part in tp.model_fields:
            tp = tp.model_fields[part].annotation
        else:
            return []
    tp = _strip(tp)
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return sorted(tp.model_fields)
    return []


def _strip(tp: Any) -> Any:
    """Drop Annotated and Optional wrappers."""
    for _ in range(8):
        if typing.get_origin(tp) is typing.Annotated:
            tp = typing.get_args(tp)[0]
        elif isinstance(tp, types.UnionType) or typing.get_origin(tp) is typing.Union:
            args = [a for a in typing.get_args(tp) if a is not type(None)]
            tp = args[0]
        else:
            break
    return tp


def to_ms(seconds: float) -> int:
    """Durations are compared in whole milliseconds everywhere (enforcement and proofs).

    Rounding first keeps 0.1 s at 100 ms rather than ceil(100.00000000000001) = 101.
    """
    return math.ceil(round(seconds * 1000, 6))
