"""The cpp candidate's Python entry: one C call that checks the operands, shapes and allocates
the output, and runs the chosen variant.

Why C and not the forward's Python: the benchmark and the tuner flush the last-level cache
before each call, which evicts the interpreter too, and there every Python statement of a
forward cost 2-7 us. The forward that computed dims in Python and called the kernel through
ctypes spent about 45 us around a 48 us ReLU (eager: about 10 us around its own loop), so the
single activations read 0.63-0.71x eager while their kernels were faster than eager's. This
entry costs about what eager's dispatch does (bench/RESULTS.md, "Corpus").

It is built with the kernel, in the same translation unit, against the few torch headers a
tensor's metadata and its allocation need (about 1 s of the build; ATen/core/Tensor.h costs
2.7 s, torch/extension.h 10-18 s): the tensor is read from torch's THPVariable layout, which the module checks
against torch's own wrapping when it is imported. The verifier judges its symbols as any
extension's: tensor metadata, allocation (at::detail::empty_cpu: torch.empty's own CPU
allocation, no kernel), THPVariable_Wrap.
"""

from __future__ import annotations

from assay.kernels.pointwise import Chain

HEAD = """#include <Python.h>
#include <ATen/core/TensorBase.h>
#include <ATen/EmptyTensor.h>
#include <vector>
"""

_COMMON = r"""
// ---- the Python entry ------------------------------------------------------------------
struct AssayTensorObject { PyObject_HEAD at::TensorBase cdata; };  // torch's THPVariable, as it begins
PyObject* THPVariable_Wrap(at::TensorBase&& var);
extern PyObject* THPVariableClass;

typedef std::vector<int64_t> Shape;
// Product of shape[a:b] with Python's slice rules (b == ASSAY_END: to the end).
static const long ASSAY_END = 1L << 62;
static int64_t sprod(const Shape& s, long a, long b) {
  const long n = (long)s.size();
  if (a < 0) a = a + n < 0 ? 0 : a + n;
  if (b < 0) b = b + n < 0 ? 0 : b + n;
  if (a > n) a = n;
  if (b > n) b = n;
  int64_t p = 1;
  for (long i = a; i < b; ++i) p *= s[i];
  return p;
}
static int64_t gcd64(int64_t a, int64_t b) { while (b) { int64_t t = a % b; a = b; b = t; } return a < 0 ? -a : a; }
static Shape shape_of(const at::TensorBase& t) { return Shape(t.sizes().begin(), t.sizes().end()); }

// Fills out_shape, dims and out_dtype from the operands; returns a message when they do not fit.
static const char* assay_shapes(const at::TensorBase* const* ts, Shape& out_shape, long* dims, c10::ScalarType& out_dtype);

static PyObject* assay_call(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 2 + ASSAY_NIN) {
    PyErr_Format(PyExc_TypeError, "the kernel takes %d tensors, got %d", ASSAY_NIN, (int)nargs - 2);
    return nullptr;
  }
  const long v = PyLong_AsLong(args[0]);
  if (v == -1 && PyErr_Occurred()) return nullptr;
  if (v < 0 || v >= assay_variant_count()) {
    PyErr_Format(PyExc_RuntimeError, "kernel variant %ld does not exist", v);
    return nullptr;
  }
  // The constants: a tuple of floats (the constructor's, fixed once per module).
  float K[ASSAY_MAX_CONSTS];
  if (!PyTuple_Check(args[1]) || PyTuple_GET_SIZE(args[1]) > ASSAY_MAX_CONSTS) {
    PyErr_SetString(PyExc_TypeError, "the kernel's constants are a tuple of at most 64 floats");
    return nullptr;
  }
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(args[1]); ++i) {
    K[i] = (float)PyFloat_AsDouble(PyTuple_GET_ITEM(args[1], i));
    if (PyErr_Occurred()) return nullptr;
  }
  const at::TensorBase* ts[ASSAY_NIN > 0 ? ASSAY_NIN : 1];
  for (int i = 0; i < ASSAY_NIN; ++i) {
    PyObject* o = args[2 + i];
    if (Py_TYPE(o) != (PyTypeObject*)THPVariableClass) {
      const int is = PyObject_IsInstance(o, THPVariableClass);
      if (is < 0) return nullptr;
      if (!is) { PyErr_SetString(PyExc_TypeError, "this kernel takes tensors"); return nullptr; }
    }
    const at::TensorBase& t = reinterpret_cast<AssayTensorObject*>(o)->cdata;
    if (!t.defined() || t.scalar_type() != c10::kFloat || !t.device().is_cpu() || !t.is_contiguous()) {
      PyErr_SetString(PyExc_ValueError, "this kernel takes contiguous float32 CPU tensors");
      return nullptr;
    }
    ts[i] = &t;
  }
  try {
    Shape shape;
    long dims[ASSAY_NDIMS > 0 ? ASSAY_NDIMS : 1] = {0};
    c10::ScalarType dtype = c10::kFloat;
    if (const char* why = assay_shapes(ts, shape, dims, dtype)) {
      PyErr_SetString(PyExc_ValueError, why);
      return nullptr;
    }
#if ASSAY_INPLACE
    // The first operand is the candidate's own intermediate (a convolution's output, made in
    // this forward): the epilogue overwrites it instead of touching fresh memory.
    if (shape_of(*ts[0]) != shape || ts[0]->scalar_type() != dtype) {
      PyErr_SetString(PyExc_ValueError, "the operand written in place does not have the output's shape");
      return nullptr;
    }
    at::TensorBase out = *ts[0];
#else
    at::TensorBase out = at::detail::empty_cpu(shape, dtype, false, std::nullopt);
#endif
    void* ptrs[1 + (ASSAY_NIN > 0 ? ASSAY_NIN : 1)];
    ptrs[0] = out.mutable_data_ptr();
    for (int i = 0; i < ASSAY_NIN; ++i) ptrs[1 + i] = const_cast<void*>(ts[i]->const_data_ptr());
    Py_BEGIN_ALLOW_THREADS
    assay_kernel((int)v, ptrs, dims, K);
    Py_END_ALLOW_THREADS
    return THPVariable_Wrap(std::move(out));
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return nullptr;
  }
}

static PyMethodDef ASSAY_METHODS[] = {
  {"call", (PyCFunction)(void (*)(void))assay_call, METH_FASTCALL, "call(variant, consts, *tensors)"},
  {"variant_count", [](PyObject*, PyObject*) -> PyObject* { return PyLong_FromLong(assay_variant_count()); },
   METH_NOARGS, "how many configurations this library holds"},
  {nullptr, nullptr, 0, nullptr}};
static struct PyModuleDef ASSAY_MODULE = {PyModuleDef_HEAD_INIT, "assay_kernel", nullptr, -1, ASSAY_METHODS,
                                          nullptr, nullptr, nullptr, nullptr};

// The module's PyInit_ function is one line the candidate adds when it builds, since its name
// holds the hash of this source.
static PyObject* assay_init(const char* name) {
  ASSAY_MODULE.m_name = name;
  // The entry reads tensors through torch's object layout: check it against torch's own wrap.
  try {
    at::TensorBase probe = at::detail::empty_cpu({1}, c10::kFloat, false, std::nullopt);
    const void* data = probe.const_data_ptr();
    PyObject* wrapped = THPVariable_Wrap(std::move(probe));
    if (!wrapped) return nullptr;
    const bool same = reinterpret_cast<AssayTensorObject*>(wrapped)->cdata.const_data_ptr() == data;
    Py_DECREF(wrapped);
    if (!same) {
      PyErr_SetString(PyExc_ImportError, "this torch's tensor objects are laid out differently; rebuild the candidate");
      return nullptr;
    }
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_ImportError, e.what());
    return nullptr;
  }
  return PyModule_Create(&ASSAY_MODULE);
}
"""


def _slice(lo: int | None, hi: int | None, of: str = "s") -> str:
    return f"sprod({of}, {0 if lo is None else lo}, {'ASSAY_END' if hi is None else hi})"


def _elementwise(spec: dict) -> tuple[int, list[str], int]:
    chain = Chain.from_json(spec["chain"])
    leaves = chain.leaves
    full = next(j for j, leaf in enumerate(leaves) if leaf["kind"] == "full")
    lines = [
        f"const Shape s = shape_of(*ts[{full}]);",
        "out_shape = s;",
        "const int64_t numel = sprod(s, 0, ASSAY_END);",
    ]
    runs = []
    for j, leaf in enumerate(leaves):
        if leaf["kind"] == "full":
            lines.append(f'if (ts[{j}]->numel() != numel) return "operands of different sizes";')
        elif leaf["kind"] == "scalar":
            lines.append(f'if (ts[{j}]->numel() != 1) return "a one-element operand of another size";')
        elif leaf["kind"] == "tail":
            runs.append(_slice(leaf["a"], None))
            lines.append(
                f'if (ts[{j}]->numel() != {_slice(leaf["a"], None)}) return "a broadcast operand of the wrong size";'
            )
        elif leaf["kind"] == "row":
            runs.append(_slice(leaf["b"], None))
            lines.append(
                f'if (ts[{j}]->numel() != {_slice(leaf["a"], leaf["b"])}) return "a broadcast operand of the wrong size";'
            )
    lines.append(f"const int64_t runs[] = {{{', '.join(runs) or '0'}}};")
    lines.append(
        f"int64_t seg = {'0' if runs else 'numel'};"
        + (f" for (int k = 0; k < {len(runs)}; ++k) seg = gcd64(seg, runs[k]);" if runs else "")
    )
    lines.append("if (seg < 1) seg = 1;")
    lines.append("dims[0] = (long)numel; dims[1] = (long)seg;")
    d, k = 2, 0
    for leaf in leaves:
        if leaf["kind"] == "tail":
            lines.append(f"dims[{d}] = (long)runs[{k}];")
            d, k = d + 1, k + 1
        elif leaf["kind"] == "row":
            lines.append(f"dims[{d}] = (long)(runs[{k}] / seg); dims[{d + 1}] = (long){_slice(leaf['a'], leaf['b'])};")
            d, k = d + 2, k + 1
    return len(leaves), lines, d


def _rowreduce(spec: dict) -> tuple[int, list[str], int]:
    nin = 1 + sum(1 for k in ("weight", "bias") if spec.get(k))
    lines = [
        "const Shape s = shape_of(*ts[0]);",
        "out_shape = s;",
        f"const int64_t cols = {_slice(-int(spec.get('row_dims', 1)), None)};",
        "const int64_t c1 = cols > 1 ? cols : 1;",
    ]
    for j in range(1, nin):
        lines.append(f'if (ts[{j}]->numel() != cols) return "a weight or bias of the wrong size";')
    lines.append("dims[0] = (long)(ts[0]->numel() / c1); dims[1] = (long)cols;")
    return nin, lines, 2


def _matmul(spec: dict) -> tuple[int, list[str], int]:
    chain = Chain.from_json(spec["chain"])
    kn = spec["layout"] != "nk"
    lines = [
        'if (ts[0]->dim() < 1 || ts[1]->dim() != 2) return "the matmul takes a matrix and a 2-D weight";',
        "const int64_t k = ts[0]->size(-1);",
        f"const int64_t n = ts[1]->size({1 if kn else 0});",
        f'if (ts[1]->size({0 if kn else 1}) != k) return "the operands\' inner sizes differ";',
        "Shape s = shape_of(*ts[0]); s.back() = n; out_shape = s;",
        "dims[0] = (long)(ts[0]->numel() / (k > 1 ? k : 1)); dims[1] = (long)n; dims[2] = (long)k;",
    ]
    d = 3
    for j, leaf in enumerate(chain.leaves, start=2):
        if leaf["kind"] == "full":
            lines.append(f'if (ts[{j}]->numel() != sprod(s, 0, ASSAY_END)) return "an operand of the wrong size";')
        elif leaf["kind"] == "scalar":
            lines.append(f'if (ts[{j}]->numel() != 1) return "a one-element operand of another size";')
        elif leaf["kind"] == "tail":
            lines.append(f"dims[{d}] = (long){_slice(leaf['a'], None)};")
            lines.append(f'if (ts[{j}]->numel() != dims[{d}]) return "a bias of the wrong size";')
            d += 1
        elif leaf["kind"] == "row":
            lines.append(
                f"dims[{d}] = (long)sprod(s, {leaf['b']}, -1); dims[{d + 1}] = (long){_slice(leaf['a'], leaf['b'])};"
            )
            lines.append(f'if (ts[{j}]->numel() != dims[{d + 1}]) return "a bias of the wrong size";')
            d += 2
    return 2 + len(chain.leaves), lines, d


def _dimreduce(spec: dict) -> tuple[int, list[str], int]:
    from assay.kernels.dimreduce import NORM_OPS

    dim = int(spec["dim"])
    if spec["op"] in NORM_OPS:
        kept = "s[d]"
        keep = True
    else:
        kept, keep = "1", bool(spec["keepdim"])
    lines = [
        "const Shape s = shape_of(*ts[0]);",
        f"const long d = {dim};",
        'if (d < 0 || d >= (long)s.size()) return "the tensor has fewer dimensions than the task";',
        "out_shape.assign(s.begin(), s.begin() + d);",
        f"out_shape.push_back({kept});" if keep else "",
        "out_shape.insert(out_shape.end(), s.begin() + d + 1, s.end());",
        f"out_dtype = {'c10::kLong' if spec['out_dtype'] == 'int64' else 'c10::kFloat'};",
        "dims[0] = (long)sprod(s, 0, d); dims[1] = (long)s[d]; dims[2] = (long)sprod(s, d + 1, ASSAY_END);",
    ]
    return 1, [line for line in lines if line], 3


# conv: its epilogue is an elementwise kernel whose first operand is the convolution's output,
# which it overwrites (INPLACE).
INPLACE = ("conv",)
KINDS = {
    "elementwise": _elementwise,
    "conv": _elementwise,
    "rowreduce": _rowreduce,
    "matmul": _matmul,
    "dimreduce": _dimreduce,
}


def entry_source(kind: str, spec: dict) -> str:
    """C++ to append to a template's source: its shapes function and the Python module."""
    nin, lines, ndims = KINDS[kind](spec)
    body = "\n  ".join(lines)
    return (
        f"\nstatic const int ASSAY_NIN = {nin}, ASSAY_NDIMS = {ndims}, ASSAY_MAX_CONSTS = 64;\n"
        f"#define ASSAY_INPLACE {int(kind in INPLACE)}\n"
        + _COMMON
        + f"""
static const char* assay_shapes(const at::TensorBase* const* ts, Shape& out_shape, long* dims, c10::ScalarType& out_dtype) {{
  (void)out_dtype;
  {body}
  return nullptr;
}}
"""
    )
