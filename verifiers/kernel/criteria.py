"""The kernel kind's criteria: the tables a `kernel-*` profile holds (verifiers/criteria/), as
the kernel verifier reads them. Loading, lookup by name and hashing are the shared
assay.verifiers.criteria's; this module says only what a kernel profile must contain."""

from __future__ import annotations

from pydantic import Field

from assay.verifiers.criteria import CriteriaBase, StrictModel, load_profile


class Tolerance(StrictModel):
    atol: float = Field(ge=0)
    rtol: float = Field(ge=0)


class Correctness(StrictModel):
    trials: int = Field(ge=5)
    other_shapes: int = Field(ge=2)
    min_size_constant: int = Field(ge=2)
    tolerance: dict[str, Tolerance]


class Speed(StrictModel):
    min_speedup_vs_eager: float = Field(gt=0)


class Timing(StrictModel):
    warmup_iters: int = Field(ge=1)
    # And at least this long: a subject fresh from its import pays first-call costs for a while.
    warmup_s: float = Field(default=0.1, ge=0, le=10)
    rounds: int = Field(ge=4)
    target_round_s: float = Field(gt=0)
    max_iters_per_round: int = Field(ge=2)
    flush_mb: int = Field(ge=1)
    scaling_min: float = Field(gt=1)
    perturb_max_elements: int = Field(ge=1, le=1 << 20)
    # Fresh rounds (eager's and the candidate's): every call on an input no call saw before,
    # made before the round in this much memory. The speedup credited is at most fresh_slack
    # times the one they show.
    fresh_rounds: int = Field(ge=2)
    fresh_input_mb: int = Field(ge=64, le=8192)
    fresh_slack: float = Field(ge=1)
    # Below this share of its CPUs for the trusted reference, a failed speed check says the
    # machine was too busy to time, and the verdict's metrics say so (timing_contended). A quiet
    # machine reads 0.98. Busy ones read 0.49-0.66 here with one or with two spinning processes
    # per CPU beside a docker sandbox (more neighbours did not lower it); at 0.65 a run beside two
    # per CPU read 0.658, and its failed speed check was not called inconclusive.
    min_cpu_share: float = Field(default=0.8, gt=0, le=1)
    # Above it (the share of the sandbox's CPUs that processes outside it kept busy while either
    # side was timed), a slow figure is inconclusive too: quiet reads 0.00-0.05, two spinners per
    # CPU 0.5-0.7, whatever share the scheduler happened to give the reference.
    max_other_cpu_share: float = Field(default=0.25, ge=0, le=1)
    # While the candidate is timed, its running thread's program counter every this much CPU
    # time (the kernel samples at its tick at the finest: 4 ms on a 250 Hz kernel)...
    sample_us: int = Field(default=1000, ge=100, le=100_000)
    # ...and how much of that time may lie in libtorch_cpu's code (not Sleef's vector math in
    # it): as a share of the candidate's CPU time, and as CPU time a call against eager's. Judged
    # from min_samples intervals on. Honest kernels read 0-1% of either (allocation through the
    # dispatcher); half of softmax by the shim's kernels reached by address, 36-126% of eager's.
    max_torch_cpu_share: float = Field(default=0.2, gt=0, le=1)
    # Below this much libtorch_cpu time a call neither limit is judged: allocation through the
    # dispatcher and the harness's own calls around each timed call take 10-15 us a call here,
    # which on a task whose eager call takes 50 us would read as 20-30%.
    torch_cpu_floor_us: float = Field(default=30.0, ge=0)
    min_samples: int = Field(default=50, ge=1)


class Roofline(StrictModel):
    slack: float = Field(ge=1)


class Settle(StrictModel):
    seconds: float = Field(gt=0)
    max_cpu_fraction: float = Field(gt=0)


class Limits(StrictModel):
    import_timeout_s: float = Field(gt=0)
    forward_timeout_s: float = Field(gt=0)
    memory_mb: int = Field(ge=256)
    build_memory_mb: int = Field(ge=256)
    max_processes: int = Field(ge=1)
    build_max_processes: int = Field(ge=1)
    output_bytes: int = Field(ge=1024)
    sandbox_memory_mb: int = Field(ge=512)
    sandbox_pids: int = Field(ge=32)


class Scan(StrictModel):
    stop_on_failure: bool
    allowed_imports: list[str]
    allowed_os: list[str]
    allowed_torch: list[str]
    allowed_nn: list[str]
    allowed_cpp: list[str]
    allowed_tensor_methods: list[str]
    # Contractions a forward may call (torch.<name>, torch.nn.functional.<name>): only the
    # reference's own, on its sizes, pass at run time ([ops] contractions).
    allowed_contractions: list[str] = []


class Ops(StrictModel):
    allowed: list[str]
    # Ops that open a contraction: the candidate may make the reference's own, on its shapes.
    contractions: list[str] = []


class Criteria(CriteriaBase):
    correctness: Correctness
    speed: Speed
    timing: Timing
    roofline: Roofline
    settle: Settle
    limits: Limits
    scan: Scan
    ops: Ops

    def tolerance(self, dtype: str) -> Tolerance:
        """Tolerance for an output dtype ('float32', ...); a complex dtype not listed takes its
        parts' (complex64: float32's); anything else not listed must match exactly."""
        listed = self.correctness.tolerance
        if dtype not in listed and dtype in _COMPLEX_PARTS:
            dtype = _COMPLEX_PARTS[dtype]
        return listed.get(dtype, Tolerance(atol=0.0, rtol=0.0))


# The dtype of a complex dtype's real and imaginary parts.
_COMPLEX_PARTS = {"complex32": "float16", "complex64": "float32", "complex128": "float64"}


def load_criteria(name: str) -> Criteria:
    """The named kernel profile, validated, with its hash; a UserError names a bad or unknown
    one, or one written for another kind."""
    return load_profile(name, Criteria, kind="kernel")
