"""The autotune cache: keys that ignore how the source is spelled, stores that merge and
deduplicate, and searches that start from the best known configurations."""

from __future__ import annotations

from assay.kernels import AutotuneCache, CacheKey, LedgerStore, LocalStore, autotune, cache_key, inspect_tasks, plan
from assay.kernels.autotune import plan_rounds
from assay.kernels.playbook import SearchSpace
from assay.ledger import Ledger

from .conftest import EXAMPLES, shrink

KEY = CacheKey("sig", "cpp.rowreduce", (4096, 1024), "float32", "EPYC|AVX512|2t", "cpp")
SPACE = SearchSpace([{"u": u, "nt": nt} for u in (1, 2, 4) for nt in (0, 1)])


def other(**kw) -> CacheKey:
    return CacheKey(**{**KEY.__dict__, **kw})


def test_key_survives_renames_and_comments_but_not_a_different_op(ksb, task_dir):
    src = (EXAMPLES / "bias_gelu_residual.py").read_text()
    base = shrink(EXAMPLES / "bias_gelu_residual.py", task_dir)
    renamed = (
        src.replace("self.bias", "self.shift")
        .replace("x + ", "hidden_states + ")
        .replace("def forward(self, x, residual)", "def forward(self, hidden_states, skip)")
        .replace("+ residual", "+ skip")
        .replace("class Model", "# a comment the key must not see\nclass Model")
    )
    assert renamed != src and "shift" in renamed
    (task_dir / "renamed_src.py").write_text('"""Edited docstring."""\n' + renamed)
    variant = shrink(task_dir / "renamed_src.py", task_dir, "renamed.py")
    (task_dir / "silu_src.py").write_text(src.replace("F.gelu(", "F.silu("))
    changed = shrink(task_dir / "silu_src.py", task_dir, "changed.py")
    big = task_dir / "bigger.py"
    big.write_text(src + "\nTOKENS = 4096\n")
    infos = inspect_tasks(ksb, [base, variant, changed, big])
    keys = [cache_key(plan(i)[0].template) for i in infos]
    assert keys[0] == keys[1] and keys[0].digest == keys[1].digest
    assert keys[2].signature != keys[0].signature
    assert keys[3].signature == keys[0].signature and keys[3].bucket != keys[0].bucket
    assert keys[3].family == keys[0].family and keys[3].digest != keys[0].digest


def test_buckets_round_sizes_to_powers_of_two():
    assert other(bucket=(4096, 1024)).digest == KEY.digest
    assert other(device="Xeon|AVX2|2t").family == KEY.family
    assert other(device="Xeon|AVX2|2t").digest != KEY.digest


def test_local_and_ledger_stores_merge_and_dedupe(tmp_path):
    with Ledger.open(f"sqlite:///{tmp_path / 'ledger.db'}") as ledger:
        local = LocalStore(tmp_path / "autotune.jsonl")
        shared = LedgerStore(ledger)
        AutotuneCache([local]).record(KEY, {"u": 1, "nt": 0}, 2.0)
        both = AutotuneCache([local, shared])
        both.record(KEY, {"u": 1, "nt": 0}, 1.5)
        both.record(KEY, {"nt": 1, "u": 2}, 1.8)
        both.record(KEY, {"u": 2, "nt": 1}, 1.8)  # the same measurement again: one ledger row
        entries = both.entries(KEY)
        assert [(e.config, e.seconds) for e in entries] == [({"u": 1, "nt": 0}, 1.5), ({"nt": 1, "u": 2}, 1.8)]
        assert len(shared.family(KEY.family)) == 2 and len(local.family(KEY.family)) == 4
        with local.path.open("a") as f:
            f.write('{"torn": \n')
        assert len(AutotuneCache([local]).entries(KEY)) == 2


def test_seeds_prefer_exact_key_then_the_same_computation_elsewhere(tmp_path):
    cache = AutotuneCache([LocalStore(tmp_path / "a.jsonl")])
    cache.record(other(device="Xeon|AVX2|2t"), {"u": 4, "nt": 1}, 9.0)  # best on another machine
    cache.record(other(device="Xeon|AVX2|2t"), {"u": 1, "nt": 1}, 18.0)
    cache.record(KEY, {"u": 2, "nt": 0}, 1.2)
    cache.record(KEY, {"u": 1, "nt": 0}, 1.0)
    cache.record(other(signature="different"), {"u": 2, "nt": 1}, 0.1)  # another computation: never a seed
    cache.record(KEY, {"u": 8, "nt": 0}, 0.5)  # not in this space: never a seed
    assert cache.seeds(KEY, SPACE, k=3) == [{"u": 1, "nt": 0}, {"u": 2, "nt": 0}, {"u": 4, "nt": 1}]


def test_a_configuration_won_on_one_machine_seeds_another(tmp_path):
    with Ledger.open(f"sqlite:///{tmp_path / 'team.db'}") as ledger:
        machine_a = AutotuneCache([LocalStore(tmp_path / "a.jsonl"), LedgerStore(ledger)])
        machine_a.record(other(device="Xeon|AVX2|2t"), {"u": 4, "nt": 1}, 1.0)
        machine_a.record(other(device="Xeon|AVX2|2t"), {"u": 1, "nt": 0}, 3.0)
        machine_b = AutotuneCache([LocalStore(tmp_path / "b.jsonl"), LedgerStore(ledger)])
        seeds = machine_b.seeds(KEY, SPACE)
        assert seeds[0] == {"u": 4, "nt": 1}
        # another machine's result is a seed, not an answer: search around it too
        rounds = plan_rounds(SPACE, seeds, exact=False, warm_extra=2, round_size=8)
        assert len(rounds) == 1 and rounds[0][:2] == seeds and len(rounds[0]) == len(seeds) + 2
        # this machine's own result for this exact key: confirm the winner only
        assert plan_rounds(SPACE, seeds, exact=True, warm_extra=2, round_size=8) == [[seeds[0]]]
        # nothing cached: the whole space, in rounds
        cold = plan_rounds(SPACE, [], exact=False, warm_extra=2, round_size=4)
        assert [len(r) for r in cold] == [4, 2] and sum(cold, []) == SPACE.configs


def test_autotune_cold_then_warm(ksb, task_dir, tmp_path):
    task = shrink(EXAMPLES / "softmax.py", task_dir)
    p = plan(inspect_tasks(ksb, [task])[0])[0]
    space = SearchSpace(p.space.configs[:4])
    cache = AutotuneCache([LocalStore(tmp_path / "c.jsonl")])
    cold = autotune(ksb, task, p.template, space, cache, round_size=2, reps=2)
    assert cold.ok and not cold.seeded and cold.rounds == 2 and len(cold.trials) == 4
    assert all(t.ok and t.seconds > 0 for t in cold.trials)
    assert len(cache.entries(cold.key)) == 4
    events = []
    warm = autotune(
        ksb, task, p.template, space, cache, reps=2, confirm=True, progress=lambda m, f: events.append((m, f))
    )
    assert warm.ok and warm.rounds == 1 and [t.config for t in warm.trials] == [cold.best] == [warm.seeded[0]]
    assert "warm start" in events[0][0] and events[-1][1] == 1.0
    # without confirm, the exact key's winner is reused: no build, no harness run
    reused = autotune(ksb, task, p.template, space, cache)
    assert reused.ok and reused.reused and reused.rounds == 0 and reused.best == warm.seeded[0]
    assert reused.elapsed_s < 2
