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
    raw: dict = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, path: Path | str, d: dict) -> "TaskInfo":
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
            raw=d,
        )

    @property
    def nodes(self) -> list[dict]:
        return self.graph["nodes"]

    def ref_meta(self, ref: str) -> dict:
        """Shape and dtype of a graph value ("%in0", "%p1", "%n3")."""
        kind, idx = ref[1:].rstrip("0123456789"), int(ref.lstrip("%inpn"))
        if kind == "in":
            return self.inputs[idx]
        if kind == "p":
            return self.params[idx]
        return self.nodes[idx]
