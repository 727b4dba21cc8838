"""The timing stage: eager, torch.compile, a copy of the task's bytes and the candidate,
interleaved round by round under one supervisor in a fresh sandbox; audited timed calls,
fresh-input rounds, CPU samples, and contention turned into an inconclusive speed check."""

from __future__ import annotations

import math
import os
import statistics
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from assay.verifiers.common.timing import others_share
from assay.verifiers.kernel import contractions
from assay.verifiers.kernel import runtime as rt
from assay.verifiers.kernel.baseline import _compile_warm
from assay.verifiers.kernel.check import (
    _candidate_binds,
    _candidate_env,
    _check_timeout,
    _judge_ctypes,
    _limits,
    _nbytes,
    _opwatch_path,
)
from assay.verifiers.kernel.judge import (
    TRUSTED_SUBJECTS,
    Checks,
    compare,
    cpu_share,
    judge_lifecycle,
    judge_roofline,
    load_tensors,
    median_cpu_per_iter,
    median_per_iter,
    scaling,
)
from assay.verifiers.kernel.reference import ReferenceRun, _say, _stage
from assay.verifiers.kernel.samples import judge_samples

Progress = Callable[[str, float], None]


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
    common = {
        "init_seed": ref.init_seed,
        "init_args": first["init_args"],
        "inputs_file": f"{rt.IN_INPUTS}/run_{first['id']}.safetensors",
        "inputs": first["inputs"],
        "perturb_max_elements": tm.perturb_max_elements,
        "fresh_input_mb": tm.fresh_input_mb,
        "flush_mb": tm.flush_mb,
    }
    ref_plan = {"role": "time-ref", "task": f"{rt.IN_TASK}/task.py", "copy_bytes": first["min_bytes"], **common}
    cand_plan = {
        "role": "time-cand",
        "candidate": f"{rt.IN_CANDIDATE}/candidate.py",
        "opwatch": _opwatch_path(ref),
        "contractions": list(crit.ops.contractions),
        "sample_us": tm.sample_us,
        **common,
    }
    (ws / "refhome" / "tmp").mkdir()
    ref_env = rt.base_env(
        HOME=f"{rt.WORKDIR}/refhome",
        TMPDIR=f"{rt.WORKDIR}/refhome/tmp",
        TORCHINDUCTOR_CACHE_DIR=f"{rt.WORKDIR}/inductor",
    )
    # The checks it waits for: the check run's own limit, and comparing its outputs.
    gate_s = _check_timeout(ref) + 60
    plan = {
        "mode": "time",
        "reference": rt.worker_spec(ref_plan, ref_env),
        "candidate": rt.worker_spec(cand_plan, _candidate_env()),
        "subjects": ["eager", "compiled", "copy", "candidate"],
        "rounds": tm.rounds,
        "fresh_rounds": tm.fresh_rounds,
        "target_round_s": tm.target_round_s,
        "max_iters": tm.max_iters_per_round,
        "warmup_iters": tm.warmup_iters,
        "warmup_s": tm.warmup_s,
        "limits": _limits(crit),
        "candidate_roots": rt.CANDIDATE_ROOTS,
        "trusted_roots": rt.trusted_roots(),
        "audit_candidate": f"{rt.WORKDIR}/audit/candidate.safetensors",
        # The most one audited call's outputs may take (the supervisor reads at most this).
        "audit_max_bytes": _audit_frame_bytes(ref),
        "audit_reference": f"{rt.WORKDIR}/audit-ref/reference.safetensors",
        "gate": f"{rt.WORKDIR}/gate",
        "gate_timeout_s": gate_s,
        "ext_seed": f"{rt.WORKDIR}/ext-seed",
        "ext_dir": f"{rt.WORKDIR}/ext",
    }
    per_round = tm.target_round_s * 3 * 4 + 1
    # Warm-up stops within about twice its time; calibration once a round fills a quarter of
    # the target, so within about twice that.
    settling = 4 * (3 * tm.warmup_s + tm.target_round_s + lim.forward_timeout_s * (tm.warmup_iters + 2))
    timeout = gate_s + 2 * lim.import_timeout_s + (tm.rounds + tm.fresh_rounds) * per_round + settling + 120
    binds = _candidate_binds(ref, work)
    binds[rt.IN_TASK] = ref.root / "task"
    sandbox = rt.open_verification_sandbox(
        ws, binds, rt.sandbox_limits(lim.sandbox_memory_mb, lim.sandbox_pids, timeout + 30), ref.backend
    )
    try:
        result, res = rt.run_supervised(sandbox, plan, timeout, _candidate_env())
        return result, res, time.monotonic()
    finally:
        sandbox.close()


def _round_row(e: dict) -> list:
    return [int(e["n"]), round(1e3 * float(e["wall_s"]), 3), round(1e3 * float(e["cpu_s"]), 3), int(e.get("faults", 0))]


def _timing(
    ref: ReferenceRun, checks: Checks, metrics: dict, work: Path, run: _TimingRun, progress: Progress | None
) -> None:
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
        checks.fail(
            "no_torch_compute",
            "while timed, forward dispatched " + ", ".join(f"{k} x{v}" for k, v in list(bad.items())[:8]),
        )
    # The calls counted by the supervisor, not by the candidate's process.
    calls = result.get("candidate_calls")
    over, theirs = contractions.beyond(
        report.get("contracted_ops"),
        (metrics.get("contractions") or {}).get("reference"),
        ref.runs[0]["id"],
        crit.ops,
        calls if isinstance(calls, int) else 0,
    )
    if over:
        checks.fail("no_torch_compute", "while timed, forward made " + contractions.refusal(over, theirs))
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
    cpus = result.get("sandbox_cpus")
    others = {side: others_share(log, subjects, cpus) for side, subjects in _SIDES.items()}
    busy_why = []
    if share is not None and share < tm.min_cpu_share:
        busy_why.append(f"the reference got {share:.0%} of the {threads} CPUs it ran on, need {tm.min_cpu_share:.0%}")
    for side, o in others.items():
        # The scheduler does not always share the CPUs out alike: beside two spinners per CPU the
        # reference once got 96% of its CPUs while the candidate's team waited for its threads.
        if o is not None and o > tm.max_other_cpu_share:
            busy_why.append(
                f"other processes kept {o:.0%} of the sandbox's {cpus} CPUs busy while the {side} was timed, "
                f"allowed {tm.max_other_cpu_share:.0%}"
            )
    contended = bool(busy_why)
    ratio = scaling(times["candidate"][1], "cpu_s")
    wall_ratio = scaling(times["candidate"][1], "wall_s")
    unscaled = None
    if not ratio >= tm.scaling_min:
        unscaled = (
            f"the candidate's CPU time does not follow its iteration count (3n/n = {ratio:.2f}, "
            f"wall {wall_ratio:.2f}; need >= {tm.scaling_min})"
        )
        # On a busy machine an honest kernel's short rounds pay for the neighbours' cache misses
        # and migrations too (seen in CI: 3n/n under 2 for slow_honest beside two spinners), so
        # the ratio cannot tell work per round from noise there: the verdict still fails, on
        # speed, as inconclusive, instead of naming a cheat the figures do not show.
        if not contended:
            problems.append(unscaled)
    # Before warm and fresh rounds alike: work left for a fresh round's flush is work too.
    flush = {
        s: statistics.median([float(e.get("flush_cpu_s", 0)) for e in times[s][1] + fresh[s][1]] or [0.0])
        for s in ("eager", "candidate")
    }
    if flush["candidate"] > 2 * flush["eager"] + 0.02:
        problems.append(
            f"the candidate burned {flush['candidate'] * 1e3:.1f} ms of CPU per untimed cache flush, "
            f"the reference {flush['eager'] * 1e3:.1f} ms: work moved out of the timed window"
        )
    windows = sum(float(e.get("wall_s", 0)) for e in log)
    if windows > host_wall + 0.5:
        problems.append(f"the timed windows add up to {windows:.2f} s, more than the {host_wall:.2f} s the exec took")
    if problems:
        checks.fail("timing_integrity", "; ".join(problems))
    else:
        checks.ok(
            "timing_integrity", f"supervisor clock, interleaved rounds, 3n/n = {ratio:.2f} CPU, {wall_ratio:.2f} wall"
        )
    min_bytes = int(ref.runs[0]["min_bytes"])
    copy_bytes = int(result.get("copy_bytes") or min_bytes)
    t_copy_task = t_copy * min_bytes / max(copy_bytes, 1)
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
    metrics.update(
        {
            "speedup_vs_eager": round(speed_eager, 4),
            "speedup_vs_compile": round(speed_comp, 4),
            "speedup_vs_eager_measured": round(measured, 4),
            "speedup_vs_eager_fresh": round(speed_fresh, 4) if speed_fresh == speed_fresh else None,
            "time_candidate_s": t_cand,
            "time_eager_s": t_eager,
            "time_compile_s": t_comp,
            "time_copy_s": t_copy_task,
            "copy_bandwidth_gbs": round(min_bytes / t_copy_task / 1e9, 3),
            "candidate_bandwidth_gbs": round(min_bytes / t_cand / 1e9, 3),
            "bandwidth_fraction": round(t_copy_task / t_cand, 4),
            "min_bytes": min_bytes,
            "timing_rounds": len(cand_rounds),
            "timing_iterations": sum(int(e["n"]) for e in cand_rounds),
            "cpu_per_wall": {
                s: round(
                    sum(float(e["cpu_s"]) for e in times[s][1])
                    / max(sum(float(e["wall_s"]) for e in times[s][1]), 1e-9),
                    3,
                )
                for s in times
            },
            # Every timed round as [iterations, wall ms, CPU ms, page faults], for whoever audits
            # the figures (a fault cost 17 us here: thousands of them are a round's time).
            "rounds": {s: [_round_row(e) for e in times[s][1]] for s in times},
            "rounds_fresh": {s: [_round_row(e) for e in fresh[s][1]] for s in fresh},
            # The calibration rounds that sized them (their pace sets each subject's n).
            "rounds_calibration": {
                s: [
                    _round_row(e)
                    for e in log
                    if e.get("subject") == s and "n" in e and e.get("round") is None and e.get("fresh_round") is None
                ]
                for s in times
            },
            "timing_wall_s": round(res.duration_s, 3),
            # Each audited call's [stopping, reading, resuming] ms (the supervisor reads its output).
            "audit_read_ms": result.get("audit_read_ms"),
            "timing_phases_s": _phases(result.get("phase_s")),
        }
    )
    # The faster of the candidate's warm and fresh rounds: the fresh ones change no input around
    # each call, so a candidate that does no work shows its bare time there.
    t_fast, where = t_cand, "warm"
    if fresh["candidate"][0] < t_cand:  # False for NaN
        t_fast, where = fresh["candidate"][0], "fresh"
    busy = "; ".join(busy_why) or None
    copy_per = [float(e["wall_s"]) / int(e["n"]) for e in times["copy"][1]]
    roof = judge_roofline(t_fast, where, copy_per, min_bytes, copy_bytes, crit.roofline.slack, busy)
    metrics["copy_bandwidth_best_gbs"] = round(min_bytes / roof.copy_best_s / 1e9, 3) if roof.copy_best_s > 0 else None
    metrics["copy_round_spread"] = round(roof.copy_spread, 3) if roof.copy_spread == roof.copy_spread else None
    metrics["roofline_unsettled"] = roof.unsettled
    checks.set("roofline", roof.passed, roof.detail)
    need = crit.speed.min_speedup_vs_eager
    detail = f"{speed_eager:.3f}x eager, {speed_comp:.3f}x torch.compile (need >= {need}x eager)"
    if speed_eager < measured:
        detail += (
            f"; measured {measured:.3f}x eager, but {speed_fresh:.3f}x on inputs no call saw before: "
            f"credited at most {tm.fresh_slack}x that"
        )
    metrics["reference_cpu_share"] = None if share is None else round(share, 3)
    metrics["others_cpu_share"] = {side: None if o is None else round(o, 3) for side, o in others.items()}
    metrics["timing_contended"] = contended
    passed = speed_eager >= need and not (contended and unscaled)
    if contended:
        # Every subject ran slower, and not alike (OpenMP teams wait for their descheduled
        # threads), so the figure says more about the neighbours than about the candidate.
        why = f"{busy}; {unscaled}" if unscaled else busy
        detail += (
            f"; inconclusive: the machine was too busy to time ({why}): verify again when it is quieter"
            if not passed
            else f"; taken on a busy machine ({why})"
        )
    checks.set("speed", passed, detail)


# Whose timed rounds the neighbours' share is read over: each side's figure is its own rounds'.
_SIDES = {"reference": TRUSTED_SUBJECTS, "candidate": ("candidate",)}


def _phases(found) -> dict[str, float]:
    """The supervisor's seconds per phase, as far as they are well-formed (the figures inform; no
    check reads them)."""
    if not isinstance(found, dict):
        return {}
    return {
        str(k)[:64]: round(float(v), 3)
        for k, v in list(found.items())[:32]
        if isinstance(v, (int, float)) and not isinstance(v, bool)
    }


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
        checks.fail(
            "consistent_when_timed", f"an audited timed call returned no plain tensor ({result.get('audit_saved')})"
        )
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
            checks.fail(
                "consistent_when_timed",
                f"{where} returned {len(layouts[i]) if isinstance(layouts[i], list) else 'no'} "
                f"outputs, eager {len(keys)}",
            )
            return
        for key, layout in zip(keys, layouts[i], strict=True):
            out = _rebuild(got[key], layout)
            if isinstance(out, str):
                checks.fail("consistent_when_timed", f"{where} returned an output the audit cannot read: {out}")
                return
            ok, why, _ = compare(out, want[key], ref.criteria)
            if not ok:
                checks.fail("consistent_when_timed", f"{where} returned a wrong output: {why}")
                return
    rounds = len({str(a.get("round")) for a in audits})
    checks.ok(
        "consistent_when_timed",
        f"{len(audits)} timed calls in {rounds} rounds match eager, "
        "read from the candidate's memory as each call returned",
    )


def _rebuild(raw, layout):
    """An output from the bytes the supervisor read and its [dtype, shape, strides]; or why not."""
    import torch

    try:
        name, shape, strides = layout
        dtype = getattr(torch, str(name), None)
        if not isinstance(dtype, torch.dtype):
            return f"dtype {str(name)[:32]!r}"
        if not (
            isinstance(shape, list)
            and isinstance(strides, list)
            and len(shape) == len(strides)
            and all(isinstance(v, int) and v >= 0 for v in shape + strides)
        ):
            return "a malformed layout"
        item = torch.empty(0, dtype=dtype).element_size()
        numel = math.prod(shape)
        span = 0 if numel == 0 else 1 + sum((n - 1) * st for n, st in zip(shape, strides, strict=True))
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
