"""Every timed iteration reads an input no earlier call saw (worker.FreshInputs): a candidate
that keeps what it saw and recomputes only what changed must still compute everything, and the
trusted reference can make an audited iteration's input again from the round's seed. The
sandboxed end of it is the input_memo cheat in test_kernel_cheats.py."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "verifiers" / "kernel" / "harness"))
import worker  # noqa: E402


def _blocks_unchanged(a, b, block: int = 16) -> int:
    """How many `block`-element runs (a cache line of float32) hold the same bits in a and b."""
    same = a.reshape(-1).view(torch.int32) == b.reshape(-1).view(torch.int32)
    n = same.numel() // block * block
    return int(same[:n].view(-1, block).all(dim=1).sum())


def _round(fresh, seed: int, n: int) -> list:
    """A round's inputs, copied out of the slots."""
    return [args[0].clone() for args in fresh.prepare(seed, n)]


def test_every_iteration_of_a_round_differs_everywhere_from_the_base_and_the_others():
    base = torch.randn(256, 1024)  # 1 MiB
    other = torch.randn(64)
    fresh = worker.FreshInputs([base, other, 3], 4 << 20)
    assert fresh.capacity == 4
    sets = fresh.prepare(seed=12345, n=4)
    for args in sets:
        assert args[1] is other and args[2] == 3  # only the largest float input is varied
        x = args[0]
        assert x.shape == base.shape and x.dtype == base.dtype and x.is_contiguous()
        nonzero = base != 0  # 0 stays 0 (0/0 has no ratio)
        ratio = x[nonzero] / base[nonzero]
        assert float(ratio.min()) >= 0.5 and float(ratio.max()) < 2.0  # same signs, same scale
        assert bool((x[~nonzero] == 0).all())
    assert len({args[0].data_ptr() for args in sets}) == 4  # a round's slots are distinct
    seen = [base]
    for x in _round(worker.FreshInputs([base, other, 3], 12 << 20), seed=12345, n=12):
        for earlier in seen:
            assert _blocks_unchanged(x, earlier) == 0
        seen.append(x)


def test_the_next_round_is_new_and_the_audited_input_is_made_again_exactly():
    base = torch.randn(128, 512)
    fresh = worker.FreshInputs([base], 2 << 20)
    first = _round(fresh, seed=7, n=5)
    second = _round(fresh, seed=8, n=5)
    for a in first:
        for b in second:
            assert _blocks_unchanged(a, b) == 0
    for j in range(5):  # the reference replays an audited iteration from its own table
        assert torch.equal(fresh.one(seed=8, j=j)[0], second[j])


def test_another_process_cannot_make_the_same_inputs_from_the_seed():
    # The table is drawn afresh for each FreshInputs (a fixed seed let a candidate rebuild it and
    # tell from a slot's values which offset the next one would use).
    base = torch.randn(128, 512)
    one, other = worker.FreshInputs([base], 2 << 20), worker.FreshInputs([base.clone()], 2 << 20)
    assert _blocks_unchanged(one.one(seed=8, j=0)[0], other.one(seed=8, j=0)[0]) == 0


def test_the_reading_side_sees_what_the_filling_side_wrote_through_one_memfd():
    base = torch.randn(64, 64)
    fd = os.memfd_create("test-fresh")
    try:
        writer = worker.FreshInputs([base], 1 << 20, shared=fd)
        reader = worker.FreshInputs([base.clone()], 1 << 20, shared=fd, fill=False)
        assert reader.capacity == writer.capacity
        views = reader.prepare(seed=5, n=2)  # views first, as the candidate builds them
        made = [a[0].clone() for a in writer.prepare(seed=5, n=2)]
        for v, m in zip(views, made, strict=False):
            assert torch.equal(v[0], m) and not torch.equal(v[0], base)
        assert torch.equal(made[1], writer.one(seed=5, j=1)[0])
    finally:
        os.close(fd)


def test_a_round_holds_what_its_budget_allows_and_no_more():
    base = torch.randn(1 << 20)  # 4 MiB
    fresh = worker.FreshInputs([base], 16 << 20)
    assert fresh.capacity == 4
    with pytest.raises(ValueError, match="5 fresh inputs"):
        fresh.prepare(seed=1, n=5)
    assert worker.FreshInputs([base], 1 << 20).capacity == 1  # an input larger than the budget: one at a time
    assert worker.FreshInputs([torch.randn(4)], 1 << 30).capacity == worker.MAX_FRESH


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_other_float_dtypes_are_varied_in_their_own_dtype(dtype):
    base = torch.randn(64, 64).to(dtype)
    x = worker.FreshInputs([base], 1 << 20).prepare(seed=3, n=2)[1][0]
    assert x.dtype == dtype and not torch.equal(x, base)


def test_inputs_without_a_float_tensor_are_passed_as_they_are():
    ids = torch.arange(10)
    fresh = worker.FreshInputs([ids], 1 << 20)
    sets = fresh.prepare(seed=1, n=3)
    assert all(s[0] is ids for s in sets)


def test_every_warm_call_changes_one_element_of_every_row_each_at_its_own_place():
    import numpy as np

    x = torch.randn(512, 256)
    before = x.clone()
    p = worker.Perturb([torch.randn(8), x], max_count=8192)  # the largest float input is varied
    a, b = p.indices(seed=5, i=0), p.indices(seed=5, i=1)
    assert (a // 256 == np.arange(512)).all() and (b // 256 == np.arange(512)).all()
    # No shared shift from one call to the next: one row's change tells nothing of another's.
    assert len(set(((b - a) % 256).tolist())) > 100
    assert (p.indices(seed=5, i=0) == a).all()  # the reference's replay finds the same places
    saved = p.apply(a)
    assert int((x != before).all(dim=1).sum()) == 0 and int((x != before).any(dim=1).sum()) == 512
    p.restore(a, saved)
    assert torch.equal(x.view(torch.int32), before.view(torch.int32))


def test_each_fresh_call_changes_its_input_where_the_answer_before_it_says(scripted_answers):
    """All of a round's inputs are in memory when it starts: without a change salted by the
    answer to the call before, a candidate could work out every output at its first call and
    only pick one per call after. The trusted side makes each input again, change and all."""
    base = torch.randn(64, 128)
    fd = os.memfd_create("test-fresh-change")
    try:
        writer = worker.FreshInputs([base], 1 << 20, shared=fd, perturb_max=8192)
        reader = worker.FreshInputs([base.clone()], 1 << 20, shared=fd, fill=False, perturb_max=8192)
        sets = reader.prepare(seed=9, n=3)
        plain = [a[0].clone() for a in writer.prepare(seed=9, n=3)]
        slots = worker.FRESH_SLOTS
        salts = [77, 123456789, 2**46 - 1]
        line = scripted_answers([0 + salts[1] * slots, 1 + salts[2] * slots, 5])
        worker.timed_fresh_round(lambda x: x.clone(), sets, 2 + salts[0] * slots, line, reader)
        for (j, salt), got in zip([(2, salts[0]), (0, salts[1]), (1, salts[2])], line.seen, strict=False):
            want = writer.one(seed=9, j=j, salt=salt)[0]
            assert torch.equal(got, want), j
            changed = (got.view(torch.int32) != plain[j].view(torch.int32)).sum(dim=1)
            assert changed.tolist() == [1] * 64  # one element of every row
        assert all(torch.equal(s[0], p) for s, p in zip(sets, plain, strict=False))  # put back after each call
        guessed = writer.one(seed=9, j=0, salt=0)[0]
        assert not torch.equal(guessed, writer.one(seed=9, j=0, salt=salts[1])[0])
    finally:
        os.close(fd)
    # Nothing to change where no input is a float tensor: the calls take the inputs as they are.
    ids = torch.arange(10)
    plain_ints = worker.FreshInputs([ids], 1 << 20, perturb_max=8192)
    assert plain_ints.change is None
    line = scripted_answers([1, 0])
    worker.timed_fresh_round(lambda x: x, plain_ints.prepare(seed=1, n=2), 0, line, plain_ints)
    assert all(torch.equal(o, ids) for o in line.seen)


def test_around_changes_the_input_for_the_call_only():
    """One helper for the warm rounds, the fresh rounds and the reference's replay: the call
    sees its elements changed, and the input is put back bit for bit after it."""
    x = torch.randn(16, 64)
    before = x.clone()
    perturb = worker.Perturb([x], 8192)
    idx = perturb.indices(42, 3)
    seen = perturb.around(lambda t: t.clone(), [x], idx)
    assert torch.equal(x.view(torch.int32), before.view(torch.int32))
    changed = (seen.view(torch.int32) != before.view(torch.int32)).view(-1).nonzero().view(-1)
    assert sorted(changed.tolist()) == sorted(idx.tolist())
    assert torch.equal(perturb.around(lambda t: t.clone(), [x], None), before)

    # A call that raises leaves the input as it found it, too.
    def boom(t):
        raise RuntimeError("candidate failed")

    with pytest.raises(RuntimeError):
        perturb.around(boom, [x], perturb.indices(42, 4))
    assert torch.equal(x.view(torch.int32), before.view(torch.int32))
