"""Benchmark the kernel playbook over the example suite; prints one JSON object.

    python bench/kernels.py [--backend cpp|triton] [--tasks softmax,gelu] [--corpus] [--write-results]

For each task: inspect in the sandbox, plan, autotune (cold, private cache unless --cache),
render the winner, then time candidate vs eager vs torch.compile in ONE harness process
(interleaved repetitions, cache flushed between them) together with a copy-bandwidth probe.
Metrics: fast_1 (fraction of tasks correct and faster than eager), geomean speedups, and for
memory-bound tasks (elementwise, row reductions) achieved GB/s over the copy bandwidth.
--corpus runs examples/kernel/corpus instead: tasks in KernelBench's style, one family per
file-name prefix (act, reduce, row, norm, gemm, conv, fused), with a per-family summary.
--verify also hands each winner to the kernel verifier (kernel-default) and records its verdict
(pass, fail, inconclusive); --hog N keeps N spinning processes per CPU running the whole time,
so `--corpus --verify --hog 2` asks whether any correct candidate is FAILed under load.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _kernels_common import (  # noqa: E402
    corpus,
    err,
    geomean,
    kernel_sandbox,
    machine,
    progress,
    subsection,
    suite,
    write_section,
)


@contextlib.contextmanager
def hog(per_cpu: int):
    """per_cpu spinning processes per CPU, for as long as the block runs."""
    spin = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(per_cpu * (os.cpu_count() or 1))
    ]
    try:
        yield
    finally:
        for p in spin:
            p.kill()
            p.wait()


def verdict(task: Path, cand: Path, sandbox: str, bar) -> dict:
    """The verifier's word on the winner, as a pipeline would get it."""
    from assay.verifiers.kernel import verify_kernel

    bar(f"{task.stem}: verify")
    report = verify_kernel(task, cand, "kernel-default", backend=sandbox)
    m = report.metrics
    return {
        "verdict": "pass" if report.passed else "inconclusive" if report.inconclusive else "fail",
        "verdict_reasons": [r[:240] for r in report.reasons],
        "verified_speedup_vs_eager": m.get("speedup_vs_eager"),
        "verified_cpu_share": m.get("reference_cpu_share"),
    }


def run_task(
    sb, task: Path, backend: str, cache, reps: int, tune_budget: float | None, baselines, bar, verify: str | None = None
) -> dict:
    from assay.kernels import NoTemplate, autotune, benchmark, inspect_task, plan, render

    row: dict = {"task": task.stem}
    t0 = time.time()
    info = inspect_task(sb, task)
    plans = plan(info, backend)
    if isinstance(plans, NoTemplate):
        row.update(ok=False, reason=f"no template: {plans.reason}")
        return row
    p = plans[0]
    row.update(template=p.template.name, space=len(p.space))
    bar(f"{task.stem}: autotune {len(p.space)} configs")
    tuned = autotune(sb, task, p.template, p.space, cache, budget_s=tune_budget)
    row.update(tune_s=round(tuned.elapsed_s, 2))
    if not tuned.ok:
        row.update(ok=False, reason=f"autotune: {tuned.error} {tuned.detail[:300]}")
        return row
    cand = Path(sb.spec.workspace) / f"{task.stem}_candidate.py"
    cand.write_text(render(p.template, tuned.best))
    bar(f"{task.stem}: benchmark")
    b = benchmark(sb, task, cand, baselines=baselines, reps=reps, copy_bandwidth=True)
    row.update(config=tuned.best, ok=b.ok, correct=b.ok, error=b.error, detail=b.detail[:300])
    if b.seconds:
        row.update(
            ms={k: round(v * 1e3, 4) for k, v in b.seconds.items()},
            speedup_vs_eager=b.speedup_vs_eager,
            speedup_vs_compile=b.speedup_vs_compile,
            speedup_vs_eager_min=b.speedup_min.get("eager"),
            speedup_vs_compile_min=b.speedup_min.get("compile"),
            compile_s=b.compile_s,
            achieved_gbps=b.achieved_gbps,
            copy_gbps=b.copy_gbps,
            achieved_gbps_best=b.achieved_gbps_best,
            copy_gbps_best=b.copy_gbps_best,
            copy_gbps_large=b.copy_gbps_large,
            copy_gbps_large_best=b.copy_gbps_large_best,
        )
        if p.template.kind in ("elementwise", "rowreduce"):
            row["memory_bound"] = True
            row["bandwidth_fraction"] = b.bandwidth_fraction
            row["bandwidth_fraction_best"] = b.bandwidth_fraction_best
            row["bandwidth_fraction_large"] = b.bandwidth_fraction_large
    if verify is not None and b.ok:
        row.update(verdict(task, cand, verify, bar))
    row["wall_s"] = round(time.time() - t0, 1)
    return row


def summarise(rows: list[dict], backend: str) -> dict:
    # bandwidth_fraction pairs each task with a copy of its own size timed in its own interleaved
    # rounds; _large with the STREAM-sized copy of the same rounds. The strictest divides each
    # task's best rate by the best STREAM-sized copy seen anywhere in this run, which on a
    # shared host also measures how busy the neighbours were at each moment.
    copy_best = max((r["copy_gbps_large_best"] for r in rows if r.get("copy_gbps_large_best")), default=None)
    for r in rows:
        if r.get("memory_bound") and r.get("achieved_gbps_best") and copy_best:
            r["bandwidth_fraction_run_best"] = r["achieved_gbps_best"] / copy_best
    n = len(rows)
    fast = [r for r in rows if r.get("correct") and (r.get("speedup_vs_eager") or 0) > 1.0]

    def fractions(key):
        xs = [r[key] for r in rows if r.get("memory_bound") and r.get(key)]
        return {
            "geomean": geomean(xs),
            "min": min(xs) if xs else None,
            "tasks_at_or_above_0.7": sum(1 for x in xs if x >= 0.7),
            "memory_bound_tasks": len(xs),
        }

    families: dict[str, list[dict]] = {}
    for r in rows:
        families.setdefault(r["task"].split("_")[0], []).append(r)
    per_family = {
        fam: {
            "tasks": len(rs),
            "correct": sum(1 for r in rs if r.get("correct")),
            "fast_1": sum(1 for r in rs if r.get("correct") and (r.get("speedup_vs_eager") or 0) > 1.0) / len(rs),
            "geomean_speedup_vs_eager": geomean([r.get("speedup_vs_eager") for r in rs if r.get("correct")]),
            "geomean_speedup_vs_compile": geomean([r.get("speedup_vs_compile") for r in rs if r.get("correct")]),
        }
        for fam, rs in sorted(families.items())
    }
    out = {
        "backend": backend,
        "tasks": n,
        "per_family": per_family,
        "correct": sum(1 for r in rows if r.get("correct")),
        "fast_1": len(fast) / n if n else 0.0,
        "geomean_speedup_vs_eager": geomean([r.get("speedup_vs_eager") for r in rows if r.get("correct")]),
        "geomean_speedup_vs_compile": geomean([r.get("speedup_vs_compile") for r in rows if r.get("correct")]),
        # the same ratios from each implementation's best repetition: less noise from neighbours
        "fast_1_min": sum(1 for r in rows if r.get("correct") and (r.get("speedup_vs_eager_min") or 0) > 1.0) / n
        if n
        else 0.0,
        "geomean_speedup_vs_eager_min": geomean([r.get("speedup_vs_eager_min") for r in rows if r.get("correct")]),
        "geomean_speedup_vs_compile_min": geomean([r.get("speedup_vs_compile_min") for r in rows if r.get("correct")]),
        "bandwidth_fraction": fractions("bandwidth_fraction"),
        "bandwidth_fraction_best": fractions("bandwidth_fraction_best"),
        "bandwidth_fraction_large": fractions("bandwidth_fraction_large"),
        "bandwidth_fraction_run_best": fractions("bandwidth_fraction_run_best"),
        "copy_gbps_large_best": copy_best,
    }
    verified = [r for r in rows if r.get("verdict")]
    if verified:
        out["verdicts"] = {v: sum(1 for r in verified if r["verdict"] == v) for v in ("pass", "inconclusive", "fail")}
        # A candidate the benchmark found correct that the verifier FAILs: either a false
        # rejection, or a check the benchmark does not make (its reasons say which).
        out["correct_but_failed"] = [
            {"task": r["task"], "reasons": r["verdict_reasons"]} for r in verified if r["verdict"] == "fail"
        ]
    return out


def _fractions(b: dict) -> str:
    return (
        f"geomean **{(b['geomean'] or 0):.2f}**, min {(b['min'] or 0):.2f}, "
        f"{b['tasks_at_or_above_0.7']}/{b['memory_bound_tasks']} tasks at >= 0.7"
    )


def markdown(summary: dict, rows: list[dict], mach: dict, seconds: float) -> str:
    lines = [
        f"Machine: {mach['cpu']} ({', '.join(mach['isa'])}), nproc {mach['nproc']}, torch {mach['torch']}, "
        f"Python {mach['python']}. Backend `{summary['backend']}`; {seconds:.0f} s for the whole run "
        "(shared 2-core machine: other work was running, so absolute times are noisy; each ratio "
        "comes from one process with interleaved repetitions).",
        "",
        f"- fast_1: **{summary['fast_1']:.2f}** ({summary['correct']}/{summary['tasks']} correct)",
        f"- geomean speedup vs eager: **{(summary['geomean_speedup_vs_eager'] or 0):.2f}x**",
        f"- geomean speedup vs torch.compile: **{(summary['geomean_speedup_vs_compile'] or 0):.2f}x**",
        "- memory-bound bandwidth fraction, achieved GB/s over a copy of the task's size timed in the same "
        f"interleaved rounds (medians): {_fractions(summary['bandwidth_fraction'])}",
        f"- the same from best repetitions: {_fractions(summary['bandwidth_fraction_best'])}; against the "
        f"STREAM-sized copy (two 64 MB arrays) of the same rounds: {_fractions(summary['bandwidth_fraction_large'])}; "
        f"each task's best over the best STREAM-sized copy anywhere in the run ({summary['copy_gbps_large_best'] or 0:.1f} GB/s): "
        f"{_fractions(summary['bandwidth_fraction_run_best'])}",
        f"- from best repetitions instead of medians: fast_1 {summary['fast_1_min']:.2f}, vs eager "
        f"{(summary['geomean_speedup_vs_eager_min'] or 0):.2f}x, vs torch.compile {(summary['geomean_speedup_vs_compile_min'] or 0):.2f}x",
        *(
            [
                f"- verifier verdicts (kernel-default): pass {summary['verdicts']['pass']}, inconclusive "
                f"{summary['verdicts']['inconclusive']}, fail {summary['verdicts']['fail']}"
                + "".join(
                    f"; {x['task']} failed: {'; '.join(x['reasons'])[:200]}" for x in summary["correct_but_failed"]
                )
            ]
            if summary.get("verdicts")
            else []
        ),
        "",
        "| family | tasks | correct | fast_1 | geomean vs eager | geomean vs compile |",
        "| --- | --- | --- | --- | --- | --- |",
        *[
            f"| {fam} | {f['tasks']} | {f['correct']} | {f['fast_1']:.2f} | {(f['geomean_speedup_vs_eager'] or 0):.2f}x "
            f"| {(f['geomean_speedup_vs_compile'] or 0):.2f}x |"
            for fam, f in summary["per_family"].items()
        ],
        "",
        "| task | template | correct | eager ms | compile ms | ours ms | vs eager | vs compile | BW frac | copy GB/s (task size / STREAM size) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        ms = r.get("ms", {})
        f = lambda v, d=2: "" if v is None else f"{v:.{d}f}"  # noqa: E731
        lines.append(
            f"| {r['task']} | {r.get('template', '-')} | {'yes' if r.get('correct') else 'no: ' + str(r.get('reason') or r.get('detail') or '')[:60]} "
            f"| {f(ms.get('eager'), 3)} | {f(ms.get('compile'), 3)} | {f(ms.get('candidate'), 3)} "
            f"| {f(r.get('speedup_vs_eager'))} | {f(r.get('speedup_vs_compile'))} | {f(r.get('bandwidth_fraction'))} | {f(r.get('copy_gbps'), 1)} / {f(r.get('copy_gbps_large'), 1)} |"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", choices=("cpp", "triton"), default="cpp")
    ap.add_argument("--tasks", default="", help="comma-separated task names (default: the whole suite)")
    ap.add_argument("--corpus", action="store_true", help="the KernelBench-style corpus instead of the examples")
    ap.add_argument("--sandbox", default="auto")
    ap.add_argument("--reps", type=int, default=25)
    ap.add_argument("--tune-budget", type=float, default=None, help="seconds per task for autotuning")
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile baseline")
    ap.add_argument("--cache", action="store_true", help="use (and fill) the real autotune cache")
    ap.add_argument("--write-results", action="store_true", help="update the Kernels section of bench/RESULTS.md")
    ap.add_argument("--summarise", metavar="RUN.json", help="re-summarise a saved run's per-task rows, run nothing")
    ap.add_argument("--verify", action="store_true", help="verify each winner (kernel-default) and record the verdict")
    ap.add_argument("--hog", type=int, default=0, metavar="N", help="N spinning processes per CPU during the run")
    args = ap.parse_args()

    if args.summarise:
        saved = json.loads(Path(args.summarise).read_text())
        rows = saved["per_task"]
        summary = summarise(rows, saved.get("backend", "cpp"))
        out = {**summary, "machine": saved["machine"], "seconds": saved["seconds"], "per_task": rows}
        if args.write_results:
            title = "### Corpus (cpp backend)" if args.corpus else "### Suite (cpp backend)"
            write_section(subsection(title, markdown(summary, rows, saved["machine"], saved["seconds"])))
        print(json.dumps(out, indent=1, default=str))
        return

    if args.backend == "triton":
        from triton_bench import main as triton_main  # noqa: PLC0415

        triton_main(args)
        return

    from assay.kernels import AutotuneCache, LocalStore

    tasks = corpus() if args.corpus else suite()
    if args.tasks:
        want = set(args.tasks.split(","))
        tasks = [t for t in tasks if t.stem in want]
    mach = machine()
    baselines = ("eager",) if args.no_compile else ("eager", "compile")
    rows = []
    t0 = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        cache = AutotuneCache.open() if args.cache else AutotuneCache([LocalStore(Path(tmp) / "autotune.jsonl")])
        busy = hog(args.hog) if args.hog else contextlib.nullcontext()
        with busy, kernel_sandbox(args.sandbox) as sb, progress() as prog:
            bar = prog.add_task("kernels", total=len(tasks))
            for task in tasks:

                def say(msg, _bar=bar):
                    prog.update(_bar, description=msg)

                try:
                    row = run_task(
                        sb,
                        task,
                        args.backend,
                        cache,
                        args.reps,
                        args.tune_budget,
                        baselines,
                        say,
                        args.sandbox if args.verify else None,
                    )
                except Exception as exc:  # one broken task must not hide the others' figures
                    row = {"task": task.stem, "ok": False, "reason": f"{type(exc).__name__}: {exc}"[:300]}
                rows.append(row)
                prog.advance(bar)
                err.print(
                    f"{task.stem}: vs eager {row.get('speedup_vs_eager') or 0:.2f}x, vs compile "
                    f"{row.get('speedup_vs_compile') or 0:.2f}x, bw {row.get('bandwidth_fraction') or 0:.2f}"
                    + ("" if row.get("correct") else f"  [{row.get('reason') or row.get('detail')}]")
                    + (f", verdict {row['verdict']}" if row.get("verdict") else "")
                )
    summary = summarise(rows, args.backend)
    seconds = time.time() - t0
    out = {**summary, "machine": mach, "seconds": round(seconds, 1), "hog_per_cpu": args.hog, "per_task": rows}
    if args.write_results:
        title = "### Corpus (cpp backend)" if args.corpus else "### Suite (cpp backend)"
        write_section(subsection(title, markdown(summary, rows, mach, seconds)))
    print(json.dumps(out, indent=1, default=str))


if __name__ == "__main__":
    main()
