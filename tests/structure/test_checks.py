"""The static checks `make lint` runs hold on the tree, and each fails on what it is for: a copy of
a module with an unused import planted fails ruff; one with a misformatted line fails the format
check. (Both run on a temporary copy, with the project's own configuration.)"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUFF = shutil.which("ruff", path=str(Path(sys.executable).parent))


def _ruff(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([RUFF, *args], cwd=cwd, capture_output=True, text=True, timeout=120)


@pytest.fixture
def copy(tmp_path, need) -> Path:
    need(RUFF is not None, "ruff is not installed (make install-test installs it)")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / "policies").mkdir()
    shutil.copy(ROOT / "policies" / "paths.py", tmp_path / "policies" / "paths.py")
    return tmp_path


def test_the_tree_passes_lint_and_format():
    if RUFF is None:
        pytest.skip("ruff is not installed (make install-test installs it)")
    assert _ruff("check", ".", cwd=ROOT).returncode == 0
    assert _ruff("format", "--check", ".", cwd=ROOT).returncode == 0


def test_an_unused_import_fails_the_lint(copy):
    assert _ruff("check", ".", cwd=copy).returncode == 0
    module = copy / "policies" / "paths.py"
    text = module.read_text()
    module.write_text(
        text.replace("from __future__ import annotations\n", "from __future__ import annotations\n\nimport json\n", 1)
    )
    out = _ruff("check", ".", cwd=copy)
    assert out.returncode == 1 and "F401" in out.stdout and "json" in out.stdout


def test_a_misformatted_line_fails_the_format_check(copy):
    assert _ruff("format", "--check", ".", cwd=copy).returncode == 0
    module = copy / "policies" / "paths.py"
    module.write_text(module.read_text() + "\nX = {  'a':1 }\n")
    out = _ruff("format", "--check", ".", cwd=copy)
    assert out.returncode == 1 and "paths.py" in out.stdout
