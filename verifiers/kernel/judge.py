"""Turning evidence into checks, in the verifier's own process.

Inputs here come from sandboxes: the supervisor's measurements (trusted code, but parsed
defensively all the same), the candidate worker's report (untrusted: its process ran the
candidate), and tensors written by both sides (read without following links, size-capped,
safetensors only). Every comparison that decides correctness happens here, with torch
functions the candidate never shared a process with.
"""

from __future__ import annotations

import math
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from assay.verifiers.common.timing import cpu_share as _cpu_share
from assay.verifiers.common.timing import median_cpu_per_iter, median_per_iter, scaling  # noqa: F401  (the stages take them from here)
from assay.verifiers.kernel.criteria import Criteria

POISON_BITS = {
    "float32": ("int32", 0x7FC0FFEE),
    "float64": ("int64", 0x7FF8DEADBEEFF00D),
    "float16": ("int16", 0x7E5A),
    "bfloat16": ("int16", 0x7FDA),
}


@dataclass
class Check:
    name: str
    passed: bool
    detail: str

    def to_json(self) -> dict:
        return {"name": self.name, "passed": self.passed, "detail": self.detail}


@dataclass
class Checks:
    """Checks in the order they were first reached; later evidence can only fail a check."""

    items: dict[str, Check] = field(default_factory=dict)

    def ok(self, name: str, detail: str) -> None:
        if name not in self.items:
            self.items[name] = Check(name, True, detail)

    def fail(self, name: str, detail: str) -> None:
        current = self.items.get(name)
        if current is None or current.passed:
            self.items[name] = Check(name, False, detail)
        elif detail not in current.detail:
            current.detail = f"{current.detail}; {detail}"

    def set(self, name: str, passed: bool, detail: str) -> None:
        (self.ok if passed else self.fail)(name, detail)

    def passed(self, *names: str) -> bool:
        return all(self.items[n].passed for n in names if n in self.items)

    def all_passed(self) -> bool:
        return all(c.passed for c in self.items.values())

    def list(self) -> list[Check]:
        return list(self.items.values())


# ------------------------------------------------------------------ reading sandbox files


def read_inside(root: Path, relative: str, max_bytes: int) -> bytes | None:
    """A file under `root` written by a sandbox, opened component by component without
    following any link (a candidate could have swapped a folder for a link to a host path)."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(root, flags | os.O_DIRECTORY)
    except OSError:
        return None
    try:
        parts = [p for p in relative.split("/") if p]
        for i, part in enumerate(parts):
            if part in (".", ".."):
                return None
            last = i == len(parts) - 1
            nxt = os.open(part, flags | (0 if last else os.O_DIRECTORY), dir_fd=fd)
            os.close(fd)
            fd = nxt
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > max_bytes:
            return None
        chunks, left = [], st.st_size
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 24))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def load_tensors(root: Path, relative: str, max_bytes: int) -> dict | None:
    from safetensors import SafetensorError
    from safetensors.torch import load

    data = read_inside(root, relative, max_bytes)
    if data is None:
        return None
    try:
        return load(data)
    except (SafetensorError, ValueError, RuntimeError, OSError):
        return None


# ------------------------------------------------------------------------------ tensors


def _dtype(t) -> str:
    return str(t.dtype).removeprefix("torch.")


def compare(got, want, criteria: Criteria) -> tuple[bool, str, float]:
    """(close enough, why not, max abs error) for one output tensor."""
    import torch

    if tuple(got.shape) != tuple(want.shape):
        return False, f"shape {list(got.shape)} instead of {list(want.shape)}", float("inf")
    if got.dtype != want.dtype:
        return False, f"dtype {_dtype(got)} instead of {_dtype(want)}", float("inf")
    tol = criteria.tolerance(_dtype(want))
    if not (want.is_floating_point() or want.is_complex()):
        same = torch.equal(got, want)
        return same, "" if same else "values differ (exact match required)", 0.0 if same else float("inf")
    parts = want.is_complex()
    if parts:
        # Real and imaginary parts side by side: .double() of a complex tensor keeps the real part
        # only, which let any imaginary part pass.
        got, want = (torch.view_as_real(t.resolve_conj()) for t in (got, want))
    g, w = got.double(), want.double()
    nan_g, nan_w = torch.isnan(g), torch.isnan(w)
    # NaN only where the reference has NaN, infinities only where it has the same infinity.
    special = nan_g | nan_w | torch.isinf(g) | torch.isinf(w)
    bad_special = special & ~((nan_g & nan_w) | (g == w))
    plain = ~special
    diff = torch.where(plain, (g - w).abs(), torch.zeros_like(g))
    bad = (plain & (diff > tol.atol + tol.rtol * w.abs())) | bad_special
    diff = torch.where(bad_special, torch.full_like(diff, float("inf")), diff)
    max_err = float(diff.max()) if diff.numel() else 0.0
    if parts:
        bad = bad.any(-1)  # a complex element is off when either of its parts is
    if bool(bad.any()):
        n = int(bad.sum())
        return (
            False,
            f"{n} of {bad.numel()} elements off (max abs error {max_err:.3g}, atol {tol.atol:g}, rtol {tol.rtol:g})",
            max_err,
        )
    return True, "", max_err


def unwritten(got, want) -> str | None:
    """Why an output looks like memory the candidate never wrote, if it does."""
    import torch

    name = _dtype(got)
    if name in POISON_BITS and got.numel():
        int_name, pattern = POISON_BITS[name]
        ints = got.contiguous().view(getattr(torch, int_name))
        bits = pattern - (1 << (8 * got.element_size())) if pattern >= 1 << (8 * got.element_size() - 1) else pattern
        if float((ints == bits).float().mean()) > 0.5:
            return "its memory was never written (it still holds the verifier's poison pattern)"
    if got.numel() and not bool(got.any()) and bool(want.any()):
        return "it is all zeros (memory never written?)"
    return None


def same_values(a, b, criteria: Criteria) -> bool:
    return tuple(a.shape) == tuple(b.shape) and a.dtype == b.dtype and compare(a, b, criteria)[0]


# ------------------------------------------------------------------------ the lifecycle

LIFECYCLE = ("loads", "no_crash", "no_early_exit", "within_limits")
KILL_WORDS = {"timeout": "time limit", "memory": "memory limit", "pids": "process limit", "output": "output limit"}


def judge_lifecycle(checks: Checks, result: dict | None, res, stage: str) -> bool:
    """loads / no_crash / no_early_exit / within_limits from one supervised exec. True if the
    exec ran to its end."""
    if res.killed:
        checks.fail("within_limits", f"the {stage} sandbox hit its {KILL_WORDS.get(res.killed, res.killed)}")
        return False
    if result is None:
        tail = (res.stderr or res.stdout).strip().splitlines()[-3:]
        checks.fail(
            "no_crash", f"the {stage} sandbox ended without a result (exit {res.exit_code}): {' | '.join(tail)}"
        )
        return False
    stop = result.get("stop")
    if not stop:
        for name in LIFECYCLE:
            checks.ok(name, f"{stage}: ran to the end")
        return True
    why, phase, who = str(stop.get("why")), str(stop.get("phase")), str(stop.get("who", "candidate"))
    detail = str(stop.get("detail", ""))[:1500]
    if who != "candidate":
        checks.fail(
            "timing_integrity",
            f"the trusted {who} worker failed during {phase}: {why} {detail}".strip() + _stderr(result, who),
        )
        return False
    if why == "error":
        said = result.get("error") if result is not None else None
        err = said if isinstance(said, dict) else {}
        kind, where, text = err.get("kind"), str(err.get("phase", phase)), str(err.get("detail", ""))[-1500:]
        if kind == "exit":
            checks.fail("no_early_exit", f"the candidate exited early during {where}: {text}")
        elif kind == "model_new" or where in ("import", "construct"):
            checks.fail("loads", f"{where}: {text}")
        else:
            checks.fail("no_crash", f"the candidate raised during {where}: {_last_line(text)}")
        return False
    if why == "exit":
        status = ((result.get("workers") or {}).get("candidate") or {}).get("exit") or {}
        if "code" in status:
            checks.fail(
                "no_early_exit",
                f"the candidate's process exited with code {status['code']} during {phase}"
                + _stderr(result, "candidate"),
            )
        else:
            checks.fail(
                "no_crash",
                f"the candidate's process died of {status.get('signal', 'a signal')} during {phase}"
                + _stderr(result, "candidate"),
            )
        return False
    if why in KILL_WORDS:
        checks.fail("within_limits", f"{KILL_WORDS[why]} during {phase}: {detail}")
        return False
    checks.fail("harness_integrity", f"the verifier's channel was tampered with during {phase}: {detail}")
    return False


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:500] if lines else text[:500]


def _stderr(result: dict, who: str) -> str:
    tail = str(((result.get("workers") or {}).get(who) or {}).get("stderr_tail", "")).strip()
    return f" (stderr: {_last_line(tail)})" if tail else ""


# ------------------------------------------------------------------------------- timing

TRUSTED_SUBJECTS = ("eager", "compiled", "copy")


def inconclusive(checks: list, metrics: dict) -> bool:
    """Whether a failed verdict failed only on figures the machine's load decided: speed measured
    on a machine too busy to time it (`timing_contended`), or the roofline against a copy
    baseline the load made unsteady (`roofline_unsettled`). A release pipeline retries that on a
    quieter machine (exit code 3) instead of taking it for a slow kernel or a cheat. Checks as
    dicts or as Check objects."""
    m = metrics or {}
    failed = {
        (c.get("name") if isinstance(c, dict) else c.name)
        for c in checks
        if not (c.get("passed") if isinstance(c, dict) else c.passed)
    }
    load_decided = set()
    if m.get("timing_contended") is True:
        load_decided |= {"speed", "roofline"}
    if isinstance(m.get("roofline_unsettled"), str) and m["roofline_unsettled"]:
        load_decided.add("roofline")
    return bool(failed) and failed <= load_decided


@dataclass(frozen=True)
class RooflineJudgement:
    passed: bool
    detail: str
    # Why the figure cannot be trusted when it fails (the load, measured); None when it can.
    unsettled: str | None
    copy_best_s: float
    copy_spread: float


def judge_roofline(
    t_fast: float,
    where: str,
    copy_per_iter: list[float],
    min_bytes: int,
    copy_bytes: int,
    slack: float,
    busy: str | None,
) -> RooflineJudgement:
    """A candidate may not beat a copy of the task's bytes by more than `slack`. The bound is the
    copy's fastest round, not its median: a cheat that skips the work is many times faster than
    any copy, while an honest kernel at copy speed can beat a copy round a neighbour slowed. A
    failure is load-decided (inconclusive, never FAIL) when the machine was busy (`busy`, the
    measured contention) or the copy's own rounds spread wider than the slack: then the baseline
    says more about the neighbours than about the bytes."""
    per = sorted(t for t in copy_per_iter if t > 0 and math.isfinite(t))
    scale = min_bytes / max(copy_bytes, 1)
    best = per[0] * scale if per else float("nan")
    spread = per[-1] / per[0] if per else float("nan")
    bound = best / slack
    gbs = min_bytes / best / 1e9 if best > 0 else float("nan")
    if not t_fast < bound:  # NaN (no copy rounds): nothing to judge against, no failure
        return RooflineJudgement(
            True, f"{min_bytes / t_fast / 1e9:.3f} GB/s of {gbs:.3f} GB/s copy bandwidth", None, best, spread
        )
    detail = (
        f"{t_fast * 1e3:.3f} ms per call ({where} rounds) is faster than copying the task's {min_bytes} bytes "
        f"({best * 1e3:.3f} ms at {gbs:.3f} GB/s, the fastest copy round) allows, even with slack {slack}"
    )
    why = []
    if busy:
        why.append(busy)
    if spread > slack:
        why.append(f"the copy's own rounds ranged {spread:.2f}x from fastest to slowest, more than the slack")
    unsettled = "; ".join(why) or None
    if unsettled:
        detail += (
            f"; inconclusive: the copy baseline was unsteady ({unsettled}): verify again when the machine is quieter"
        )
    return RooflineJudgement(False, detail, unsettled, best, spread)


def cpu_share(log: list[dict], threads) -> float | None:
    """The share of its CPUs the trusted reference (eager, compiled, copy) got while it was timed
    (common.timing.cpu_share). The candidate is stopped while the reference runs, so it cannot
    lower this figure."""
    return _cpu_share(log, threads, TRUSTED_SUBJECTS)
