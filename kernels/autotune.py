"""Autotuning a template's parameters in the sandbox, seeded from the cache.

Cold (nothing cached for this computation): the space is compiled in rounds, each round's
configurations into one shared object timed in one harness process. Warm from another size or
machine: only the cached best configurations and a few of their neighbours are built and timed.
Warm on this exact key (same graph, size bucket, dtype, device, backend): the cached winner is
reused without a search (the agent's build, test and benchmark that follow, and the verifier,
measure it anyway); `confirm=True` times it first. Every measurement goes back into the cache.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path

from assay.kernels.cache import AutotuneCache, CacheKey, cache_key
from assay.kernels.playbook import SearchSpace, Template, render
from assay.kernels.runner import HarnessError, Progress, _say, call_harness, sandbox_path
from assay.sandbox.base import Sandbox

TUNE_DIR = ".assay-tune"


@dataclass
class Trial:
    config: dict
    ok: bool
    seconds: float | None = None  # best of the repetitions (see _rank)
    median_s: float | None = None
    at_s: float = 0.0  # when it was measured, seconds after autotune() started
    error: str | None = None


@dataclass
class TuneResult:
    ok: bool
    key: CacheKey
    best: dict | None = None
    best_seconds: float | None = None
    trials: list[Trial] = field(default_factory=list)
    seeded: list[dict] = field(default_factory=list)
    elapsed_s: float = 0.0
    rounds: int = 0
    reused: bool = False  # exact-key cache hit taken without a search
    error: str | None = None
    detail: str = ""


def neighbours(config: dict, space: SearchSpace) -> list[dict]:
    """Configurations one parameter away from `config`, in the space's order."""
    return [c for c in space.configs if sum(c[k] != config.get(k) for k in c) == 1]


def plan_rounds(
    space: SearchSpace, seeds: list[dict], exact: bool, warm_extra: int, round_size: int
) -> list[list[dict]]:
    """Exact key on this device: confirm the cached winner only. Same computation seen at
    another size or on another machine: its best configurations plus a few neighbours.
    Nothing cached: the whole space, in rounds (one build each)."""
    if seeds and exact:
        return [seeds[:1]]
    if seeds:
        order = list(seeds)
        for s in seeds:
            for n in neighbours(s, space):
                if len(order) >= len(seeds) + warm_extra:
                    break
                if n not in order:
                    order.append(n)
        return [order]
    order = list(space.configs)
    return [order[i : i + round_size] for i in range(0, len(order), round_size)]


def _write_new(folder: Path, stem: str, text: str) -> Path:
    """Write `text` to a new file in `folder`, a folder of the agent-writable workspace.

    The host writes here as its own (often root) user, and the agent's code may have planted
    a symlink for the folder or for a predictable file name to point the write at a host file.
    So the folder is opened without following a symlink, and the file is created under a
    fresh name that must not exist yet (O_EXCL refuses a symlink in its place too).
    """
    ws = os.open(folder.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        try:
            os.mkdir(folder.name, 0o755, dir_fd=ws)
        except FileExistsError:
            pass
        dir_fd = os.open(folder.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=ws)
    finally:
        os.close(ws)
    try:
        name = f"{stem}_{secrets.token_hex(4)}.py"
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=dir_fd)
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        return folder / name
    finally:
        os.close(dir_fd)


def autotune(
    sb: Sandbox,
    task: Path | str,
    template: Template,
    space: SearchSpace,
    cache: AutotuneCache | None = None,
    *,
    warm_extra: int = 4,
    round_size: int = 24,
    reps: int = 7,
    budget_s: float | None = None,
    confirm: bool = False,
    timeout: float = 600,
    progress: Progress | None = None,
) -> TuneResult:
    """Search `space` for `template` on `task`; seeds from `cache` and records into it.

    budget_s: stop starting new rounds after this many seconds (the best so far stands).
    round_size: configurations per build; each round costs a harness start (a torch import,
    about 1.5 s here) besides its compile, so the suite's 6-18-configuration spaces take one."""
    start = time.time()
    key = cache_key(template)
    seeds = cache.seeds(key, space) if cache is not None else []
    # seeds come exact-key first, so the top seed is this key's own winner when it has one
    mine = [e for e in cache.entries(key) if e.key == key.digest and e.config == seeds[0]] if seeds and cache else []
    exact = bool(mine)
    result = TuneResult(ok=False, key=key, seeded=seeds)
    if exact and not confirm:
        cached = min(e.seconds for e in mine)
        result.trials.append(Trial(seeds[0], True, cached, cached, time.time() - start))
        result.ok, result.best, result.best_seconds, result.reused = True, seeds[0], cached, True
        result.elapsed_s = time.time() - start
        _say(progress, f"autotune: reusing the cached best for {template.name} on this device", 1.0)
        return result
    rounds = plan_rounds(space, seeds, exact, warm_extra, round_size)
    total = sum(len(r) for r in rounds)
    tune_dir = Path(sb.spec.workspace) / TUNE_DIR
    done = 0
    _say(
        progress,
        f"autotuning {template.name}: {total} configurations"
        + (f", warm start from {len(seeds)} cached" if seeds else ", cold cache"),
        0.0,
    )
    for configs in rounds:
        if budget_s is not None and result.rounds and time.time() - start > budget_s:
            _say(progress, f"autotune budget of {budget_s:.0f}s spent after {done}/{total}", None)
            break
        src = render(template, configs)
        try:
            path = _write_new(tune_dir, f"tune_{hashlib.sha256(src.encode()).hexdigest()[:16]}", src)
        except OSError as exc:
            result.error, result.detail = "workspace", f"cannot write the tuning source into {TUNE_DIR}/: {exc}"
            break
        args = [
            "tune",
            sandbox_path(sb, task),
            sandbox_path(sb, path),
            "--variants",
            ",".join(str(i) for i in range(len(configs))),
            "--reps",
            str(reps),
        ]
        try:
            out = call_harness(sb, "run.py", args, timeout=timeout)
        except HarnessError as exc:
            result.error, result.detail = exc.kind, exc.detail
            break
        result.rounds += 1
        if not out.get("ok"):
            result.error, result.detail = out.get("error"), out.get("detail", "")
            break
        for row in out["results"]:
            cfg = configs[row["variant"]]
            t = Trial(
                cfg,
                bool(row.get("ok")),
                row.get("min_s"),
                row.get("median_s"),
                max(0.0, row.get("done_unix", start) - start),
                row.get("error"),
            )
            result.trials.append(t)
            if t.ok and cache is not None and t.seconds is not None:
                cache.record(key, cfg, t.seconds)
        done += len(configs)
        _say(progress, f"autotuned {done}/{total}", done / total)
    good = [t for t in result.trials if t.ok and t.seconds is not None]
    if good:
        # min over repetitions: on a shared CPU the least-disturbed run is the best estimate of
        # what a configuration can do; the benchmark, not the tuner, reports medians
        best = min(good, key=lambda t: t.seconds or 0.0)  # every good trial has its seconds
        result.ok, result.best, result.best_seconds = True, best.config, best.seconds
    elif result.error is None:
        result.error = "no configuration ran correctly"
        result.detail = "; ".join(sorted({t.error or "" for t in result.trials}))[:2000]
    result.elapsed_s = time.time() - start
    return result
