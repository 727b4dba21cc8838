"""Where the candidate's timed CPU time went, from the worker's samples (harness/sampler.cpp).

The op recorder sees torch's kernels only through the dispatcher, CtypesWatch only through
ctypes, and the symbol check only what a library imports by name. A kernel of torch's reached
by address (the AOTInductor shim's aoti_torch_cpu_* found by walking the dynamic linker's
tables, a function pointer read out of torch's memory) passes all three, but its work still
runs in torch's code, and that is what the samples show. Each sample is the instruction a
thread of the candidate's process was running, every interval of its CPU time while timed.

Samples are sorted into: the candidate's own build; torch's OpenMP runtime (libgomp ships in
torch/lib, and every OpenMP kernel's threads wait in it); torch's glue (libc10, libtorch_python:
types, allocator, bindings; no kernel lives there); Sleef's vector math, which libtorch_cpu
exports and at::vec's inline code calls from a candidate's own kernel; libtorch_cpu's other
code; other people's numeric libraries (numpy's OpenBLAS...); the reference's own contractions
(torch's code while a convolution or matmul the op recorder matched to the reference's ran:
oneDNN and MKL live in libtorch_cpu); and everything else (libc, libm, Python). Too much time
in libtorch_cpu's other code fails no_torch_compute (an honest kernel spends 0-1% there:
allocation through the dispatcher); in the numeric libraries, extension_symbols.
"""

from __future__ import annotations

import bisect
import os
import re
import subprocess
from functools import lru_cache

from assay.verifiers.kernel import runtime as rt
from assay.verifiers.kernel.criteria import Criteria

ALLOWED_IN_TORCH = ("Sleef_",)
# Other people's numeric kernels a process may have loaded (numpy's OpenBLAS, MKL, oneDNN,
# FFTW): reached by address like torch's, they are not the candidate's work either. numpy's own
# ufunc loops (_multiarray_umath) are not listed: the harness changes an input element around
# every timed call with them (worker.Perturb), 4-6% of an honest 1.3 ms softmax's CPU time here.
FOREIGN_COMPUTE = re.compile(r"blas|lapack|libmkl|dnnl|fftw|libgfortran|libsleef|xnnpack|fbgemm", re.I)


CLASSES = ("own", "openmp", "glue", "sleef", "torch", "foreign", "contraction", "other")
# Where a sample taken inside one of the reference's own contractions (see opwatch.cpp) lands
# instead: that time is the contraction's, which the op recorder has matched to the reference.
IN_CONTRACTION = {"torch", "sleef"}  # oneDNN and MKL live in libtorch_cpu
# torch's core types, allocator and Python bindings: what calling any extension from Python runs
# (argument parsing, THPVariable_Wrap, a TensorImpl for the output). No ATen kernel lives there;
# they are all in libtorch_cpu.
GLUE = ("libc10", "libtorch_python", "libshm")


@lru_cache(maxsize=8)
def allowed_ranges(path: str) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """(starts, ends) of the functions in `path` a candidate's kernel may run in (Sleef's),
    as offsets from the library's first mapping; None when its symbols cannot be read."""
    try:
        out = subprocess.run(["nm", "-D", "--defined-only", "-S", path], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    spans = []
    for line in out.stdout.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[3].startswith(ALLOWED_IN_TORCH):
            try:
                lo, size = int(parts[0], 16), int(parts[1], 16)
            except ValueError:
                continue
            spans.append((lo, lo + size))
    spans.sort()
    return tuple(s for s, _ in spans), tuple(e for _, e in spans)


def _class_of(path: str, offset: int) -> str:
    """One sample's class (see CLASSES and the module's docstring)."""
    if rt.candidate_built(path):
        return "own"
    name = os.path.basename(path)
    if "/torch/" not in path:
        return "foreign" if FOREIGN_COMPUTE.search(name) else "other"
    if name.startswith("libgomp"):
        return "openmp"
    if name.startswith(GLUE):
        return "glue"
    ranges = allowed_ranges(path) if offset >= 0 else None
    if ranges is None:
        return "torch"
    i = bisect.bisect_right(ranges[0], offset) - 1
    return "sleef" if i >= 0 and offset < ranges[1][i] else "torch"


def classify(samples: list) -> tuple[dict[str, int], dict[tuple[str, str], int], list[str], list[str]]:
    """The worker's [file, offset, count] entries as (counts per class, counts per (class, file
    name), malformed entries, torch libraries whose symbols could not be read: their samples
    count as torch's, in doubt)."""
    classes: dict[str, int] = dict.fromkeys(CLASSES, 0)
    files: dict[tuple[str, str], int] = {}
    malformed, unresolved = [], set()
    for entry in samples:
        if not (
            isinstance(entry, list)
            and len(entry) in (3, 4)
            and isinstance(entry[1], int)
            and isinstance(entry[2], int)
            and entry[2] > 0
            and (len(entry) == 3 or entry[3] in (0, 1))
        ):
            malformed.append(str(entry)[:80])
            continue
        path, offset, count = str(entry[0]), entry[1], entry[2]
        kind = _class_of(path, offset)
        if len(entry) == 4 and entry[3] == 1 and kind in IN_CONTRACTION:
            kind = "contraction"
        classes[kind] += count
        key = (kind, os.path.basename(path))
        files[key] = files.get(key, 0) + count
        if kind == "torch" and offset >= 0 and allowed_ranges(path) is None:
            unresolved.add(key[1])
    return classes, files, malformed, sorted(unresolved)


def judge_samples(checks, report: dict, crit: Criteria, metrics: dict, eager_cpu_s: float | None) -> None:
    """The timed candidate's CPU samples into no_torch_compute (and harness_integrity when the
    record is missing, malformed, or the sampler was tampered with). `eager_cpu_s`: the eager
    Model's CPU seconds per call in the same run.

    Two limits, either of which fails: torch's share of the candidate's CPU time, and torch's
    CPU time per call against eager's. The second cannot be diluted: threads spinning in the
    candidate's own code lower the share, not the time torch's kernels took."""
    rec = report.get("cpu_sampling")
    if not isinstance(rec, dict) or not isinstance(rec.get("samples"), list):
        checks.fail("harness_integrity", "while timed, the worker's CPU samples are missing")
        return
    problems = [str(p) for p in rec.get("problems") or []]
    if problems:
        checks.fail("harness_integrity", "while timed: " + "; ".join(problems[:6]))
    classes, files, malformed, unresolved = classify(rec["samples"])
    if malformed:
        checks.fail("harness_integrity", f"while timed, malformed CPU samples: {malformed[0]}")
        return
    total = sum(classes.values())
    interval_s = _positive(rec.get("interval_us")) / 1e6
    calls = _positive(rec.get("calls"))
    cpu_ms, sampled_ms = _positive(rec.get("cpu_ms")), _positive(rec.get("sampled_ms"))
    # CPU time of threads that started and ended inside a round: no timer, no /proc record left,
    # so no sample could say where it went. It could have been torch's, and counts as torch's.
    # (A live thread that ran unsampled is named by the worker's own problems.)
    unplaced = _positive(rec.get("ended_ms")) / 1e3 / interval_s if interval_s else 0.0
    whole = total + unplaced
    torch_s = (classes["torch"] + unplaced) * interval_s / calls if calls else 0.0
    summary = {
        "intervals": total,
        **{k: round(v / total, 3) if total else 0.0 for k, v in classes.items()},
        "files": _top_files(files, total),
        "cpu_ms": cpu_ms,
        "sampled_ms": sampled_ms,
        "unplaced": round(unplaced / whole, 3) if whole else 0.0,
    }
    if unresolved:
        summary["unresolved"] = [f"symbols of {name} unreadable" for name in unresolved]  # counted as torch's
    if calls and eager_cpu_s:
        summary["torch_cpu_vs_eager"] = round(torch_s / eager_cpu_s, 3)
    metrics["cpu_samples"] = summary
    if total < crit.timing.min_samples or not interval_s:
        return
    limit = crit.timing.max_torch_cpu_share
    if classes["foreign"] / total > limit:
        where = ", ".join(f"{n} x{k}" for (kind, n), k in files.items() if kind == "foreign")
        checks.fail(
            "extension_symbols",
            f"while timed, {classes['foreign'] / total:.0%} of the candidate's CPU time ran in "
            f"numeric libraries it did not build ({where})",
        )
    # Over the time outside the reference's contractions: a long convolution must not dilute
    # torch's share of what the candidate's own part of the call ran.
    outside = whole - classes["contraction"]
    share = (classes["torch"] + unplaced) / outside if outside else 0.0
    vs_eager = torch_s / eager_cpu_s if calls and eager_cpu_s else 0.0
    floor_s = crit.timing.torch_cpu_floor_us / 1e6
    if (share > limit or vs_eager > limit) and (not calls or torch_s > floor_s):
        mine = sorted(((n, k) for (kind, n), k in files.items() if kind == "torch"), key=lambda nk: -nk[1])
        where = ", ".join(f"{name} x{n}" for name, n in mine[:4]) or "none"
        unseen = (
            f"; {unplaced / whole:.0%} ran on threads that started and ended inside a round, where the sampler "
            f"could not see it, counted as torch's: {share:.0%} in all"
            if unplaced
            else ""
        )
        checks.fail(
            "no_torch_compute",
            f"while timed, the candidate's threads ran in torch's own code for "
            f"{classes['torch'] / whole:.0%} of their CPU time{unseen}, {1e3 * torch_s:.3f} "
            f"ms a call ({vs_eager:.0%} of eager's CPU time a call; at most {limit:.0%} of either allowed; "
            f"samples in {where}): torch's kernels, reached without the dispatcher. Own build "
            f"{classes['own'] / whole:.0%}, OpenMP runtime {classes['openmp'] / whole:.0%}, Sleef "
            f"{classes['sleef'] / whole:.0%}",
        )


def _top_files(files: dict[tuple[str, str], int], total: int, n: int = 6) -> list[list]:
    """[file name, share] of the files that held the most CPU time, for the report."""
    per: dict[str, int] = {}
    for (_, name), count in files.items():
        per[name] = per.get(name, 0) + count
    top = sorted(per.items(), key=lambda kv: -kv[1])[:n]
    return [[name, round(count / total, 3)] for name, count in top] if total else []


def _positive(value) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else 0.0
