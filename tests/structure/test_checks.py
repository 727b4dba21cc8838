"""The static checks `make lint` and `make typecheck` run hold on the tree, and each fails on what
it is for: a copy of a module with an unused import planted fails ruff; one with a misformatted
line fails the format check; a type error, an unresolved `assay.` import, or an unannotated
function on the strict path fails pyright. (Each runs on a temporary copy, with the project's own
configuration.) The tree-wide pyright run is `make typecheck`, not repeated here: a minute."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUFF = shutil.which("ruff", path=str(Path(sys.executable).parent))
PYRIGHT = shutil.which("pyright", path=str(Path(sys.executable).parent))
ROOMS = ["agents", "tools", "sandbox", "policies", "verifiers", "kernels", "tui", "ledger", "cli", "reports"]


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


# --- pyright ----------------------------------------------------------------------------------


def _pyright(cwd: Path) -> list[dict]:
    """pyright's errors on the copy, from its JSON report: each with its file, rule and message."""
    out = subprocess.run(
        [PYRIGHT, "--outputjson", "-p", str(cwd / "pyproject.toml")],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )
    report = json.loads(out.stdout)
    errors = [d for d in report["generalDiagnostics"] if d["severity"] == "error"]
    assert (out.returncode == 1) == bool(errors), out.stdout  # the exit code says what the report says
    return errors


def _where(errors: list[dict]) -> set[tuple[str, str]]:
    return {(Path(e["file"]).name, e.get("rule", "")) for e in errors}


@pytest.fixture
def typed_copy(tmp_path, need) -> Path:
    """The project's pyright configuration over a package of two modules: assay/typed.py, which
    the configuration lists as strict, and assay/loose.py, which it does not."""
    need(PYRIGHT is not None, "pyright is not installed (make install-test installs it)")
    need(shutil.which("node") is not None, "pyright needs Node.js (make test's services step installs it)")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / ".venv").symlink_to(ROOT / ".venv" if (ROOT / ".venv").exists() else Path(sys.prefix))
    pkg = tmp_path / "assay"
    pkg.mkdir()
    for room in ROOMS:  # the configuration includes them; empty here
        (pkg / room).mkdir()
    shutil.copy(ROOT / "assay" / "__init__.py", pkg / "__init__.py")
    shutil.copy(ROOT / "assay" / "typed.py", pkg / "typed.py")
    (pkg / "loose.py").write_text("def double(x):\n    return x * 2\n")
    return tmp_path


def test_pyright_passes_the_copy_and_fails_each_planted_error(typed_copy):
    # One test, four pyright runs: each start of its Node process costs seconds.
    assert _pyright(typed_copy) == []
    typed = typed_copy / "assay" / "typed.py"
    original = typed.read_text()

    typed.write_text(original + '\n\ndef count() -> int:\n    return "three"\n')
    assert _where(_pyright(typed_copy)) == {("typed.py", "reportReturnType")}

    typed.write_text(original + "\nfrom assay.nowhere import thing  # noqa: E402\n")
    errors = _pyright(typed_copy)
    assert ("typed.py", "reportMissingImports") in _where(errors)
    assert any("assay.nowhere" in e["message"] for e in errors)

    # Strict where the configuration says so, and only there: the same unannotated function
    # passes in loose.py and fails in typed.py.
    typed.write_text(original + "\n\ndef double(x):\n    return x * 2\n")
    where = _where(_pyright(typed_copy))
    assert ("typed.py", "reportMissingParameterType") in where
    assert {file for file, _ in where} == {"typed.py"}


def test_a_type_ignore_comment_silences_nothing(typed_copy):
    # Only a `pyright: ignore[rule]` may silence a line; a bare `type: ignore` is not honoured.
    typed = typed_copy / "assay" / "typed.py"
    bare = "# " + "type: " + "ignore"  # spelled apart so the scan below does not find it here
    typed.write_text(typed.read_text() + f'\n\ndef count() -> int:\n    return "three"  {bare}\n')
    assert _where(_pyright(typed_copy)) == {("typed.py", "reportReturnType")}


# What is committed: build/ copies and the links under assay/ would count files twice or stale.
SOURCES = [
    ROOT / line
    for line in subprocess.run(
        ["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.splitlines()
]
IGNORE = re.compile(r"#\s*pyright:\s*ignore(?P<rules>\[[^\]]*\])?(?P<rest>.*)$")


def test_every_silenced_line_names_its_rule_and_says_why():
    bad = []
    for path in SOURCES:
        for n, line in enumerate(path.read_text().splitlines(), 1):
            where = f"{path.relative_to(ROOT)}:{n}"
            if re.search(r"#\s*type:\s*ignore", line):
                bad.append(f"{where}: a type: ignore (pyright does not honour it; name the rule)")
            m = IGNORE.search(line)
            if m is None:
                continue
            if not m["rules"] or m["rules"] == "[]":
                bad.append(f"{where}: a pyright: ignore that names no rule")
            # The reason is on the line (after the ignore) or in a comment just above it.
            above = path.read_text().splitlines()[n - 2].strip() if n > 1 else ""
            if not m["rest"].strip(" #") and not above.startswith("#"):
                bad.append(f"{where}: a pyright: ignore with no reason beside or above it")
    assert not bad, "\n".join(bad)


def test_make_typecheck_checks_the_files_it_names():
    # pyright takes the first pyrightconfig.json above the working folder over the project's
    # pyproject.toml: a stray one in /tmp once made a clean clone there check no file at all, and
    # a path in `include` that does not exist is a warning with exit code 0. So the Makefile
    # names the configuration, and every path the configuration names must be there.
    import tomllib

    make = (ROOT / "Makefile").read_text()
    assert re.search(r"bin/pyright -p pyproject\.toml\b", make), "make typecheck must run pyright -p pyproject.toml"
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pyright"]
    missing = [p for p in conf["include"] + conf.get("strict", []) if not (ROOT / p).exists()]
    assert not missing, f"pyright is told to check paths that do not exist: {missing}"
