"""The house's walls, checked from the code's own imports (DESIGN.md, "Rooms").

cli/tui -> agents -> tools -> sandbox/policies; agents reach tools only through MCP (never
by import); verifiers never import agents or tools; the TUI does not import the CLI (both draw
on reports). A new import that crosses a wall fails here, naming the file and the line, and so
does a kind registry's row (an import made by name, at run time) that points outside its room.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ROOMS = ("agents", "tools", "sandbox", "policies", "verifiers", "kernels", "tui", "ledger", "cli", "reports")

# room -> rooms it may import (besides itself and the shared `assay` core: settings, errors, runspec, typed).
ALLOWED = {
    "sandbox": set(),
    "policies": set(),
    "ledger": set(),
    "kernels": {"sandbox", "ledger"},
    "verifiers": {"sandbox", "ledger", "kernels"},
    "tools": {"sandbox", "policies", "ledger", "kernels"},
    "agents": {"policies", "ledger", "kernels"},
    "reports": {"ledger", "verifiers"},
    "tui": {"agents", "ledger", "verifiers", "policies", "reports"},
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


# Each room's kind registry: the rows it imports by name when a job of that kind runs.
REGISTRIES = {
    "agents": ROOT / "agents" / "kinds.py",
    "tools": ROOT / "tools" / "kinds.py",
    "verifiers": ROOT / "verifiers" / "kinds.py",
}


def _registry_rows(path: Path) -> dict[str, str]:
    tree = ast.parse(path.read_text())
    for node in tree.body:
        target = (
            node.target
            if isinstance(node, ast.AnnAssign)
            else (node.targets[0] if isinstance(node, ast.Assign) else None)
        )
        if isinstance(target, ast.Name) and target.id == "SHIPPED":
            return ast.literal_eval(node.value)
    raise AssertionError(f"{path.relative_to(ROOT)} has no SHIPPED rows")


def _module_file(module: str) -> Path | None:
    parts = module.split(".")
    if parts[0] != "assay" or len(parts) < 2 or parts[1] not in ROOMS:
        return None
    base = ROOT.joinpath(parts[1], *parts[2:])
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


@pytest.mark.parametrize("room", sorted(REGISTRIES))
def test_kind_registries_point_inside_their_own_room(room):
    """A row is an import the static walk above cannot see: it must name a module of the
    registry's own room (so the verifier's rows never reach agents or tools), which exists, and
    whose own imports the walk above covers."""
    rows = _registry_rows(REGISTRIES[room])
    assert rows, f"{room}'s registry has no kinds"
    bad = []
    for kind, target in rows.items():
        module = target.partition(":")[0]
        if not module.startswith(f"assay.{room}."):
            bad.append(f"{room} kind {kind!r} -> {target} (outside assay.{room})")
        elif _module_file(module) is None:
            bad.append(f"{room} kind {kind!r} -> {target} (no such module)")
    assert bad == []


def test_every_kind_is_in_every_registry():
    kinds = {room: set(_registry_rows(path)) for room, path in REGISTRIES.items()}
    assert len({frozenset(k) for k in kinds.values()}) == 1, kinds


def test_harness_scripts_import_no_assay():
    """Scripts that run inside sandboxes must stand alone: the sandbox does not see assay's source."""
    bad = []
    for path in sorted([*ROOT.glob("*/harness/*.py"), *ROOT.glob("*/*/harness/*.py")]):
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
