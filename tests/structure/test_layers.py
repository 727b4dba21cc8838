"""The house's walls, checked from the code's own imports (DESIGN.md, "Rooms").

cli/tui -> agents -> tools -> sandbox/policies; agents reach tools only through MCP (never
by import); verifiers never import agents or tools. A new import that crosses a wall fails
here, naming the file and the line.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ROOMS = ("agents", "tools", "sandbox", "policies", "verifiers", "kernels", "tui", "ledger", "cli")

# room -> rooms it may import (besides itself and the shared `assay` core: settings, errors).
ALLOWED = {
    "sandbox": set(),
    "policies": set(),
    "ledger": set(),
    "kernels": {"sandbox", "ledger"},
    "verifiers": {"sandbox", "ledger", "kernels"},
    "tools": {"sandbox", "policies", "ledger", "kernels"},
    "agents": {"policies", "ledger", "kernels"},
    "tui": {"agents", "ledger", "verifiers", "cli", "policies"},
    "cli": set(ROOMS),
}


def _imports(path: Path):
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.lineno, node.module
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name


def _violations(room: str) -> list[str]:
    found = []
    for path in sorted((ROOT / room).rglob("*.py")):
        if "harness" in path.parts:  # standalone scripts run inside sandboxes; they import no assay at all
            continue
        for line, module in _imports(path):
            parts = module.split(".")
            if parts[0] in ROOMS:
                found.append(f"{path.relative_to(ROOT)}:{line} imports the bare top-level name {module!r}")
            if parts[0] != "assay" or len(parts) < 2 or parts[1] not in ROOMS or parts[1] == room:
                continue
            if parts[1] not in ALLOWED[room]:
                found.append(f"{path.relative_to(ROOT)}:{line} imports assay.{parts[1]} ({room} may not)")
    return found


@pytest.mark.parametrize("room", ROOMS)
def test_room_imports_only_what_its_walls_allow(room):
    assert _violations(room) == []


def test_harness_scripts_import_no_assay():
    """Scripts that run inside sandboxes must stand alone: the sandbox does not see assay's source."""
    bad = []
    for path in sorted(ROOT.glob("*/harness/*.py")):
        for line, module in _imports(path):
            if module.split(".")[0] == "assay":
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    assert bad == []


def test_every_package_folder_ships_in_the_wheel():
    """pyproject lists packages by hand (the rooms are mapped into `assay`); a folder with an
    __init__.py that is not listed would be missing from a built wheel."""
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    mapped = {v: k for k, v in cfg["package-dir"].items()}
    listed = set(cfg["packages"])
    missing = []
    for init in ROOT.glob("*/**/__init__.py"):
        rel = init.parent.relative_to(ROOT)
        top = rel.parts[0]
        if top not in mapped or "tests" in rel.parts:
            continue
        name = ".".join([mapped[top], *rel.parts[1:]])
        if name not in listed:
            missing.append(name)
    assert missing == []
