"""The quant verifier: does a recipe, applied by the verifier itself, keep the model's behaviour
and gain what its objective asks?

    outcome = verify_quant("examples/quant/mlp_logits.py", "recipe.toml", criteria, options)

1. The recipe is parsed here by its strict model (recipe.py): unknown keys, configs or
   arguments, code, figures it claims: refused by name before anything runs. A recipe of only
   "none" rules quantizes nothing and fails here.
2. The task file is read here for its entry points (get_model, get_inputs, get_probes, OUTPUT).
3. One fresh sandbox runs harness/quant_judge.py: the task's model built with a held-out seed
   (random-init tasks get weights no one saw), the recipe applied to a copy, both measured side
   by side (bytes, drift on the task's probes and held-out probes made from a secret seed or
   drawn from the shipped sentence pool, interleaved latency).
4. judge.py turns the figures into checks and the readiness card.
"""

from __future__ import annotations

import ast
import hashlib
import os
import random
import shutil
import tempfile
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

from assay.errors import UserError
from assay.recipe import parse_recipe
from assay.verifiers.common import sandboxes as sb
from assay.verifiers.common.heldout import HeldOut
from assay.verifiers.outcome import Check, Outcome
from assay.verifiers.quant.criteria import Criteria
from assay.verifiers.quant.judge import judge, outcome_of, readiness

Progress = Callable[[str, float], None]
OUTPUTS = ("logits", "embeddings", "generate")
NEEDS = ("get_model", "get_inputs", "get_probes")


def harness_dir() -> Path:
    return Path(str(resources.files("assay.verifiers.quant").joinpath("harness")))


def sentence_pool() -> list[tuple[str, str]]:
    """Paraphrase pairs: each sentence's true nearest neighbour is its pair, so neighbour
    agreement measures retrieval, not the order of unrelated sentences' near-ties."""
    text = resources.files("assay.verifiers.quant").joinpath("heldout_sentences.txt").read_text(encoding="utf-8")
    pairs = [tuple(part.strip() for part in line.split(" | ")) for line in text.splitlines() if line.strip()]
    return [(p[0], p[1]) for p in pairs if len(p) == 2]


def prompt_pool() -> list[dict[str, str]]:
    """The held-out prompts for generate tasks, as {"prompt", "expect"}."""
    import tomllib

    raw = resources.files("assay.verifiers.quant").joinpath("heldout_prompts.toml").read_text(encoding="utf-8")
    return [{"prompt": p["text"], "expect": p["expect"]} for p in tomllib.loads(raw)["prompt"]]


def sample_prompts(rng: random.Random, count: int) -> list[dict[str, str]]:
    """`count` prompts, the kinds taken in turn (text, json, tool_call) so each is judged."""
    by_kind: dict[str, list[dict[str, str]]] = {}
    for p in prompt_pool():
        by_kind.setdefault(p["expect"], []).append(p)
    queues = [rng.sample(by_kind[k], len(by_kind[k])) for k in ("text", "json", "tool_call") if k in by_kind]
    out: list[dict[str, str]] = []
    while len(out) < count and any(queues):
        for q in queues:
            if q and len(out) < count:
                out.append(q.pop())
    return out


def inspect_task(path: Path) -> tuple[str, str]:
    """(source, OUTPUT) of a task file; a UserError names what it lacks."""
    if not path.is_file():
        raise UserError(f"task file {path} does not exist", "give the path of a quant task file (.py)")
    try:
        source = path.read_text(encoding="utf-8")
        tree = ast.parse(source, filename=str(path))
    except (UnicodeDecodeError, SyntaxError) as exc:
        raise UserError(f"task file {path} is not valid Python ({exc})", "fix the task file") from None
    funcs = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    missing = [f for f in NEEDS if f not in funcs]
    if missing:
        raise UserError(
            f"task file {path} defines no {', '.join(missing)}",
            "a quant task defines get_model(), get_inputs(), get_probes() and OUTPUT (DESIGN.md, Job kinds)",
        )
    output = None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "OUTPUT" for t in node.targets):
            output = node.value.value if isinstance(node.value, ast.Constant) else None
    if output not in OUTPUTS:
        raise UserError(
            f"task file {path}: OUTPUT is {output!r}", f"set OUTPUT to one of: {', '.join(map(repr, OUTPUTS))}"
        )
    if output == "generate" and "get_tokenizer" not in funcs:
        raise UserError(
            f"task file {path}: OUTPUT = 'generate' but the task defines no get_tokenizer()",
            "add get_tokenizer() returning the model's tokenizer (encode, decode, eos_token_id)",
        )
    return source, output


def verify_quant(
    task_path: Path,
    recipe_path: Path,
    crit: Criteria,
    options: Any,
    backend: str = "auto",
    progress: Progress | None = None,
) -> Outcome:
    if options.objective == "memory":
        raise UserError(
            "objective 'memory' is not measured yet (peak memory of the quantized model is not built)",
            "use objective = 'size' (serialized bytes) or 'latency'",
        )
    source, output = inspect_task(task_path)
    if not recipe_path.is_file() or recipe_path.is_symlink():
        raise UserError(
            f"recipe {recipe_path} does not exist (or is a link)", "give the path of the recipe.toml to verify"
        )
    raw = recipe_path.read_bytes()
    hashes = (crit.sha256, hashlib.sha256(source.encode()).hexdigest(), hashlib.sha256(raw).hexdigest())
    try:
        recipe = parse_recipe(raw, recipe_path.name)
    except UserError as exc:
        # the submission itself is refused: a failed verdict naming why, not bad input
        check = Check(name="recipe", passed=False, detail=f"{exc.problem} (fix: {exc.fix})")
        return outcome_of([check], {}, [], options.objective, hashes)
    if not recipe.quantizes_anything():
        check = Check(
            name="quantizes_something",
            passed=False,
            detail="every rule says config = 'none': the recipe quantizes nothing",
        )
        return outcome_of([check], {}, [], options.objective, hashes)
    held = HeldOut()
    pool = sentence_pool()
    plan = {
        "task": f"{sb.IN_TASK}/task.py",
        "output": output,
        "rules": recipe.plan(),
        "seed": held.seed(),
        "heldout_seed": held.seed(),
        "heldout_count": crit.heldout.count,
        "heldout_texts": [t for pair in held.rng.sample(pool, min(crit.heldout.texts // 2, len(pool))) for t in pair],
        "heldout_prompts": sample_prompts(held.rng, crit.heldout.prompts) if output == "generate" else [],
        "tie_margin": crit.quality.generate.tie_margin if output == "generate" else crit.quality.logits.tie_margin,
        "new_tokens": {
            "text": crit.quality.generate.new_tokens,
            "json": crit.quality.generate.structured_new_tokens,
            "tool_call": crit.quality.generate.structured_new_tokens,
        },
        "threads": os.cpu_count() or 2,
        "rounds": crit.timing.rounds if options.objective == "latency" or options.min_speedup is not None else 0,
        "target_round_s": crit.timing.target_round_s,
        "warmup_s": crit.timing.warmup_s,
        "max_iters": crit.timing.max_iters,
        "flush_mb": crit.timing.flush_mb,
    }
    if progress:
        progress("quantizing and measuring in a fresh sandbox", 0.1)
    root = Path(tempfile.mkdtemp(prefix="assay-quant-"))
    try:
        (root / "task").mkdir()
        (root / "task" / "task.py").write_text(source, encoding="utf-8")
        (root / "ws" / "home").mkdir(parents=True)
        result, res = sb.judge_in_fresh_sandbox(
            root / "ws",
            {sb.harness_in("quant"): harness_dir(), sb.IN_COMMON: sb.common_harness_dir(), sb.IN_TASK: root / "task"},
            f"{sb.harness_in('quant')}/quant_judge.py",
            plan,
            timeout=crit.limits.timeout_s,
            memory_mb=crit.limits.memory_mb,
            pids=crit.limits.pids,
            backend=backend,
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if result is None and res.killed == "timeout":
        # the task ran in eager (the harness checks that first) but measuring the recipe did not
        # finish: slow kernels for these shapes on this CPU, or a busy machine; not a verdict
        check = Check(
            name="measured",
            passed=False,
            detail=f"the measurement ran past the criteria's {crit.limits.timeout_s:.0f} s limit in its sandbox "
            "(the recipe's kernels may be slow on this CPU for these shapes, or the machine is busy)",
        )
        return outcome_of([check], {}, ["measured"], options.objective, hashes)
    if result is None:
        why = res.killed or (res.stderr or res.stdout)[-1500:]
        raise UserError(
            f"the quant judge did not finish in its sandbox: {why}", "run the task file on its own and fix it"
        )
    if not result.get("ok"):
        stage, error = result.get("stage"), str(result.get("error", "")).strip().splitlines()
        last = error[-1] if error else "no error text"
        if stage in ("task", "eager"):
            raise UserError(
                f"task file {task_path}: {last}",
                "fix the task so get_model()(*get_inputs()) and its probes run in eager",
            )
        check = Check(
            name="rules_applied" if stage == "apply" else "quality_probes", passed=False, detail=f"{stage}: {last}"
        )
        return outcome_of([check], {"error": result.get("error")}, [], options.objective, hashes)
    checks, metrics, inconclusive = judge(result, recipe, options, crit)
    out = outcome_of(checks, metrics, inconclusive, options.objective, hashes)
    card = readiness(task_path.stem, output, options.objective, metrics, out.passed, out.reasons)
    if progress:
        progress("done", 1.0)
    return out.model_copy(update={"metrics": {**out.metrics, "readiness": card}})
