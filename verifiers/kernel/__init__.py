"""The kernel kind's verifier: is a candidate ModelNew correct, honest, and really faster?

    report = verify_kernel("examples/kernels/softmax.py", "candidate.py", "kernel-default")

Its stages, each a module (verify.py's docstring tells the whole order):

- scan.py, symbols.py: the candidate's source and the C++ it builds, read for torch compute,
  dynamic code and system access;
- reference.py: the task's Model on held-out inputs in a fresh sandbox;
- check.py: the candidate under the supervisor in another, outputs compared here;
- timing.py (baseline.py: torch.compile's cache): eager, compiled, copy and candidate
  interleaved, audited, contention measured;
- judge.py, samples.py: evidence turned into checks;
- verify.py: the stages in order, and the report; kind.py: the VerifierKind the verifier
  process calls; criteria.py: what a kernel profile holds; runtime.py: its sandboxes;
  harness/: the scripts that run inside them.
"""

from assay.verifiers.kernel.reference import prepare_reference, warm_task
from assay.verifiers.kernel.verify import KernelReport, verify_candidate, verify_kernel

__all__ = ["KernelReport", "prepare_reference", "verify_candidate", "verify_kernel", "warm_task"]
