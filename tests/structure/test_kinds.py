"""Every registered job kind is a whole slice through the house (DESIGN.md, Job kinds): options
model, agent kind, tools, verifier, criteria profile, a manifest that signs, an example job, a
CLI verify and a README row. A kind missing any of them fails here, by name."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import BaseModel
from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parents[2]


def _shipped() -> list[str]:
    from assay.agents.kinds import SHIPPED

    return sorted(SHIPPED)


@pytest.fixture(params=_shipped())
def kind(request) -> str:
    return request.param


def test_the_agent_side(kind):
    from assay.agents.kinds import AgentKind, agent_kind

    k = agent_kind(kind)
    assert isinstance(k, AgentKind) and k.name == kind
    assert issubclass(k.options_model, BaseModel)
    k.options_model.model_validate({})  # every option has a default: a job may leave [<kind>] out
    assert k.default_manifest == f"{kind}-agent" and k.default_criteria == f"{kind}-default"


def test_the_tools(kind):
    from assay.tools.kinds import SHIPPED
    from assay.tools.registry import default_registry

    assert kind in SHIPPED
    own = [t.name for t in default_registry().for_kind(kind) if kind in t.kinds]
    assert own, f"kind {kind!r} registers no tools of its own"


def test_the_verifier_and_its_criteria(kind):
    from assay.verifiers.kinds import VerifierKind, load_criteria_for, verifier_kind

    v = verifier_kind(kind)
    assert isinstance(v, VerifierKind) and v.name == kind
    profile = load_criteria_for(v, f"{kind}-default")
    assert isinstance(profile, v.criteria_model) and profile.kind == kind and len(profile.sha256) == 64
    assert (ROOT / "verifiers" / kind / "kind.py").is_file()


def test_the_manifest_signs_and_loads(kind, tmp_path, monkeypatch):
    from assay.policies.manifest import shipped_manifest_path
    from assay.policies.signing import keygen, load_signed_manifest, sign_manifest
    from assay.settings import settings

    monkeypatch.setenv("ASSAY_HOME", str(tmp_path / "home"))
    settings.cache_clear()
    path = shipped_manifest_path(f"{kind}-agent")
    assert path.resolve() == ROOT / "policies" / "manifests" / f"{kind}-agent.toml"
    keygen(if_missing=True)
    sign_manifest(path, to_store=True)
    manifest = load_signed_manifest(path, role=f"{kind}-agent")
    assert "submit" in manifest.tools
    settings.cache_clear()


def test_an_example_job_loads(kind):
    from assay.agents.job import load_job

    jobs = sorted((ROOT / "examples" / kind).glob("*.toml"))
    assert jobs, f"examples/{kind}/ has no job file"
    for path in jobs:
        job = load_job(path)
        assert job.kind == kind and job.task_path.is_file()


def test_the_cli_verifies_it():
    from assay.cli.main import app

    for kind in _shipped():
        result = CliRunner().invoke(app, [kind, "verify", "--help"])
        assert result.exit_code == 0, result.output
        assert "SUBMISSION" in result.output and "--criteria" in result.output


def test_the_readme_lists_it(kind):
    readme = (ROOT / "README.md").read_text()
    assert re.search(rf"^\| `{kind}` \|", readme, re.M), f"README.md's job kinds table has no row for {kind}"


def test_no_shared_module_names_a_kind():
    """The shared path defaults to no kind: kernel's manifest, criteria and headline metric appear
    only in the kernel kind's own files (and in the registries' rows)."""
    import subprocess

    out = subprocess.run(
        ["git", "grep", "-n", "-I", r"kernel-agent\|kernel-default\|speedup_vs_eager", "--", "."],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    if out.returncode not in (0, 1):
        pytest.skip(f"git grep is not available here ({out.stderr.strip()[:200]})")
    own = (
        "agents/kernel/",
        "tools/kernel.py",
        "verifiers/kernel/",
        "kernels/",
        "examples/kernel/",
        "policies/manifests/kernel-agent.toml",
        "verifiers/criteria/kernel-",
        "bench/",
        "tests/",
        "README.md",
    )
    shared = [line for line in out.stdout.splitlines() if not line.startswith(own)]
    assert shared == []
