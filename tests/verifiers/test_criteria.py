"""Criteria profiles: loaded by name from package data, validated, hashed."""

from __future__ import annotations

import hashlib

import pytest

from assay.errors import UserError
from assay.verifiers.criteria import _shipped_dir, available
from assay.verifiers.kernel.criteria import load_criteria


def test_shipped_profiles_load_and_hold_the_issue_floor():
    assert {"kernel-default", "kernel-test", "kernel-test-runtime"} <= set(available("kernel"))
    for name in available("kernel"):
        c = load_criteria(name)
        assert c.name == name
        assert c.correctness.trials >= 5 and c.correctness.other_shapes >= 2
        assert c.tolerance("float32").atol == pytest.approx(1e-4)
        assert c.tolerance("float32").rtol == pytest.approx(1e-4)
        assert c.tolerance("int64").atol == 0 and c.tolerance("int64").rtol == 0
        # A complex dtype not listed takes its parts' tolerance.
        assert c.tolerance("complex64") == c.tolerance("float32")
        assert c.tolerance("complex128") == c.tolerance("float64")
        assert "aten::softmax" not in c.ops.allowed and "aten::_softmax" not in c.ops.allowed


def test_hash_covers_every_file_a_profile_extends():
    raw = {n: _shipped_dir().joinpath(f"{n}.toml").read_bytes() for n in ("kernel-default", "kernel-test")}
    default = load_criteria("kernel-default")
    assert default.sha256 == hashlib.sha256(hashlib.sha256(raw["kernel-default"]).digest()).hexdigest()
    test = load_criteria("kernel-test")
    chained = hashlib.sha256(
        hashlib.sha256(raw["kernel-default"]).digest() + hashlib.sha256(raw["kernel-test"]).digest()
    )
    assert test.sha256 == chained.hexdigest()
    assert len({load_criteria(n).sha256 for n in available("kernel")}) == len(available("kernel"))


def test_test_profile_keeps_the_default_checks():
    default, test = load_criteria("kernel-default"), load_criteria("kernel-test")
    assert test.correctness == default.correctness
    assert test.ops == default.ops
    assert test.scan == default.scan
    assert test.roofline == default.roofline
    assert test.speed == default.speed
    assert test.limits.memory_mb <= default.limits.memory_mb
    assert load_criteria("kernel-test-runtime").scan.stop_on_failure is False


@pytest.mark.parametrize("name", ["nope", "../kernel-default", "/etc/passwd", "kernel-default.toml", ""])
def test_unknown_or_path_like_names_are_user_errors(name):
    with pytest.raises(UserError) as err:
        load_criteria(name)
    assert err.value.fix


def test_a_profile_of_another_kind_is_refused():
    """A run is judged only by a profile of its own kind: kernel-default for a port job is a
    UserError naming both kinds, never the kernel's thresholds applied to a port."""
    from assay.verifiers.criteria import CriteriaBase, load_profile

    with pytest.raises(UserError) as err:
        load_profile("kernel-default", CriteriaBase, kind="port")
    assert "'kernel'" in err.value.problem and "'port'" in err.value.problem and "port" in err.value.fix
