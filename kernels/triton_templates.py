"""Triton templates (placeholder until written)."""


def space(kind, spec):
    raise NotImplementedError


def source(kind, spec, configs):
    raise NotImplementedError


def render_candidate(template, configs, selected):
    raise NotImplementedError
