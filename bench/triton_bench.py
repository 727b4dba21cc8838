"""`bench/kernels.py --backend triton`: the Triton path over the suite.

With a GPU visible inside the sandbox: autotune, then time candidate vs eager vs
torch.compile on the GPU (device-synchronised timing). Without one: says so, and checks every
task's candidate for correctness under TRITON_INTERPRET=1 (never timing the interpreter).
"""

from __future__ import annotations

import json
import time

from _kernels_common import err, geomean, kernel_sandbox, machine, progress, subsection, suite, write_section


def gpu_visible(sb) -> str | None:
    res = sb.exec(
        ["python", "-c", "import torch; print(torch.cuda.get_device_name() if torch.cuda.is_available() else '')"],
        timeout=120,
    )
    name = res.stdout.strip().splitlines()[-1] if res.ok and res.stdout.strip() else ""
    return name or None


def main(args) -> None:
    from assay.kernels import NoTemplate, autotune, benchmark, inspect_tasks, plan, quick_test, render

    tasks = suite()
    if args.tasks:
        want = set(args.tasks.split(","))
        tasks = [t for t in tasks if t.stem in want]
    rows, t0 = [], time.time()
    with kernel_sandbox(args.sandbox) as sb, progress() as prog:
        gpu = gpu_visible(sb)
        if gpu is None:
            err.print(
                "[yellow]no GPU visible in the sandbox: Triton correctness under TRITON_INTERPRET=1 only, "
                "at small odd sizes (the interpreter runs each program in numpy), no timing[/yellow]"
            )
            from assay.kernels.task import shrunk

            small = sb.spec.workspace / "tasks"
            small.mkdir(exist_ok=True)
            tasks = [shrunk(t, small / t.name) for t in tasks]
        bar = prog.add_task("triton", total=len(tasks))
        infos = inspect_tasks(sb, tasks)
        for task, info in zip(tasks, infos, strict=False):
            row = {"task": task.stem}
            plans = plan(info, "triton") if not isinstance(info, Exception) else NoTemplate(str(info))
            if isinstance(plans, NoTemplate):
                row.update(correct=False, reason=plans.reason)
            else:
                p = plans[0]
                cand = sb.spec.workspace / f"{task.stem}_triton.py"
                if gpu:
                    tuned = autotune(sb, task, p.template, p.space, None)
                    cand.write_text(render(p.template, tuned.best or p.space.configs[0]))
                    b = benchmark(sb, task, cand, baselines=("eager", "compile"), reps=args.reps)
                    row.update(
                        config=tuned.best,
                        correct=b.ok,
                        speedup_vs_eager=b.speedup_vs_eager,
                        speedup_vs_compile=b.speedup_vs_compile,
                        ms={k: v * 1e3 for k, v in b.seconds.items()},
                    )
                else:
                    cand.write_text(render(p.template, p.space.configs[0]))
                    res = quick_test(sb, task, cand, seeds=(0, 1))
                    row.update(
                        correct=res.ok,
                        max_abs_err=max((t.get("max_abs_err") or 0) for t in res.trials) if res.trials else None,
                        detail=res.detail[-300:],
                    )
            rows.append(row)
            prog.advance(bar)
    n = len(rows)
    out = {
        "backend": "triton",
        "gpu": gpu,
        "mode": "timed on GPU" if gpu else "TRITON_INTERPRET=1 correctness only",
        "tasks": n,
        "correct": sum(1 for r in rows if r.get("correct")),
        "seconds": round(time.time() - t0, 1),
        "machine": machine(),
        "per_task": rows,
    }
    if gpu:
        fast = [r for r in rows if r.get("correct") and (r.get("speedup_vs_eager") or 0) > 1]
        out.update(
            fast_1=len(fast) / n,
            geomean_speedup_vs_eager=geomean([r.get("speedup_vs_eager") for r in rows]),
            geomean_speedup_vs_compile=geomean([r.get("speedup_vs_compile") for r in rows]),
        )
    if args.write_results:
        body = (
            f"{out['mode']}: {out['correct']}/{n} tasks correct"
            + (
                f" on {gpu}; fast_1 {out['fast_1']:.2f}, geomean vs eager {out['geomean_speedup_vs_eager']:.2f}x, "
                f"vs torch.compile {out['geomean_speedup_vs_compile']:.2f}x"
                if gpu
                else " (no GPU on this machine; the interpreter runs kernels in numpy, so no timing is reported)"
            )
            + f". {out['seconds']:.0f} s."
        )
        write_section(subsection("### Triton backend", body))
    print(json.dumps(out, indent=1, default=str))
