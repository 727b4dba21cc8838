"""The playbook's choices: which template, over which space, and an honest "no template"."""

from __future__ import annotations

from pathlib import Path

import pytest

from assay.kernels import NoTemplate, TaskInfo, inspect_task, plan
from assay.kernels.patterns import recognise

from .conftest import load_module


def info(nodes, inputs, params=(), output=None, replays=True, steps=None):
    return TaskInfo.from_json(
        Path("synthetic.py"),
        {
            "graph": {"nodes": nodes, "output": output or [f"%n{len(nodes) - 1}"]},
            "inputs": list(inputs),
            "params": list(params),
            "init_inputs": [],
            "init_signature": [],
            "forward_signature": ["x"],
            "device": {"model": "test", "capability": "AVX2", "threads": 2},
            "init_recipe": {
                "steps": steps if steps is not None else [],
                "replays": replays,
                "symbols": {},
                "constants": {},
            },
        },
    )


X = {"shape": [64, 128], "dtype": "float32"}


CONV = {
    "op": "conv2d",
    "args": {"input": "%in0", "weight": "%p0", "bias": None, "stride": [2, 2], "padding": [1, 1], "dilation": [1, 1],
             "groups": 1},
    "shape": [1, 8, 16, 16],
    "dtype": "float32",
}  # fmt: skip
CONV_IN = [{"shape": [1, 3, 32, 32], "dtype": "float32"}]
CONV_W = {"name": "w", "shape": [8, 3, 3, 3], "dtype": "float32", "parameter": True}


def test_a_convolution_alone_has_nothing_to_fuse_and_says_so():
    res = plan(info([CONV], CONV_IN, [CONV_W]))
    assert isinstance(res, NoTemplate) and "conv2d alone" in res.reason


def test_a_convolution_with_an_epilogue_keeps_its_convolution_and_fuses_the_rest():
    from assay.kernels import render

    bias = {"name": "b", "shape": [8, 1, 1], "dtype": "float32", "parameter": True}
    nodes = [
        CONV,
        {"op": "relu", "args": {"input": "%n0"}, "shape": [1, 8, 16, 16], "dtype": "float32"},
        {
            "op": "add",
            "args": {"input": "%n1", "other": "%p1", "alpha": 1},
            "shape": [1, 8, 16, 16],
            "dtype": "float32",
        },
    ]
    res = plan(info(nodes, CONV_IN, [CONV_W, bias]))
    assert not isinstance(res, NoTemplate), res
    t = res[0].template
    assert t.kind == "conv" and t.spec["conv"]["options"]["stride"] == [2, 2]
    # The epilogue's operands: the convolution's output first, then the per-channel bias.
    assert [(leaf["ref"], leaf["kind"]) for leaf in t.spec["chain"]["leaves"]] == [("%conv", "full"), ("%p1", "row")]
    src = render(t, res[0].space.configs[0])
    # No module owns the weight here, so the functional op with the reference's arguments.
    assert "y = torch.nn.functional.conv2d(x, self.w, None, stride=[2, 2], padding=[1, 1]" in src
    assert "return _KERNEL(_variant, self._k, y, self.b)" in src
    # An op after the convolution that is not elementwise still names itself.
    pool = {"op": "max_pool2d", "args": {"input": "%n0"}, "shape": [1, 8, 8, 8], "dtype": "float32"}
    res = plan(info([CONV, pool], CONV_IN, [CONV_W]))
    assert isinstance(res, NoTemplate) and "max_pool2d" in res.reason


def test_other_dtypes_have_no_template():
    node = {"op": "relu", "args": {"input": "%in0"}, "shape": [64, 128], "dtype": "float16"}
    res = plan(info([node], [{"shape": [64, 128], "dtype": "float16"}]))
    assert isinstance(res, NoTemplate) and "float16" in res.reason


def test_unreproducible_init_has_no_template():
    node = {"op": "add", "args": {"input": "%in0", "other": "%p0", "alpha": 1}, "shape": [64, 128], "dtype": "float32"}
    res = plan(info([node], [X], [{"name": "b", "shape": [128], "dtype": "float32", "parameter": True}], replays=False))
    assert isinstance(res, NoTemplate) and "initialisation" in res.reason


def test_softmax_over_another_dim_takes_the_dim_template_which_triton_lacks():
    node = {"op": "softmax", "args": {"input": "%in0", "dim": 0, "dtype": None}, "shape": [64, 128], "dtype": "float32"}
    res = plan(info([node], [X]))
    assert not isinstance(res, NoTemplate) and res[0].template.kind == "dimreduce", res
    res = plan(info([node], [X]), backend="triton")
    assert isinstance(res, NoTemplate) and "no triton template for softmax over a dim" in res.reason


def test_broadcast_over_a_middle_dim_is_declined():
    x = {"shape": [4, 8, 16], "dtype": "float32"}
    y = {"shape": [4, 1, 16], "dtype": "float32"}
    node = {"op": "mul", "args": {"input": "%in0", "other": "%in1"}, "shape": [4, 8, 16], "dtype": "float32"}
    res = plan(info([node], [x, y]))
    assert isinstance(res, NoTemplate) and "middle dimension" in res.reason


def test_elementwise_chain_leaf_kinds():
    x = {"shape": [4, 8, 16], "dtype": "float32"}
    nodes = [
        {"op": "mul", "args": {"input": "%in0", "other": "%p0"}, "shape": [4, 8, 16], "dtype": "float32"},
        {"op": "add", "args": {"input": "%n0", "other": "%p1", "alpha": 1}, "shape": [4, 8, 16], "dtype": "float32"},
        {"op": "gelu", "args": {"input": "%n1", "approximate": "tanh"}, "shape": [4, 8, 16], "dtype": "float32"},
    ]
    params = [
        {"name": "s", "shape": [8, 1], "dtype": "float32", "parameter": True},
        {"name": "b", "shape": [16], "dtype": "float32", "parameter": True},
    ]
    pat = recognise(info(nodes, [x], params))
    assert pat.kind == "elementwise"
    kinds = [(leaf["ref"], leaf["kind"]) for leaf in pat.spec["chain"]["leaves"]]
    assert kinds == [("%in0", "full"), ("%p0", "row"), ("%p1", "tail")]
    assert [op["fn"] for op in pat.spec["chain"]["ops"]] == ["mul", "add", "gelu"]


def test_selu_is_elu_with_atens_constants():
    nodes = [{"op": "selu", "args": {"input": "%in0"}, "shape": [64, 128], "dtype": "float32"}]
    pat = recognise(info(nodes, [X]))
    assert pat.kind == "elementwise" and [op["fn"] for op in pat.spec["chain"]["ops"]] == ["elu"]
    # alpha, scale, input_scale: the values ATen's selu uses.
    consts = [c["value"] for c in pat.spec["chain"]["consts"]]
    assert consts == pytest.approx([1.6732632423543772, 1.0507009873554805, 1.0], rel=1e-15)


def test_rmsnorm_written_out_is_a_row_reduction():
    nodes = [
        {"op": "pow", "args": {"input": "%in0", "exponent": 2}, "shape": [64, 128], "dtype": "float32"},
        {
            "op": "mean",
            "args": {"input": "%n0", "dim": [-1], "keepdim": True, "dtype": None},
            "shape": [64, 1],
            "dtype": "float32",
        },
        {"op": "add", "args": {"input": "%n1", "other": 1e-6, "alpha": 1}, "shape": [64, 1], "dtype": "float32"},
        {"op": "rsqrt", "args": {"input": "%n2"}, "shape": [64, 1], "dtype": "float32"},
        {"op": "mul", "args": {"input": "%in0", "other": "%n3"}, "shape": [64, 128], "dtype": "float32"},
        {"op": "mul", "args": {"input": "%n4", "other": "%p0"}, "shape": [64, 128], "dtype": "float32"},
    ]
    pat = recognise(info(nodes, [X], [{"name": "w", "shape": [128], "dtype": "float32", "parameter": True}]))
    assert pat.kind == "rowreduce" and pat.spec["op"] == "rms_norm" and pat.spec["weight"] == "%p0"
    assert pat.spec["consts"] == [{"value": 1e-6, "path": "2.other"}]
    # mean over a different dim is not RMSNorm
    nodes[1] = {**nodes[1], "args": {**nodes[1]["args"], "dim": [0]}}
    assert isinstance(
        plan(info(nodes, [X], [{"name": "w", "shape": [128], "dtype": "float32", "parameter": True}])), NoTemplate
    )


def test_linear_epilogue_starts_with_the_bias():
    nodes = [
        {
            "op": "linear",
            "args": {"input": "%in0", "weight": "%p0", "bias": "%p1"},
            "shape": [64, 32],
            "dtype": "float32",
        },
        {"op": "relu", "args": {"input": "%n0"}, "shape": [64, 32], "dtype": "float32"},
    ]
    params = [
        {"name": "l.weight", "shape": [32, 128], "dtype": "float32", "parameter": True},
        {"name": "l.bias", "shape": [32], "dtype": "float32", "parameter": True},
    ]
    pat = recognise(info(nodes, [X], params))
    assert pat.kind == "matmul" and pat.spec["layout"] == "nk"
    chain = pat.spec["chain"]
    assert chain["ops"] == [{"fn": "add", "x": ["A", "L0"], "attr": {}}, {"fn": "relu", "x": ["V0"], "attr": {}}]
    assert chain["leaves"][0]["ref"] == "%p1" and chain["leaves"][0]["kind"] == "tail" and chain["out"] == "V1"


def test_a_real_task_without_template_ends_in_no_candidate(ksb, task_dir):
    task = task_dir / "cumsum.py"
    task.write_text(
        "import torch\nimport torch.nn as nn\n\nN = 33\n\n\nclass Model(nn.Module):\n"
        "    def forward(self, x):\n        return torch.cumsum(x, dim=1)\n\n\n"
        "def get_inputs():\n    return [torch.randn(N, N)]\n\n\ndef get_init_inputs():\n    return []\n"
    )
    res = plan(inspect_task(ksb, task))
    assert isinstance(res, NoTemplate) and "cumsum" in res.reason


def test_tanh_of_softplus_renders_as_the_fused_function():
    """mish written out (x * tanh(softplus(x))) uses the fused tanh(softplus) of vecmath.h, and the
    C++ the plan renders says so; softplus alone keeps its own function."""
    sp = {
        "op": "softplus",
        "args": {"input": "%in0", "beta": 1.0, "threshold": 20.0},
        "shape": [64, 128],
        "dtype": "float32",
    }
    tanh = {"op": "tanh", "args": {"input": "%n0"}, "shape": [64, 128], "dtype": "float32"}
    mul = {"op": "mul", "args": {"input": "%in0", "other": "%n1"}, "shape": [64, 128], "dtype": "float32"}
    from assay.kernels import render

    def body(nodes):
        p = plan(info(nodes, [X]))[0]
        return [line.strip() for line in render(p.template, p.space.configs[0]).splitlines() if "const vf v" in line]

    # Two instances of the loop: beta and threshold as the task's values, taken when the run-time
    # ones equal them, and as run-time floats for any other.
    one, twenty = "0x1.0000000000000p+0f", "0x1.4000000000000p+4f"
    mish = body([sp, tanh, mul])
    assert mish[1:3] == [f"const vf v1 = vtanh_softplus(x0, {one}, {twenty});", "const vf v2 = (x0 * v1);"]
    assert mish[4:] == ["const vf v1 = vtanh_softplus(x0, k0, k1);", "const vf v2 = (x0 * v1);"]
    assert body([sp]) == [f"const vf v0 = vsoftplus(x0, {one}, {twenty});", "const vf v0 = vsoftplus(x0, k0, k1);"]


def test_constants_other_than_the_rendered_ones_take_the_general_loop(ksb, task_dir, monkeypatch, tmp_path):
    """The literal instance is taken only when the run-time constants equal it: a model built with
    another beta (its constructor's argument) still computes its own softplus."""
    import torch

    from assay.kernels import inspect_task, render

    task = task_dir / "softplus_beta.py"
    task.write_text(
        "import torch\nimport torch.nn as nn\n\nN = 4096\n\n\nclass Model(nn.Module):\n"
        "    def __init__(self, beta: float = 1.0):\n        super().__init__()\n        self.sp = nn.Softplus(beta=beta, threshold=20.0)\n\n"
        "    def forward(self, x):\n        return self.sp(x)\n\n\n"
        "def get_inputs():\n    return [torch.randn(N) * 4]\n\n\ndef get_init_inputs():\n    return [1.0]\n"
    )
    p = plan(inspect_task(ksb, task))[0]
    assert "K[0] == 0x1.0000000000000p+0f" in render(p.template, p.space.configs[0])
    monkeypatch.setenv("ASSAY_KERNEL_BUILD_DIR", str(tmp_path / "build"))
    cand = task_dir / "softplus_beta_new.py"
    cand.write_text(render(p.template, p.space.configs[0]))
    ref, new = load_module("sp_task", task), load_module("sp_cand", cand)
    x = torch.randn(4096) * 4
    for beta in (1.0, 2.5, 0.5):
        want = ref.Model(beta)(x)
        got = new.ModelNew(beta)(x)
        assert torch.allclose(got, want, rtol=1e-5, atol=1e-6), (beta, (got - want).abs().max())
    # The constructor as the task wrote it, default and annotation included: a task whose
    # get_init_inputs() leaves beta out builds ModelNew() the same way.
    assert "def __init__(self, beta: float = 1.0):" in cand.read_text()
    assert torch.allclose(new.ModelNew()(x), ref.Model()(x), rtol=1e-5, atol=1e-6)


def test_weights_made_in_a_way_the_recipe_cannot_replay_come_from_the_tasks_own_constructor(
    ksb, task_dir, monkeypatch, tmp_path
):
    """randn * 0.1 + 1 after a submodule: no replay recipe matches it, so the candidate keeps
    the task's constructor (as KernelBench candidates do) and the same seed gives both the same
    weights."""
    import torch

    from assay.kernels import render

    task = task_dir / "own_init_scale.py"
    task.write_text(
        "import torch\nimport torch.nn as nn\n\nC = 64\n\n\nclass Model(nn.Module):\n"
        "    def __init__(self, channels: int = C):\n        super(Model, self).__init__()\n"
        "        self.act = nn.SiLU()\n        self.scale = nn.Parameter(torch.randn(channels) * 0.1 + 1.0)\n\n"
        "    def forward(self, x):\n        return self.act(x) * self.scale\n\n\n"
        "def get_inputs():\n    return [torch.randn(32, C)]\n\n\ndef get_init_inputs():\n    return []\n"
    )
    inspected = inspect_task(ksb, task)
    assert not inspected.init_recipe["replays"] and "body" in inspected.own_init
    p = plan(inspected)[0]
    monkeypatch.setenv("ASSAY_KERNEL_BUILD_DIR", str(tmp_path / "build"))
    cand = task_dir / "own_init_scale_new.py"
    cand.write_text(render(p.template, p.space.configs[0]))
    assert "self.scale = nn.Parameter(torch.randn(channels) * 0.1 + 1.0)" in cand.read_text()

    ref, new = load_module("own_task", task), load_module("own_cand", cand)
    torch.manual_seed(3)
    want_model = ref.Model()
    torch.manual_seed(3)
    got_model = new.ModelNew()
    assert torch.equal(want_model.scale, got_model.scale)
    x = torch.randn(32, 64)
    assert torch.allclose(got_model(x), want_model(x), rtol=1e-5, atol=1e-6)


def test_layer_norm_over_several_trailing_dims_is_one_row_each(ksb, task_dir, monkeypatch, tmp_path):
    """KernelBench's LayerNorm normalises over the last three dims: each row is their product, and
    the (3-D) weight and bias lie along it in the same order."""
    import torch

    from assay.kernels import render

    task = task_dir / "layernorm3.py"
    task.write_text(
        "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
        "    def __init__(self, normalized_shape: tuple):\n        super().__init__()\n"
        "        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)\n\n"
        "    def forward(self, x):\n        return self.ln(x)\n\n\n"
        "def get_inputs():\n    return [torch.randn(4, 8, 16, 32)]\n\n\n"
        "def get_init_inputs():\n    return [(8, 16, 32)]\n"
    )
    p = plan(inspect_task(ksb, task))
    assert not isinstance(p, NoTemplate), p.reason
    assert p[0].template.kind == "rowreduce" and p[0].template.spec["row_dims"] == 3
    monkeypatch.setenv("ASSAY_KERNEL_BUILD_DIR", str(tmp_path / "build"))
    cand = task_dir / "layernorm3_new.py"
    cand.write_text(render(p[0].template, p[0].space.configs[0]))

    ref, new = load_module("ln3_task", task), load_module("ln3_cand", cand)
    torch.manual_seed(5)
    want_model = ref.Model((8, 16, 32))
    torch.manual_seed(5)
    got_model = new.ModelNew((8, 16, 32))
    with torch.no_grad():  # weights other than ones and zeros, so their layout is tested too
        for a, b in zip(want_model.parameters(), got_model.parameters(), strict=True):
            a.copy_(torch.randn_like(a))
            b.copy_(a)
    x = torch.randn(4, 8, 16, 32)
    assert torch.allclose(got_model(x), want_model(x), rtol=1e-4, atol=1e-5)


def test_a_norm_over_leading_dims_says_so():
    x = {"shape": [4, 8, 16], "dtype": "float32"}
    nodes = [
        {
            "op": "layer_norm",
            "args": {"input": "%in0", "normalized_shape": [4, 8]},
            "shape": [4, 8, 16],
            "dtype": "float32",
        }
    ]
    res = plan(info(nodes, [x]))
    assert isinstance(res, NoTemplate) and "not trailing dims" in res.reason


def _ctor(names, params):
    from assay.kernels.candidate import ctor_signature

    i = info([], [X])
    i.init_signature, i.init_params = names, params
    return ctor_signature(i, {"self", "_init"})


def test_constructor_signatures_keep_defaults_annotations_and_keyword_only_parameters():
    p = [
        {"name": "in_features", "keyword_only": False, "default": None, "annotation": "int"},
        {"name": "bias", "keyword_only": False, "default": "True", "annotation": "bool"},
        {"name": "eps", "keyword_only": True, "default": "1e-05", "annotation": None},
    ]
    sig, args = _ctor(["in_features", "bias", "eps"], p)
    assert (sig, args) == ("in_features: int, bias: bool = True, *, eps=1e-05", "(in_features, bias, eps)")
    ns: dict = {}
    exec(f"def ctor(self, {sig}):\n    return {args}", ns)
    assert ns["ctor"](None, 3) == (3, True, 1e-05) and ns["ctor"](None, 3, False, eps=0.1) == (3, False, 0.1)
    # A default no literal can write (a module, say) is left out, and so is every default before
    # a required parameter: the signature must still be valid Python.
    p = [
        {"name": "act", "keyword_only": False, "default": None, "annotation": None},
        {"name": "dim", "keyword_only": False, "default": "1", "annotation": "int"},
    ]
    assert _ctor(["act", "dim"], p) == ("act, dim: int = 1", "(act, dim)")
    p = [
        {"name": "dim", "keyword_only": False, "default": "1", "annotation": None},
        {"name": "act", "keyword_only": False, "default": None, "annotation": None},
    ]
    assert _ctor(["dim", "act"], p) == ("dim, act", "(dim, act)")
    assert _ctor(["dim"], None) == ("dim", "(dim,)")  # an older inspection: names only
    assert _ctor(None, None) == ("*args", "args")


def test_large_outputs_write_with_streaming_stores_only():
    """The tuner's one-call-per-flush timing does not charge plain stores' write-back, the
    verifier's back-to-back rounds do: from 8 MB of output the choice is not left to the tuner."""
    from assay.kernels.cpp_templates import STREAM_ONLY_BYTES, elementwise_space, rowreduce_space

    big = rowreduce_space("softmax", 4096 * 1024 * 4)
    assert big and {c["nt"] for c in big} == {1}
    assert {c["alg"] for c in big} == {0, 1, 2} and {c["unroll"] for c in big} == {1, 2, 4}
    small = rowreduce_space("softmax", STREAM_ONLY_BYTES - 4)
    assert {c["nt"] for c in small} == {0, 1} and len(small) == 2 * len(big)
    big, small = elementwise_space(STREAM_ONLY_BYTES), elementwise_space(STREAM_ONLY_BYTES - 4)
    assert {c["nt"] for c in big} == {1} and {c["nt"] for c in small} == {0, 1} and len(small) == 2 * len(big)
    # What the playbook asks for, by the output's size (the suite's elementwise tasks write 16 MB).
    from assay.kernels.playbook import space_for

    for shape, want in (([2048, 2048], big), ([64, 128], small)):
        relu = {"op": "relu", "args": {"input": "%in0"}, "shape": shape, "dtype": "float32"}
        assert space_for(plan(info([relu], [{"shape": shape, "dtype": "float32"}]))[0].template) == want
