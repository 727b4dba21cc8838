"""`assay kernel verify`: exit codes and the --json shape. The cases here end before any
sandbox starts (bad input, or a candidate the source scan rejects)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from assay.cli.verify import kind_app

HERE = Path(__file__).parent
SOFTMAX = HERE.parent.parent / "examples" / "kernel" / "softmax.py"
CHEAT = HERE / "cheats" / "ref_torch_softmax.py"
runner = CliRunner()
app = kind_app("kernel")


def invoke(*args: str):
    return runner.invoke(app, ["verify", *args])


def test_scan_rejection_prints_one_json_object_and_exits_1():
    result = invoke(str(SOFTMAX), str(CHEAT), "--criteria", "kernel-test", "--json")
    assert result.exit_code == 1, result.output
    obj = json.loads(result.stdout)
    assert obj["passed"] is False
    assert {"passed", "reasons", "checks", "metrics"} <= set(obj)
    names = {c["name"]: c for c in obj["checks"]}
    assert names["source_no_torch_compute"]["passed"] is False
    assert any(r.startswith("source_no_torch_compute:") for r in obj["reasons"])
    assert all({"name", "passed", "detail"} <= set(c) for c in obj["checks"])
    assert obj["criteria"] == "kernel-test" and len(obj["criteria_hash"]) == 64
    assert obj["outcome"] == "fail" and obj["inconclusive"] is False


def test_human_output_names_the_failed_check():
    result = invoke(str(SOFTMAX), str(CHEAT), "--criteria", "kernel-test")
    assert result.exit_code == 1
    assert "source_no_torch_compute" in result.stdout and "FAILED" in result.stdout


@pytest.mark.parametrize(
    "args, words",
    [
        (["missing-task.py", str(CHEAT)], "does not exist"),
        ([str(SOFTMAX), "missing-candidate.py"], "does not exist"),
        ([str(SOFTMAX), str(CHEAT), "--criteria", "no-such-profile"], "unknown criteria"),
        ([str(SOFTMAX), str(CHEAT), "--backend", "chroot"], "unknown sandbox backend"),
    ],
)
def test_bad_input_exits_2_with_one_line(args, words):
    result = invoke(*args)
    assert result.exit_code == 2
    assert words in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_a_task_without_model_exits_2(tmp_path):
    task = tmp_path / "task.py"
    task.write_text("def get_inputs():\n    return []\n")
    result = invoke(str(task), str(CHEAT), "--json")
    assert result.exit_code == 2 and "defines no Model" in result.stderr


def test_an_unreadable_candidate_exits_2(tmp_path):
    bad = tmp_path / "cand.py"
    bad.write_bytes(b"\xff\xfe\x00 not utf-8")
    result = invoke(str(SOFTMAX), str(bad))
    assert result.exit_code == 2 and "cannot be read" in result.stderr
