"""The kernel playbook's expertise as a library: which template fits a task, over which search
space, and the candidate source for a chosen configuration. No model, no agent loop here: the
playbook brain (assay.agents) calls these and drives the MCP tools with the results."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from assay.kernels import cpp_templates, dimreduce, triton_templates
from assay.kernels.candidate import render_candidate
from assay.kernels.patterns import NoMatch, recognise
from assay.kernels.task import TaskInfo

BACKENDS = ("cpp", "triton")


@dataclass(frozen=True, eq=False)
class Template:
    """A template bound to one recognised task: `kind` is the template, `spec` the instance."""

    kind: str  # "elementwise" | "rowreduce" | "matmul" | "dimreduce" | "conv"
    backend: str  # "cpp" | "triton"
    spec: dict
    info: TaskInfo = field(repr=False)

    @property
    def name(self) -> str:
        return f"{self.backend}.{self.kind}"


@dataclass
class SearchSpace:
    configs: list[dict]  # every configuration, the default first

    def __len__(self) -> int:
        return len(self.configs)

    def index(self, config: dict) -> int | None:
        for i, c in enumerate(self.configs):
            if c == config:
                return i
        return None


@dataclass
class Plan:
    template: Template
    space: SearchSpace


@dataclass
class NoTemplate:
    """An honest "no candidate": the reason goes into the run's report."""

    reason: str


def plan(info: TaskInfo, backend: str = "cpp") -> list[Plan] | NoTemplate:
    if backend not in BACKENDS:
        return NoTemplate(f"unknown kernel backend {backend!r} (known: {', '.join(BACKENDS)})")
    if info.params and not info.init_recipe.get("replays") and "body" not in info.own_init:
        return NoTemplate(
            "the reference's parameter initialisation could not be reproduced, and its constructor "
            f"cannot be repeated ({info.own_init.get('why', 'no reason given')}), "
            "so a candidate could not match its weights"
        )
    if any(p.get("parameter") is False for p in info.params):
        return NoTemplate("the reference uses buffers or constant tensors; templates take parameters only")
    pattern = recognise(info)
    if isinstance(pattern, NoMatch):
        return NoTemplate(pattern.reason)
    if backend == "triton" and pattern.kind == "dimreduce":
        return NoTemplate(f"no triton template for {pattern.spec['op']} over a dim (the cpp backend has one)")
    if backend == "triton" and pattern.kind == "conv":
        return NoTemplate(f"no triton template for {pattern.spec['conv']['op']} epilogues (the cpp backend has one)")
    template = Template(pattern.kind, backend, pattern.spec, info)
    return [Plan(template, SearchSpace(space_for(template)))]


def space_for(template: Template) -> list[dict]:
    if template.backend == "triton":
        return triton_templates.space(template.kind, template.spec)
    if template.kind in ("elementwise", "conv"):
        return cpp_templates.elementwise_space(4 * math.prod(template.spec["out_shape"]))
    if template.kind == "dimreduce":
        return dimreduce.space()
    if template.kind == "rowreduce":
        x = template.info.ref_meta(template.spec["x"])["shape"]
        return cpp_templates.rowreduce_space(template.spec["op"], 4 * math.prod(x))
    return cpp_templates.matmul_space()


def source(template: Template, configs: list[dict]) -> str:
    """The kernel source (C++ or Triton) holding every configuration in `configs`."""
    if template.backend == "triton":
        return triton_templates.source(template.kind, template.spec, configs)
    if template.kind == "dimreduce":
        return dimreduce.source(template.spec, configs, cpp_templates.vecmath())
    gen = {
        "elementwise": cpp_templates.elementwise_source,
        "conv": cpp_templates.elementwise_source,  # the epilogue; the convolution is ATen's
        "rowreduce": cpp_templates.rowreduce_source,
        "matmul": cpp_templates.matmul_source,
    }[template.kind]
    return gen(template.spec, configs)


def render(template: Template, params: dict | list[dict], selected: int = 0) -> str:
    """Candidate file for one configuration, or for several (autotuning) with `selected` active."""
    configs = [params] if isinstance(params, dict) else list(params)
    if template.backend == "triton":
        return triton_templates.render_candidate(template, configs, selected)
    return render_candidate(
        template.kind, template.name, template.spec, template.info, source(template, configs), configs, selected
    )
