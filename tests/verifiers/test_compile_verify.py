"""`assay compile verify` end to end in real sandboxes, from both sides: honest rewrites of the
example tasks pass; the untouched model fails with its symptom; a control that only looks
divergent is "not reproduced"; escape hatches, tampering with dynamo and wrong answers are
refused by name. The aot_eager backend and compile-test keep each verification to seconds
(Inductor's compiles cost 20-80 s here; bench/compile.py runs it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from assay.cli.verify import kind_app

HERE = Path(__file__).parent
EXAMPLES = HERE.parent.parent / "examples" / "compile"
HONEST = HERE / "compile" / "honest"
CHEATS = HERE / "compile" / "cheats"
runner = CliRunner()
app = kind_app("compile")


def verify(task: Path, fixed: Path, backend: str, *extra: str):
    result = runner.invoke(
        app,
        ["verify", str(task), str(fixed), "--backend", backend, "--criteria", "compile-test", "--json", *extra],
    )
    return result, json.loads(result.stdout) if result.stdout.strip() else None


def failed(obj: dict) -> dict[str, str]:
    return {c["name"]: c["detail"] for c in obj["checks"] if not c["passed"]}


def untouched(tmp_path: Path, task: str) -> Path:
    """The task's own Model submitted as the fix."""
    fixed = tmp_path / "fixed.py"
    fixed.write_text((EXAMPLES / f"{task}.py").read_text() + "\n\nModelNew = Model\n")
    return fixed


# shape_branch's hand-written fix (no playbook rewrite exists for it) is checked by bench/compile.py
@pytest.mark.parametrize("task", ["item_branch", "python_counter", "int_loop"])
def test_an_honest_rewrite_passes_and_the_symptom_is_named(backend, task):
    result, obj = verify(EXAMPLES / f"{task}.py", HONEST / f"{task}.py", backend, "--compile-backend", "aot_eager")
    assert result.exit_code == 0, result.output
    assert obj["outcome"] == "pass", obj["reasons"]
    m = obj["metrics"]
    assert m["symptoms"], "the verdict names what was wrong with the original"
    assert m["fixed"]["breaks"] == 0 and m["fixed"]["fullgraph"] is True
    assert m["fixed"]["recompiles"] <= 1 and m["fixed"]["coverage"] >= 0.95
    assert len(m["parity"]) >= 4  # the first input, held-out seeds, the input sequence


def test_the_untouched_model_fails_with_its_breaks_even_beside_a_sitecustomize(backend, tmp_path):
    untouched(tmp_path, "item_branch")
    # would make the break vanish and explain lie, if anything ever imported it
    (tmp_path / "sitecustomize.py").write_text(
        "import torch._dynamo\ntorch._dynamo.config.capture_scalar_outputs = True\n"
        "torch._dynamo.explain = lambda *a, **k: None\n"
    )
    result, obj = verify(EXAMPLES / "item_branch.py", tmp_path, backend, "--compile-backend", "aot_eager")
    assert result.exit_code == 1, result.output
    bad = failed(obj)
    assert "isolation" not in bad, bad  # it never ran: nothing to refuse
    assert "1 graph break" in bad["graph_breaks"] and "item()" in bad["graph_breaks"]
    assert "fullgraph=True fails" in bad["fullgraph"]
    assert set(bad) <= {"graph_breaks", "fullgraph", "recompiles"}


def test_a_control_that_only_looks_divergent_is_not_reproduced(backend, tmp_path):
    result, obj = verify(
        EXAMPLES / "ill_conditioned.py", HONEST / "ill_conditioned.py", backend, "--compile-backend", "aot_eager"
    )
    assert result.exit_code == 1, result.output
    bad = failed(obj)
    assert list(bad) == ["symptom"] and "not reproduced on torch" in bad["symptom"]


@pytest.mark.parametrize(
    ("cheat", "checks", "words"),
    [
        ("disable_forward", {"graph_breaks", "fullgraph", "coverage"}, "no graph was captured"),
        ("opaque_custom_op", {"coverage", "opaque"}, "custom op cheat::whole_body"),
        ("allow_in_graph", {"opaque"}, "call to branch (not traced)"),
        ("dropped_branch", {"parity"}, "held-out cases match"),
        ("memoised", {"parity"}, "held-out cases match"),
    ],
)
def test_escape_hatches_and_wrong_answers_are_refused_by_name(backend, cheat, checks, words):
    result, obj = verify(EXAMPLES / "item_branch.py", CHEATS / f"{cheat}.py", backend, "--compile-backend", "aot_eager")
    assert result.exit_code == 1, result.output
    bad = failed(obj)
    assert checks <= set(bad), bad
    assert words in " ".join(bad.values())


@pytest.mark.parametrize(
    ("cheats", "words"),
    [
        # four ways in at import time, in one submission: each is named in the one refusal
        (
            ("suppress_errors", "cache_limits", "explain_replaced", "counters_cleared"),
            (
                "torch._dynamo.config.suppress_errors changed",
                "torch._dynamo.config.recompile_limit changed",
                "torch._dynamo.explain was replaced",
                "went down",
            ),
        ),
        # in effect only while forward runs: seen from inside the compile
        (("patch_in_forward",), ("capture_scalar_outputs changed from False to True",)),
        # the judge runs the submission in its own process: its functions and its reporting
        (("judge_patched",), ("the judge.coverage was replaced", "assay_harness._dumps was replaced")),
    ],
)
def test_tampering_with_dynamo_is_refused(backend, tmp_path, cheats, words):
    fixed = tmp_path / "fixed.py"
    # the import-time lines of each cheat, then one ModelNew
    heads = [(CHEATS / f"{c}.py").read_text().split("class ModelNew")[0] for c in cheats]
    body = "class ModelNew" + (CHEATS / f"{cheats[-1]}.py").read_text().split("class ModelNew", 1)[1]
    fixed.write_text("\n".join(heads) + "\n" + body)
    result, obj = verify(EXAMPLES / "item_branch.py", fixed, backend, "--compile-backend", "aot_eager")
    assert result.exit_code == 1, result.output
    bad = failed(obj)
    assert "isolation" in bad, bad
    for w in words:
        assert w in bad["isolation"], (w, bad["isolation"])


def test_bad_input_is_one_line_and_exit_2(backend, tmp_path):
    broken = tmp_path / "broken_task.py"
    broken.write_text(
        "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x @ x\n"
        "def get_inputs():\n    return [torch.randn(3, 4)]\n"
    )
    cases = [
        (broken, untouched(tmp_path, "item_branch"), (), "fix the task"),
        (EXAMPLES / "item_branch.py", EXAMPLES / "print_debug.py", (), "defines no class ModelNew"),
        (EXAMPLES / "item_branch.py", HONEST / "item_branch.py", ("--compile-backend", "tvm"), "backend"),
        (
            EXAMPLES / "item_branch.py",
            HONEST / "item_branch.py",
            ("--compile-backend", "eager", "--mode", "max-autotune"),
            "needs backend 'inductor'",
        ),
        (tmp_path / "missing.py", HONEST / "item_branch.py", (), "does not exist"),
    ]
    for task, fixed, extra, words in cases:
        result = runner.invoke(app, ["verify", str(task), str(fixed), "--backend", backend, *extra])
        assert result.exit_code == 2, (words, result.output)
        lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and words in lines[0] and "Traceback" not in result.output, (words, result.output)


def test_examples_are_shipped_with_their_symptom_in_the_docstring():
    import ast

    tasks = sorted(EXAMPLES.glob("*.py"))
    assert len(tasks) >= 12
    for path in tasks:
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
        assert "Symptom" in doc or "control" in doc, path.name
