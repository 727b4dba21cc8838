"""The kernel verifier: is a candidate ModelNew correct, honest, and really faster?

    report = verify_kernel("examples/kernels/softmax.py", "candidate.py", "kernel-default")

What it does, in order (each stage only if the previous ones passed, except where noted):

1. Source scan of the candidate text in this process (kernel_scan): imports, torch compute
   reached by name in Python or inline C++, dynamic code, system access, monkeypatching.
2. Reference runs in a fresh sandbox: the task's Model on `trials` inputs drawn from seeds
   made here with `secrets` (passed over stdin, never written where a candidate can read)
   and on `other_shapes` variants of the task's module-level size constants. Inputs and
   expected outputs are written to the reference workspace; only the inputs are ever bound
   into a candidate's sandbox.
3. Check run in a fresh candidate sandbox, under the supervisor: the candidate on every run,
   with the op recorder armed around each forward (every thread), the idle window after
   each return watched from outside, and each output cloned the moment forward returns and
   written out. Outputs are compared here, in the verifier's process. The C++ the candidate
   built is then read for the torch symbols it imports, and every library it opened or function
   it took through ctypes is checked to be its own build (torch's C kernels skip the recorder).
4. Timing in another fresh sandbox: eager Model, torch.compile(Model), a plain copy of the
   task's bytes and the candidate, interleaved round by round under one supervisor that
   holds the clock, stops the candidate's processes while a reference runs, and audits one
   timed iteration of every round against the eager Model's output for the same input.
   Each subject is warmed up for a time (not only a few calls) and its rounds sized from
   calibration rounds of growing length. Every call of these rounds sees one element of every
   input row changed, so a candidate that keeps the last input and output and recomputes only
   the rows that changed must recompute them all. Then fresh rounds of eager and the
   candidate, every call on an input no call saw before, written by the reference while the
   candidate is stopped: the speedup credited is at most `fresh_slack` times the one they
   show (what survives of remembering inputs must survive that too). While the candidate
   runs, its threads' instructions are sampled every `sample_us` of CPU time: a kernel of
   torch's reached by address, which no op record, ctypes hook or symbol shows, shows there
   (kernel_samples). The audited outputs are
   copied into memory made before the clock starts, so no subject's round pays page faults
   the harness caused.

Every check has its own name (see CHECK_ORDER); a failed one adds "name: why" to `reasons`.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import importlib
import json
import math
import os
import random
import secrets
import shutil
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from assay.errors import UserError
from assay.sandbox.base import SandboxError
from assay.verifiers import kernel_runtime as rt
from assay.verifiers.criteria import Criteria, load_criteria
from assay.verifiers.kernel_judge import (
    Checks,
    compare,
    cpu_share,
    inconclusive,
    judge_lifecycle,
    load_tensors,
    median_cpu_per_iter,
    median_per_iter,
    same_values,
    scaling,
    unwritten,
)
from assay.verifiers.kernel_samples import judge_samples
from assay.verifiers.kernel_scan import SCAN_CHECKS, save_tensor_names, scan_candidate

VERIFIER = "assay.verifiers.kernel/1"
Progress = Callable[[str, float], None]

CHECK_ORDER = SCAN_CHECKS + (
    "loads", "no_crash", "no_early_exit", "within_limits",
    "plain_tensor_output", "no_alias", "no_input_mutation", "no_replay", "no_work_after_return",
    "no_torch_compute", "extension_symbols", "harness_integrity",
    "correctness", "other_shapes",
    "consistent_when_timed", "timing_integrity", "roofline", "speed",
)


@dataclass
class KernelReport:
    passed: bool
    reasons: list[str]
    checks: list  # list[Check]
    metrics: dict
    task_sha256: str
    candidate_sha256: str
    criteria: str
    criteria_sha256: str
    backend: str
    verifier: str = VERIFIER

    def check(self, name: str):
        return next((c for c in self.checks if c.name == name), None)

    @property
    def inconclusive(self) -> bool:
        return not self.passed and inconclusive(self.checks, self.metrics)

    def to_json(self) -> dict:
        return {
            "passed": self.passed,
            "inconclusive": self.inconclusive,
            "reasons": list(self.reasons),
            "checks": [c.to_json() for c in self.checks],
            "metrics": self.metrics,
            "task_sha256": self.task_sha256,
            "candidate_sha256": self.candidate_sha256,
            "criteria": self.criteria,
            "criteria_sha256": self.criteria_sha256,
            "backend": self.backend,
            "verifier": self.verifier,
        }


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
        raise UserError(f"task {path} defines no {', '.join(missing)}",
                        "a KernelBench task defines class Model(nn.Module), get_inputs() and get_init_inputs()")
    sizes = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name, value = node.targets[0].id, node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            name, value = node.target.id, node.value
        else:
            continue
        if isinstance(value, ast.Constant) and type(value.value) is int and value.value >= criteria.correctness.min_size_constant:
            sizes[name] = value.value
    return TaskInfo(source, hashlib.sha256(source.encode()).hexdigest(), sizes)


def shape_variants(sizes: dict[str, int], count: int, rng: random.Random) -> list[dict[str, int]]:
    """Other values for the task's size constants: odd (vector widths do not divide them),
    smaller than the task's own (so they stay cheap), different from each other."""
    ranges = [(0.25, 0.5), (0.5, 0.95), (0.34, 0.7), (0.2, 0.8)]
    variants: list[dict[str, int]] = []
    for k in range(count):
        lo_f, hi_f = ranges[k % len(ranges)]
        over = {}
        for name, c in sizes.items():
            lo, hi = max(3, int(c * lo_f)), max(4, int(c * hi_f))
            v = rng.randrange(lo, hi + 1) | 1
            if v == c:
                v = max(3, c - 2) | 1
            over[name] = v
        if over not in variants:
            variants.append(over)
    return variants


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


def warm_task(task_path: str | Path, criteria: Criteria | str = "kernel-default", backend: str = "auto",
              cache_dir: Path | None = None) -> None:
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
            ref = ReferenceRun(Path(task_path), task, crit, backend, cache_dir, root, secrets.randbits(62), [], "", None)
            _compile_warm(ref, None)
            opwatch.result()
    finally:
        rt.BACKGROUND["on"] = False
        shutil.rmtree(root, ignore_errors=True)


def _say(progress: Progress | None, stage: str, fraction: float) -> None:
    if progress is not None:
        progress(stage, fraction)


def prepare_reference(task_path: str | Path, criteria: Criteria | str = "kernel-default", backend: str = "auto",
                      cache_dir: Path | None = None, progress: Progress | None = None) -> ReferenceRun:
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
    rng = random.Random(secrets.randbits(128))  # the verifier's secret; never leaves this process whole
    init_seed = rng.getrandbits(62)
    _task_folder(root, task)
    ws = root / "reference"
    for sub in ("inputs", "expected", "home"):
        (ws / sub).mkdir(parents=True)
    c = crit.correctness
    trials = [{"id": i, "kind": "trial", "seed": rng.getrandbits(62), "overrides": {}} for i in range(c.trials)]
    variants = shape_variants(task.sizes, c.other_shapes + 1, rng) if task.sizes else []
    shaped = [{"id": c.trials + k, "kind": "shape", "seed": rng.getrandbits(62), "overrides": v}
              for k, v in enumerate(variants)]
    plan = {"role": "reference", "task": f"{rt.IN_TASK}/task.py", "init_seed": init_seed,
            "runs": trials + shaped, "inputs_dir": f"{rt.WORKDIR}/inputs", "expected_dir": f"{rt.WORKDIR}/expected"}
    lim = crit.limits
    timeout = lim.import_timeout_s + len(plan["runs"]) * lim.forward_timeout_s
    _say(progress, "reference runs", 0.08)
    sandbox = rt.open_verification_sandbox(
        ws, {rt.IN_HARNESS: rt.harness_dir(), rt.IN_TASK: root / "task"},
        rt.sandbox_limits(lim.sandbox_memory_mb, lim.sandbox_pids, timeout + 30), backend)
    try:
        report, res = rt.run_plain(sandbox, plan, timeout, rt.base_env())
    finally:
        sandbox.close()
    if report is None or "runs" not in report:
        why = res.killed or (report or {}).get("error") or (res.stderr or res.stdout)[-1500:]
        raise UserError(f"the task's reference did not run in the sandbox: {why}",
                        "run the task file on its own and fix it")
    done = {r["id"]: r for r in report["runs"] if isinstance(r, dict) and "id" in r}
    for t in trials:
        r = done.get(t["id"], {})
        if not r.get("ok"):
            raise UserError(f"the task's Model fails on its own inputs: {r.get('error', 'no result')}",
                            "fix the task so Model(*get_init_inputs())(*get_inputs()) runs")
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


# ------------------------------------------------------------------------- the candidate

def verify_kernel(task_path: str | Path, candidate_path: str | Path, criteria: Criteria | str = "kernel-default",
                  backend: str = "auto", progress: Progress | None = None,
                  cache_dir: Path | None = None) -> KernelReport:
    """Verify one candidate file against one task; see the module docstring."""
    crit = load_criteria(criteria) if isinstance(criteria, str) else criteria
    candidate = read_source(candidate_path, "candidate")
    task_source = read_source(task_path, "task")
    inspect_task(task_source, crit, task_path)
    checks = Checks()
    if _scan(checks, candidate, task_source, crit) or not crit.scan.stop_on_failure:
        with prepare_reference(task_path, crit, backend, cache_dir, progress) as ref:
            return verify_candidate(ref, candidate_path, progress, _scanned=checks)
    return _finish(checks, {}, hashlib.sha256(task_source.encode()).hexdigest(),
                   hashlib.sha256(candidate.encode()).hexdigest(), crit, backend)


def _scan(checks: Checks, candidate: str, task_source: str, crit: Criteria) -> bool:
    findings = scan_candidate(candidate, crit, task_source)
    for name in SCAN_CHECKS:
        found = findings[name]
        if found:
            shown = "; ".join(str(f) for f in found[:6]) + (f"; and {len(found) - 6} more" if len(found) > 6 else "")
            checks.fail(name, shown)
        else:
            checks.ok(name, "clean")
    return checks.all_passed()


def verify_candidate(ref: ReferenceRun, candidate_path: str | Path, progress: Progress | None = None,
                     _scanned: Checks | None = None) -> KernelReport:
    crit = ref.criteria
    candidate = read_source(candidate_path, "candidate")
    cand_sha = hashlib.sha256(candidate.encode()).hexdigest()
    checks = _scanned or Checks()
    if _scanned is None:
        _scan(checks, candidate, ref.task.source, crit)
    metrics: dict = {}
    if not checks.all_passed() and crit.scan.stop_on_failure:
        return _finish(checks, metrics, ref.task.sha256, cand_sha, crit, ref.backend)
    for stage in ("check", "compile_wait", "timing_after_checks"):  # this candidate's own
        ref.phase_s.pop(stage, None)
    work = Path(tempfile.mkdtemp(prefix="cand-", dir=ref.root))
    pool = ThreadPoolExecutor(1)
    timing = None
    try:
        (work / "candidate").mkdir()
        (work / "candidate" / "candidate.py").write_text(candidate, encoding="utf-8")
        try:
            # The compile warm-up (started by prepare_reference) and the timing sandbox's
            # reference load run beside the check run; both are wasted only when the candidate
            # fails its checks (the compile cache keeps its part even then).
            timing = _start_timing(ref, work, pool)
            with _stage(ref.phase_s, "check"):
                ran = _check_run(ref, checks, metrics, work, cand_sha, progress)
            # Timing only means something for a candidate that is correct and honest so far.
            # (Scan findings do not stop it here: a profile that runs scan failures anyway wants
            # to see every runtime check, timing's included.)
            if ran and all(c.passed for c in checks.list() if c.name not in SCAN_CHECKS):
                _timing(ref, checks, metrics, work, timing, progress)
        except SandboxError as exc:
            checks.fail("no_crash", f"the sandbox failed: {exc}")
    finally:
        if timing is not None and not timing.done.done():
            timing.release(False)
        if timing is not None:
            timing.done.exception()  # its sandbox is closed before its folder goes
        pool.shutdown()
        shutil.rmtree(work, ignore_errors=True)
    if ref.shapes_note:
        metrics["other_shapes_note"] = ref.shapes_note
    metrics["verifier_phases_s"] = dict(ref.phase_s)
    _say(progress, "done", 1.0)
    return _finish(checks, metrics, ref.task.sha256, cand_sha, crit, ref.backend)


def _finish(checks: Checks, metrics: dict, task_sha: str, cand_sha: str, crit: Criteria, backend: str) -> KernelReport:
    ordered = sorted(checks.list(), key=lambda c: CHECK_ORDER.index(c.name) if c.name in CHECK_ORDER else 99)
    reasons = [f"{c.name}: {c.detail}" for c in ordered if not c.passed]
    return KernelReport(passed=bool(ordered) and not reasons, reasons=reasons, checks=ordered, metrics=metrics,
                        task_sha256=task_sha, candidate_sha256=cand_sha, criteria=crit.name,
                        criteria_sha256=crit.sha256, backend=backend)


def _candidate_binds(ref: ReferenceRun, work: Path) -> dict[str, Path]:
    return {rt.IN_HARNESS: rt.harness_dir(), rt.IN_CANDIDATE: work / "candidate",
            rt.IN_INPUTS: ref.inputs_dir, rt.IN_OPWATCH: ref.opwatch_dir}


def _candidate_env() -> dict[str, str]:
    ext = f"{rt.WORKDIR}/ext"
    return rt.base_env(TORCH_EXTENSIONS_DIR=ext, ASSAY_KERNEL_BUILD_DIR=ext)


def _opwatch_path(ref: ReferenceRun) -> str:
    so = next(ref.opwatch_dir.glob("assay_opwatch_*.so"))
    return f"{rt.IN_OPWATCH}/{so.name}"


def _check_run(ref: ReferenceRun, checks: Checks, metrics: dict, work: Path, cand_sha: str,
               progress: Progress | None) -> bool:
    crit, lim = ref.criteria, ref.criteria.limits
    ws = work / "check"
    (ws / "out").mkdir(parents=True)
    (ws / "home").mkdir()
    ext_cache = ref.cache_dir / "ext" / cand_sha[:32]
    rt.copy_tree(ext_cache, ws / "ext")
    runs = []
    for r in ref.runs:
        runs.append({
            "id": r["id"], "inputs_file": f"{rt.IN_INPUTS}/run_{r['id']}.safetensors", "inputs": r["inputs"],
            "init_args": r["init_args"], "reuse_buffers_of": r["reuse_buffers_of"],
            "out_file": f"{rt.WORKDIR}/out/run_{r['id']}.safetensors",
            "poison": [{"shape": o["shape"], "dtype": o["dtype"]} for o in r["outputs"]],
        })
    worker_plan = {"role": "check", "candidate": f"{rt.IN_CANDIDATE}/candidate.py", "opwatch": _opwatch_path(ref),
                   "init_seed": ref.init_seed, "runs": runs}
    plan = {"mode": "check", "candidate": rt.worker_spec(worker_plan, _candidate_env()),
            "settle_s": crit.settle.seconds, "candidate_roots": rt.CANDIDATE_ROOTS, "trusted_roots": rt.trusted_roots(), "limits": _limits(crit)}
    timeout = _check_timeout(ref)
    _say(progress, "building and checking the candidate", 0.2)
    sandbox = rt.open_verification_sandbox(ws, _candidate_binds(ref, work),
                                           rt.sandbox_limits(lim.sandbox_memory_mb, lim.sandbox_pids, timeout + 30),
                                           ref.backend)
    try:
        result, res = rt.run_supervised(sandbox, plan, timeout, _candidate_env())
        metrics["check_wall_s"] = round(res.duration_s, 3)
        finished = judge_lifecycle(checks, result, res, "check")
        log = (result or {}).get("log") or []
        if result:
            metrics["peak_rss_mb"] = result.get("peak_rss_mb")
        mapped = sorted({p for e in log if isinstance(e, dict) for p in (e.get("mapped") or [])})
        hidden = any(isinstance(e, dict) and e.get("mapped") is None and "mapped" in e for e in log)
        if finished:
            _symbols(sandbox, mapped, hidden, checks, crit)
    finally:
        sandbox.close()
    rt.copy_tree(ws / "ext", ext_cache)
    # What the supervisor saw after each return holds even if a later run ended the exec.
    _judge_settle(ref, checks, log)
    if not finished:
        return False
    report = result.get("report") if isinstance(result.get("report"), dict) else {}
    _judge_check(ref, checks, metrics, ws, report, log)
    return True


def _check_timeout(ref: ReferenceRun) -> float:
    """The check run's limit: the candidate's import, then each run's forward and settle."""
    lim = ref.criteria.limits
    return lim.import_timeout_s + len(ref.runs) * (lim.forward_timeout_s + ref.criteria.settle.seconds + 5) + 60


def _judge_settle(ref: ReferenceRun, checks: Checks, log: list) -> None:
    """no_work_after_return from the supervisor's own view of each idle window."""
    crit = ref.criteria
    labels = {r["id"]: _label(r) for r in ref.runs}
    for s in log:
        if not isinstance(s, dict) or "run" not in s:
            continue
        label = labels.get(s["run"], f"run {s['run']}")
        if s.get("extra_processes"):
            checks.fail("no_work_after_return", f"{label}: {len(s['extra_processes'])} process(es) of the candidate still alive after forward returned")
        if s.get("settle_s") and float(s.get("settle_cpu_s", 0)) > crit.settle.max_cpu_fraction * float(s["settle_s"]):
            checks.fail("no_work_after_return", f"{label}: the candidate used {float(s['settle_cpu_s']):.2f} s of CPU in the {float(s['settle_s']):.2f} s after forward returned")
        if int(s.get("py_threads") or 0) > 0:
            checks.fail("no_work_after_return", f"{label}: {s['py_threads']} thread(s) the candidate started were running when forward returned")


def _label(run: dict) -> str:
    return f"run {run['id']} ({'task shape' if run['kind'] == 'trial' else _shape_label(run)})"


def _limits(crit: Criteria) -> dict:
    lim = crit.limits
    return {"import_timeout_s": lim.import_timeout_s, "forward_timeout_s": lim.forward_timeout_s,
            "memory_mb": lim.memory_mb, "max_processes": lim.max_processes,
            "build_max_processes": lim.build_max_processes, "build_memory_mb": lim.build_memory_mb,
            "output_bytes": lim.output_bytes}


def _symbols(sandbox, mapped: list[str], hidden: bool, checks: Checks, crit: Criteria) -> None:
    """Which torch functions the candidate's own shared libraries import: at::_ops::X::call
    for an op outside the allowed list, at::native/at::cpu kernels, the dispatcher or the op
    recorder, dlsym, threads. Read from the binaries, so macros and threads hide nothing."""
    from assay.verifiers.kernel_symbols import judge_symbols

    if hidden:
        checks.fail("extension_symbols", "the candidate's process hid its memory maps (made itself non-dumpable)")
        return
    deleted = [p for p in mapped if p.endswith(" (deleted)")]
    files = [p for p in mapped if not p.endswith(" (deleted)")]
    if deleted:
        checks.fail("extension_symbols", f"the candidate runs code from deleted files: {', '.join(deleted[:3])}")
    if not files:
        checks.ok("extension_symbols", "the candidate loads no shared library of its own")
        return
    res = sandbox.exec(["nm", "-D", "--undefined-only", "-C", *files], timeout=120)
    if res.exit_code != 0 or res.truncated:
        checks.fail("extension_symbols", f"cannot read the symbols of {', '.join(files)}: {res.stderr.strip()[-300:]}")
        return
    problems = judge_symbols(res.stdout, crit)
    if problems:
        checks.fail("extension_symbols", "; ".join(problems[:8]))
    else:
        checks.ok("extension_symbols", f"{len(files)} library(ies) import only allowed torch symbols")


def _judge_ctypes(checks: Checks, report: dict, when: str = "") -> None:
    """Functions the candidate took through ctypes (worker.CtypesWatch) from a library it did not
    build: torch's own kernels as C functions run with no dispatcher, so no op is recorded; any
    other library's (libc's) is native code outside what extension_symbols judged."""
    entries = report.get("ctypes_functions")
    if not isinstance(entries, list):
        checks.fail("harness_integrity", f"{when}the worker's record of ctypes functions is missing")
        return
    torch_fns, other_fns = [], []
    for entry in entries:
        if not (isinstance(entry, list) and len(entry) == 3):
            checks.fail("harness_integrity", f"{when}a malformed ctypes record: {str(entry)[:80]}")
            continue
        path, name = str(entry[0]), str(entry[1])
        if not rt.candidate_built(path):
            what = f"{name} ({os.path.basename(path)})" if name else f"the library {os.path.basename(path)}"
            (torch_fns if "/torch/" in path else other_fns).append(what)
    if torch_fns:
        checks.fail("no_torch_compute", f"{when}the candidate reached torch's own libraries through ctypes (their C "
                    f"functions run kernels with no dispatcher and no op record): {', '.join(torch_fns[:6])}")
    if other_fns:
        checks.fail("extension_symbols", f"{when}the candidate reached libraries it did not build through ctypes: "
                    f"{', '.join(other_fns[:6])}")


def _judge_check(ref: ReferenceRun, checks: Checks, metrics: dict, ws: Path, report: dict, log: list) -> None:
    crit = ref.criteria
    records = {r.get("id"): r for r in report.get("runs") or [] if isinstance(r, dict)}
    allowed = set(crit.ops.allowed)
    bad_ops: dict[str, int] = {}
    outputs: dict[int, list] = {}
    expected: dict[int, list] = {}
    wrong_trials, wrong_shapes, replays = [], [], []
    good: dict[int, list[bool]] = {}
    max_err = 0.0
    for run in ref.runs:
        rid = run["id"]
        rec = records.get(rid)
        if rec is None:
            checks.fail("harness_integrity", f"run {rid}: the worker's report is missing (was the harness patched?)")
            continue
        label = _label(run)
        for src in ("ops", "foreign_ops"):
            for op, n in (rec.get(src) or {}).items():
                if op not in allowed:
                    key = op + (" (on another thread)" if src == "foreign_ops" else "")
                    bad_ops[key] = bad_ops.get(key, 0) + int(n)
        if rec.get("output_type") or rec.get("not_plain"):
            checks.fail("plain_tensor_output", f"{label}: forward returned {rec.get('output_type')}, not a plain torch.Tensor")
            continue
        if rec.get("bad_device"):
            checks.fail("plain_tensor_output", f"{label}: output on {rec['bad_device']}, not a dense CPU tensor")
            continue
        if rec.get("aliases_input"):
            checks.fail("no_alias", f"{label}: the output shares memory with an input")
        if rec.get("aliases_earlier_output"):
            checks.fail("no_alias", f"{label}: the output reuses the memory of an earlier call's output")
        if rec.get("aliases_other_output"):
            checks.fail("no_alias", f"{label}: two outputs share memory")
        if rec.get("inputs_changed"):
            checks.fail("no_input_mutation", f"{label}: forward changed input(s) {rec['inputs_changed']}")
        if rec.get("changed_after_return"):
            checks.fail("no_work_after_return", f"{label}: the output changed after forward returned")
        want = load_tensors(ref.ref_ws / "expected", f"run_{rid}.safetensors", 1 << 34)
        if want is None:
            raise UserError(f"the reference output of run {rid} is missing", "rerun the verification")
        want_list = [want[o["key"]] for o in run["outputs"]]
        wrong = wrong_trials if run["kind"] == "trial" else wrong_shapes
        shapes, dtypes = rec.get("shapes"), rec.get("dtypes")
        if not isinstance(shapes, list) or not isinstance(dtypes, list):
            checks.fail("harness_integrity", f"{label}: the worker's record of the outputs is missing")
            continue
        if len(shapes) != len(want_list):
            wrong.append(f"{label}: {len(shapes)} output(s) instead of {len(want_list)}")
            continue
        mismatch = [f"output {j}: shape {sh} {dt} instead of {list(w.shape)} {str(w.dtype).removeprefix('torch.')}"
                    for j, (sh, dt, w) in enumerate(zip(shapes, dtypes, want_list))
                    if list(sh) != list(w.shape) or dt != str(w.dtype).removeprefix("torch.")]
        if mismatch:
            wrong.append(f"{label} " + "; ".join(mismatch))
            continue
        limit = sum(_nbytes(o) for o in run["outputs"]) + (1 << 20)
        got = load_tensors(ws / "out", f"run_{rid}.safetensors", limit)
        if got is None:
            checks.fail("harness_integrity", f"{label}: the candidate's output file is missing or malformed")
            continue
        got_list = [got.get(f"out_{j}") for j in range(len(want_list))]
        if len(got) != len(want_list) or any(g is None or tuple(g.shape) != tuple(w.shape) or g.dtype != w.dtype
                                             for g, w in zip(got_list, want_list)):
            checks.fail("harness_integrity", f"{label}: the output file does not hold what the worker reported")
            continue
        expected[rid], outputs[rid] = want_list, got_list
        good[rid] = []
        for j, (g, w) in enumerate(zip(got_list, want_list)):
            ok, why, err = compare(g, w, crit)
            max_err = max(max_err, err if err != float("inf") else max_err)
            good[rid].append(ok)
            if ok:
                continue
            blank = unwritten(g, w)
            wrong.append(f"{label} output {j}: " + (f"{why}; {blank}" if blank else why))
            if blank:
                continue  # never-written memory looks alike every time; that is not a replay
            for earlier in outputs:
                if earlier == rid or j >= len(good[earlier]) or not good[earlier][j]:
                    continue
                # A replay hands back a real answer: one that was right for another input.
                if same_values(g, outputs[earlier][j], crit) or same_values(g, expected[earlier][j], crit):
                    how = "same input memory, new values" if run.get("reuse_buffers_of") == earlier else "different inputs"
                    replays.append(f"{label} returned the output of run {earlier} ({how})")
                    break
    if report.get("compilers"):
        checks.fail("no_torch_compute", f"the candidate ran torch's compiler ({', '.join(map(str, report['compilers']))} "
                    "loaded): its kernel would be torch's, not its own")
    _judge_ctypes(checks, report)
    if bad_ops:
        shown = ", ".join(f"{op} x{n}" for op, n in sorted(bad_ops.items(), key=lambda kv: -kv[1])[:8])
        checks.fail("no_torch_compute", f"forward dispatched torch ops beyond allocation: {shown}")
    elif not report.get("compilers"):
        checks.ok("no_torch_compute", "forward dispatched only allocation and view ops")
    integrity = report.get("integrity")
    if not isinstance(integrity, list):
        checks.fail("harness_integrity", "the worker's integrity report is missing")
    elif integrity:
        checks.fail("harness_integrity", "; ".join(str(p) for p in integrity[:8]))
    else:
        checks.ok("harness_integrity", "clocks, comparisons and harness code untouched")
    n_trials = sum(1 for r in ref.runs if r["kind"] == "trial")
    n_shapes = len(ref.runs) - n_trials
    if wrong_trials or wrong_shapes:
        checks.fail("correctness", f"{len(wrong_trials) + len(wrong_shapes)} of {len(ref.runs)} runs wrong: "
                    + "; ".join((wrong_trials + wrong_shapes)[:4]))
    else:
        checks.ok("correctness", f"{n_trials} trials and {n_shapes} other shapes match (max abs error {max_err:.3g})")
    if wrong_shapes:
        checks.fail("other_shapes", "; ".join(wrong_shapes[:3]))
    else:
        checks.ok("other_shapes", ref.shapes_note or f"{n_shapes} other shapes match: "
                  + ", ".join(_shape_label(r) for r in ref.runs if r["kind"] == "shape"))
    if replays:
        checks.fail("no_replay", "; ".join(replays[:4]))
    else:
        checks.ok("no_replay", "every run's output belongs to its own inputs")
    for name, detail in (("plain_tensor_output", "every output is a plain CPU torch.Tensor"),
                         ("no_alias", "outputs share memory with no input and no earlier output"),
                         ("no_input_mutation", "inputs unchanged by forward"),
                         ("no_work_after_return", "nothing ran after forward returned")):
        checks.ok(name, detail)
    metrics["max_abs_error"] = max_err
    metrics["runs"] = len(ref.runs)
    metrics["forward_s"] = [round(float(e.get("forward_s", 0)), 4) for e in log if isinstance(e, dict) and "run" in e]


def _shape_label(run: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in run["overrides"].items())


def _nbytes(spec: dict) -> int:
    import math

    size = {"float64": 8, "int64": 8, "float32": 4, "int32": 4, "float16": 2, "bfloat16": 2, "int16": 2}.get(spec["dtype"], 8)
    return math.prod(spec["shape"]) * size


# ---------------------------------------------------------------------------------- timing

def _warm_stamp() -> str:
    """What a filled inductor cache was filled under: another torch or other inductor settings
    means its entries may not load, so the task is compiled again."""
    from importlib.metadata import version

    env = {k: v for k, v in rt.base_env().items() if k.startswith("TORCHINDUCTOR")}
    # vec_isa: the worker sets inductor's vec_isa_ok after asking the compiler (compile_model);
    # caches filled before it did are keyed without it.
    return json.dumps({"torch": version("torch"), "env": env, "vec_isa": "compiler-checked"}, sort_keys=True)


def _compile_warm(ref: ReferenceRun, progress: Progress | None) -> Path:
    """Fill the inductor cache for this task in a reference sandbox (no candidate there), so the
    timing sandbox's compiled Model loads instead of compiling. A cache that an earlier
    verification filled under the same torch is used as it is (that sandbox start costs more than
    the load it would check). Returns the folder the timing sandbox copies its cache from."""
    ws = ref.root / "warm"
    if ref.compile_warm is not None:
        return ws / "inductor"
    cache = ref.cache_dir / "inductor" / ref.task.sha256[:32]
    stamp, lock = cache / ".filled", cache.parent / f"{cache.name}.lock"
    # Held through the compile: a second verifier of the task (or the warm-up started beside
    # the agent) is compiling it already, so wait for that and load, not compile twice.
    with rt.locked(lock):
        if _stamped(stamp):
            rt.copy_tree(cache, ws / "inductor")
            ref.compile_warm = {"ok": True, "cached": True}
            return ws / "inductor"
        # No stamp: whatever is there (a warm-up stopped mid-copy) is not read; compile afresh,
        # from the first task's filled cache when there is one: inductor keeps the builds that
        # check the CPU's bf16 and VNNI instructions in the cache folder (1-1.5 s of a mish
        # compile here), the same for every task of this machine and torch.
        seed = ref.cache_dir / "inductor-seed"
        seeded = _stamped(seed / ".filled")
        if seeded:
            rt.copy_tree(seed, ws / "inductor")
        (ws / "inductor").mkdir(parents=True, exist_ok=True)
        _compile_in_sandbox(ref, ws)
        rt.copy_tree(ws / "inductor", cache)
        with contextlib.suppress(OSError):
            stamp.write_text(_warm_stamp())
        if not seeded:
            _plant_seed(cache, seed)
    return ws / "inductor"


def _stamped(stamp: Path) -> bool:
    """Whether a cache folder was filled under this torch and these inductor settings."""
    try:
        return stamp.read_text() == _warm_stamp()
    except OSError:
        return False


def _plant_seed(cache: Path, seed: Path) -> None:
    """Keep a filled task cache as the seed of later tasks' compiles. Written once, whole, by a
    rename (a reader never sees half a seed); one left by another torch is replaced."""
    if seed.exists():
        shutil.rmtree(seed, ignore_errors=True)
    tmp = seed.with_name(f"{seed.name}.{os.getpid()}.tmp")
    try:
        rt.copy_tree(cache, tmp)
        os.rename(tmp, seed)
    except OSError:
        pass  # another verifier planted it first, or the disk said no: no seed this time
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _compile_in_sandbox(ref: ReferenceRun, ws: Path) -> None:
    lim = ref.criteria.limits
    (ws / "home").mkdir(exist_ok=True)
    plan = {"role": "warm", "task": f"{rt.IN_TASK}/task.py", "init_seed": ref.init_seed}
    if ref.runs:
        first = ref.runs[0]
        plan.update(init_args=first["init_args"], inputs_file=f"{rt.IN_INPUTS}/run_{first['id']}.safetensors",
                    inputs=first["inputs"])
    timeout = lim.import_timeout_s
    sandbox = rt.open_verification_sandbox(
        ws, {rt.IN_HARNESS: rt.harness_dir(), rt.IN_TASK: ref.root / "task", rt.IN_INPUTS: ref.inputs_dir},
        rt.sandbox_limits(lim.sandbox_memory_mb, lim.sandbox_pids, timeout + 30), ref.backend)
    try:
        report, res = rt.run_plain(sandbox, plan, timeout, rt.base_env(TORCHINDUCTOR_CACHE_DIR=f"{rt.WORKDIR}/inductor"))
    finally:
        sandbox.close()
    if not report or not report.get("ok"):
        raise UserError(f"torch.compile of the task's Model failed: {(report or {}).get('error') or res.stderr[-1500:]}",
                        "check that the task compiles with torch.compile on this machine")
    ref.compile_warm = report


@dataclass
class _TimingRun:
    """A timing sandbox started before the checks end (see _start_timing)."""

    ws: Path
    done: Future  # -> (result, ExecResult, monotonic time the exec ended)
    released: float = 0.0

    def release(self, go: bool) -> None:
        """Let the supervisor start the candidate ("go"), or tell it the checks failed ("stop")."""
        tmp = self.ws / ".gate"
        tmp.write_text("go" if go else "stop")
        os.replace(tmp, self.ws / "gate")
        self.released = time.monotonic()


def _start_timing(ref: ReferenceRun, work: Path, pool: ThreadPoolExecutor) -> _TimingRun:
    """Open the timing sandbox now and let its supervisor load the reference and torch.compile's
    baseline (seconds of imports and tracing) while the candidate is checked in its own sandbox.
    The candidate is started only after `release(True)`, so nothing of it runs beside the checks
    and nothing is timed unless they pass."""
    ws = work / "timing"
    for sub in ("audit", "audit-ref", "home", "refhome"):
        (ws / sub).mkdir(parents=True)
    return _TimingRun(ws, pool.submit(_timing_exec, ref, work, ws))


def _timing_exec(ref: ReferenceRun, work: Path, ws: Path):
    crit, lim, tm = ref.criteria, ref.criteria.limits, ref.criteria.timing
    with _stage(ref.phase_s, "compile_wait"):
        warm = ref.warming.result() if ref.warming is not None else _compile_warm(ref, None)
    rt.copy_tree(warm, ws / "inductor")
    first = ref.runs[0]
    common = {"init_seed": ref.init_seed, "init_args": first["init_args"],
              "inputs_file": f"{rt.IN_INPUTS}/run_{first['id']}.safetensors", "inputs": first["inputs"],
              "perturb_max_elements": tm.perturb_max_elements, "fresh_input_mb": tm.fresh_input_mb, "flush_mb": tm.flush_mb}
    ref_plan = {"role": "time-ref", "task": f"{rt.IN_TASK}/task.py", "copy_bytes": first["min_bytes"], **common}
    cand_plan = {"role": "time-cand", "candidate": f"{rt.IN_CANDIDATE}/candidate.py", "opwatch": _opwatch_path(ref),
                 "sample_us": tm.sample_us, **common}
    (ws / "refhome" / "tmp").mkdir()
    ref_env = rt.base_env(HOME=f"{rt.WORKDIR}/refhome", TMPDIR=f"{rt.WORKDIR}/refhome/tmp",
                          TORCHINDUCTOR_CACHE_DIR=f"{rt.WORKDIR}/inductor")
    # The checks it waits for: the check run's own limit, and comparing its outputs.
    gate_s = _check_timeout(ref) + 60
    plan = {
        "mode": "time",
        "reference": rt.worker_spec(ref_plan, ref_env),
        "candidate": rt.worker_spec(cand_plan, _candidate_env()),
        "subjects": ["eager", "compiled", "copy", "candidate"],
        "rounds": tm.rounds, "fresh_rounds": tm.fresh_rounds, "target_round_s": tm.target_round_s, "max_iters": tm.max_iters_per_round,
        "warmup_iters": tm.warmup_iters, "warmup_s": tm.warmup_s, "limits": _limits(crit), "candidate_roots": rt.CANDIDATE_ROOTS, "trusted_roots": rt.trusted_roots(),
        "audit_candidate": f"{rt.WORKDIR}/audit/candidate.safetensors",
        # The most one audited call's outputs may take (the supervisor reads at most this).
        "audit_max_bytes": _audit_frame_bytes(ref),
        "audit_reference": f"{rt.WORKDIR}/audit-ref/reference.safetensors",
        "gate": f"{rt.WORKDIR}/gate", "gate_timeout_s": gate_s,
        "ext_seed": f"{rt.WORKDIR}/ext-seed", "ext_dir": f"{rt.WORKDIR}/ext",
    }
    per_round = tm.target_round_s * 3 * 4 + 1
    # Warm-up stops within about twice its time; calibration once a round fills a quarter of
    # the target, so within about twice that.
    settling = 4 * (3 * tm.warmup_s + tm.target_round_s + lim.forward_timeout_s * (tm.warmup_iters + 2))
    timeout = gate_s + 2 * lim.import_timeout_s + (tm.rounds + tm.fresh_rounds) * per_round + settling + 120
    binds = _candidate_binds(ref, work)
    binds[rt.IN_TASK] = ref.root / "task"
    sandbox = rt.open_verification_sandbox(ws, binds, rt.sandbox_limits(lim.sandbox_memory_mb, lim.sandbox_pids, timeout + 30),
                                           ref.backend)
    try:
        result, res = rt.run_supervised(sandbox, plan, timeout, _candidate_env())
        return result, res, time.monotonic()
    finally:
        sandbox.close()


def _round_row(e: dict) -> list:
    return [int(e["n"]), round(1e3 * float(e["wall_s"]), 3), round(1e3 * float(e["cpu_s"]), 3), int(e.get("faults", 0))]


def _timing(ref: ReferenceRun, checks: Checks, metrics: dict, work: Path, run: _TimingRun,
            progress: Progress | None) -> None:
    crit, tm = ref.criteria, ref.criteria.timing
    _say(progress, "timing eager, torch.compile and the candidate", 0.65)
    # The candidate's extension as the check run built it (the sandbox sees the folder live;
    # its supervisor copies it to ext/ before starting the candidate).
    rt.copy_tree(work / "check" / "ext", run.ws / "ext-seed")
    run.release(True)
    result, res, ended = run.done.result()
    # Every timed window lies after the release: the exec's time from there bounds their sum.
    host_wall = ended - run.released
    ref.phase_s["timing_after_checks"] = round(host_wall, 3)
    if not judge_lifecycle(checks, result, res, "timing"):
        return
    log = [e for e in result.get("log") or [] if isinstance(e, dict)]
    report = result.get("report") if isinstance(result.get("report"), dict) else {}
    allowed = set(crit.ops.allowed)
    bad = {op: n for src in ("ops", "foreign_ops") for op, n in (report.get(src) or {}).items() if op not in allowed}
    if bad:
        checks.fail("no_torch_compute", "while timed, forward dispatched " + ", ".join(f"{k} x{v}" for k, v in list(bad.items())[:8]))
    if report.get("integrity"):
        checks.fail("harness_integrity", "while timed: " + "; ".join(map(str, report["integrity"][:8])))
    if report.get("compilers"):
        checks.fail("no_torch_compute", "while timed, the candidate ran torch's compiler")
    _judge_ctypes(checks, report, "while timed, ")
    _audit(ref, checks, run.ws, result, report)

    times = {s: median_per_iter(log, s) for s in ("eager", "compiled", "copy", "candidate")}
    judge_samples(checks, report, crit, metrics, median_cpu_per_iter(times["eager"][1]))
    fresh = {s: median_per_iter(log, s, "fresh_round") for s in ("eager", "candidate")}
    t_eager, t_comp, t_copy, t_cand = (times[s][0] for s in ("eager", "compiled", "copy", "candidate"))
    problems = list(result.get("integrity") or [])
    threads = result.get("reference_threads")
    share = cpu_share(log, threads)
    contended = share is not None and share < tm.min_cpu_share
    ratio = scaling(times["candidate"][1], "cpu_s")
    wall_ratio = scaling(times["candidate"][1], "wall_s")
    unscaled = None
    if not ratio >= tm.scaling_min:
        unscaled = (f"the candidate's CPU time does not follow its iteration count (3n/n = {ratio:.2f}, "
                    f"wall {wall_ratio:.2f}; need >= {tm.scaling_min})")
        # On a busy machine an honest kernel's short rounds pay for the neighbours' cache misses
        # and migrations too (seen in CI: 3n/n under 2 for slow_honest beside two spinners), so
        # the ratio cannot tell work per round from noise there: the verdict still fails, on
        # speed, as inconclusive, instead of naming a cheat the figures do not show.
        if not contended:
            problems.append(unscaled)
    # Before warm and fresh rounds alike: work left for a fresh round's flush is work too.
    flush = {s: statistics.median([float(e.get("flush_cpu_s", 0)) for e in times[s][1] + fresh[s][1]] or [0.0])
             for s in ("eager", "candidate")}
    if flush["candidate"] > 2 * flush["eager"] + 0.02:
        problems.append(f"the candidate burned {flush['candidate'] * 1e3:.1f} ms of CPU per untimed cache flush, "
                        f"the reference {flush['eager'] * 1e3:.1f} ms: work moved out of the timed window")
    windows = sum(float(e.get("wall_s", 0)) for e in log)
    if windows > host_wall + 0.5:
        problems.append(f"the timed windows add up to {windows:.2f} s, more than the {host_wall:.2f} s the exec took")
    if problems:
        checks.fail("timing_integrity", "; ".join(problems))
    else:
        checks.ok("timing_integrity", f"supervisor clock, interleaved rounds, 3n/n = {ratio:.2f} CPU, {wall_ratio:.2f} wall")
    min_bytes = int(ref.runs[0]["min_bytes"])
    copy_bytes = int(result.get("copy_bytes") or min_bytes)
    t_copy_task = t_copy * min_bytes / max(copy_bytes, 1)
    bound = t_copy_task / crit.roofline.slack
    speed_eager, speed_comp = t_eager / t_cand, t_comp / t_cand
    # On inputs no call saw before, eager against the candidate: the speedup credited is at most
    # fresh_slack times what they show (a candidate keeping what it saw is fast only on repeats).
    speed_fresh = fresh["eager"][0] / fresh["candidate"][0]  # NaN where either has none
    measured = speed_eager
    if not speed_fresh * tm.fresh_slack >= speed_eager:  # NaN: no fresh figure, no credit
        cap = speed_fresh * tm.fresh_slack if speed_fresh == speed_fresh else 0.0
        speed_comp *= cap / speed_eager
        speed_eager = cap
    cand_rounds = times["candidate"][1]
    metrics.update({
        "speedup_vs_eager": round(speed_eager, 4),
        "speedup_vs_compile": round(speed_comp, 4),
        "speedup_vs_eager_measured": round(measured, 4),
        "speedup_vs_eager_fresh": round(speed_fresh, 4) if speed_fresh == speed_fresh else None,
        "time_candidate_s": t_cand, "time_eager_s": t_eager, "time_compile_s": t_comp, "time_copy_s": t_copy_task,
        "copy_bandwidth_gbs": round(min_bytes / t_copy_task / 1e9, 3),
        "candidate_bandwidth_gbs": round(min_bytes / t_cand / 1e9, 3),
        "bandwidth_fraction": round(t_copy_task / t_cand, 4),
        "min_bytes": min_bytes,
        "timing_rounds": len(cand_rounds),
        "timing_iterations": sum(int(e["n"]) for e in cand_rounds),
        "cpu_per_wall": {s: round(sum(float(e["cpu_s"]) for e in times[s][1])
                                  / max(sum(float(e["wall_s"]) for e in times[s][1]), 1e-9), 3) for s in times},
        # Every timed round as [iterations, wall ms, CPU ms, page faults], for whoever audits
        # the figures (a fault cost 17 us here: thousands of them are a round's time).
        "rounds": {s: [_round_row(e) for e in times[s][1]] for s in times},
        "rounds_fresh": {s: [_round_row(e) for e in fresh[s][1]] for s in fresh},
        # The calibration rounds that sized them (their pace sets each subject's n).
        "rounds_calibration": {s: [_round_row(e) for e in log if e.get("subject") == s and "n" in e
                                   and e.get("round") is None and e.get("fresh_round") is None] for s in times},
        "timing_wall_s": round(res.duration_s, 3),
        # Each audited call's [stopping, reading, resuming] ms (the supervisor reads its output).
        "audit_read_ms": result.get("audit_read_ms"),
        "timing_phases_s": _phases(result.get("phase_s")),
    })
    # The faster of the candidate's warm and fresh rounds: the fresh ones change no input around
    # each call, so a candidate that does no work shows its bare time there.
    t_fast, where = t_cand, "warm"
    if fresh["candidate"][0] < t_cand:  # False for NaN
        t_fast, where = fresh["candidate"][0], "fresh"
    if t_fast < bound:
        checks.fail("roofline", f"{t_fast * 1e3:.3f} ms per call ({where} rounds) is faster than copying the task's {min_bytes} bytes "
                    f"({t_copy_task * 1e3:.3f} ms at {metrics['copy_bandwidth_gbs']} GB/s) allows, even with slack {crit.roofline.slack}")
    else:
        checks.ok("roofline", f"{metrics['candidate_bandwidth_gbs']} GB/s of {metrics['copy_bandwidth_gbs']} GB/s copy bandwidth")
    need = crit.speed.min_speedup_vs_eager
    detail = f"{speed_eager:.3f}x eager, {speed_comp:.3f}x torch.compile (need >= {need}x eager)"
    if speed_eager < measured:
        detail += (f"; measured {measured:.3f}x eager, but {speed_fresh:.3f}x on inputs no call saw before: "
                   f"credited at most {tm.fresh_slack}x that")
    metrics["reference_cpu_share"] = None if share is None else round(share, 3)
    metrics["timing_contended"] = contended
    passed = speed_eager >= need and not (contended and unscaled)
    if contended:
        # Every subject ran slower, and not alike (OpenMP teams wait for their descheduled
        # threads), so the figure says more about the neighbours than about the candidate.
        busy = f"the reference got {share:.0%} of the {threads} CPUs it ran on, need {tm.min_cpu_share:.0%}"
        if unscaled:
            busy += f"; {unscaled}"
        detail += (f"; inconclusive: the machine was too busy to time ({busy}): verify again when it is quieter"
                   if not passed else f"; taken on a busy machine ({busy})")
    checks.set("speed", passed, detail)


def _phases(found) -> dict[str, float]:
    """The supervisor's seconds per phase, as far as they are well-formed (the figures inform; no
    check reads them)."""
    if not isinstance(found, dict):
        return {}
    return {str(k)[:64]: round(float(v), 3) for k, v in list(found.items())[:32]
            if isinstance(v, (int, float)) and not isinstance(v, bool)}


def _audit(ref: ReferenceRun, checks: Checks, ws: Path, result: dict, report: dict) -> None:
    """The audited timed calls (each call of a round with chance 1/n, one a round on average):
    what the candidate returned there vs what the eager Model gives for the same (fresh) input."""
    audits = result.get("audits")
    if not isinstance(audits, list) or not audits or not all(isinstance(a, dict) for a in audits):
        checks.fail("consistent_when_timed", "no timed iteration was audited")
        return
    limit = _audit_frame_bytes(ref) * len(audits)
    want = load_tensors(ws / "audit-ref", "reference.safetensors", limit)
    if want is None:
        checks.fail("timing_integrity", "the reference's audit output is missing (was its folder replaced?)")
        return
    # Read by the supervisor from the candidate's memory at the audited calls (worker.AuditLine).
    if result.get("audit_saved") != "saved":
        checks.fail("consistent_when_timed", f"an audited timed call returned no plain tensor ({result.get('audit_saved')})")
        return
    got = load_tensors(ws / "audit", "candidate.safetensors", limit)
    layouts = result.get("audit_layout")
    if got is None or set(got) != set(want) or not isinstance(layouts, list) or len(layouts) != len(audits):
        checks.fail("consistent_when_timed", "the audited timed outputs are missing or malformed")
        return
    for i, audit in enumerate(audits):
        where = f"timed iteration {audit.get('call', audit.get('index'))} of round {audit.get('round')}"
        keys = sorted((k for k in want if k.startswith(f"a{i}_")), key=lambda k: int(k.rsplit("_", 1)[1]))
        if not isinstance(layouts[i], list) or len(layouts[i]) != len(keys):
            checks.fail("consistent_when_timed", f"{where} returned {len(layouts[i]) if isinstance(layouts[i], list) else 'no'} "
                        f"outputs, eager {len(keys)}")
            return
        for key, layout in zip(keys, layouts[i]):
            out = _rebuild(got[key], layout)
            if isinstance(out, str):
                checks.fail("consistent_when_timed", f"{where} returned an output the audit cannot read: {out}")
                return
            ok, why, _ = compare(out, want[key], ref.criteria)
            if not ok:
                checks.fail("consistent_when_timed", f"{where} returned a wrong output: {why}")
                return
    rounds = len({str(a.get("round")) for a in audits})
    checks.ok("consistent_when_timed", f"{len(audits)} timed calls in {rounds} rounds match eager, "
              "read from the candidate's memory as each call returned")


def _rebuild(raw, layout):
    """An output from the bytes the supervisor read and its [dtype, shape, strides]; or why not."""
    import torch

    try:
        name, shape, strides = layout
        dtype = getattr(torch, str(name), None)
        if not isinstance(dtype, torch.dtype):
            return f"dtype {str(name)[:32]!r}"
        if not (isinstance(shape, list) and isinstance(strides, list) and len(shape) == len(strides)
                and all(isinstance(v, int) and v >= 0 for v in shape + strides)):
            return "a malformed layout"
        item = torch.empty(0, dtype=dtype).element_size()
        numel = math.prod(shape)
        span = 0 if numel == 0 else 1 + sum((n - 1) * st for n, st in zip(shape, strides))
        if raw.dtype != torch.uint8 or raw.dim() != 1 or raw.numel() != span * item:
            return "its size does not follow its shape and strides"
        if numel == 0:
            return torch.empty(shape, dtype=dtype)
        flat = raw.clone().view(dtype)
        return torch.as_strided(flat, shape, strides)
    except (TypeError, ValueError, RuntimeError) as exc:
        return f"a malformed layout ({type(exc).__name__})"


def _audit_frame_bytes(ref: ReferenceRun) -> int:
    return sum(_nbytes(o) for o in ref.runs[0]["outputs"]) * 2 + (1 << 20)


def report_json(report: KernelReport) -> str:
    return json.dumps(report.to_json(), indent=None, sort_keys=False, default=str)
