"""The source scan, on the cheat suite's files and on small snippets. No sandbox needed."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from assay.verifiers.kernel.criteria import load_criteria
from assay.verifiers.kernel.scan import SCAN_CHECKS, scan_candidate

HERE = Path(__file__).parent
SOFTMAX = HERE.parent.parent / "examples" / "kernel" / "softmax.py"


def _expected():
    spec = importlib.util.spec_from_file_location("verifier_conftest", HERE / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.expected_cheats()


EXPECTED = _expected()
CRITERIA = load_criteria("kernel-test")
TASK = SOFTMAX.read_text()


def scan(source: str) -> dict[str, list]:
    return scan_candidate(source, CRITERIA, TASK)


def failed(source: str) -> set[str]:
    return {name for name, found in scan(source).items() if found}


def test_every_cheat_file_is_listed_and_every_listed_cheat_exists():
    files = {p.stem for p in (HERE / "cheats").glob("*.py")}
    assert files == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_cheat_meets_the_scan_it_is_expected_to_meet(name):
    findings = failed((HERE / "cheats" / f"{name}.py").read_text())
    static = EXPECTED[name].get("static")
    if static:
        assert static in findings, f"{name}: expected {static}, scan found {findings or 'nothing'}"
    else:
        assert findings == set(), f"{name} should pass the scan so that its runtime check is what stops it"


@pytest.mark.parametrize("path", sorted((HERE / "honest").glob("*.py")), ids=lambda p: p.stem)
def test_honest_candidates_pass_the_scan(path):
    assert failed(path.read_text()) == set()


HEADER = "import torch\nimport torch.nn as nn\n"


def model(body: str, header: str = HEADER) -> str:
    return (
        header
        + "\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n"
        + "".join(f"        {line}\n" for line in body.strip().splitlines())
    )


@pytest.mark.parametrize(
    "body, check",
    [
        ("return torch.softmax(x, -1)", "source_no_torch_compute"),
        ("return torch.exp(x) / torch.exp(x).sum(-1, keepdim=True)", "source_no_torch_compute"),
        ("return x.exp()", "source_no_torch_compute"),
        ("return x.type(torch.float64)", "source_no_torch_compute"),
        ("f = torch.nn.functional.gelu\nreturn f(x)", "source_no_torch_compute"),
        ("return torch.Tensor.softmax(x, -1)", "source_no_torch_compute"),
        ("return getattr(x, 'softmax')(-1)", "source_no_torch_compute"),
        ("return getattr(torch, 'soft' + 'max')(x, -1)", "source_no_dynamic_code"),
        ("return eval('torch.softmax')(x, -1)", "source_no_dynamic_code"),
        ("return __import__('torch').softmax(x, -1)", "source_no_dynamic_code"),
        ("return torch._C._nn.gelu(x)", "source_no_dynamic_code"),
        ("return vars(torch)['softmax'](x, -1)", "source_no_dynamic_code"),
        ("return x.__class__", "source_no_dynamic_code"),
        ("torch.allclose = lambda *a, **k: True\nreturn x", "source_no_harness_tampering"),
        ("setattr(torch, 'equal', None)\nreturn x", "source_no_harness_tampering"),
        ("exit(0)", "source_no_system_access"),
        ("import os\nos.system('true')\nreturn x", "source_no_system_access"),
        ("import subprocess\nreturn x", "source_imports"),
        ("import numpy\nreturn x", "source_imports"),
        ("from softmax import Model\nreturn Model()(x)", "source_imports"),
        ("from . import helper\nreturn x", "source_imports"),
        ("from torch import *\nreturn x", "source_imports"),
    ],
)
def test_python_rules(body, check):
    assert check in failed(model(body))


@pytest.mark.parametrize(
    "body",
    [
        "out = torch.empty_like(x)\nreturn out",
        "rows, cols = x.shape[0], x.size(-1)\nreturn torch.empty((rows, cols), dtype=torch.float32)",
        "assert x.is_contiguous() and x.dtype == torch.float32\nreturn torch.empty_like(x).view(x.shape)",
        "parts = 'a,b'.split(',')\nreturn torch.empty(len(parts))",
        "assert x.device.type == 'cpu'\nreturn torch.empty_like(x)",
    ],
)
def test_allocation_and_metadata_are_allowed(body):
    assert failed(model(body)) == set()


@pytest.mark.parametrize(
    "body",
    [
        "return torch.nn.functional.conv2d(x, torch.empty(8, 3, 3, 3))",
        "return torch.mm(x, torch.empty(4, 4))",
        "import torch.nn.functional as F\nreturn F.linear(x, torch.empty(4, 4))",
    ],
)
def test_contractions_pass_the_scan_and_are_judged_at_run_time(body):
    # Only the reference's own, on its sizes, pass the op recorder (test_kernel_contractions).
    assert failed(model(body)) == set()


@pytest.mark.parametrize("body", ["return torch.nn.functional.softmax(x, -1)", "return torch.einsum('ij->i', x)"])
def test_what_is_not_a_listed_contraction_stays_refused(body):
    assert "source_no_torch_compute" in failed(model(body)), body


def test_model_new_init_may_build_parameters_with_torch():
    source = HEADER + (
        "\n\nclass ModelNew(nn.Module):\n"
        "    def __init__(self, n):\n"
        "        super().__init__()\n"
        "        self.linear = nn.Linear(n, n)\n"
        "        self.scale = nn.Parameter(torch.randn(n) * 0.5)\n"
        "    def forward(self, x):\n"
        "        return torch.empty_like(x)\n"
    )
    task = "import torch.nn as nn\nclass Model(nn.Module):\n    def __init__(self, n): pass\n    def forward(self, x): pass\n"
    assert not any(scan_candidate(source, CRITERIA, task).values())


def test_compute_outside_init_is_still_caught_next_to_an_exempt_init():
    source = model("return self.linear(x).relu()").replace(
        "class ModelNew(nn.Module):\n",
        "class ModelNew(nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.linear = nn.Linear(4, 4)\n",
    )
    assert "source_no_torch_compute" in failed(source)


def init_model(init: str, forward: str = "return self.f(x)") -> str:
    """ModelNew with an __init__ (no arguments, as softmax's Model) and a forward."""
    return (
        HEADER
        + "import torch.nn.functional as F\n\n\nclass ModelNew(nn.Module):\n    def __init__(self):\n"
        + "".join(f"        {line}\n" for line in ("super().__init__()\n" + init).strip().splitlines())
        + "".join(f"    {line}\n" for line in ("def forward(self, x):\n    " + forward).splitlines())
    )


@pytest.mark.parametrize(
    "init",
    [
        "def f(x):\n    return F.softmax(x, dim=-1)\nself.f = f",
        "self.f = lambda x: torch.softmax(x, -1)",
        "def f(x):\n    return x.softmax(-1)\nself.f = f",
        "class Inner:\n    def __init__(self):\n        self.y = torch.exp(torch.ones(1))\nself.f = Inner",
        "def __init__(x):\n    return torch.softmax(x, -1)\nself.f = __init__",
    ],
    ids=["def", "lambda", "method", "class", "nested-init"],
)
def test_a_function_defined_inside_init_is_judged_like_forward(init):
    """__init__'s exemption is for its own body (building parameters), not for closures it
    leaves behind for forward to call."""
    assert "source_no_torch_compute" in failed(init_model(init))


@pytest.mark.parametrize(
    "expr, check",
    [
        ("torch.sys.modules", "source_imports"),
        ("torch.os.system", "source_imports"),
        ("torch.utils.cpp_extension.subprocess.run", "source_imports"),
        ("torch.nn.functional.np", "source_imports"),
        ("torch.sys.modules['torch.autograd']._enable_record_function", "source_no_dynamic_code"),
        ("nn.Module()._modules", "source_no_dynamic_code"),
        ("[torch][0]._C", "source_no_dynamic_code"),
    ],
)
def test_module_reexports_and_private_attributes_are_refused_even_in_init(expr, check):
    assert check in failed(init_model(f"self.g = {expr}", "return torch.empty_like(x)"))


def test_torch_reexport_list_covers_this_torch():
    """Every non-torch module torch's namespaces hold is on the list (a new torch may add one;
    private names such as torch.utils._osp are refused as private already)."""
    import types

    import torch
    import torch.nn.functional
    import torch.utils.cpp_extension

    from assay.verifiers.kernel.scan import TORCH_REEXPORTS

    for mod in (torch, torch.nn, torch.nn.functional, torch.utils, torch.utils.cpp_extension):
        held = {
            n
            for n, v in vars(mod).items()
            if isinstance(v, types.ModuleType) and not v.__name__.startswith("torch") and not n.startswith("_")
        }
        assert held <= TORCH_REEXPORTS, (mod.__name__, held - TORCH_REEXPORTS)


def test_own_private_state_and_super_init_are_allowed():
    source = init_model(
        "self._k = [1.0]\nself._buf = None", "return torch.empty_like(x).view(x.shape) if self._k[0] else x"
    )
    assert failed(source) == set()


def cpp(code: str) -> str:
    return (
        HEADER + "from torch.utils.cpp_extension import load_inline\n"
        f"_SRC = r'''\n{code}\n'''\n"
        "_m = load_inline(name='k', cpp_sources=_SRC, functions=['f'])\n"
        "\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return _m.f(x)\n"
    )


@pytest.mark.parametrize(
    "code, check",
    [
        ("torch::Tensor f(torch::Tensor x) { return at::softmax(x, -1); }", "source_no_torch_compute"),
        ("torch::Tensor f(torch::Tensor x) { return x.softmax(-1); }", "source_no_torch_compute"),
        ("torch::Tensor f(torch::Tensor x) { return torch::exp(x); }", "source_no_torch_compute"),
        ("#define NS at::\ntorch::Tensor f(torch::Tensor x) { return NS softmax(x, -1); }", "source_no_dynamic_code"),
        ("#define CAT(a, b) a##b\ntorch::Tensor f(torch::Tensor x) { return x; }", "source_no_dynamic_code"),
        ("torch::Tensor f(torch::Tensor x) { return at::native::softmax(x, -1, false); }", "source_no_dynamic_code"),
        (
            '#include <dlfcn.h>\ntorch::Tensor f(torch::Tensor x) { dlsym(RTLD_DEFAULT, "x"); return x; }',
            "source_no_dynamic_code",
        ),
        ("torch::Tensor f(torch::Tensor x) { std::thread t([]{}); t.detach(); return x; }", "source_no_system_access"),
        ("torch::Tensor f(torch::Tensor x) { _exit(0); return x; }", "source_no_system_access"),
        ('torch::Tensor f(torch::Tensor x) { system("true"); return x; }', "source_no_system_access"),
        ('TORCH_LIBRARY(my, m) { m.def("f", &f); }', "source_no_dynamic_code"),
        (
            "#include <link.h>\nint cb(dl_phdr_info*, size_t, void*);\ntorch::Tensor f(torch::Tensor x) { dl_iterate_phdr(cb, 0); return x; }",
            "source_no_dynamic_code",
        ),
        (
            'extern "C" int aoti_torch_cpu_mm_out(void*, void*, void*);\ntorch::Tensor f(torch::Tensor x) { return x; }',
            "source_no_dynamic_code",
        ),
        (
            "#include <link.h>\ntorch::Tensor f(torch::Tensor x) { auto m = _r_debug.r_map; return x; }",
            "source_no_dynamic_code",
        ),
        (
            "#include <elf.h>\ntorch::Tensor f(torch::Tensor x) { const Elf64_Sym* s = nullptr; return x; }",
            "source_no_dynamic_code",
        ),
        (
            "#include <signal.h>\ntorch::Tensor f(torch::Tensor x) { sigset_t s; pthread_sigmask(SIG_BLOCK, &s, 0); return x; }",
            "source_no_system_access",
        ),
        (
            "#include <time.h>\ntorch::Tensor f(torch::Tensor x) { timer_delete(0); return x; }",
            "source_no_system_access",
        ),
        # One allowed name of at::detail is not the namespace: its other functions stay refused,
        # however the qualifier is spaced or nested.
        ("torch::Tensor f(torch::Tensor x) { return at::detail::make_tensor_base(x); }", "source_no_torch_compute"),
        ("torch::Tensor f(torch::Tensor x) { return at :: detail :: empty_meta(x); }", "source_no_torch_compute"),
        ("torch::Tensor f(torch::Tensor x) { return at::detail::empty_cpu::softmax(x); }", "source_no_torch_compute"),
        ("torch::Tensor f(torch::Tensor x) { using namespace at::detail; return x; }", "source_no_torch_compute"),
    ],
)
def test_inline_cpp_rules(code, check):
    assert check in failed(cpp(code))


def test_a_cpp_contraction_passes_the_scan_and_other_aten_calls_do_not():
    assert failed(cpp("at::Tensor y = at::conv2d(x, w);")) == set()
    assert "source_no_torch_compute" in failed(cpp("at::Tensor y = at::softmax(x, -1);"))


def test_plain_cpp_kernel_with_openmp_is_allowed():
    code = (
        "torch::Tensor f(torch::Tensor x) {\n"
        "  auto out = at::empty_like(x);\n"
        "  const float* a = x.data_ptr<float>(); float* b = out.data_ptr<float>();\n"
        "  // comments may say at::softmax or exit(0) freely\n"
        "  #pragma omp parallel for\n"
        "  for (int64_t i = 0; i < x.numel(); ++i) b[i] = a[i] > 0.f ? a[i] : 0.f;\n"
        "  return out;\n}"
    )
    assert failed(cpp(code)) == set()


def test_an_entry_on_tensor_base_and_torch_empty_allocation_is_allowed():
    """What kernels/cpp_entry.py writes: the tensor's base type, its raw pointers, and the CPU
    allocation torch.empty itself makes."""
    code = (
        "at::TensorBase f(const at::TensorBase& x) {\n"
        "  at::TensorBase out = at::detail::empty_cpu(x.sizes(), c10::kFloat, false, std::nullopt);\n"
        "  const float* a = (const float*)x.const_data_ptr(); float* b = (float*)out.mutable_data_ptr();\n"
        "  for (int64_t i = 0; i < x.numel(); ++i) b[i] = a[i];\n"
        "  return out;\n}"
    )
    assert failed(cpp(code)) == set()


@pytest.mark.parametrize(
    "line, check",
    [
        ("ctypes.CDLL('libtorch_cpu.so')", "source_no_dynamic_code"),
        ("ctypes.CDLL(None)", "source_no_dynamic_code"),
        ("ctypes.pythonapi.Py_IncRef", "source_no_dynamic_code"),
        ("ctypes.memmove(0, 0, 0)", "source_no_dynamic_code"),
        ("ctypes.c_float.from_address(x.data_ptr())", "source_no_dynamic_code"),
        ("ctypes.c_void_p.in_dll(lib, 'aoti_torch_cpu_mm_out')", "source_no_dynamic_code"),
    ],
)
def test_ctypes_may_only_load_what_was_built(line, check):
    assert check in failed(model(f"{line}\nreturn x", HEADER + "import ctypes\n"))


@pytest.mark.parametrize(
    "expr",
    [
        "torch.utils.cpp_extension.torch.softmax(x, -1)",
        "cpp_extension.torch.nn.functional.softmax(x, -1)",
        "torch.nn.functional.torch.exp(x)",
        "cpp_extension.verify_ninja_availability()",
    ],
)
def test_torch_reached_through_its_own_modules_is_judged_as_torch(expr):
    header = (
        HEADER + "import torch.utils.cpp_extension\nimport torch.nn.functional\nfrom torch.utils import cpp_extension\n"
    )
    assert "source_no_torch_compute" in failed(model(f"return {expr}", header))


_LOADER_HEADER = HEADER + "import ctypes\nfrom torch.utils.cpp_extension import load\n"
_BUILT = "so = load(name='k', sources=['k.cpp'], is_python_module=False)\n"


@pytest.mark.parametrize(
    "lines",
    [
        # libtorch_cpu is already loaded: its AOTInductor shim runs ATen kernels with no dispatcher.
        "name = 'libtorch' + '_cpu.so'\nlib = ctypes.CDLL(name)\n",
        _BUILT + "so = 'libtorch_cpu.so'\nlib = ctypes.CDLL(so)\n",
        "def opener(so):\n    return ctypes.CDLL(so)\n",
        "class Paths:\n    lib = 'libtorch_cpu.so'\nlib = ctypes.CDLL(Paths.lib)\n",
        "names = ['libtorch_cpu.so']\nlib = ctypes.CDLL(names[0])\n",
        "so, n = load(name='k', sources=['k.cpp']), 1\nlib = ctypes.CDLL(so)\n",
        "for so in ['libtorch_cpu.so']:\n    lib = ctypes.CDLL(so)\n",
        "lib = ctypes.CDLL(so := 'libtorch_cpu.so')\n",
        "lib = getattr(ctypes.cdll, 'libtorch_cpu.so')\n",
        "lib = ctypes.cdll['libtorch_cpu.so']\n",
        "opener = ctypes.CDLL\nlib = opener('libtorch_cpu.so')\n",
        "class Lib(ctypes.CDLL):\n    pass\n",
        _BUILT + "lib = ctypes.CDLL(so)\nother = type(lib)('libtorch_cpu.so')\n",
        "from ctypes import CDLL\nname = 'libtorch_cpu.so'\nlib = CDLL(name)\n",
    ],
)
def test_ctypes_loads_nothing_but_the_built_library(lines):
    assert "source_no_dynamic_code" in failed(model("return torch.empty_like(x)", _LOADER_HEADER + lines))


@pytest.mark.parametrize(
    "lines",
    [
        "lib = ctypes.CDLL(load(name='k', sources=['k.cpp'], is_python_module=False))\n",
        _BUILT + "lib = ctypes.cdll.LoadLibrary(so)\n",
        "def build():\n    so = load(name='k', sources=['k.cpp'], is_python_module=False)\n    return ctypes.CDLL(so)\n",
        "from ctypes import CDLL\n" + _BUILT + "lib = CDLL(so)\n",
    ],
)
def test_ctypes_may_load_the_built_library_however_spelled(lines):
    assert failed(model("return torch.empty_like(x)", _LOADER_HEADER + lines)) == set()


def test_ctypes_loading_the_built_library_is_allowed():
    source = HEADER + (
        "import ctypes\nfrom torch.utils.cpp_extension import load\n"
        "so = load(name='k', sources=['k.cpp'], is_python_module=False)\n"
        "lib = ctypes.CDLL(so)\n"
        "lib.run.argtypes = [ctypes.c_void_p, ctypes.c_long]\n"
        "\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n"
        "        out = torch.empty_like(x)\n        lib.run(ctypes.c_void_p(out.data_ptr()), x.numel())\n        return out\n"
    )
    assert failed(source) == set()


@pytest.mark.parametrize(
    "source, message",
    [
        ("def broken(:\n", "does not parse"),
        ("import torch\nclass Model2: pass\n", "defines no class ModelNew"),
        ("import torch.nn as nn\nclass ModelNew(nn.Module):\n    pass\n", "no forward"),
        (
            "import torch.nn as nn\nclass ModelNew(nn.Module):\n    def forward(self, x, y):\n        return x\n",
            "ModelNew.forward takes 2",
        ),
    ],
)
def test_missing_or_malformed_model_new(source, message):
    found = scan(source)["candidate_file"]
    assert found and message in str(found[0])


def test_every_scan_check_is_reported():
    assert set(scan(model("return torch.empty_like(x)"))) == set(SCAN_CHECKS)
