"""Job files: TOML, validated, every error naming the field and the fix.

Thresholds never appear here: they belong to the verifier's criteria profile, which a job
names but cannot change.
"""

from __future__ import annotations

import ast
import stat
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, cast

from pydantic import BaseModel, ConfigDict, Field, SerializeAsAny, ValidationError, ValidationInfo, field_validator

from assay.agents.kinds import AgentKind, agent_kind, names
from assay.errors import UserError


class _Strict(BaseModel):
    # strict: TOML values carry their types, and a job saying steps = "3" or steps = true has
    # made a mistake to name, not one to guess around (lax mode made true one step).
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class Budget(_Strict):
    steps: int = Field(default=40, ge=1, le=10_000, description="model requests the agent may make")
    minutes: float = Field(default=10, gt=0, le=24 * 60)
    tokens: int | None = Field(default=None, ge=1, description="total tokens; unlimited for the playbook")


class SandboxChoice(_Strict):
    backend: Literal["auto", "docker", "bwrap"] = "auto"


class PaddingChoice(_Strict):
    enabled: bool = False
    size_bucket: int = Field(default=4096, ge=256)
    time_quantum_s: float = Field(default=0.25, gt=0)
    default_ceiling_s: float | None = Field(default=None, gt=0)


class Job(_Strict):
    kind: str = Field(..., description="job kind, e.g. kernel")
    task: str = Field(..., min_length=1, description="task file, relative to the job file")
    brain: str = Field(
        default="playbook", min_length=1, description="playbook | local | provider:model | an OpenAI-compatible URL"
    )
    # Both default to the kind's own (load_job fills them in): never another kind's.
    manifest: str = Field(..., min_length=1, description="a shipped manifest name or a path")
    criteria: str = Field(..., pattern=r"^[A-Za-z0-9_.-]{1,64}$", description="criteria profile name")
    budget: Budget = Budget()
    sandbox: SandboxChoice = SandboxChoice()
    padding: PaddingChoice = PaddingChoice()
    # The table named after the kind (e.g. [kernel]), as that kind's own options model.
    options: SerializeAsAny[BaseModel]
    # Where the file was read from; task paths resolve against it.
    source: Path | None = Field(default=None, exclude=True)

    @field_validator("options", mode="before")
    @classmethod
    def _kind_options(cls, v: Any, info: ValidationInfo) -> BaseModel:
        kind = info.data.get("kind")
        if not isinstance(kind, str):
            raise ValueError("needs a valid kind")
        model = agent_kind(kind).options_model
        if isinstance(v, model):
            return v
        return model.model_validate(v)

    @property
    def agent_kind(self) -> AgentKind:
        return agent_kind(self.kind)

    @field_validator("brain")
    @classmethod
    def _brain_shape(cls, v: str) -> str:
        if v in ("playbook", "local") or ":" in v:
            return v
        raise ValueError("must be 'playbook', 'local', a pydantic-ai model string like 'openai-chat:gpt-4o', or a URL")

    @property
    def task_path(self) -> Path:
        base = self.source.parent if self.source else Path.cwd()
        return (base / self.task).resolve()


def _field(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(p)[:SHOWN] for p in loc) or "(top level)"


# A job file is a dozen lines; anything near this is not one (and parsing it would take long).
MAX_JOB_BYTES = 256 * 1024
# How much of a value from the file an error message may echo.
SHOWN = 120


def load_job(path: str | Path) -> Job:
    """Read and validate a job file; anything wrong is one UserError naming the field."""
    try:
        try:
            return _load(Path(path))
        except RecursionError:
            raise UserError(
                f"job file {path} nests arrays or tables too deeply", "a job file needs two levels at most"
            ) from None
    except UserError as exc:
        # One line, bounded: field names and values come from the file and may hold anything.
        raise UserError(_line(exc.problem, 600), _line(exc.fix, 300) if exc.fix else None) from None


def _load(p: Path) -> Job:
    try:
        st = p.stat()
        if not stat.S_ISREG(st.st_mode):
            raise UserError(f"job file {_show(str(p))} is not a regular file", "give the path of a .toml job file")
        if st.st_size > MAX_JOB_BYTES:
            raise UserError(
                f"job file {_show(str(p))} is {st.st_size} bytes; a job file is at most {MAX_JOB_BYTES}",
                "give a job file, e.g. examples/kernel/softmax.toml",
            )
        with open(p, "rb") as fh:
            raw = fh.read(MAX_JOB_BYTES + 1)
    except FileNotFoundError:
        raise UserError(
            f"job file {_show(str(p))} not found",
            "give the path of a .toml job file, e.g. examples/kernel/softmax.toml",
        ) from None
    except (OSError, ValueError) as exc:  # permissions, a name too long, a NUL in the name
        raise UserError(
            f"job file {_show(str(p))} cannot be read ({exc.__class__.__name__})", "give a readable .toml file"
        ) from None
    if len(raw) > MAX_JOB_BYTES:
        raise UserError(
            f"job file {_show(str(p))} is over {MAX_JOB_BYTES} bytes",
            "give a job file, e.g. examples/kernel/softmax.toml",
        )
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise UserError(f"job file {p} is not UTF-8 text", "save it as UTF-8 TOML") from None
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"job file {p} is not valid TOML: {exc}", "fix the TOML syntax at that line") from None
    except RecursionError:
        raise UserError(
            f"job file {p} nests arrays or tables too deeply", "a job file needs two levels at most"
        ) from None
    for banned in ("threshold", "thresholds", "tolerance", "min_speedup", "seed"):
        if _mentions(data, banned):
            raise UserError(
                f"job file {p} sets '{banned}'",
                'criteria live with the verifier; name a profile with criteria = "..." instead',
            )
    kind_name = data.get("kind")
    if not isinstance(kind_name, str) or kind_name not in names():
        raise UserError(
            f"job file {p}: field 'kind' is {_show(kind_name)}",
            f"set kind to one of: {', '.join(names())}",
        )
    kind = agent_kind(kind_name)
    if "options" in data or "source" in data:
        bad = "options" if "options" in data else "source"
        raise UserError(
            f"job file {p}: field '{bad}' is not a job field", f"put {kind_name} options in the [{kind_name}] table"
        )
    data = dict(data)
    table = data.pop(kind_name, {})
    data.setdefault("manifest", kind.default_manifest)
    data.setdefault("criteria", kind.default_criteria)
    try:
        options = kind.options_model.model_validate(table)
        job = Job.model_validate({**data, "options": options})
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = err["loc"] if exc.title == Job.__name__ else (kind_name, *err["loc"])
        raise UserError(f"job file {p}: field '{_field(loc)}' {err['msg'].lower()}", _hint(err)) from None
    job = job.model_copy(update={"source": p.resolve()})
    try:
        found = job.task_path.is_file()
    except (OSError, ValueError) as exc:  # a name too long, a NUL byte
        raise UserError(
            f"job file {p}: field 'task' is not a usable path ({exc.__class__.__name__})",
            "set task to a path relative to the job file",
        ) from None
    if not found:
        raise UserError(
            f"job file {p}: task file {_show(str(job.task_path))} not found",
            "set task to a path relative to the job file",
        )
    tree = _check_task(p, job.task_path)
    _check_names(p, job.task_path, tree, kind_name, tuple(getattr(kind, "task_names", ())))
    return job


def _check_names(job_file: Path, task: Path, tree: ast.Module, kind: str, names: tuple[str, ...]) -> None:
    """The module-level names a kind's task file must define (its `task_names`), so a task of
    another kind is one line here, not a run whose agent finds nothing to work on."""
    if not names:
        return
    found: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.add(node.name)
        elif isinstance(node, ast.Assign):
            found.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            found.add(node.target.id)
    missing = [n for n in names if n not in found]
    if missing:
        raise UserError(
            f"job file {job_file}: task {_show(str(task))} defines no {', '.join(missing)}",
            f"a {kind} task defines {', '.join(names)} (DESIGN.md, Job kinds)",
        )


# A task file is a page or two of Python; anything near this is not one.
MAX_TASK_BYTES = 1 << 20


def _check_task(job_file: Path, task: Path) -> ast.Module:
    """The task is a Python file that parses (its tree, for the kind's checks). Says so without quoting it: a job naming
    /etc/passwd or a key file must not get its first line echoed back."""
    where = f"job file {job_file}: task {_show(str(task))}"
    fix = "set task to the job's Python task file (Model, get_inputs, ...), relative to the job file"
    if task.suffix != ".py":
        raise UserError(f"{where} is not a Python file (.py)", fix)
    try:
        with open(task, "rb") as fh:
            raw = fh.read(MAX_TASK_BYTES + 1)
    except OSError as exc:
        raise UserError(f"{where} cannot be read ({exc.__class__.__name__})", fix) from None
    if len(raw) > MAX_TASK_BYTES:
        raise UserError(f"{where} is over {MAX_TASK_BYTES} bytes", fix)
    try:
        return ast.parse(raw.decode("utf-8"), filename=task.name)
    except UnicodeDecodeError:
        raise UserError(f"{where} is not UTF-8 text", fix) from None
    except (SyntaxError, ValueError) as exc:
        line = getattr(exc, "lineno", None)
        raise UserError(
            f"{where} is not valid Python (line {line})" if line else f"{where} is not valid Python", fix
        ) from None


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= SHOWN else text[: SHOWN - 3] + "..."


def _line(text: str, limit: int) -> str:
    """`text` on one line (control characters escaped) and at most `limit` characters."""
    out = "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text)
    return out if len(out) <= limit else out[: limit - 3] + "..."


def _mentions(data: object, key: str) -> bool:
    if isinstance(data, dict):
        mapping = cast("dict[object, object]", data)
        return any(k == key or _mentions(v, key) for k, v in mapping.items())
    if isinstance(data, list):
        return any(_mentions(v, key) for v in cast("list[object]", data))
    return False


def _hint(err: Mapping[str, Any]) -> str:
    kind = err.get("type", "")
    if kind == "extra_forbidden":
        return "remove it; allowed top-level fields: " + ", ".join(
            sorted(Job.model_fields.keys() - {"source", "options"})
        )
    if kind == "missing":
        return "add it to the job file"
    if kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        return f"use a value that is {err['msg'].lower().removeprefix('input should be ')}"
    if kind == "literal_error":
        return f"use one of: {err.get('ctx', {}).get('expected', '')}"
    return "see examples/kernel/*.toml for a valid job file"
