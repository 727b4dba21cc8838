"""The toy judge, inside a verification sandbox: the task's Model and the submitted ModelNew on
held-out inputs, then both timed interleaved. Standard library only, through the shared harness."""

import os
import random
import sys

sys.path.insert(
    0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "common", "harness")
)
import assay_harness  # noqa: E402
import assay_timing  # noqa: E402


def main() -> None:
    plan = assay_harness.read_plan()
    task = assay_harness.load_entry("/assay/task/task.py", "toy_task")
    try:
        sub = assay_harness.load_entry(plan["entry"], "toy_submission")
        new = sub.ModelNew(plan["power"])
    except Exception as exc:  # the submission's failure, reported as such
        assay_harness.emit({"error": f"{type(exc).__name__}: {exc}"})
        return
    ref = task.Model(plan["power"])
    inputs = [[random.Random(seed).randint(-50, 50) for _ in range(64)] for seed in plan["seeds"]]
    expected = [ref(xs) for xs in inputs]
    got = [new(xs) for xs in inputs]
    log = assay_timing.interleave(
        {"reference": lambda: ref(inputs[0]), "submission": lambda: new(inputs[0])}, rounds=4, target_round_s=0.01
    )
    assay_harness.emit(
        {
            "expected": expected,
            "got": got,
            "log": log,
            "isolation": assay_harness.isolation_problems("/assay/submission"),
        }
    )


main()
