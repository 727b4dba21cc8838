"""The compile kind on its example tasks, in one run, as JSON (and a RESULTS.md section).

    python bench/compile.py [--write-results] [--backend inductor|aot_eager] [--only item_branch,...]

For each task in examples/compile/: the playbook through `assay run` (a compile job with
aot_eager, where the graph figures read as under any backend), then its submitted fixed.py
verified again by the verifier under compile-default with `--backend` (Inductor by default), so
the speed figures (compiled fix vs Model eager and vs compiled Model, interleaved in one
sandbox) are Inductor's. `fixed_rate` is the share of the tasks with a symptom whose fix passes
that verification; controls (tasks whose symptom does not reproduce on this torch) are counted
apart: right when the playbook submits nothing and the verifier says "not reproduced".
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _kernels_common import ROOT, err, machine, progress, write_section  # noqa: E402

EXAMPLES = ROOT / "examples" / "compile"
ASSAY = [sys.executable, "-m", "assay"]


def playbook(task: Path, workdir: Path) -> dict:
    """`assay run` of a compile job on `task` with the playbook: its verdict and submission."""
    job = workdir / f"{task.stem}.toml"
    job.write_text(
        f'kind = "compile"\ntask = "{task}"\nbrain = "playbook"\nmanifest = "compile-agent"\n'
        'criteria = "compile-test"\n[budget]\nsteps = 20\nminutes = 10\n[sandbox]\nbackend = "auto"\n'
        '[compile]\nbackend = "aot_eager"\n'
    )
    report = workdir / f"{task.stem}.json"
    start = time.perf_counter()
    out = subprocess.run([*ASSAY, "run", str(job), "--json", str(report)], capture_output=True, text=True, timeout=900)
    took = time.perf_counter() - start
    if not report.is_file():
        return {"error": (out.stderr or out.stdout)[-800:], "run_s": round(took, 1)}
    run = json.loads(report.read_text())["runs"][0]
    from assay.settings import settings

    subs = sorted((settings().home / "runs" / run["run_id"] / "submissions").glob("*/fixed.py"))
    return {"run": run, "fixed": subs[-1] if subs else None, "run_s": round(took, 1)}


def verified(task: Path, fixed: Path, backend: str) -> dict:
    from assay.verifiers.compile.criteria import load_criteria
    from assay.verifiers.compile.kind import CompileVerifyOptions
    from assay.verifiers.compile.verify import verify_compile

    start = time.perf_counter()
    out = verify_compile(task, fixed, load_criteria("compile-default"), CompileVerifyOptions(backend=backend))
    return {
        "outcome": out.outcome,
        "reasons": out.reasons,
        "metrics": out.metrics,
        "verify_s": round(time.perf_counter() - start, 1),
    }


def figures(f: dict | None) -> dict:
    f = f or {}
    return {k: f.get(k) for k in ("breaks", "graphs", "fullgraph", "recompiles", "coverage")}


def one(task: Path, backend: str, workdir: Path) -> dict:
    pb = playbook(task, workdir)
    if "run" not in pb:
        return {"task": task.stem, "error": pb["error"]}
    run = pb["run"]
    m = run.get("metrics") or {}
    row: dict = {
        "task": task.stem,
        "playbook_outcome": run.get("outcome") or ("pass" if run.get("passed") else "fail"),
        "playbook_reasons": run.get("reasons", [])[:3],
        "run_s": pb["run_s"],
        "symptoms": m.get("symptoms"),
        "out_of_box": figures(m.get("original")),
        "after": figures(m.get("fixed")),
    }
    fixed = pb["fixed"]
    if fixed is None:
        # nothing submitted: a control is right to; for the verifier's word, verify Model itself
        with tempfile.TemporaryDirectory() as d:
            same = Path(d) / "fixed.py"
            same.write_text(task.read_text() + "\n\nModelNew = Model\n")
            v = verified(task, same, backend)
        row["untouched"] = {"outcome": v["outcome"], "reasons": v["reasons"][:2], "verify_s": v["verify_s"]}
        row["symptoms"] = v["metrics"].get("symptoms")
        row["out_of_box"] = figures(v["metrics"].get("original"))
        row["control"] = not row["symptoms"]
        return row
    v = verified(task, fixed, backend)
    vm = v["metrics"]
    row.update(
        control=False,
        verdict=v["outcome"],
        verdict_reasons=v["reasons"][:3],
        verify_s=v["verify_s"],
        symptoms=vm.get("symptoms"),
        out_of_box=figures(vm.get("original")),
        after=figures(vm.get("fixed")),
        fixed_vs_model_eager=vm.get("fixed_vs_model_eager"),
        fixed_vs_compiled_model=vm.get("fixed_vs_compiled_model"),
        timing_cpu_share=vm.get("timing_cpu_share"),
    )
    return row


def markdown(out: dict) -> str:
    m = out["machine"]
    lines = [
        f"### Example tasks, playbook then {out['backend']} ({out['date']}, {m['cpu']}, {m['nproc']} CPUs, torch {m['torch']})",
        "",
        f"From `python bench/compile.py --write-results`. fixed_rate **{out['fixed_rate']:.2f}** "
        f"({out['fixed']} of {out['with_symptom']} tasks with a symptom pass compile-default with {out['backend']}); "
        f"controls right: {out['controls_right']} of {out['controls']}. Speed: compiled fix over Model eager and over "
        "compiled Model, interleaved in the verifier's sandbox.",
        "",
        "| task | symptom (Model) | breaks | recompiles | coverage | verdict | vs eager | vs compiled Model | verify s |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in out["tasks"]:
        if "error" in r:
            lines.append(f"| {r['task']} | error: {r['error'][:80]} | | | | | | | |")
            continue
        o, a = r["out_of_box"], r.get("after") or {}
        sym = "; ".join(r.get("symptoms") or ["not reproduced (control)"])[:90].replace("|", "/")
        verdict = r.get("verdict") or (
            f"control: {r['untouched']['outcome']}" if r.get("control") else f"not fixed ({r['playbook_outcome']})"
        )

        def x(v):
            return f"{v:.2f}x" if isinstance(v, (int, float)) else "-"

        lines.append(
            f"| {r['task']} | {sym} | {o.get('breaks')} -> {a.get('breaks', '-')} | {o.get('recompiles')} -> "
            f"{a.get('recompiles', '-')} | {a.get('coverage', '-')} | {verdict} | {x(r.get('fixed_vs_model_eager'))} | "
            f"{x(r.get('fixed_vs_compiled_model'))} | {r.get('verify_s', r.get('untouched', {}).get('verify_s', '-'))} |"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="inductor", choices=("inductor", "aot_eager", "eager"))
    ap.add_argument("--only", default="", help="comma-separated task names")
    ap.add_argument("--write-results", action="store_true")
    args = ap.parse_args()
    tasks = sorted(EXAMPLES.glob("*.py"))
    if args.only:
        wanted = set(args.only.split(","))
        tasks = [t for t in tasks if t.stem in wanted]
    rows = []
    with tempfile.TemporaryDirectory() as d, progress() as bar:
        tid = bar.add_task("compile tasks", total=len(tasks))
        for task in tasks:
            bar.update(tid, description=f"{task.stem}: playbook, then {args.backend}")
            rows.append(one(task, args.backend, Path(d)))
            bar.advance(tid)
    with_symptom = [r for r in rows if "error" not in r and not r.get("control")]
    fixed = [r for r in with_symptom if r.get("verdict") == "pass"]
    controls = [r for r in rows if r.get("control")]
    out = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": machine(),
        "backend": args.backend,
        "fixed_rate": len(fixed) / len(with_symptom) if with_symptom else 0.0,
        "fixed": len(fixed),
        "with_symptom": len(with_symptom),
        "controls": len(controls),
        "controls_right": sum(
            1 for r in controls if r["untouched"]["outcome"] == "fail" and r["playbook_outcome"] != "pass"
        ),
        "tasks": rows,
    }
    if args.write_results:
        write_section(markdown(out), heading="## Compile")
    err.print(markdown(out))
    print(json.dumps(out, indent=1, default=str))


if __name__ == "__main__":
    main()
