"""The agent-side quick test's comparison (kernels/harness/_common.py) judges non-finite values
element by element, as the verifier does: it once passed a NaN anywhere as soon as eager's
output held a NaN somewhere, because it only asked whether both tensors had some non-finite value."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")


@pytest.fixture
def compare(harness_script):
    return harness_script("kernels/harness/_common.py").compare


def test_a_nan_where_eager_has_a_number_fails_even_when_eager_has_a_nan_elsewhere(compare):
    want = torch.tensor([float("nan"), 1.0, 2.0])
    got = torch.tensor([float("nan"), float("nan"), 2.0])
    r = compare(want, got, 1e-4, 1e-4)
    assert not r["ok"] and r["mismatched"] == 1 and r["max_abs_err"] == float("inf")


def test_nan_and_infinities_where_eager_has_the_same_pass(compare):
    want = torch.tensor([float("nan"), float("inf"), float("-inf"), 1.0])
    got = torch.tensor([float("nan"), float("inf"), float("-inf"), 1.0 + 1e-6])
    r = compare(want, got, 1e-4, 1e-4)
    assert r["ok"] and r["mismatched"] == 0 and r["max_abs_err"] < 1e-5


@pytest.mark.parametrize("got", [[float("inf"), 0.0], [float("-inf"), 1.0], [1e30, 1.0]])
def test_the_wrong_infinity_or_a_number_for_one_fails(compare, got):
    want = torch.tensor([float("inf"), 1.0])
    r = compare(want, torch.tensor(got), 1e-4, 1e-4)
    assert not r["ok"] and r["mismatched"] >= 1


def test_a_plain_difference_past_the_tolerance_fails(compare):
    r = compare(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.001]), 1e-4, 1e-4)
    assert not r["ok"] and r["mismatched"] == 1 and abs(r["max_abs_err"] - 0.001) < 1e-6


def test_a_wrong_imaginary_part_fails(compare):
    want = torch.tensor([1 + 2j, 3 - 1j])
    r = compare(want, torch.tensor([1 + 0j, 3 - 1j]), 1e-4, 1e-4)
    assert not r["ok"] and r["mismatched"] == 1
    assert compare(want, want.clone(), 1e-4, 1e-4)["ok"]
