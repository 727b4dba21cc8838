"""The check stage: the candidate in a fresh sandbox under the supervisor, on every reference
run, with the op recorder armed; outputs compared here, the C++ it built read for the torch
symbols it imports, and what it opened through ctypes checked to be its own."""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from pathlib import Path

from assay.errors import UserError
from assay.verifiers.kernel import contractions
from assay.verifiers.kernel import runtime as rt
from assay.verifiers.kernel.criteria import Criteria
from assay.verifiers.kernel.judge import (
    Checks,
    compare,
    judge_lifecycle,
    load_tensors,
    same_values,
    unwritten,
)
from assay.verifiers.kernel.reference import ReferenceRun, _say

Progress = Callable[[str, float], None]


def _candidate_binds(ref: ReferenceRun, work: Path) -> dict[str, Path]:
    assert ref.opwatch_dir is not None  # prepare_reference waits for the op recorder's build
    return {
        **rt.harness_binds(),
        rt.IN_CANDIDATE: work / "candidate",
        rt.IN_INPUTS: ref.inputs_dir,
        rt.IN_OPWATCH: ref.opwatch_dir,
    }


def _candidate_env() -> dict[str, str]:
    ext = f"{rt.WORKDIR}/ext"
    return rt.base_env(TORCH_EXTENSIONS_DIR=ext, ASSAY_KERNEL_BUILD_DIR=ext)


def _opwatch_path(ref: ReferenceRun) -> str:
    assert ref.opwatch_dir is not None  # prepare_reference waits for the op recorder's build
    so = next(ref.opwatch_dir.glob("assay_opwatch_*.so"))
    return f"{rt.IN_OPWATCH}/{so.name}"


def _check_run(
    ref: ReferenceRun, checks: Checks, metrics: dict, work: Path, cand_sha: str, progress: Progress | None
) -> bool:
    crit, lim = ref.criteria, ref.criteria.limits
    ws = work / "check"
    (ws / "out").mkdir(parents=True)
    (ws / "home").mkdir()
    ext_cache = ref.cache_dir / "ext" / cand_sha[:32]
    rt.copy_tree(ext_cache, ws / "ext")
    runs = []
    for r in ref.runs:
        runs.append(
            {
                "id": r["id"],
                "inputs_file": f"{rt.IN_INPUTS}/run_{r['id']}.safetensors",
                "inputs": r["inputs"],
                "init_args": r["init_args"],
                "reuse_buffers_of": r["reuse_buffers_of"],
                "overrides": r.get("overrides") or {},
                "out_file": f"{rt.WORKDIR}/out/run_{r['id']}.safetensors",
                "poison": [{"shape": o["shape"], "dtype": o["dtype"]} for o in r["outputs"]],
            }
        )
    worker_plan = {
        "role": "check",
        "candidate": f"{rt.IN_CANDIDATE}/candidate.py",
        "opwatch": _opwatch_path(ref),
        "init_seed": ref.init_seed,
        "runs": runs,
        # As text: the worker records the reference's contractions from it, and no task file
        # is mounted where the candidate runs.
        "task_source": ref.task.source,
        "contractions": list(crit.ops.contractions),
    }
    plan = {
        "mode": "check",
        "candidate": rt.worker_spec(worker_plan, _candidate_env()),
        "settle_s": crit.settle.seconds,
        "candidate_roots": rt.CANDIDATE_ROOTS,
        "trusted_roots": rt.trusted_roots(),
        "limits": _limits(crit),
    }
    timeout = _check_timeout(ref)
    _say(progress, "building and checking the candidate", 0.2)
    sandbox = rt.open_verification_sandbox(
        ws,
        _candidate_binds(ref, work),
        rt.sandbox_limits(lim.sandbox_memory_mb, lim.sandbox_pids, timeout + 30),
        ref.backend,
    )
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
    said = result.get("report") if result is not None else None
    report = said if isinstance(said, dict) else {}
    record = result.get("reference_contractions") if result is not None else None
    if crit.ops.contractions and not isinstance(record, dict):
        checks.fail("harness_integrity", "the reference's contractions were not recorded before the candidate ran")
    metrics["contractions"] = {"reference": (record or {}).get("runs") or {}}
    if isinstance(record, dict) and record.get("error"):
        metrics["contractions"]["error"] = str(record["error"])[:500]
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
            checks.fail(
                "no_work_after_return",
                f"{label}: {len(s['extra_processes'])} process(es) of the candidate still alive after forward returned",
            )
        if s.get("settle_s") and float(s.get("settle_cpu_s", 0)) > crit.settle.max_cpu_fraction * float(s["settle_s"]):
            checks.fail(
                "no_work_after_return",
                f"{label}: the candidate used {float(s['settle_cpu_s']):.2f} s of CPU in the {float(s['settle_s']):.2f} s after forward returned",
            )
        if int(s.get("py_threads") or 0) > 0:
            checks.fail(
                "no_work_after_return",
                f"{label}: {s['py_threads']} thread(s) the candidate started were running when forward returned",
            )


def _label(run: dict) -> str:
    return f"run {run['id']} ({'task shape' if run['kind'] == 'trial' else _shape_label(run)})"


def _limits(crit: Criteria) -> dict:
    lim = crit.limits
    return {
        "import_timeout_s": lim.import_timeout_s,
        "forward_timeout_s": lim.forward_timeout_s,
        "memory_mb": lim.memory_mb,
        "max_processes": lim.max_processes,
        "build_max_processes": lim.build_max_processes,
        "build_memory_mb": lim.build_memory_mb,
        "output_bytes": lim.output_bytes,
    }


def _symbols(sandbox, mapped: list[str], hidden: bool, checks: Checks, crit: Criteria) -> None:
    """Which torch functions the candidate's own shared libraries import: at::_ops::X::call
    for an op outside the allowed list, at::native/at::cpu kernels, the dispatcher or the op
    recorder, dlsym, threads. Read from the binaries, so macros and threads hide nothing."""
    from assay.verifiers.kernel.symbols import judge_symbols

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
        checks.fail(
            "no_torch_compute",
            f"{when}the candidate reached torch's own libraries through ctypes (their C "
            f"functions run kernels with no dispatcher and no op record): {', '.join(torch_fns[:6])}",
        )
    if other_fns:
        checks.fail(
            "extension_symbols",
            f"{when}the candidate reached libraries it did not build through ctypes: {', '.join(other_fns[:6])}",
        )


def _judge_check(ref: ReferenceRun, checks: Checks, metrics: dict, ws: Path, report: dict, log: list) -> None:
    crit = ref.criteria
    records = {r.get("id"): r for r in report.get("runs") or [] if isinstance(r, dict)}
    allowed = set(crit.ops.allowed)
    bad_ops: dict[str, int] = {}
    reference = (metrics.get("contractions") or {}).get("reference")
    contracted_bad: dict[str, list[str]] = {}  # reason: the runs it holds for
    made: list = []  # runs on which the candidate made the reference's contractions
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
        over, theirs = contractions.beyond(rec.get("contracted_ops"), reference, rid, crit.ops)
        if over:
            contracted_bad.setdefault(contractions.refusal(over, theirs), []).append(label)
        elif (rec.get("contracted_ops") or {}).get("roots"):
            made.append(rid)
        if rec.get("output_type") or rec.get("not_plain"):
            checks.fail(
                "plain_tensor_output", f"{label}: forward returned {rec.get('output_type')}, not a plain torch.Tensor"
            )
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
        if len(dtypes) != len(shapes):
            checks.fail(
                "harness_integrity", f"{label}: the worker recorded {len(dtypes)} dtypes for {len(shapes)} outputs"
            )
            continue
        mismatch = [
            f"output {j}: shape {sh} {dt} instead of {list(w.shape)} {str(w.dtype).removeprefix('torch.')}"
            for j, (sh, dt, w) in enumerate(zip(shapes, dtypes, want_list, strict=True))
            if list(sh) != list(w.shape) or dt != str(w.dtype).removeprefix("torch.")
        ]
        if mismatch:
            wrong.append(f"{label} " + "; ".join(mismatch))
            continue
        limit = sum(_nbytes(o) for o in run["outputs"]) + (1 << 20)
        got = load_tensors(ws / "out", f"run_{rid}.safetensors", limit)
        if got is None:
            checks.fail("harness_integrity", f"{label}: the candidate's output file is missing or malformed")
            continue
        got_list = [got.get(f"out_{j}") for j in range(len(want_list))]
        if len(got) != len(want_list) or any(
            g is None or tuple(g.shape) != tuple(w.shape) or g.dtype != w.dtype
            for g, w in zip(got_list, want_list, strict=True)
        ):
            checks.fail("harness_integrity", f"{label}: the output file does not hold what the worker reported")
            continue
        expected[rid], outputs[rid] = want_list, got_list
        good[rid] = []
        for j, (g, w) in enumerate(zip(got_list, want_list, strict=True)):
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
                    how = (
                        "same input memory, new values"
                        if run.get("reuse_buffers_of") == earlier
                        else "different inputs"
                    )
                    replays.append(f"{label} returned the output of run {earlier} ({how})")
                    break
    if report.get("compilers"):
        checks.fail(
            "no_torch_compute",
            f"the candidate ran torch's compiler ({', '.join(map(str, report['compilers']))} "
            "loaded): its kernel would be torch's, not its own",
        )
    _judge_ctypes(checks, report)
    if bad_ops:
        shown = ", ".join(f"{op} x{n}" for op, n in sorted(bad_ops.items(), key=lambda kv: -kv[1])[:8])
        checks.fail("no_torch_compute", f"forward dispatched torch ops beyond allocation: {shown}")
    for why, labels in list(contracted_bad.items())[:3]:
        where = labels[0] + (f" and {len(labels) - 1} more run(s)" if len(labels) > 1 else "")
        checks.fail("no_torch_compute", f"on {where}, forward made {why}")
    if not bad_ops and not contracted_bad and not report.get("compilers"):
        extra = " and the reference's own contractions" if made else ""
        checks.ok("no_torch_compute", f"forward dispatched only allocation and view ops{extra}")
    if made:
        metrics["contractions"]["candidate_runs"] = made
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
        checks.fail(
            "correctness",
            f"{len(wrong_trials) + len(wrong_shapes)} of {len(ref.runs)} runs wrong: "
            + "; ".join((wrong_trials + wrong_shapes)[:4]),
        )
    else:
        checks.ok("correctness", f"{n_trials} trials and {n_shapes} other shapes match (max abs error {max_err:.3g})")
    if wrong_shapes:
        checks.fail("other_shapes", "; ".join(wrong_shapes[:3]))
    else:
        checks.ok(
            "other_shapes",
            ref.shapes_note
            or f"{n_shapes} other shapes match: "
            + ", ".join(_shape_label(r) for r in ref.runs if r["kind"] == "shape"),
        )
    if replays:
        checks.fail("no_replay", "; ".join(replays[:4]))
    else:
        checks.ok("no_replay", "every run's output belongs to its own inputs")
    for name, detail in (
        ("plain_tensor_output", "every output is a plain CPU torch.Tensor"),
        ("no_alias", "outputs share memory with no input and no earlier output"),
        ("no_input_mutation", "inputs unchanged by forward"),
        ("no_work_after_return", "nothing ran after forward returned"),
    ):
        checks.ok(name, detail)
    metrics["max_abs_error"] = max_err
    metrics["runs"] = len(ref.runs)
    metrics["forward_s"] = [round(float(e.get("forward_s", 0)), 4) for e in log if isinstance(e, dict) and "run" in e]


def _shape_label(run: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in run["overrides"].items())


def _nbytes(spec: dict) -> int:

    size = {"float64": 8, "int64": 8, "float32": 4, "int32": 4, "float16": 2, "bfloat16": 2, "int16": 2}.get(
        spec["dtype"], 8
    )
    return math.prod(spec["shape"]) * size
