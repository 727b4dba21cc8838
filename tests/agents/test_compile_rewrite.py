"""The compile playbook's source rewrites, family by family, on the example tasks (no sandbox):
each names what it changed, keeps Model's parameters (the state_dict loads strictly) and
computes what Model computes in eager; a family with no rewrite is left alone and said so."""

from __future__ import annotations

import types
from pathlib import Path

import pytest
import torch

from assay.agents.compile.rewrite import rewrite

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "compile"


def module(source: str, name: str) -> types.ModuleType:
    mod = types.ModuleType(name)
    exec(compile(source, name, "exec"), mod.__dict__)
    return mod


@pytest.mark.parametrize(
    ("task", "words"),
    [
        ("item_branch", "torch.where picks"),
        ("print_debug", "removed `print("),
        ("tolist_scale", "the tensor's own max"),
        ("python_counter", "non-persistent buffer"),
        ("int_loop", "closed form"),
        ("masked_sum", "zeros in a sum of the same size"),
        ("logger_call", "removed `logger.warning("),
        ("float_norm", "stays a 0-d tensor"),
    ],
)
def test_a_rewrite_names_its_change_and_computes_what_model_computes(task, words):
    source = (EXAMPLES / f"{task}.py").read_text()
    fixed, notes = rewrite(source)
    assert any(words in n for n in notes), notes
    old, new = module(source, f"task_{task}"), module(fixed, f"fixed_{task}")
    assert not hasattr(new, "Model") and not hasattr(new, "get_inputs")  # ModelNew only; the task keeps its own
    torch.manual_seed(0)
    model = old.Model(*old.get_init_inputs()).eval()
    rewritten = new.ModelNew(*old.get_init_inputs()).eval()
    rewritten.load_state_dict(model.state_dict(), strict=True)
    sequence = old.get_input_sequence() if hasattr(old, "get_input_sequence") else [old.get_inputs()]
    with torch.no_grad():
        for args in [old.get_inputs(), *sequence]:
            torch.testing.assert_close(rewritten(*args), model(*args), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(("task", "kept"), [("shape_branch", "x.shape[0] % 2 == 0"), ("nonzero_rows", "torch.nonzero")])
def test_a_family_without_a_rewrite_is_left_alone(task, kept):
    fixed, notes = rewrite((EXAMPLES / f"{task}.py").read_text())
    assert notes == [] and kept in fixed


def test_branches_it_cannot_express_as_where_are_left_alone():
    src = (
        "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n"
        "        if x.sum().item() > 0:\n            a = x + 1\n            b = a * 2\n        else:\n            b = x\n"
        "        return b\n"
    )
    fixed, notes = rewrite(src)
    assert notes == [] and ".item()" in fixed and "class ModelNew" in fixed
