"""The compile verifier: does the rewritten model (`fixed.py`'s ModelNew) fix what breaks
torch.compile on the task's Model, and still compute what Model computes?

    outcome = verify_compile("examples/compile/item_branch.py", "fixed.py", criteria, options)

1. The task file is read here for its entry points (Model, get_inputs, optional
   get_init_inputs and get_input_sequence); the submission must define ModelNew.
2. One fresh sandbox runs harness/compile_judge.py: the task's Model with a held-out seed
   measured first (its symptom), the dynamo state captured, fixed.py imported from a
   read-only copy, ModelNew measured the same way, then both compiled with the job's backend.
3. judge.py turns the figures into checks.
"""

from __future__ import annotations

import ast
import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

from assay.errors import UserError
from assay.verifiers.common import sandboxes as sb
from assay.verifiers.common.heldout import HeldOut
from assay.verifiers.compile.criteria import Criteria
from assay.verifiers.compile.judge import judge, outcome_of
from assay.verifiers.outcome import Check, Outcome

Progress = Callable[[str, float], None]
NEEDS = ("get_inputs",)


def harness_dir() -> Path:
    return Path(str(resources.files("assay.verifiers.compile").joinpath("harness")))


def _defines(path: Path, what: str) -> tuple[str, ast.Module]:
    if not path.is_file() or path.is_symlink():
        raise UserError(f"{what} {path} does not exist (or is a link)", f"give the path of the {what} (.py)")
    try:
        source = path.read_text(encoding="utf-8")
        return source, ast.parse(source, filename=str(path))
    except (UnicodeDecodeError, SyntaxError) as exc:
        raise UserError(f"{what} {path} is not valid Python ({exc})", f"fix the {what}") from None


def names_in(tree: ast.Module) -> set[str]:
    return {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}


def _assigns(tree: ast.Module, name: str) -> bool:
    return any(
        isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in n.targets)
        for n in tree.body
    )


def inspect_task(path: Path) -> str:
    source, tree = _defines(path, "task file")
    found = names_in(tree)
    missing = [n for n in ("Model", *NEEDS) if n not in found]
    if missing:
        raise UserError(
            f"task file {path} defines no {', '.join(missing)}",
            "a compile task defines Model, get_inputs(), optionally get_init_inputs() and get_input_sequence() "
            "(DESIGN.md, Job kinds)",
        )
    return source


def verify_compile(
    task_path: Path,
    fixed_path: Path,
    crit: Criteria,
    options: Any,
    backend: str = "auto",
    progress: Progress | None = None,
) -> Outcome:
    source = inspect_task(task_path)
    fixed_source, tree = _defines(fixed_path, "submission")
    hashes = (
        crit.sha256,
        hashlib.sha256(source.encode()).hexdigest(),
        hashlib.sha256(fixed_source.encode()).hexdigest(),
    )
    if "ModelNew" not in names_in(tree) and not _assigns(tree, "ModelNew"):
        raise UserError(
            f"submission {fixed_path} defines no class ModelNew",
            "define ModelNew: Model's constructor and forward signature, loading Model's state_dict strictly",
        )
    held = HeldOut()
    plan = {
        "task": f"{sb.IN_TASK}/task.py",
        "fixed": f"{sb.IN_SUBMISSION}/{fixed_path.name}",
        "backend": options.backend,
        "mode": options.mode,
        "seed": held.seed(),
        "heldout_seeds": held.seeds(crit.heldout.seeds),
        "atol": crit.parity.atol,
        "rtol": crit.parity.rtol,
        "fp64_factor": crit.parity.fp64_factor,
        "threads": os.cpu_count() or 2,
        "rounds": crit.speed.rounds,
        "target_round_s": crit.speed.target_round_s,
        "warmup_s": crit.speed.warmup_s,
        "max_iters": crit.speed.max_iters,
        "flush_mb": crit.speed.flush_mb,
    }
    if progress:
        progress(f"reproducing, then measuring the fix with {options.backend} in a fresh sandbox", 0.1)
    root = Path(tempfile.mkdtemp(prefix="assay-compile-"))
    try:
        (root / "task").mkdir()
        (root / "task" / "task.py").write_text(source, encoding="utf-8")
        (root / "ws" / "home").mkdir(parents=True)
        submission = sb.submission_folder(root, fixed_path)
        result, res = sb.judge_in_fresh_sandbox(
            root / "ws",
            {
                sb.harness_in("compile"): harness_dir(),
                sb.IN_COMMON: sb.common_harness_dir(),
                sb.IN_TASK: root / "task",
                sb.IN_SUBMISSION: submission,
            },
            f"{sb.harness_in('compile')}/compile_judge.py",
            plan,
            timeout=crit.limits.timeout_s,
            memory_mb=crit.limits.memory_mb,
            pids=crit.limits.pids,
            backend=backend,
            # docker mounts /tmp noexec: Inductor's compiled .so files must live in the workspace
            env=sb.base_env(TORCHINDUCTOR_CACHE_DIR=f"{sb.WORKDIR}/inductor"),
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if result is None and res.killed == "timeout":
        # a fresh Inductor compile costs 20-80 s here, more on a busy machine: not a verdict
        check = Check(
            name="finished",
            passed=False,
            detail=f"the verification ran past the criteria's {crit.limits.timeout_s:.0f} s limit in its sandbox "
            "(slow compiles on a busy machine, or a submission that does not return)",
        )
        return outcome_of([check], {}, ["finished"], hashes)
    if result is None:
        why = res.killed or (res.stderr or res.stdout)[-1500:].strip() or f"exit status {res.exit_code}"
        check = Check(
            name="finished",
            passed=False,
            detail=f"the verification did not finish in its sandbox ({crit.limits.timeout_s:.0f} s limit): {why[-600:]}",
        )
        return outcome_of([check], {}, [], hashes)
    if not result.get("ok"):
        stage, error = result.get("stage"), str(result.get("error", "")).strip().splitlines()
        last = error[-1] if error else "no error text"
        if stage in ("task", "eager"):
            raise UserError(
                f"task file {task_path}: {last}",
                "fix the task so Model(*get_init_inputs())(*get_inputs()) runs in eager",
            )
        names = {"import": "imports", "load": "loads_weights", "fixed_eager": "runs_eager"}
        check = Check(name=names.get(str(stage), "submission"), passed=False, detail=f"{fixed_path.name}: {last}")
        return outcome_of([check], {"error": result.get("error")}, [], hashes)
    checks, metrics, inconclusive = judge(result, crit)
    diagnosis = fixed_path.parent / "diagnosis.md"
    if diagnosis.is_file() and not diagnosis.is_symlink() and diagnosis.stat().st_size <= 16384:
        # shown in reports beside the figures, never judged
        metrics["diagnosis"] = diagnosis.read_text(encoding="utf-8", errors="replace")
    if progress:
        progress("done", 1.0)
    return outcome_of(checks, metrics, inconclusive, hashes)
