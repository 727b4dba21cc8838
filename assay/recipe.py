"""The quant kind's submission format, recipe.toml, shared by the agent side's tools and the
verifier (both must read a recipe alike; the verifier's reading is the one that counts): ordered
rules, each a glob on module names and a config from a fixed vocabulary with typed arguments.
Nothing else.

    [[rule]]
    match = "encoder.layer.*.intermediate.dense"
    config = "int8_weight_only"

    [[rule]]
    match = "*"
    config = "none"          # keep fp32

A recipe holds no code and no figures: every key outside the vocabulary is refused by name, so a
recipe cannot name an import path, a callable or a metric it would like to have measured. The
first rule whose glob matches a module's name decides that module; modules no rule matches stay
fp32. What each config does in torchao or torch is verifiers/quant/harness/quant_judge.py's; this
module only says what a recipe may say.
"""

from __future__ import annotations

import tomllib
from typing import Annotated, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from assay.errors import UserError

MAX_BYTES = 64 << 10
MAX_RULES = 256
GLOB_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.*?[]!-")
# what torchao's CPU int4 layout takes (it asserts on others)
INT4_GROUP_SIZES = Literal[32, 64, 128]


class _Rule(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    match: str = Field(min_length=1, max_length=200)


class KeepFp32(_Rule):
    config: Literal["none"]


class Int8WeightOnly(_Rule):
    """torchao Int8WeightOnlyConfig: int8 weights per channel, fp32 activations."""

    config: Literal["int8_weight_only"]


class Int8Dynamic(_Rule):
    """torchao Int8DynamicActivationInt8WeightConfig: int8 weights, activations quantized per call."""

    config: Literal["int8_dynamic"]


class IntxWeightOnly(_Rule):
    """torchao IntxWeightOnlyConfig: `bits`-bit weights in groups of `group_size` (0: per channel)."""

    config: Literal["intx_weight_only"]
    bits: Literal[2, 3, 4, 5, 6, 7, 8] = 4
    group_size: Literal[0, 16, 32, 64, 128, 256] = 32


class Int4WeightOnly(_Rule):
    """torchao's CPU int4 (PrototypeInt4WeightOnlyConfig, opaque packed layout)."""

    config: Literal["int4_weight_only"]
    group_size: INT4_GROUP_SIZES = 32


class Float8WeightOnly(_Rule):
    """torchao Float8WeightOnlyConfig (emulated on the CPU)."""

    config: Literal["float8_weight_only"]


class EagerDynamicInt8(_Rule):
    """torch.ao.quantization.quantize_dynamic to qint8 (fbgemm/onednn kernels): the legacy eager
    dynamic quantizer, Linear modules only; weights per tensor, or per output channel."""

    config: Literal["eager_dynamic_int8"]
    per_channel: bool = False


Rule = Annotated[
    KeepFp32 | Int8WeightOnly | Int8Dynamic | IntxWeightOnly | Int4WeightOnly | Float8WeightOnly | EagerDynamicInt8,
    Field(discriminator="config"),
]
# The vocabulary, read off the rule models themselves (one list: the tools offer the same names).
CONFIGS: tuple[str, ...] = tuple(get_args(m.model_fields["config"].annotation)[0] for m in get_args(get_args(Rule)[0]))
QUANTIZING: tuple[str, ...] = tuple(c for c in CONFIGS if c != "none")


class Recipe(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    description: str = Field(default="", max_length=2000)
    rule: list[Rule] = Field(min_length=1, max_length=MAX_RULES)

    def plan(self) -> list[dict]:
        """The rules as the harness reads them (plain JSON, in order)."""
        return [r.model_dump() for r in self.rule]

    def quantizes_anything(self) -> bool:
        return any(r.config != "none" for r in self.rule)


def parse_recipe(raw: bytes, where: str = "recipe.toml") -> Recipe:
    if len(raw) > MAX_BYTES:
        raise UserError(f"{where} is {len(raw)} bytes, over {MAX_BYTES}", "a recipe is a short list of [[rule]] tables")
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise UserError(
            f"{where} is not valid TOML ({exc})", "fix the syntax: [[rule]] tables of match and config"
        ) from None
    try:
        recipe = Recipe.model_validate(data)
    except ValidationError as exc:
        raise UserError(f"{where}: {_first_error(exc)}", _fix_for(exc)) from None
    for i, r in enumerate(recipe.rule, 1):
        bad = sorted(set(r.match) - GLOB_CHARS)
        if bad:
            raise UserError(
                f"{where}: rule {i}: match {r.match!r} has characters no module name or glob holds: {''.join(bad)!r}",
                "match module names with letters, digits, '.', '_' and the glob characters * ? [ ] !",
            )
    return recipe


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    loc = [str(p) for p in err["loc"]]
    if loc[:1] == ["rule"] and len(loc) >= 2 and loc[1].isdigit():
        # pydantic numbers from 0 and puts the union's tag in the path: say "rule 2", the key
        where = f"rule {int(loc[1]) + 1}" + (f": {loc[-1]}" if len(loc) > 3 else "")
    else:
        where = ".".join(loc) or "recipe"
    if err["type"] == "extra_forbidden":
        return f"{where}: unknown key (a recipe holds only [[rule]] tables of match, config and the config's arguments; its figures are the verifier's to measure)"
    if err["type"] == "union_tag_invalid":
        return f"{where}: unknown config {err['input']!r}"
    if err["type"] == "union_tag_not_found":
        return f"{where}: no config"
    return f"{where}: {err['msg']}"


def _fix_for(exc: ValidationError) -> str:
    types = {e["type"] for e in exc.errors()}
    if types & {"union_tag_invalid", "union_tag_not_found"}:
        return f"name one of: {', '.join(CONFIGS)}"
    if "extra_forbidden" in types:
        return "remove the key; each config's arguments: intx_weight_only (bits, group_size), int4_weight_only (group_size)"
    return "see `assay quant verify --help` and DESIGN.md (Job kinds) for the recipe format"
