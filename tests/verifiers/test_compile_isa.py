"""The verifier harness's torch.compile skips inductor's build-and-load probes of the CPU's vector
ISAs when the compiler accepts each ISA's flags (worker.compile_model, trust_cpu_vec_isas), and
still compiles what inductor would have compiled without the shortcut."""

from __future__ import annotations

import dataclasses
import platform
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "verifiers" / "kernel" / "harness"))
import worker  # noqa: E402
from torch._inductor import config, cpu_vec_isa  # noqa: E402

pytestmark = pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="the shortcut is x86-only")


@pytest.fixture
def inductor(tmp_path, monkeypatch):
    """A fresh inductor cache and vec-ISA state for the test, restored after it."""
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    monkeypatch.setattr(config.cpp, "vec_isa_ok", None)
    cpu_vec_isa.valid_vec_isa_list.cache_clear()
    torch._dynamo.reset()
    yield
    cpu_vec_isa.valid_vec_isa_list.cache_clear()
    torch._dynamo.reset()


def test_the_trusted_list_picks_the_isa_the_probes_pick(inductor):
    worker.trust_cpu_vec_isas()
    assert config.cpp.vec_isa_ok is True
    trusted = str(cpu_vec_isa.pick_vec_isa())
    config.cpp.vec_isa_ok = None
    cpu_vec_isa.valid_vec_isa_list.cache_clear()
    assert str(cpu_vec_isa.pick_vec_isa()) == trusted  # inductor's own probes, built and loaded


def test_a_flag_the_compiler_refuses_keeps_the_probes(inductor, monkeypatch, tmp_path):
    refuses = tmp_path / "cxx"
    refuses.write_text("#!/bin/sh\nexit 1\n")
    refuses.chmod(0o755)
    monkeypatch.setattr("torch._inductor.cpp_builder.get_cpp_compiler", lambda: str(refuses))
    worker.trust_cpu_vec_isas()
    assert config.cpp.vec_isa_ok is None


@dataclasses.dataclass
class Unbuildable(cpu_vec_isa.VecAVX2):
    """An ISA the CPU lists (it calls itself avx2) whose flags no compiler takes."""

    _arch_flags = "-mno-such-vector-isa"
    marker: int = 1

    def __hash__(self):
        return hash("unbuildable")


@pytest.mark.slow
def test_a_compile_that_fails_on_the_trusted_list_is_compiled_again_with_the_probes(inductor, monkeypatch):
    monkeypatch.setattr(cpu_vec_isa, "supported_vec_isa_list", [Unbuildable(), *cpu_vec_isa.supported_vec_isa_list])
    config.cpp.vec_isa_ok = True  # as if the compiler check had passed
    model = torch.nn.Softmax(dim=1)
    x = torch.randn(8, 64)
    compiled, out = worker.compile_model(torch, model, [x])
    assert config.cpp.vec_isa_ok is None  # set back only by the failed first compile
    assert not isinstance(cpu_vec_isa.pick_vec_isa(), Unbuildable)  # the probes left it out
    torch.testing.assert_close(out, model(x))
    torch.testing.assert_close(compiled(x), model(x))
