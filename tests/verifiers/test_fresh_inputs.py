"""Every timed iteration reads an input no earlier call saw (worker.FreshInputs): a candidate
that keeps what it saw and recomputes only what changed must still compute everything, and the
trusted reference can make the audited iteration's input again from the round's seed. The
sandboxed end of it is the input_memo cheat in test_kernel_cheats.py."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "verifiers" / "harness"))
import worker  # noqa: E402


def _blocks_unchanged(a, b, block: int = 16) -> int:
    """How many `block`-element runs (a cache line of float32) hold the same bits in a and b."""
    same = (a.view(-1).view(torch.int32) == b.view(-1).view(torch.int32))
    n = same.numel() // block * block
    return int(same[:n].view(-1, block).all(dim=1).sum())


def test_every_iteration_of_a_round_differs_everywhere_from_the_base_and_the_others():
    base = torch.randn(256, 1024)
    other = torch.randn(64)
    fresh = worker.FreshInputs([base, other, 3], 64 << 20)
    sets = fresh.prepare(seed=12345, n=12)
    assert len(sets) == 12
    seen = [base]
    for args in sets:
        x = args[0]
        assert x.shape == base.shape and x.dtype == base.dtype and x.is_contiguous()
        assert args[1] is other and args[2] == 3  # only the largest float input is varied
        ratio = x / base
        assert float(ratio.min()) >= 0.5 and float(ratio.max()) < 2.0  # same signs, same scale
        for earlier in seen:
            assert _blocks_unchanged(x, earlier) == 0
        seen.append(x)
    # Buffers are distinct within a round: no iteration's input is another's.
    assert len({args[0].data_ptr() for args in sets}) == 12


def test_the_next_round_is_new_and_the_audited_input_is_made_again_exactly():
    base = torch.randn(128, 512)
    fresh = worker.FreshInputs([base], 64 << 20)
    first = [a[0].clone() for a in fresh.prepare(seed=7, n=5)]
    second = [a[0].clone() for a in fresh.prepare(seed=8, n=5)]
    for a in first:
        for b in second:
            assert _blocks_unchanged(a, b) == 0
    again = worker.FreshInputs([base.clone()], 64 << 20)  # the reference's own copy of the inputs
    for j in range(5):
        assert torch.equal(again.one(seed=8, j=j)[0], second[j])


def test_capacity_follows_the_memory_budget_and_is_enforced():
    base = torch.randn(1 << 20)  # 4 MiB
    fresh = worker.FreshInputs([base], 64 << 20)
    assert fresh.capacity == 16
    with pytest.raises(ValueError, match="17 fresh inputs"):
        fresh.prepare(seed=1, n=17)
    # A budget below six inputs still gives six: a round needs at least 2 (and 3 x 2 in odd rounds).
    assert worker.FreshInputs([base], 1 << 20).capacity == 6
    assert worker.FreshInputs([torch.randn(4)], 1 << 30).capacity == worker.MAX_FRESH


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_other_float_dtypes_are_varied_in_their_own_dtype(dtype):
    base = torch.randn(64, 64).to(dtype)
    x = worker.FreshInputs([base], 8 << 20).prepare(seed=3, n=2)[1][0]
    assert x.dtype == dtype and not torch.equal(x, base)


def test_inputs_without_a_float_tensor_are_passed_as_they_are():
    ids = torch.arange(10)
    fresh = worker.FreshInputs([ids], 8 << 20)
    sets = fresh.prepare(seed=1, n=3)
    assert all(s[0] is ids for s in sets)
