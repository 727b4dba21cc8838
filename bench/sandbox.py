"""Sandbox latency: cold start and warm exec per backend, against bare subprocess.run.

    python bench/sandbox.py [--warm 300] [--cold 15] [--backend docker --backend bwrap] [--record]

Prints one JSON object with a key per available backend holding warm_overhead_ms_p50,
warm_overhead_ms_p95 and cold_start_ms_p50 (plus p95s, raw latencies and the close cost),
and a "baseline" key for bare subprocess.run of the same command in the same run. Warm
samples interleave sandbox and bare runs, so load from other processes hits both alike.
Overhead = sandbox percentile minus bare percentile. Cold start = open_sandbox() until the
first exec of the command has returned (the base image is built before timing starts).
--record rewrites the "## Sandbox" section of bench/RESULTS.md. Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from assay.sandbox import SandboxSpec, open_sandbox
from assay.sandbox.backends import BACKENDS, availability

COMMAND = ["/bin/true"]
TARGETS = {"bwrap": {"warm_overhead_ms_p50": 8.0}, "docker": {"warm_overhead_ms_p50": 50.0, "cold_start_ms_p50": 300.0}}
RESULTS = Path(__file__).with_name("RESULTS.md")


def pct(samples: list[float], q: float) -> float:
    """q-th percentile (0-100), linear interpolation, in milliseconds."""
    s = sorted(samples)
    k = (len(s) - 1) * q / 100
    lo, hi = int(k), min(int(k) + 1, len(s) - 1)
    return (s[lo] + (s[hi] - s[lo]) * (k - lo)) * 1000


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def bench_backend(name: str, workdir: Path, warm_n: int, cold_n: int, progress: Progress) -> tuple[dict, list[float]]:
    spec = SandboxSpec(workspace=workdir / name)
    # Untimed: builds the base image (docker) and warms caches, as a run's first sandbox would.
    open_sandbox(spec, name).close()

    cold, close = [], []
    task = progress.add_task(f"{name}: cold start", total=cold_n)
    for _ in range(cold_n):
        t0 = time.perf_counter()
        sb = open_sandbox(spec, name)
        r = sb.exec(COMMAND)
        cold.append(time.perf_counter() - t0)
        assert r.ok, r
        close.append(timed(sb.close))
        progress.advance(task)

    warm, bare = [], []
    task = progress.add_task(f"{name}: warm exec", total=warm_n)
    sb = open_sandbox(spec, name)
    try:
        for _ in range(20):  # settle
            sb.exec(COMMAND)
        for _ in range(warm_n):
            warm.append(timed(lambda: sb.exec(COMMAND)))
            bare.append(timed(lambda: subprocess.run(COMMAND, check=True)))
            progress.advance(task)
    finally:
        sb.close()
    result = {
        "warm_overhead_ms_p50": round(pct(warm, 50) - pct(bare, 50), 3),
        "warm_overhead_ms_p95": round(pct(warm, 95) - pct(bare, 95), 3),
        "cold_start_ms_p50": round(pct(cold, 50), 1),
        "cold_start_ms_p95": round(pct(cold, 95), 1),
        "warm_exec_ms_p50": round(pct(warm, 50), 3),
        "warm_exec_ms_p95": round(pct(warm, 95), 3),
        "bare_same_run_ms_p50": round(pct(bare, 50), 3),
        "close_ms_p50": round(pct(close, 50), 1),
        "containment": getattr(sb, "containment", ""),
    }
    for key, limit in TARGETS.get(name, {}).items():
        result.setdefault("meets_targets", {})[key] = result[key] <= limit
    return result, bare


def machine() -> dict:
    cpu = "unknown"
    try:
        m = re.search(r"^model name\s*:\s*(.+)$", Path("/proc/cpuinfo").read_text(), re.M)
        cpu = m.group(1).strip() if m else cpu
    except OSError:
        pass
    info = {
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "kernel": platform.release(),
        "python": platform.python_version(),
        "loadavg_1m": round(os.getloadavg()[0], 2),
    }
    try:
        info["docker"] = (
            subprocess.run(
                ["docker", "version", "--format", "{{.Server.Version}}"], capture_output=True, text=True, timeout=10
            ).stdout.strip()
            or "not running"
        )
    except (OSError, subprocess.TimeoutExpired):
        info["docker"] = "not installed"
    try:
        info["bwrap"] = subprocess.run(
            ["bwrap", "--version"], capture_output=True, text=True, timeout=10
        ).stdout.strip()
    except OSError:
        info["bwrap"] = "not installed"
    return info


def record(report: dict) -> None:
    m = report["machine"]
    lines = [
        "## Sandbox",
        "",
        f"`bench/sandbox.py`, one run, {report['date']}, command `{' '.join(COMMAND)}`, "
        f"{report['warm_samples']} warm samples (interleaved with bare `subprocess.run`), "
        f"{report['cold_samples']} cold starts per backend.",
        f"Machine: {m['cpu']}, nproc {m['nproc']} (shared with four other engineers' jobs; 1-minute load "
        f"{m['loadavg_1m']} at the end of the run), kernel {m['kernel']}, Docker {m['docker']}, {m['bwrap']}, "
        f"Python {m['python']}.",
        "",
        "| backend | warm overhead p50 | warm overhead p95 | cold start p50 | cold start p95 | close p50 | target |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name in BACKENDS:
        r = report.get(name)
        if not isinstance(r, dict) or "warm_overhead_ms_p50" not in r:
            lines.append(f"| {name} | not available: {r} | | | | | |")
            continue
        target = ", ".join(f"{k.replace('_ms_p50', '')} <= {v:g} ms" for k, v in TARGETS[name].items())
        met = all(r.get("meets_targets", {}).values())
        lines.append(
            f"| {name} | {r['warm_overhead_ms_p50']:.2f} ms | {r['warm_overhead_ms_p95']:.2f} ms | "
            f"{r['cold_start_ms_p50']:.0f} ms | {r['cold_start_ms_p95']:.0f} ms | {r['close_ms_p50']:.0f} ms | "
            f"{target}: {'met' if met else 'NOT met'} |"
        )
    b = report["baseline"]
    lines += [
        "",
        f"Baseline, bare `subprocess.run` of the same command in the same run: p50 {b['subprocess_ms_p50']:.2f} ms, "
        f"p95 {b['subprocess_ms_p95']:.2f} ms. Overhead is the sandbox percentile minus the bare one.",
        "A warm exec is one round trip to the sandbox's resident helper (PID 1 inside), which forks the",
        "command; a cold start includes creating the container or bwrap namespaces, the cgroup, and",
        "the helper's Python start. Closing (container removal) is not part of the cold start.",
        "",
        "```json",
        json.dumps(report, indent=1),
        "```",
        "",
    ]
    text = RESULTS.read_text() if RESULTS.exists() else "# Benchmark results\n\n"
    section = "\n".join(lines)
    # Replace only our own section: from "## Sandbox" to the next "## " heading.
    pattern = re.compile(r"^## Sandbox\n.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(text):
        text = pattern.sub(lambda _: section + "\n", text, count=1)
    else:
        text = text.rstrip("\n") + "\n\n" + section
    RESULTS.write_text(text)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--warm", type=int, default=300, help="warm exec samples per backend")
    ap.add_argument("--cold", type=int, default=15, help="cold starts per backend")
    ap.add_argument("--backend", action="append", choices=BACKENDS, help="only these (default: every available one)")
    ap.add_argument("--record", action="store_true", help="write the figures into bench/RESULTS.md")
    args = ap.parse_args(argv)

    avail = availability()
    report: dict = {
        "date": datetime.date.today().isoformat(),
        "command": COMMAND,
        "warm_samples": args.warm,
        "cold_samples": args.cold,
    }
    bare_all: list[float] = []
    with (
        tempfile.TemporaryDirectory(prefix="assay-bench-") as tmp,
        Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=Console(stderr=True),
            transient=False,
        ) as progress,
    ):
        for name in args.backend or BACKENDS:
            ok, detail = avail[name]
            if not ok:
                report[name] = {"available": False, "detail": detail}
                continue
            report[name], bare = bench_backend(name, Path(tmp), args.warm, args.cold, progress)
            bare_all += bare
    if not bare_all:
        print(json.dumps({**report, "error": "no sandbox backend available"}))
        return 1
    report["baseline"] = {
        "subprocess_ms_p50": round(pct(bare_all, 50), 3),
        "subprocess_ms_p95": round(pct(bare_all, 95), 3),
    }
    report["machine"] = machine()
    print(json.dumps(report))
    if args.record:
        record(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
