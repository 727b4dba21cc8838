"""Fixtures for the kernel verifier's tests.

Sandboxed tests share one cache folder per session (the op recorder is built once, each
candidate's C++ once), and reach a sandbox through the `need` fixture: skipped where no
backend works, a failure in CI.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

HERE = Path(__file__).parent
ROOT = HERE.parent.parent
CHEATS = HERE / "cheats"
HONEST = HERE / "honest"
SOFTMAX = ROOT / "examples" / "kernel" / "softmax.py"


def expected_cheats() -> dict[str, dict]:
    with open(CHEATS / "expected.toml", "rb") as f:
        return tomllib.load(f)


def sandbox_backend() -> tuple[bool, str]:
    from assay.sandbox.backends import availability

    found = availability()
    for name in ("docker", "bwrap"):
        ok, _ = found[name]
        if ok:
            return True, name
    return False, "no sandbox backend (docker or bwrap) works here: " + "; ".join(d for _, d in found.values())


class ScriptedAnswers:
    """The supervisor's side of an audit line as a worker's timed loop meets it: each report
    is kept, and answered with the next of `answers`."""

    def __init__(self, answers):
        self.answers, self.seen = list(answers), []

    def report(self, out):
        self.seen.append(out)
        return self.answers.pop(0)


@pytest.fixture
def scripted_answers():
    return ScriptedAnswers


@contextlib.contextmanager
def _spinning(per_cpu: int):
    spin = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(per_cpu * (os.cpu_count() or 1))
    ]
    try:
        yield
    finally:
        for p in spin:
            p.kill()
            p.wait()


@pytest.fixture
def cpu_hog():
    """`with cpu_hog(n):` keeps n spinning processes per CPU running beside the block."""
    return _spinning


@pytest.fixture(scope="session")
def kernel_cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("kernel-verifier-cache")


@pytest.fixture
def backend(need) -> str:
    ok, detail = sandbox_backend()
    need(ok, detail)
    return detail
