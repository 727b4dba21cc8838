"""The extension symbol check on `nm -D --undefined-only -C` listings."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from assay.verifiers.kernel.criteria import load_criteria
from assay.verifiers.kernel.symbols import allowed_structs, judge_symbols

CRITERIA = load_criteria("kernel-test")


def nm(*symbols: str) -> str:
    return "\n".join(f"                 U {s}" for s in symbols)


def test_allocation_ops_map_to_their_ops_structs():
    ok = allowed_structs(tuple(CRITERIA.ops.allowed))
    assert {"empty_memory_format", "empty_like", "empty_strided", "fill__Scalar"} <= ok
    assert "softmax_int" not in ok and "_softmax" not in ok and "copy_" not in ok


def test_what_the_cpp_frontends_factories_import_is_clean():
    # torch::empty_like, as KernelBench candidates allocate, with TORCH_CHECK and data_ptr<float>:
    # the torch and c10 imports nm listed for such a load_inline library built here.
    listing = nm(
        "at::_ops::empty_like::call(at::Tensor const&, std::optional<c10::ScalarType>, std::optional<c10::Layout>, "
        "std::optional<c10::Device>, std::optional<bool>, std::optional<c10::MemoryFormat>)",
        "c10::TensorImpl::set_autograd_meta(std::unique_ptr<c10::AutogradMetaInterface, "
        "std::default_delete<c10::AutogradMetaInterface> >)",
        "c10::impl::getGlobalPyInterpreter()",
        "c10::impl::ExcludeDispatchKeyGuard::ExcludeDispatchKeyGuard(c10::DispatchKeySet)",
        "c10::impl::ExcludeDispatchKeyGuard::~ExcludeDispatchKeyGuard()",
        "c10::detail::torchCheckFail(char const*, char const*, unsigned int, char const*)",
        "float* at::TensorBase::data_ptr<float>() const",
        "c10::SymBool::guard_bool(char const*, long) const",
        "vtable for torch::autograd::AutogradMeta",
    )
    assert judge_symbols(listing, CRITERIA) == []


def test_an_honest_extension_is_clean():
    listing = nm(
        "at::_ops::empty_like::call(at::Tensor const&, std::optional<c10::ScalarType>, std::optional<c10::Layout>, "
        "std::optional<c10::Device>, std::optional<bool>, std::optional<c10::MemoryFormat>)",
        "GOMP_parallel@GOMP_4.0",
        "expf@GLIBC_2.27",
        "_ZGVeN16v_expf@GLIBC_2.22",
        "c10::detail::torchCheckFail(char const*, char const*, unsigned int, char const*)",
        "pybind11::detail::type_caster<at::Tensor, void>::load(pybind11::handle, bool)",
    )
    assert judge_symbols(listing, CRITERIA) == []


def test_a_contraction_may_be_imported_and_is_judged_at_run_time():
    # Which convolution, on which sizes, is the op recorder's to say (test_kernel_contractions).
    listing = nm(
        "at::_ops::conv2d::call(at::Tensor const&, at::Tensor const&, std::optional<at::Tensor> const&, "
        "c10::ArrayRef<long>, c10::ArrayRef<long>, c10::ArrayRef<long>, long)",
        "at::_ops::addmm::call(at::Tensor const&, at::Tensor const&, at::Tensor const&, c10::Scalar const&, "
        "c10::Scalar const&)",
    )
    assert judge_symbols(listing, CRITERIA) == []


@pytest.mark.parametrize(
    "symbol, words",
    [
        ("at::_ops::softmax_int::call(at::Tensor const&, long, std::optional<c10::ScalarType>)", "softmax_int"),
        ("at::_ops::copy_::call(at::Tensor&, at::Tensor const&, bool)", "copy_"),
        ("at::_ops::exp::redispatch(c10::DispatchKeySet, at::Tensor const&)", "redispatch"),
        ("at::native::softmax_cpu(at::Tensor const&, long, bool)", "directly"),
        ("at::cpu::_softmax(at::Tensor const&, long, bool)", "directly"),
        ("at::clearCallbacks()", "recording"),
        ("c10::impl::IncludeDispatchKeyGuard::IncludeDispatchKeyGuard(c10::DispatchKeySet)", "dispatcher"),
        ("c10::impl::tls_set_dispatch_key_excluded(c10::DispatchKey, bool)", "dispatcher"),
        ("c10::impl::_force_tls_local_dispatch_key_set(c10::impl::PODLocalDispatchKeySet)", "dispatcher"),
        ("dlsym@GLIBC_2.34", "dlsym"),
        ("dl_iterate_phdr@GLIBC_2.2.5", "walks the loaded libraries"),
        ("dladdr@GLIBC_2.34", "maps addresses"),
        ("_r_debug@GLIBC_2.2.5", "list of loaded libraries"),
        ("pthread_sigmask@GLIBC_2.32", "masks signals"),
        ("timer_settime@GLIBC_2.34", "sets timers"),
        ("pthread_create@GLIBC_2.34", "threads"),
        ("std::thread::_M_start_thread(std::unique_ptr<std::thread::_State>, void (*)())", "std::thread"),
        ("fork@GLIBC_2.2.5", "processes"),
        ("_exit@GLIBC_2.2.5", "ends the process"),
        ("socket@GLIBC_2.2.5", "sockets"),
    ],
)
def test_forbidden_imports_are_named(symbol, words):
    problems = judge_symbols(nm(symbol), CRITERIA)
    assert problems and words in problems[0]


@pytest.mark.skipif(shutil.which("nm") is None or shutil.which("g++") is None, reason="needs binutils and g++")
def test_on_a_real_library_built_here(tmp_path):
    """A tiny C++ library calling a libc function it should not: nm's listing, judged."""
    src = tmp_path / "k.cpp"
    src.write_text('#include <stdlib.h>\nextern "C" int k(void) { return system("true"); }\n')
    lib = tmp_path / "k.so"
    subprocess.run(["g++", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    out = subprocess.run(["nm", "-D", "--undefined-only", "-C", str(lib)], capture_output=True, text=True, check=True)
    assert any("system" in p for p in judge_symbols(out.stdout, CRITERIA))


@pytest.mark.parametrize(
    "symbol, words",
    [
        ("aoti_torch_cpu__linear_pointwise", "AOTInductor C shim"),
        ("aoti_torch_cpu_mm_out", "AOTInductor C shim"),
        ("aoti_torch_delete_tensor_object", "AOTInductor C shim"),
        ("sgemm_", "from torch's libraries"),
        ("cblas_sgemm_batch", "from torch's libraries"),
        ("at::functionalization::impl::to_functional_tensor(at::Tensor const&)", "from torch's libraries"),
        ("torch::aot_inductor::tensor_handle_to_tensor_pointer(AtenTensorOpaque*)", "from torch's libraries"),
        (
            "fbgemm::cblas_sgemm_ref(int, int, int, int, float, float const*, float const*, float, float*)",
            "from torch's libraries",
        ),
    ],
)
def test_torch_kernels_outside_the_dispatcher_are_refused(symbol, words):
    """libtorch exports kernels that no op recorder sees (the AOTI C shim, MKL, fbgemm): a symbol
    the candidate takes from torch must be on the short list a kernel needs."""
    problems = judge_symbols(nm(symbol), CRITERIA, torch_defined=frozenset({symbol}))
    assert problems and words in problems[0], problems


def test_the_aoti_shim_is_refused_even_without_torchs_listing():
    assert judge_symbols(nm("aoti_torch_cpu_add_Tensor"), CRITERIA, torch_defined=frozenset())


def test_what_an_honest_kernel_takes_from_torch_is_allowed():
    symbols = (
        "Sleef_expf16_u10",
        "THPVariableClass",
        "THPVariable_Wrap(at::TensorBase const&)",
        "float* at::TensorBase::data_ptr<float>() const",
        "vtable for c10::Error",
        "long c10::detail::maybe_wrap_dim_slow<long>(long, long, bool)",
        "torch::PyWarningHandler::PyWarningHandler()",
        "at::internal::invoke_parallel(long, long, long, std::function<void (long, long)> const&)",
        "caffe2::TypeMeta::typeMetaDatas()",
    )
    assert judge_symbols(nm(*symbols), CRITERIA, torch_defined=frozenset(symbols)) == []


def test_this_torch_exports_the_shim_and_blas_the_rule_is_for():
    from assay.verifiers.kernel.symbols import torch_exports

    exports = torch_exports()
    assert "aoti_torch_cpu__linear_pointwise" in exports and "sgemm_" in exports
    assert judge_symbols(nm("aoti_torch_cpu__linear_pointwise", "sgemm_"), CRITERIA) != []


@pytest.mark.skipif(shutil.which("nm") is None or shutil.which("g++") is None, reason="needs binutils and g++")
def test_a_real_library_calling_the_aoti_shim(tmp_path):
    src = tmp_path / "k.cpp"
    src.write_text(
        '#include <stdint.h>\nextern "C" int32_t aoti_torch_cpu_mm_out(void*, void*, void*);\n'
        'extern "C" int k(void** p) { return aoti_torch_cpu_mm_out(p[0], p[1], p[2]); }\n'
    )
    lib = tmp_path / "k.so"
    subprocess.run(["g++", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    out = subprocess.run(["nm", "-D", "--undefined-only", "-C", str(lib)], capture_output=True, text=True, check=True)
    assert any("aoti_torch_cpu_mm_out" in p and "AOTInductor" in p for p in judge_symbols(out.stdout, CRITERIA))
