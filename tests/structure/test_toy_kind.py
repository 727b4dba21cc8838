"""Adding a job kind touches no shared module: a toy kind, copied to a folder outside assay and
registered only through the operator's ASSAY_KINDS setting, runs end to end through the real
doors (`assay run`: the MCP server and the verifier process in their own processes, real
sandboxes) and through `assay toy verify`, with its own options, tool, manifest, criteria and
verifier, and the shared harness its judge loads the submission with."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ASSAY = str(Path(sys.executable).with_name("assay"))

TASK = """class Model:
    def __init__(self, power=2):
        self.power = power

    def __call__(self, xs):
        return [x ** self.power for x in xs]


def get_inputs():
    return [[1, 2, 3]]


def get_init_inputs():
    return [2]
"""


@pytest.fixture
def toy(tmp_path, need, _isolated_home):
    need(shutil.which("bwrap") is not None, "bubblewrap is not installed (apt install bubblewrap)")
    plug = tmp_path / "plug"
    shutil.copytree(HERE / "toykind", plug / "toykind", ignore=shutil.ignore_patterns("__pycache__"))
    from assay.policies.signing import keygen, sign_manifest
    from assay.settings import settings

    settings.cache_clear()
    keygen(if_missing=True)
    sign_manifest(plug / "toykind" / "toy-agent.toml")
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    (jobs / "task.py").write_text(TASK)
    (jobs / "toy.toml").write_text(
        'kind = "toy"\ntask = "task.py"\n[budget]\nsteps = 6\n[sandbox]\nbackend = "bwrap"\n[toy]\npower = 2\n'
    )
    kinds = {"toy": {"agent": "toykind.agent:KIND", "tools": "toykind.tools", "verifier": "toykind.verifier:KIND"}}
    env = dict(os.environ, PYTHONPATH=str(plug), ASSAY_KINDS=json.dumps(kinds), ASSAY_VERIFIER_WARM="0")
    return jobs, env


def _assay(env, *args, cwd=None):
    return subprocess.run([ASSAY, *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=300)


def test_the_toy_is_not_shipped():
    from assay.agents.kinds import SHIPPED as agents
    from assay.tools.kinds import SHIPPED as tools
    from assay.verifiers.kinds import SHIPPED as verifiers

    assert "toy" not in agents and "toy" not in tools and "toy" not in verifiers


def test_a_kind_from_outside_runs_and_verifies_end_to_end(toy, tmp_path):
    jobs, env = toy
    out = _assay(env, "run", str(jobs / "toy.toml"), "--json", str(tmp_path / "report.json"))
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    report = json.loads((tmp_path / "report.json").read_text())["runs"][0]
    assert report["kind"] == "toy" and report["outcome"] == "pass"
    assert report["headline"]["name"] == "speedup vs reference"
    assert {c["name"] for c in report["checks"]} == {"loads", "isolated", "correctness", "speed"}
    # The kind's own tool ran through the gateway and was recorded like any other.
    from assay.ledger import Ledger

    with Ledger.open() as ledger:
        calls = [c.tool for c in ledger.tool_calls(report["run_id"])]
        verdict = ledger.verdicts(report["run_id"])[-1]
    assert calls == ["toy_hint", "write_file", "submit"]
    assert verdict.payload["criteria"] == "toy-default" and verdict.payload["outcome"] == "pass"

    # The same verifier, directly, through the generic CLI path, with the kind's own option: a
    # solution that always squares is right for --power 2 and wrong for --power 3.
    solution = tmp_path / "solution.py"
    solution.write_text(
        "class ModelNew:\n    def __init__(self, power=2):\n        pass\n\n"
        "    def __call__(self, xs):\n        return [x * x for x in xs]\n"
    )
    good = _assay(
        env, "toy", "verify", str(jobs / "task.py"), str(solution), "--json", "--power", "2", "--backend", "bwrap"
    )
    assert good.returncode == 0, good.stderr
    assert json.loads(good.stdout)["outcome"] == "pass"
    wrong = _assay(
        env, "toy", "verify", str(jobs / "task.py"), str(solution), "--json", "--power", "3", "--backend", "bwrap"
    )
    assert wrong.returncode == 1, wrong.stderr
    assert any(r.startswith("correctness:") for r in json.loads(wrong.stdout)["reasons"])


def test_a_planted_sitecustomize_or_library_lookalike_changes_nothing(toy, tmp_path):
    """The submission's folder holds a sitecustomize.py and a random.py that would make every
    output right; the shared harness loads only the entry, by path, so the honest reference
    still decides and the wrong solution fails."""
    jobs, env = toy
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "solution.py").write_text(
        "class ModelNew:\n    def __init__(self, power=2):\n        pass\n\n"
        "    def __call__(self, xs):\n        return [0 for x in xs]\n"
    )
    (sub / "sitecustomize.py").write_text("import builtins\nbuiltins.pow = lambda *a: 0\n")
    (sub / "random.py").write_text(
        "class Random:\n    def __init__(self, *a):\n        pass\n    def randint(self, a, b):\n        return 0\n"
    )
    out = _assay(env, "toy", "verify", str(jobs / "task.py"), str(sub), "--json", "--backend", "bwrap")
    assert out.returncode == 1, out.stderr
    doc = json.loads(out.stdout)
    checks = {c["name"]: c for c in doc["checks"]}
    assert checks["isolated"]["passed"] and not checks["correctness"]["passed"]


def test_a_criteria_profile_of_another_kind_is_refused(toy):
    jobs, env = toy
    out = _assay(env, "toy", "verify", str(jobs / "task.py"), str(jobs / "task.py"), "--criteria", "kernel-default")
    assert out.returncode == 2
    assert "is for 'kernel' jobs, not 'toy'" in out.stderr and len(out.stderr.strip().splitlines()) == 1
