"""Warm-start benchmark: time to reach a configuration within 2% of the full-search best,
from a cold cache and from a warm one; prints one JSON object with `warm_start_speedup`.

    python bench/autotune.py [--tasks linear_bias_relu,softmax,silu_bias_clamp] [--write-results]

Machine A searches the whole space with an empty cache, writing into a team database (a
ledger on SQLite here; PostgreSQL for a real team). Machine B (a fresh sandbox workspace, so
no build cache, and an empty local cache) then tunes the same task seeded from that database.
"Within 2%" is judged against A's full-search measurements, so B's own noise cannot make a
bad configuration look good. Both clocks include every build and harness start.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _kernels_common import EXAMPLES, err, geomean, kernel_sandbox, machine, progress, subsection, write_section  # noqa: E402


def time_to_target(trials, good: list[dict]) -> float | None:
    hits = [t.at_s for t in trials if t.ok and t.config in good]
    return min(hits) if hits else None


def run_task(name: str, ledger, reps: int, say) -> dict:
    from assay.kernels import AutotuneCache, LedgerStore, LocalStore, autotune, inspect_task, plan

    task = EXAMPLES / f"{name}.py"
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        with kernel_sandbox(workspace=tmp / "machine-a") as sb:
            p = plan(inspect_task(sb, task))[0]
            say(f"{name}: cold search of {len(p.space)} configurations")
            cache_a = AutotuneCache([LocalStore(tmp / "a.jsonl"), LedgerStore(ledger)])
            cold = autotune(sb, task, p.template, p.space, cache_a, reps=reps)
        if not cold.ok:
            return {"task": name, "ok": False, "reason": f"{cold.error}: {cold.detail[:300]}"}
        best = cold.best_seconds
        good = [t.config for t in cold.trials if t.ok and t.seconds <= 1.02 * best]
        with kernel_sandbox(workspace=tmp / "machine-b") as sb:
            say(f"{name}: warm start from the team database")
            cache_b = AutotuneCache([LocalStore(tmp / "b.jsonl"), LedgerStore(ledger)])
            t0 = time.time()
            p_b = plan(inspect_task(sb, task))[0]
            inspect_s = time.time() - t0
            warm = autotune(sb, task, p_b.template, p_b.space, cache_b, reps=reps)
        with kernel_sandbox(workspace=tmp / "machine-c") as sb:
            say(f"{name}: warm start, seed built and timed")
            cache_c = AutotuneCache([LocalStore(tmp / "c.jsonl"), LedgerStore(ledger)])
            p_c = plan(inspect_task(sb, task))[0]
            confirmed = autotune(sb, task, p_c.template, p_c.space, cache_c, reps=reps, confirm=True)
    cold_t, warm_t = time_to_target(cold.trials, good), time_to_target(warm.trials, good)
    conf_t = time_to_target(confirmed.trials, good)
    return {
        "task": name,
        "ok": cold_t is not None and warm_t is not None,
        "space": len(p.space),
        "cold_rounds": cold.rounds,
        "cold_search_s": round(cold.elapsed_s, 2),
        "cold_time_to_target_s": cold_t and round(cold_t, 2),
        "warm_configs_tried": len(warm.trials),
        "warm_search_s": round(warm.elapsed_s, 2),
        "warm_time_to_target_s": warm_t and round(warm_t, 2),
        "warm_reused": warm.reused,
        "warm_start_speedup": (cold_t / warm_t) if cold_t and warm_t else None,
        "confirmed_time_to_target_s": conf_t and round(conf_t, 2),
        "warm_start_speedup_confirmed": (cold_t / conf_t) if cold_t and conf_t else None,
        "best_config": cold.best,
        "warm_best_config": warm.best,
        "within_2pct": len(good),
        "inspect_s_not_counted": round(inspect_s, 2),
    }


def markdown(out: dict) -> str:
    lines = [
        f"`bench/autotune.py`: geomean **warm_start_speedup {(out['warm_start_speedup'] or 0):.1f}x** "
        f"(exact-key winner reused); **{(out['warm_start_speedup_confirmed'] or 0):.1f}x** when the warm "
        "machine builds and times the seed before taking it. Time to reach a configuration within 2% of the "
        "full-search best; cold = empty cache, warm = a fresh workspace (no build cache) seeded from the team "
        "database the cold run wrote; clocks include builds and harness starts.",
        "",
        "| task | space | cold rounds | cold to target (s) | cold full search (s) | warm, reused (s) | speedup "
        "| warm, seed timed (s) | speedup |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in out["per_task"]:
        lines.append(
            f"| {r['task']} | {r.get('space')} | {r.get('cold_rounds')} | {r.get('cold_time_to_target_s')} | "
            f"{r.get('cold_search_s')} | {r.get('warm_time_to_target_s')} | "
            f"{(r.get('warm_start_speedup') or 0):.0f}x | {r.get('confirmed_time_to_target_s')} | "
            f"{(r.get('warm_start_speedup_confirmed') or 0):.1f}x |"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", default="linear_bias_relu,softmax,silu_bias_clamp")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--write-results", action="store_true")
    ap.add_argument("--summarise", metavar="RUN.json", help="write a saved run's figures, run nothing")
    args = ap.parse_args()
    if args.summarise:
        out = json.loads(Path(args.summarise).read_text())
        if args.write_results:
            write_section(subsection("### Autotune warm start", markdown(out)))
        print(json.dumps(out, indent=1, default=str))
        return
    from assay.ledger import Ledger

    names = args.tasks.split(",")
    rows, t0 = [], time.time()
    with tempfile.TemporaryDirectory() as db, Ledger.open(f"sqlite:///{db}/team.db") as ledger, progress() as prog:
        bar = prog.add_task("autotune", total=len(names))
        for name in names:
            row = run_task(name, ledger, args.reps, lambda m: prog.update(bar, description=m))
            rows.append(row)
            prog.advance(bar)
            err.print(
                f"{name}: cold {row.get('cold_time_to_target_s')} s -> warm {row.get('warm_time_to_target_s')} s "
                f"({(row.get('warm_start_speedup') or 0):.1f}x); seed built and timed "
                f"{row.get('confirmed_time_to_target_s')} s ({(row.get('warm_start_speedup_confirmed') or 0):.1f}x)"
            )
    out = {
        "warm_start_speedup": geomean([r.get("warm_start_speedup") for r in rows]),
        "warm_start_speedup_confirmed": geomean([r.get("warm_start_speedup_confirmed") for r in rows]),
        "cold_time_to_target_s": {r["task"]: r.get("cold_time_to_target_s") for r in rows},
        "warm_time_to_target_s": {r["task"]: r.get("warm_time_to_target_s") for r in rows},
        "machine": machine(),
        "seconds": round(time.time() - t0, 1),
        "per_task": rows,
    }
    if args.write_results:
        write_section(subsection("### Autotune warm start", markdown(out)))
    print(json.dumps(out, indent=1, default=str))


if __name__ == "__main__":
    main()
