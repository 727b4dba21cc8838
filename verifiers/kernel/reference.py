"""The reference stage: the task read from its syntax tree, and its Model run in a fresh
sandbox on held-out inputs (seeds from `secrets`, other values of its size constants); the
inputs and expected outputs every candidate is judged by."""

from __future__ import annotations

import ast
import contextlib
import hashlib
import importlib
import secrets
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from assay.errors import UserError
from assay.verifiers.common.heldout import HeldOut, shape_variants, size_constants  # noqa: F401  (shape_variants: the tests' too)
from assay.verifiers.kernel import runtime as rt
from assay.verifiers.kernel.baseline import _compile_warm
from assay.verifiers.kernel.criteria import Criteria, load_criteria
from assay.verifiers.kernel.scan import save_tensor_names

Progress = Callable[[str, float], None]

# ------------------------------------------------------------------------------ the task


@dataclass(frozen=True)
class TaskInfo:
    source: str
    sha256: str
    sizes: dict[str, int]  # module-level int constants that are sizes


def read_source(path: str | Path, what: str) -> str:
    p = Path(path)
    if not p.is_file():
        raise UserError(f"{what} {p} does not exist or is not a file", f"give the path of the {what} (.py)")
    try:
        return p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{what} {p} cannot be read ({exc})", f"give a readable UTF-8 {what} file") from None


def inspect_task(source: str, criteria: Criteria, path: str | Path = "task") -> TaskInfo:
    """The task's shape, read from its syntax tree (the task is not run in this process)."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise UserError(f"task {path} does not parse: {exc.msg} (line {exc.lineno})", "fix the task file") from None
    names = {n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    missing = [n for n in ("Model", "get_inputs", "get_init_inputs") if n not in names]
    if missing:
        raise UserError(
            f"task {path} defines no {', '.join(missing)}",
            "a KernelBench task defines class Model(nn.Module), get_inputs() and get_init_inputs()",
        )
    sizes = size_constants(tree, criteria.correctness.min_size_constant)
    return TaskInfo(source, hashlib.sha256(source.encode()).hexdigest(), sizes)


# ------------------------------------------------------------------------- the reference


@dataclass
class ReferenceRun:
    """The reference side of a verification: runs, inputs and expected outputs on disk."""

    task_path: Path
    task: TaskInfo
    criteria: Criteria
    backend: str
    cache_dir: Path
    root: Path
    init_seed: int
    runs: list[dict]  # planned runs that the reference completed, in check order
    shapes_note: str
    opwatch_dir: Path | None
    compile_warm: dict | None = None
    warming: Future | None = None  # the compile warm-up, started once the reference has run
    # Wall seconds of this verification's stages (metrics.verifier_phases_s): where a slow
    # verdict spent its time.
    phase_s: dict = field(default_factory=dict)
    metrics: dict = field(default_factory=dict)

    @property
    def ref_ws(self) -> Path:
        return self.root / "reference"

    @property
    def inputs_dir(self) -> Path:
        return self.ref_ws / "inputs"

    def close(self) -> None:
        if self.warming is not None:
            self.warming.exception()  # let a warm-up still running finish before its folder goes
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def warm_task(
    task_path: str | Path,
    criteria: Criteria | str = "kernel-default",
    backend: str = "auto",
    cache_dir: Path | None = None,
) -> None:
    """Fill the verifier's caches for a task before any candidate exists: the op recorder and
    torch.compile's inductor cache of the task's Model. The runtime starts this beside the agent,
    at the lowest CPU priority, so a first verification finds both built (or waits on the lock of
    one still building) instead of paying for them after the agent is done. It compiles from the
    task's own inputs (no reference run, no secret inputs); nothing of it reaches a verdict."""
    rt.BACKGROUND["on"] = True
    crit = load_criteria(criteria) if isinstance(criteria, str) else criteria
    task = inspect_task(read_source(task_path, "task"), crit, task_path)
    cache_dir = Path(cache_dir) if cache_dir else rt.default_cache_dir()
    root = Path(tempfile.mkdtemp(prefix="assay-kernel-warm-"))
    try:
        # No reference run: the compile starts at once, from the task's own inputs, while the
        # op recorder builds; the scan's torch names are saved meanwhile.
        with ThreadPoolExecutor(1) as pool:
            opwatch = pool.submit(rt.opwatch_library, cache_dir, backend)
            save_tensor_names()
            _task_folder(root, task)
            (root / "reference" / "inputs").mkdir(parents=True)
            ref = ReferenceRun(
                Path(task_path), task, crit, backend, cache_dir, root, secrets.randbits(62), [], "", None
            )
            _compile_warm(ref, None)
            opwatch.result()
    finally:
        rt.BACKGROUND["on"] = False
        shutil.rmtree(root, ignore_errors=True)


def _say(progress: Progress | None, stage: str, fraction: float) -> None:
    if progress is not None:
        progress(stage, fraction)


def prepare_reference(
    task_path: str | Path,
    criteria: Criteria | str = "kernel-default",
    backend: str = "auto",
    cache_dir: Path | None = None,
    progress: Progress | None = None,
) -> ReferenceRun:
    """Run the task's Model on fresh secret inputs in a sandbox. Several candidates may be
    verified against one ReferenceRun (each in its own sandboxes)."""
    crit = load_criteria(criteria) if isinstance(criteria, str) else criteria
    source = read_source(task_path, "task")
    task = inspect_task(source, crit, task_path)
    cache_dir = Path(cache_dir) if cache_dir else rt.default_cache_dir()
    _say(progress, "op recorder", 0.02)
    # Comparing outputs needs torch in this process (1.7 s to import): it loads while the
    # reference runs in its sandbox instead of after the check run (and the next scan on this
    # machine finds torch's tensor names saved).
    threading.Thread(target=_load_torch, daemon=True).start()
    root = Path(tempfile.mkdtemp(prefix="assay-kernel-verify-"))
    # The op recorder (a g++ build the first time) and the reference run need each other's
    # nothing: on two cores they overlap.
    ref = None
    with ThreadPoolExecutor(1) as pool:
        opwatch = pool.submit(rt.opwatch_library, cache_dir, backend)
        try:
            with _stage(phases := {}, "reference"):
                ref = _reference(Path(task_path), task, crit, backend, cache_dir, root, None, progress)
            ref.phase_s.update(phases)
            # The compile warm-up needs only the reference's inputs: it takes the core the
            # reference run leaves while the op recorder builds.
            ref.warming = ThreadPoolExecutor(1).submit(_compile_warm, ref, None)
            with _stage(ref.phase_s, "op_recorder_wait"):
                ref.opwatch_dir = opwatch.result()
            return ref
        except BaseException:
            opwatch.cancel()
            if ref is not None and ref.warming is not None:
                ref.warming.exception()  # its sandbox writes under root
            shutil.rmtree(root, ignore_errors=True)
            raise


@contextlib.contextmanager
def _stage(phases: dict, name: str):
    """Record the wall seconds of the block under `name` (not when it raises)."""
    started = time.monotonic()
    yield
    phases[name] = round(time.monotonic() - started, 3)


def _load_torch() -> None:
    importlib.import_module("safetensors.torch")
    save_tensor_names()


def _task_folder(root: Path, task: TaskInfo) -> None:
    """The task as the sandboxes see it (bound read-only at rt.IN_TASK)."""
    (root / "task").mkdir()
    (root / "task" / "task.py").write_text(task.source, encoding="utf-8")


def _reference(task_path, task, crit, backend, cache_dir, root, opwatch_dir, progress) -> ReferenceRun:
    rng = HeldOut().rng  # the verifier's secret; never leaves this process whole
    init_seed = rng.getrandbits(62)
    _task_folder(root, task)
    ws = root / "reference"
    for sub in ("inputs", "expected", "home"):
        (ws / sub).mkdir(parents=True)
    c = crit.correctness
    trials = [{"id": i, "kind": "trial", "seed": rng.getrandbits(62), "overrides": {}} for i in range(c.trials)]
    variants = shape_variants(task.sizes, c.other_shapes + 1, rng) if task.sizes else []
    shaped = [
        {"id": c.trials + k, "kind": "shape", "seed": rng.getrandbits(62), "overrides": v}
        for k, v in enumerate(variants)
    ]
    plan = {
        "role": "reference",
        "task": f"{rt.IN_TASK}/task.py",
        "init_seed": init_seed,
        "runs": trials + shaped,
        "inputs_dir": f"{rt.WORKDIR}/inputs",
        "expected_dir": f"{rt.WORKDIR}/expected",
    }
    lim = crit.limits
    timeout = lim.import_timeout_s + len(plan["runs"]) * lim.forward_timeout_s
    _say(progress, "reference runs", 0.08)
    sandbox = rt.open_verification_sandbox(
        ws,
        {**rt.harness_binds(), rt.IN_TASK: root / "task"},
        rt.sandbox_limits(lim.sandbox_memory_mb, lim.sandbox_pids, timeout + 30),
        backend,
    )
    try:
        report, res = rt.run_plain(sandbox, plan, timeout, rt.base_env())
    finally:
        sandbox.close()
    if report is None or "runs" not in report:
        why = res.killed or (report or {}).get("error") or (res.stderr or res.stdout)[-1500:]
        raise UserError(
            f"the task's reference did not run in the sandbox: {why}", "run the task file on its own and fix it"
        )
    done = {r["id"]: r for r in report["runs"] if isinstance(r, dict) and "id" in r}
    for t in trials:
        r = done.get(t["id"], {})
        if not r.get("ok"):
            raise UserError(
                f"the task's Model fails on its own inputs: {r.get('error', 'no result')}",
                "fix the task so Model(*get_init_inputs())(*get_inputs()) runs",
            )
        t.update(r)
    good_shapes = []
    for s in shaped:
        r = done.get(s["id"], {})
        if r.get("ok") and len(good_shapes) < c.other_shapes:
            s.update(r)
            good_shapes.append(s)
    if not task.sizes:
        note = "the task has no module-level size constants to vary"
    elif len(good_shapes) < c.other_shapes:
        note = f"only {len(good_shapes)} of {c.other_shapes} other shapes ran in the task's own Model"
    else:
        note = ""
    runs = _check_order(trials, good_shapes)
    return ReferenceRun(task_path, task, crit, backend, cache_dir, root, init_seed, runs, note, opwatch_dir)


def _check_order(trials: list[dict], shapes: list[dict]) -> list[dict]:
    """Trials and shapes interleaved; trials 2 and 4 reuse the input tensors of trials 1 and 3
    (same memory, new values), so a cache keyed on data_ptr or shape replays visibly."""
    order = []
    shapes = list(shapes)
    for i, t in enumerate(trials):
        t = dict(t)
        t["reuse_buffers_of"] = trials[i - 1]["id"] if i in (2, 4) else None
        order.append(t)
        if i in (2, 3) and shapes:
            order.append(dict(shapes.pop(0), reuse_buffers_of=None))
    order.extend(dict(s, reuse_buffers_of=None) for s in shapes)
    return order
