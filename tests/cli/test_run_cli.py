"""`assay run` and friends from the user's side: a bad job file or bad usage is exit 2 and one
line on stderr, never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from agent_helpers import SOFTMAX, assay, plant_packages, write_job
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "agents"))
from test_job_files import job_dicts, to_toml  # noqa: E402

from assay.errors import UserError


def one_error_line(stderr: str) -> str:
    lines = stderr.strip("\n").split("\n")
    assert len(lines) == 1, stderr
    assert lines[0].startswith("assay: error: ") and "Traceback" not in stderr, stderr
    return lines[0]


@pytest.fixture
def job_dir(tmp_path) -> Path:
    (tmp_path / "task.py").write_text(SOFTMAX.read_text())
    return tmp_path


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(st.one_of(job_dicts.map(to_toml), st.binary(max_size=500)))
def test_bad_job_files_exit_2_with_one_line(job_dir, capsys, content):
    """In process, for speed: the CLI's own entry point, as `assay run FILE` calls it."""
    from assay.agents.job import load_job
    from assay.cli.main import main

    p = job_dir / "job.toml"
    p.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8", "surrogatepass"))
    try:
        load_job(p)
    except UserError:
        pass
    else:
        return  # a valid job would start a real run; the fuzzing is about the invalid ones
    capsys.readouterr()
    with pytest.raises(SystemExit) as done:
        main(["run", str(p)])
    assert done.value.code == 2
    captured = capsys.readouterr()
    one_error_line(captured.err)
    assert captured.out == ""


@pytest.mark.parametrize(
    "content",
    [
        b'kind = "kernel"\ntask = "\xff"\n',
        b'kind = "quant"\ntask = "task.py"\n',
        b'kind = "kernel"\ntask = "task.py"\n[budget]\nsteps = 0\n',
        b'kind = "kernel"\ntask = "task.py"\n"multi\\nline" = 1\n',
        b"kind = " + b"[" * 3000 + b"]" * 3000 + b"\n",
    ],
)
def test_the_real_command(job_dir, content):
    p = job_dir / "job.toml"
    p.write_bytes(content)
    out = assay("run", str(p), timeout=120)
    assert out.returncode == 2, out.stdout + out.stderr
    one_error_line(out.stderr)


def test_usage_errors(job_dir, tmp_path):
    job = write_job(job_dir)
    cases = [
        (["run", str(job), "--junit", str(tmp_path / "no" / "such" / "dir" / "r.xml")], "report folder"),
        (["run", str(job), "--brain", "no-such-brain"], "unknown brain"),
        (["run", str(job_dir / "missing.toml")], "not found"),
        (["resume", "no-such-run"], ""),
        (["approve", "no-such-run"], ""),
        (["deny", "no-such-run"], ""),
        (["verdicts", "--run", "no-such-run"], None),
    ]
    for args, words in cases:
        out = assay(*args, timeout=120)
        if words is None:  # listing nothing is not an error
            assert out.returncode in (0, 2), out.stderr
            if out.returncode == 2:
                one_error_line(out.stderr)
            continue
        assert out.returncode == 2, (args, out.stdout, out.stderr)
        assert words in one_error_line(out.stderr), (args, out.stderr)
    # Typer's own usage errors are exit 2 as well.
    assert assay("run", timeout=60).returncode == 2
    assert assay("run", str(job), "--no-such-flag", timeout=60).returncode == 2


@pytest.mark.parametrize("manifest", ["no-such-manifest", "unsigned"])
def test_a_manifest_the_server_refuses_is_a_clear_error(job_dir, tmp_path, manifest):
    from agent_helpers import latest_run_id

    from assay.policies.manifest import shipped_manifest_path

    if manifest == "unsigned":
        copy = tmp_path / "mine.toml"
        copy.write_text(shipped_manifest_path("kernel-agent").read_text() + "\n# edited, never signed\n")
        manifest = str(copy)
    job = write_job(job_dir, manifest=manifest)
    out = assay("run", str(job), timeout=180)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "Traceback" not in out.stderr
    line = one_error_line(out.stderr)
    assert ("not signed" if manifest.endswith(".toml") else "no-such-manifest") in line
    # Refused before the run began: nothing half-written in the ledger.
    assert latest_run_id() is None


def test_python_m_assay_imports_nothing_from_the_working_directory(tmp_path):
    """Run from a folder with packages named like its dependencies (assay's own checkout is one:
    its kernels/ shadowed huggingface's `kernels`, which transformers imports), `python -m assay`
    loads the installed ones. A folder named `assay` itself is Python's `-m` lookup, not ours."""
    names = ("kernels", "typer", "rich", "pydantic", "pydantic_settings", "sqlalchemy", "click")
    tripped = plant_packages(tmp_path / "cwd", tmp_path / "tripped", names)
    out = assay("ledger", "verify", timeout=60, cwd=tmp_path / "cwd")
    assert out.returncode == 2 and "no ledger at" in out.stderr, out.stdout + out.stderr  # this home has none yet
    assert sorted(p.name for p in tripped.iterdir()) == []
    # The planting works: the same folder first on the path is imported.
    probe = subprocess.run([sys.executable, "-c", "import typer"], cwd=tmp_path / "cwd", capture_output=True, text=True)
    assert probe.returncode != 0 and (tripped / "typer").exists(), probe.stderr
