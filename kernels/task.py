"""What the harness learned about a task (inspect_task.py's JSON), as a typed object."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class TaskInfo:
    path: Path
    graph: dict
    inputs: list[dict]
    params: list[dict]
    init_inputs: list[dict]
    init_signature: list[str] | None
    forward_signature: list[str] | None
    init_recipe: dict
    device: dict
    torch: str = ""
    # Each constructor parameter's name, default and annotation (inspect_task.describe_param).
    init_params: list[dict] | None = None
    # The task's own Model.__init__ as a candidate repeats it (harness/own_init.py), or why not.
    own_init: dict = field(default_factory=dict)
    raw: dict = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, path: Path | str, d: dict) -> TaskInfo:
        return cls(
            path=Path(path),
            graph=d["graph"],
            inputs=d["inputs"],
            params=d["params"],
            init_inputs=d["init_inputs"],
            init_signature=d.get("init_signature"),
            forward_signature=d.get("forward_signature"),
            init_recipe=d.get("init_recipe") or {"steps": [], "replays": False, "symbols": {}, "constants": {}},
            device=d.get("device") or {},
            torch=d.get("torch", ""),
            init_params=d.get("init_params"),
            own_init=d.get("own_init") or {"why": "the inspection predates the constructor's copy"},
            raw=d,
        )

    @property
    def nodes(self) -> list[dict]:
        return self.graph["nodes"]

    def ref_meta(self, ref: str) -> dict:
        """Shape and dtype of a graph value ("%in0", "%p1", "%n3")."""
        kind = ref[1:].rstrip("0123456789")
        idx = int(ref[1 + len(kind) :])
        if kind == "in":
            return self.inputs[idx]
        if kind == "p":
            return self.params[idx]
        return self.nodes[idx]


def size_constants(source: str) -> dict[str, int]:
    """The task's module-level UPPER_CASE integer constants: its sizes, by KernelBench convention."""
    import ast

    out = {}
    for node in ast.parse(source).body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id.isupper()
            and isinstance(node.value, ast.Constant)
            and type(node.value.value) is int
        ):
            out[node.targets[0].id] = node.value.value
    return out


def resized(task: Path, dest: Path, sizes: dict[str, int]) -> Path:
    """A copy of `task` at `dest` with some size constants overridden (appended, so the task's
    get_inputs/get_init_inputs read the new values). For tests, the interpreter, or a verifier."""
    src = task.read_text()
    lines = [f"{k} = {int(v)}" for k, v in sizes.items()]
    dest.write_text(src + "\n# sizes overridden by assay\n" + "\n".join(lines) + "\n")
    return dest


def shrunk(task: Path, dest: Path) -> Path:
    """Small odd sizes (no multiple of a vector width, so every tail path runs)."""
    sizes = {k: (max(3, v // 32 + 3) if v > 8 else v) for k, v in size_constants(task.read_text()).items()}
    return resized(task, dest, sizes)
