"""The toy kind's verifier, built only from what verifiers/common shares: held-out seeds, the
submission copied alone into a fresh sandbox, the shared harness loading it by path, the
interleaved timer and its contention judgement."""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from assay.verifiers.common.heldout import HeldOut
from assay.verifiers.common.sandboxes import (
    IN_COMMON,
    IN_SUBMISSION,
    IN_TASK,
    common_harness_dir,
    harness_in,
    judge_in_fresh_sandbox,
    submission_folder,
)
from assay.verifiers.common.timing import interleaved_speed
from assay.verifiers.criteria import CriteriaBase
from assay.verifiers.outcome import Check, Headline, Outcome, no_submission

HERE = Path(__file__).resolve().parent


class ToyCriteria(CriteriaBase):
    trials: int = Field(ge=1)
    min_speedup: float = Field(ge=0)
    min_cpu_share: float = Field(gt=0, le=1)


class ToyVerifyOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    power: int = 2


class ToyVerifier:
    name = "toy"
    entry = "solution.py"
    criteria_model = ToyCriteria
    options_model = ToyVerifyOptions
    criteria_dir = HERE / "criteria"

    def warm(self, request, criteria) -> None:
        return None

    def verify(self, request, criteria, progress) -> Outcome:
        task_hash = hashlib.sha256(request.task_path.read_bytes()).hexdigest()
        if request.entry is None:
            return no_submission(criteria.sha256, task_hash)
        power = ToyVerifyOptions.model_validate(request.options).power
        root = Path(tempfile.mkdtemp(prefix="toy-verify-"))
        try:
            (root / "task").mkdir()
            shutil.copyfile(request.task_path, root / "task" / "task.py")
            sub = submission_folder(root, request.entry)
            (root / "ws").mkdir()
            binds = {
                IN_TASK: root / "task",
                IN_SUBMISSION: sub,
                harness_in("toy"): HERE / "harness",
                IN_COMMON: common_harness_dir(),
            }
            plan = {
                "seeds": HeldOut().seeds(criteria.trials),
                "power": power,
                "entry": f"{IN_SUBMISSION}/{request.entry.name}",
            }
            result, res = judge_in_fresh_sandbox(
                root / "ws",
                binds,
                f"{harness_in('toy')}/judge.py",
                plan,
                timeout=120,
                memory_mb=1024,
                pids=64,
                backend=request.sandbox_backend,
            )
        finally:
            shutil.rmtree(root, ignore_errors=True)
        sub_hash = hashlib.sha256(request.entry.read_bytes()).hexdigest()
        if result is None or "error" in result:
            why = (result or {}).get("error") or (res.stderr or res.stdout)[-300:] or "no result"
            return Outcome(
                outcome="fail",
                reasons=[f"loads: {why}"],
                checks=[Check(name="loads", passed=False, detail=why)],
                criteria_hash=criteria.sha256,
                task_hash=task_hash,
                candidate_hash=sub_hash,
            )
        checks = [
            Check(name="loads", passed=True, detail="ModelNew loaded by path"),
            Check(name="isolated", passed=not result["isolation"], detail="; ".join(result["isolation"]) or "clean"),
        ]
        wrong = [i for i, (a, b) in enumerate(zip(result["expected"], result["got"], strict=False)) if a != b]
        checks.append(
            Check(
                name="correctness",
                passed=not wrong,
                detail=f"{len(plan['seeds'])} held-out inputs" + (f", wrong on {wrong}" if wrong else ""),
            )
        )
        speed = interleaved_speed(result["log"], "submission", "reference", threads=1, min_share=criteria.min_cpu_share)
        word, detail = speed.judge(criteria.min_speedup)
        checks.append(Check(name="speed", passed=word == "pass", detail=detail))
        failed = [c for c in checks if not c.passed]
        outcome = (
            "pass"
            if not failed
            else ("inconclusive" if [c.name for c in failed] == ["speed"] and word == "inconclusive" else "fail")
        )
        return Outcome(
            outcome=outcome,
            reasons=[f"{c.name}: {c.detail}" for c in failed],
            checks=checks,
            metrics={"speedup_vs_reference": round(speed.speedup, 4), "reference_cpu_share": speed.share},
            headline=Headline(name="speedup vs reference", value=round(speed.speedup, 4), unit="x"),
            criteria_hash=criteria.sha256,
            task_hash=task_hash,
            candidate_hash=sub_hash,
        )


KIND = ToyVerifier()
