"""torch.compile of the task's Model, the timing stage's second baseline: its inductor cache
filled in a reference sandbox (no candidate there) and kept per task and torch."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from assay.errors import UserError
from assay.verifiers.kernel import runtime as rt

if TYPE_CHECKING:
    from assay.verifiers.kernel.reference import ReferenceRun

Progress = Callable[[str, float], None]

# ---------------------------------------------------------------------------------- timing


def _warm_stamp() -> str:
    """What a filled inductor cache was filled under: another torch or other inductor settings
    means its entries may not load, so the task is compiled again."""
    from importlib.metadata import version

    env = {k: v for k, v in rt.base_env().items() if k.startswith("TORCHINDUCTOR")}
    # vec_isa: the worker sets inductor's vec_isa_ok after asking the compiler (compile_model);
    # caches filled before it did are keyed without it.
    return json.dumps({"torch": version("torch"), "env": env, "vec_isa": "compiler-checked"}, sort_keys=True)


def _compile_warm(ref: ReferenceRun, progress: Progress | None) -> Path:
    """Fill the inductor cache for this task in a reference sandbox (no candidate there), so the
    timing sandbox's compiled Model loads instead of compiling. A cache that an earlier
    verification filled under the same torch is used as it is (that sandbox start costs more than
    the load it would check). Returns the folder the timing sandbox copies its cache from."""
    ws = ref.root / "warm"
    if ref.compile_warm is not None:
        return ws / "inductor"
    cache = ref.cache_dir / "inductor" / ref.task.sha256[:32]
    stamp, lock = cache / ".filled", cache.parent / f"{cache.name}.lock"
    # Held through the compile: a second verifier of the task (or the warm-up started beside
    # the agent) is compiling it already, so wait for that and load, not compile twice.
    with rt.locked(lock):
        if _stamped(stamp):
            rt.copy_tree(cache, ws / "inductor")
            ref.compile_warm = {"ok": True, "cached": True}
            return ws / "inductor"
        # No stamp: whatever is there (a warm-up stopped mid-copy) is not read; compile afresh,
        # from the first task's filled cache when there is one: inductor keeps the builds that
        # check the CPU's bf16 and VNNI instructions in the cache folder (1-1.5 s of a mish
        # compile here), the same for every task of this machine and torch.
        seed = ref.cache_dir / "inductor-seed"
        seeded = _stamped(seed / ".filled")
        if seeded:
            rt.copy_tree(seed, ws / "inductor")
        (ws / "inductor").mkdir(parents=True, exist_ok=True)
        _compile_in_sandbox(ref, ws)
        rt.copy_tree(ws / "inductor", cache)
        with contextlib.suppress(OSError):
            stamp.write_text(_warm_stamp())
        if not seeded:
            _plant_seed(cache, seed)
    return ws / "inductor"


def _stamped(stamp: Path) -> bool:
    """Whether a cache folder was filled under this torch and these inductor settings."""
    try:
        return stamp.read_text() == _warm_stamp()
    except OSError:
        return False


def _plant_seed(cache: Path, seed: Path) -> None:
    """Keep a filled task cache as the seed of later tasks' compiles. Written once, whole, by a
    rename (a reader never sees half a seed); one left by another torch is replaced."""
    if seed.exists():
        shutil.rmtree(seed, ignore_errors=True)
    tmp = seed.with_name(f"{seed.name}.{os.getpid()}.tmp")
    try:
        rt.copy_tree(cache, tmp)
        os.rename(tmp, seed)
    except OSError:
        pass  # another verifier planted it first, or the disk said no: no seed this time
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _compile_in_sandbox(ref: ReferenceRun, ws: Path) -> None:
    lim = ref.criteria.limits
    (ws / "home").mkdir(exist_ok=True)
    plan = {"role": "warm", "task": f"{rt.IN_TASK}/task.py", "init_seed": ref.init_seed}
    if ref.runs:
        first = ref.runs[0]
        plan.update(
            init_args=first["init_args"],
            inputs_file=f"{rt.IN_INPUTS}/run_{first['id']}.safetensors",
            inputs=first["inputs"],
        )
    timeout = lim.import_timeout_s
    sandbox = rt.open_verification_sandbox(
        ws,
        {**rt.harness_binds(), rt.IN_TASK: ref.root / "task", rt.IN_INPUTS: ref.inputs_dir},
        rt.sandbox_limits(lim.sandbox_memory_mb, lim.sandbox_pids, timeout + 30),
        ref.backend,
    )
    try:
        report, res = rt.run_plain(
            sandbox, plan, timeout, rt.base_env(TORCHINDUCTOR_CACHE_DIR=f"{rt.WORKDIR}/inductor")
        )
    finally:
        sandbox.close()
    if not report or not report.get("ok"):
        raise UserError(
            f"torch.compile of the task's Model failed: {(report or {}).get('error') or res.stderr[-1500:]}",
            "check that the task compiles with torch.compile on this machine",
        )
    ref.compile_warm = report
