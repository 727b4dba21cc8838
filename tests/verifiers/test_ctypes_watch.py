"""Functions a candidate takes through ctypes (worker.CtypesWatch, kernel._judge_ctypes).

libtorch_cpu exports ATen kernels as C functions (the AOTInductor shim) that skip the
dispatcher, so the op recorder never sees them; tests/verifiers/cheats/ref_ctypes_shim.py
computes softmax that way. Whatever name opened the library, a function's address says which
file it lies in: only the candidate's own build may be called."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
HARNESS = Path(__file__).resolve().parents[2] / "verifiers" / "kernel" / "harness"
sys.path.insert(0, str(HARNESS))
import worker  # noqa: E402

from assay.verifiers.kernel import runtime as rt  # noqa: E402
from assay.verifiers.kernel.check import _judge_ctypes  # noqa: E402
from assay.verifiers.kernel.judge import Checks  # noqa: E402


@pytest.fixture
def cdll_put_back(monkeypatch):
    """CtypesWatch hooks ctypes.CDLL for good, as it must in the worker; a test process gets it back."""
    for name in ("__init__", "__getitem__"):
        monkeypatch.setattr(ctypes.CDLL, name, vars(ctypes.CDLL)[name])


@pytest.fixture
def watch(cdll_put_back):
    return worker.CtypesWatch()


def _build(folder: Path, *ldflags: str) -> Path:
    """libk.so with one function, kernel(x) = x + 1."""
    if shutil.which("g++") is None:
        pytest.skip("g++ is needed to build a library")
    (folder / "k.cpp").write_text('extern "C" int kernel(int x) { return x + 1; }\n')
    subprocess.run(
        ["g++", "-shared", "-fPIC", str(folder / "k.cpp"), "-o", str(folder / "libk.so"), *ldflags], check=True
    )
    return folder / "libk.so"


@pytest.fixture(scope="module")
def own_library(tmp_path_factory) -> Path:
    return _build(tmp_path_factory.mktemp("own"))


def _judge(entries) -> Checks:
    checks = Checks()
    _judge_ctypes(checks, {"ctypes_functions": entries})
    return checks


def test_every_route_to_a_function_is_recorded_with_its_file(watch, own_library):
    torch_cpu = ctypes.CDLL("libtorch_cpu.so")  # already loaded by torch
    torch_cpu.aoti_torch_dtype_float32()
    torch_cpu["aoti_torch_device_type_cpu"]
    by_hand = torch_cpu._FuncPtr(("aoti_torch_get_data_ptr", torch_cpu))  # not through __getitem__
    own = ctypes.CDLL(str(own_library))
    assert own.kernel(41) == 42
    seen = {(Path(f).name, n): c for f, n, c in watch.take()}
    assert seen == {
        ("libtorch_cpu.so", ""): 1,  # opened
        ("libk.so", ""): 1,
        ("libtorch_cpu.so", "aoti_torch_dtype_float32"): 1,
        ("libtorch_cpu.so", "aoti_torch_device_type_cpu"): 1,
        ("libtorch_cpu.so", "aoti_torch_get_data_ptr"): 1,
        ("libk.so", "kernel"): 1,
    }, seen
    assert by_hand is not None
    assert watch.take() == []  # each is reported once


def test_a_function_found_through_the_candidates_own_handle_is_still_torchs(watch, tmp_path):
    # dlsym on a library's handle searches its dependencies too: a build linked against
    # libtorch_cpu hands out torch's C kernels under its own name.
    torch_lib = Path(torch.__file__).parent / "lib"
    own = ctypes.CDLL(
        str(_build(tmp_path, "-Wl,--no-as-needed", f"-L{torch_lib}", "-ltorch_cpu", f"-Wl,-rpath,{torch_lib}"))
    )
    own.aoti_torch_dtype_float32()
    seen = {(Path(f).name, n) for f, n, _ in watch.take()}
    assert seen == {("libk.so", ""), ("libtorch_cpu.so", "aoti_torch_dtype_float32")}, seen


def test_a_function_made_by_hand_and_dropped_is_seen(watch):
    torch_cpu = ctypes.CDLL("libtorch_cpu.so")
    f = torch_cpu._FuncPtr(("aoti_torch_dtype_float32", torch_cpu))
    assert f() >= 0
    del f  # gone before the end-of-run scan
    seen = {(Path(p).name, n) for p, n, _ in watch.take()}
    assert seen == {("libtorch_cpu.so", ""), ("libtorch_cpu.so", "aoti_torch_dtype_float32")}, seen


def test_functions_that_existed_before_the_candidate_are_not_its(cdll_put_back, own_library):
    harness_fn = ctypes.CDLL(str(own_library)).kernel  # as the harness's own OpWatch takes its functions
    watch = worker.CtypesWatch()
    assert watch.take() == [] and harness_fn(1) == 2


def test_the_hook_is_watched_by_the_integrity_check(watch):
    integrity = worker.Integrity()
    original = ctypes.CDLL.__getitem__
    try:
        ctypes.CDLL.__getitem__ = lambda self, name: original(self, name)
        assert "ctypes.CDLL.__getitem__ was replaced" in integrity.problems()
    finally:
        ctypes.CDLL.__getitem__ = original
    original = ctypes.CDLL.__init__
    try:
        ctypes.CDLL.__init__ = lambda self, *a, **k: original(self, *a, **k)
        assert "ctypes.CDLL.__init__ was replaced" in integrity.problems()
    finally:
        ctypes.CDLL.__init__ = original
    assert not any("ctypes" in p for p in integrity.problems())


def test_a_library_opened_is_reported_even_if_no_function_is_taken(watch):
    # c_void_p.in_dll reads at a symbol's address (the address itself is then one byref away)
    # and makes no function object: the open is what shows.
    torch_cpu = ctypes.CDLL("libtorch_cpu.so")
    ctypes.c_void_p.in_dll(torch_cpu, "aoti_torch_cpu_addmm_out")
    ((path, name, count),) = watch.take()
    assert (Path(path).name, name, count) == ("libtorch_cpu.so", "", 1) and Path(path).is_absolute()
    assert "the library libtorch_cpu.so" in _judge([[path, name, count]]).items["no_torch_compute"].detail


def test_the_candidates_own_library_passes_and_any_other_fails():
    own = f"{rt.WORKDIR}/.assay-build/k1/k.so"
    torch_lib = "/opt/venv/lib/python3.11/site-packages/torch/lib/libtorch_cpu.so"
    libc = "/usr/lib/x86_64-linux-gnu/libc.so.6"
    assert _judge([[own, "assay_kernel", 1]]).all_passed()
    checks = _judge([[own, "assay_kernel", 1], [torch_lib, "aoti_torch_cpu_addmm_out", 1]])
    assert not checks.items["no_torch_compute"].passed
    assert "aoti_torch_cpu_addmm_out (libtorch_cpu.so)" in checks.items["no_torch_compute"].detail
    assert "through ctypes" in checks.items["no_torch_compute"].detail
    checks = _judge([[libc, "memcpy", 2]])
    assert (
        not checks.items["extension_symbols"].passed
        and "memcpy (libc.so.6)" in checks.items["extension_symbols"].detail
    )
    assert not _judge([["?", "?", 1]]).all_passed()  # code in no file is no build of the candidate's


def test_a_missing_or_malformed_record_is_a_harness_failure():
    checks = Checks()
    _judge_ctypes(checks, {})
    assert not checks.items["harness_integrity"].passed
    assert not _judge([["only two", 1]]).items["harness_integrity"].passed
