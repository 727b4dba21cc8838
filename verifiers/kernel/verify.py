"""The kernel verifier: is a candidate ModelNew correct, honest, and really faster?

    report = verify_kernel("examples/kernels/softmax.py", "candidate.py", "kernel-default")

What it does, in order (each stage only if the previous ones passed, except where noted):

1. Source scan of the candidate text in this process (scan.py): imports, torch compute
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
   (samples.py). The audited outputs are
   copied into memory made before the clock starts, so no subject's round pays page faults
   the harness caused.

Every check has its own name (see CHECK_ORDER); a failed one adds "name: why" to `reasons`.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from assay.sandbox.base import SandboxError
from assay.verifiers.kernel.check import _check_run
from assay.verifiers.kernel.criteria import Criteria, load_criteria
from assay.verifiers.kernel.judge import (
    Checks,
    inconclusive,
)
from assay.verifiers.kernel.reference import (
    ReferenceRun,
    _say,
    _stage,
    inspect_task,
    prepare_reference,
    read_source,
)
from assay.verifiers.kernel.scan import SCAN_CHECKS, scan_candidate
from assay.verifiers.kernel.timing import _start_timing, _timing

VERIFIER = "assay.verifiers.kernel/1"
Progress = Callable[[str, float], None]

CHECK_ORDER = SCAN_CHECKS + (
    "loads",
    "no_crash",
    "no_early_exit",
    "within_limits",
    "plain_tensor_output",
    "no_alias",
    "no_input_mutation",
    "no_replay",
    "no_work_after_return",
    "no_torch_compute",
    "extension_symbols",
    "harness_integrity",
    "correctness",
    "other_shapes",
    "consistent_when_timed",
    "timing_integrity",
    "roofline",
    "speed",
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


# ------------------------------------------------------------------------- the candidate


def verify_kernel(
    task_path: str | Path,
    candidate_path: str | Path,
    criteria: Criteria | str = "kernel-default",
    backend: str = "auto",
    progress: Progress | None = None,
    cache_dir: Path | None = None,
) -> KernelReport:
    """Verify one candidate file against one task; see the module docstring."""
    crit = load_criteria(criteria) if isinstance(criteria, str) else criteria
    candidate = read_source(candidate_path, "candidate")
    task_source = read_source(task_path, "task")
    inspect_task(task_source, crit, task_path)
    checks = Checks()
    if _scan(checks, candidate, task_source, crit) or not crit.scan.stop_on_failure:
        with prepare_reference(task_path, crit, backend, cache_dir, progress) as ref:
            return verify_candidate(ref, candidate_path, progress, _scanned=checks)
    return _finish(
        checks,
        {},
        hashlib.sha256(task_source.encode()).hexdigest(),
        hashlib.sha256(candidate.encode()).hexdigest(),
        crit,
        backend,
    )


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


def verify_candidate(
    ref: ReferenceRun, candidate_path: str | Path, progress: Progress | None = None, _scanned: Checks | None = None
) -> KernelReport:
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
    return KernelReport(
        passed=bool(ordered) and not reasons,
        reasons=reasons,
        checks=ordered,
        metrics=metrics,
        task_sha256=task_sha,
        candidate_sha256=cand_sha,
        criteria=crit.name,
        criteria_sha256=crit.sha256,
        backend=backend,
    )


def report_json(report: KernelReport) -> str:
    return json.dumps(report.to_json(), indent=None, sort_keys=False, default=str)
