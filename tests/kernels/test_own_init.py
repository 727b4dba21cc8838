"""The task's own constructor as a candidate repeats it (kernels/harness/own_init.py): where the
playbook cannot replay how parameters were made, it keeps the reference's __init__, as
KernelBench candidates do, and says why when it cannot."""

from __future__ import annotations

import textwrap

import pytest

torch = pytest.importorskip("torch")


@pytest.fixture
def own_init(harness_script):
    return harness_script("kernels/harness/own_init.py").own_init


GEMM = '''
import torch
import torch.nn as nn
import torch.nn.functional as F

SCALE = 0.02
bias_shape = (128,)


class Model(nn.Module):
    """A Gemm, a bias of its own, a ReLU."""

    def __init__(self, in_features, out_features, bias_shape=bias_shape):
        super(Model, self).__init__()
        self.gemm = nn.Linear(in_features, out_features)  # a comment, dropped
        self.bias = nn.Parameter(torch.randn(bias_shape) * SCALE)
        self.act = F.relu

    def forward(self, x):
        return self.act(self.gemm(x) + self.bias)
'''


def test_the_constructor_is_repeated_with_what_it_reads(own_init):
    got = own_init(GEMM)
    assert got["body"] == [
        "super().__init__()",
        "self.gemm = nn.Linear(in_features, out_features)",
        "self.bias = nn.Parameter(torch.randn(bias_shape) * SCALE)",
        "self.act = F.relu",
    ]
    assert got["preamble"] == [
        "import torch.nn.functional as F",
        "SCALE = 0.02",
        "import torch.nn as nn",
        "import torch",
    ]


def test_the_repeated_constructor_makes_the_same_weights_from_the_same_seed(own_init):
    got = own_init(GEMM)
    ns: dict = {}
    exec(GEMM, ns)
    body = "\n".join("        " + line for line in got["body"])
    src = "\n".join(got["preamble"]) + (
        f"\n\nclass ModelNew(nn.Module):\n    def __init__(self, in_features, out_features, bias_shape):\n{body}\n"
    )
    mine: dict = {}
    exec(src, mine)
    torch.manual_seed(7)
    ref = ns["Model"](64, 128)
    torch.manual_seed(7)
    new = mine["ModelNew"](64, 128, (128,))
    assert ref.state_dict().keys() == new.state_dict().keys()
    assert all(torch.equal(a, b) for a, b in zip(ref.state_dict().values(), new.state_dict().values(), strict=True))


@pytest.mark.parametrize(
    "source, words",
    [
        ("x = 1\n", "no class Model"),
        ("class Model(Base):\n    pass\n", "derives from Base"),
        (
            "import torch.nn as nn\nfrom helpers import Block\nclass Model(nn.Module):\n"
            "    def __init__(self):\n        super().__init__()\n        self.b = Block()\n",
            "an import of helpers.Block",
        ),
        (
            "import torch.nn as nn\ndef block():\n    return nn.Linear(2, 2)\nclass Model(nn.Module):\n"
            "    def __init__(self):\n        super().__init__()\n        self.b = block()\n",
            "reads block",
        ),
        (
            "import torch.nn as nn\nN = len('abc')\nclass Model(nn.Module):\n"
            "    def __init__(self):\n        super().__init__()\n        self.l = nn.Linear(N, N)\n",
            "reads N",
        ),
        ("class Model(:\n", "does not parse"),
    ],
)
def test_what_cannot_be_repeated_says_why(own_init, source, words):
    got = own_init(textwrap.dedent(source))
    assert "body" not in got and words in got["why"], got


def test_a_model_without_a_constructor_has_nothing_to_repeat(own_init):
    got = own_init("import torch.nn as nn\nclass Model(nn.Module):\n    def forward(self, x):\n        return x\n")
    assert got == {"body": ["super().__init__()"], "preamble": []}
