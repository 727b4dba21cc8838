"""Where the timed candidate's CPU time goes (harness/sampler.cpp, worker.Sampler,
verifiers/kernel/samples.py).

A kernel of torch's reached by address (tests/verifiers/cheats/ref_aoti_by_address.py walks
the dynamic linker's tables to the AOTInductor shim) passes the op recorder, CtypesWatch and
the symbol check; its time in libtorch_cpu is what gives it away. Each sampling run is its own
process: the sampler installs a SIGPROF handler for good, and some tests break it on purpose."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
HARNESS = Path(__file__).resolve().parents[2] / "verifiers" / "kernel" / "harness"

from assay.verifiers.kernel import samples as ks  # noqa: E402
from assay.verifiers.kernel.criteria import load_criteria  # noqa: E402
from assay.verifiers.kernel.judge import Checks  # noqa: E402

KERNEL = r"""
#include <math.h>
extern "C" void own_softmax(const float* x, float* y, long rows, long cols) {
  #pragma omp parallel for
  for (long r = 0; r < rows; ++r) {
    const float* a = x + r * cols; float* b = y + r * cols; float m = a[0], s = 0.f;
    for (long c = 0; c < cols; ++c) m = a[c] > m ? a[c] : m;
    for (long c = 0; c < cols; ++c) { b[c] = expf(a[c] - m); s += b[c]; }
    for (long c = 0; c < cols; ++c) b[c] /= s;
  }
}
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict:
    if shutil.which("g++") is None:
        pytest.skip("g++ is needed to build the sampler")
    folder = tmp_path_factory.mktemp("sampler")
    (folder / "k.cpp").write_text(KERNEL)
    subprocess.run(
        ["g++", "-O2", "-fPIC", "-shared", str(HARNESS / "sampler.cpp"), "-o", str(folder / "sampler.so"), "-lrt"],
        check=True,
    )
    subprocess.run(
        ["g++", "-O2", "-fPIC", "-shared", "-fopenmp", str(folder / "k.cpp"), "-o", str(folder / "libk.so")], check=True
    )
    return {"sampler": str(folder / "sampler.so"), "kernel": str(folder / "libk.so")}


def _sample(built: dict, body: str) -> dict:
    """Run `body` in a fresh process with a Sampler `s`, the own kernel `own()` and torch's
    softmax `theirs()` at hand; returns the sampler's report."""
    script = (
        textwrap.dedent("""
        import ctypes, json, signal, sys
        sys.path.insert(0, {harness!r})
        import torch, worker
        torch.set_num_threads(2)
        s = worker.Sampler({sampler!r}, 1000)
        k = ctypes.CDLL({kernel!r})
        x = torch.randn(2048, 1024); y = torch.empty_like(x)
        def own(): k.own_softmax(ctypes.c_void_p(x.data_ptr()), ctypes.c_void_p(y.data_ptr()), 2048, 1024)
        def theirs(): torch.softmax(x, -1)
        own(); theirs()
        def window(fn, calls):
            s.arm(calls)
            for _ in range(calls):
                fn()
            s.disarm()
    """).format(harness=str(HARNESS), **built)
        + textwrap.dedent(body)
        + "\nprint(json.dumps(s.report()))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _by_file(report: dict) -> dict[str, int]:
    out: dict[str, int] = {}
    for path, _, n, _ in report["samples"]:
        out[Path(path).name] = out.get(Path(path).name, 0) + n
    return out


def test_samples_land_in_the_code_that_ran(built):
    own = _sample(built, "window(own, 150)")
    assert own["problems"] == [] and own["calls"] == 150 and own["ended_ms"] == 0
    files = _by_file(own)
    total = sum(files.values())
    # Its own loop, the libm exp it calls and OpenMP's barrier (45% of it on a loaded machine,
    # where one thread waits for the other); none of it torch's compute.
    assert files.get("libk.so", 0) / total > 0.25, files
    assert sum(files.get(f, 0) for f in ("libk.so", "libm.so.6", "libgomp.so.1")) / total > 0.9, files
    assert files.get("libtorch_cpu.so", 0) / total < 0.05, files
    # Every thread's CPU time is sampled: the samples add up to the time the threads ran.
    assert 0.7 < own["sampled_ms"] / own["cpu_ms"] < 1.3, own

    theirs = _sample(built, "window(theirs, 150)")
    files = _by_file(theirs)
    total = sum(files.values())
    # torch's softmax and OpenMP's barrier, whose share is the machine's load (84% of it once
    # in CI beside other work), so torch's own share is judged on one thread below.
    assert files.get("libtorch_cpu.so", 0) / total > 0.05, files
    assert (files.get("libtorch_cpu.so", 0) + files.get("libgomp.so.1", 0)) / total > 0.9, files
    assert 0.7 < theirs["sampled_ms"] / theirs["cpu_ms"] < 1.3, theirs

    alone = _by_file(_sample(built, "torch.set_num_threads(1)\nwindow(theirs, 150)"))
    assert alone.get("libtorch_cpu.so", 0) / sum(alone.values()) > 0.8, alone


def test_only_the_armed_windows_are_sampled(built):
    report = _sample(built, "for _ in range(150): theirs()\nwindow(own, 100)")
    files = _by_file(report)
    assert files.get("libtorch_cpu.so", 0) / sum(files.values()) < 0.05, files


def test_a_thread_that_blocks_the_signal_is_named(built):
    # The calling thread runs torch's kernel with SIGPROF blocked: its time goes unsampled,
    # and its CPU time, read per thread, says so.
    report = _sample(
        built,
        """
        torch.set_num_threads(1)
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGPROF})
        window(theirs, 300)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGPROF})
    """,
    )
    assert any("blocked SIGPROF" in p for p in report["problems"]), report


def test_a_replaced_handler_is_named(built):
    report = _sample(built, "signal.signal(signal.SIGPROF, signal.SIG_IGN)\nwindow(theirs, 500)")
    assert any("handler was replaced" in p for p in report["problems"]), report
    assert any("saw" in p for p in report["problems"]), report  # and nothing was sampled


def test_a_timer_stopped_inside_a_window_shows_as_missing_time(built):
    # The candidate reaching the sampler's own disarm (the same library, already loaded).
    report = _sample(
        built,
        """
        lib = ctypes.CDLL({sampler!r})
        def sneaky():
            lib.assay_sampler_disarm()
            theirs()
        window(sneaky, 500)
    """.format(**built),
    )
    assert any("saw" in p for p in report["problems"]), report


def test_a_thread_that_starts_and_ends_inside_a_window_is_counted(built):
    # Torch's kernel on a thread that lives for one call (and on the OpenMP team it starts as a
    # new master): no timer, and by the window's end no /proc record of its CPU time either.
    # The process's CPU clock keeps what ended threads ran.
    report = _sample(
        built,
        """
        import threading
        def hidden():
            own()
            # six kernel calls: with three the ended share read 0.23-0.31 of the CPU time
            # here, against the 0.25 asked below; with six, 0.59-0.61
            t = threading.Thread(target=lambda: [theirs() for _ in range(6)])
            t.start(); t.join()
        window(hidden, 60)
    """,
    )
    files = _by_file(report)
    # torch's time barely shows in the samples, but the ended threads' CPU time does
    assert files.get("libtorch_cpu.so", 0) / sum(files.values()) < 0.05, files
    assert report["ended_ms"] > 0.25 * report["cpu_ms"], report
    checks, metrics = _judge(report["samples"], calls=60, eager_cpu_s=None, record=report)
    failed = _failures(checks)
    assert "ran on threads that started and ended inside a round" in failed["no_torch_compute"], failed
    assert metrics["cpu_samples"]["unplaced"] > 0.25


# ----------------------------------------------------------------------------- the judgement


def _torch_lib() -> str:
    return str(Path(torch.__file__).parent / "lib" / "libtorch_cpu.so")


def _sleef_offset() -> int:
    ranges = ks.allowed_ranges(_torch_lib())
    if not ranges or not ranges[0]:
        pytest.skip("libtorch_cpu exports no Sleef functions here")
    return ranges[0][0] + 1


def _judge(samples, calls=100, eager_cpu_s=2e-3, problems=(), record=None):
    checks, metrics = Checks(), {}
    record = {**(record or {}), "samples": samples, "problems": list(problems), "interval_us": 1000, "calls": calls}
    ks.judge_samples(checks, {"cpu_sampling": record}, load_criteria("kernel-default"), metrics, eager_cpu_s)
    return checks, metrics


def _failures(checks) -> dict[str, str]:
    return {c.name: c.detail for c in checks.list() if not c.passed}


def test_torch_share_fails_no_torch_compute():
    lib = _torch_lib()
    own = str(Path("/workspace/ext/build/k.so"))
    checks, metrics = _judge([[own, -1, 60], [lib, 0x1000, 40]])
    failed = _failures(checks)
    assert "torch's own code for 40%" in failed["no_torch_compute"], failed
    assert metrics["cpu_samples"]["torch"] == 0.4


def test_dilution_does_not_hide_torch_time():
    # Threads spinning in the candidate's own code drop torch's share to 5%, but torch's kernels
    # still took 0.5 ms of CPU a call against eager's 2 ms.
    lib = _torch_lib()
    checks, _ = _judge([["/workspace/ext/k.so", -1, 950], [lib, 0x1000, 50]], calls=100, eager_cpu_s=2e-3)
    failed = _failures(checks)
    assert "25% of eager's CPU time a call" in failed["no_torch_compute"], failed


def test_sleef_openmp_and_glue_are_not_torch_compute():
    lib = _torch_lib()
    folder = Path(lib).parent
    checks, metrics = _judge(
        [
            ["/workspace/ext/k.so", -1, 30],
            [lib, _sleef_offset(), 30],
            [str(folder / "libgomp.so.1"), -1, 20],
            [str(folder / "libc10.so"), 0x100, 10],
            [str(folder / "libtorch_python.so"), 0x100, 10],
        ]
    )
    assert "no_torch_compute" not in _failures(checks)
    summary = metrics["cpu_samples"]
    assert (summary["sleef"], summary["openmp"], summary["glue"], summary["torch"]) == (0.3, 0.2, 0.2, 0.0), summary


def test_other_peoples_numeric_kernels_fail_extension_symbols():
    blas = "/venv/lib/python3.11/site-packages/numpy.libs/libscipy_openblas64_-ff651d7f.so"
    checks, metrics = _judge([["/workspace/ext/k.so", -1, 40], [blas, -1, 60]])
    failed = _failures(checks)
    assert "numeric libraries it did not build (libscipy_openblas64_-ff651d7f.so x60)" in failed["extension_symbols"], (
        failed
    )
    assert "no_torch_compute" not in failed and metrics["cpu_samples"]["foreign"] == 0.6
    # libm and libc (an honest kernel's expf and memcpy) are neither.
    checks, _ = _judge([["/workspace/ext/k.so", -1, 40], ["/usr/lib/x86_64-linux-gnu/libm.so.6", -1, 60]])
    assert _failures(checks) == {}


def test_torch_time_under_the_floor_is_not_judged():
    # A tiny task: 40% of the time in libtorch_cpu, but 20 us a call (allocation and the
    # harness's calls around each timed call cost 10-15 us a call, whatever the kernel).
    lib = _torch_lib()
    checks, _ = _judge([["/workspace/ext/k.so", -1, 3000], [lib, 0x1000, 2000]], calls=100_000, eager_cpu_s=50e-6)
    assert _failures(checks) == {}
    checks, _ = _judge([["/workspace/ext/k.so", -1, 3000], [lib, 0x1000, 4000]], calls=100_000, eager_cpu_s=50e-6)
    assert "0.040 ms a call" in _failures(checks)["no_torch_compute"]  # over the 30 us floor


def test_an_honest_share_passes_and_too_few_samples_are_not_judged():
    lib = _torch_lib()
    checks, _ = _judge([["/workspace/ext/k.so", -1, 990], [lib, 0x1000, 10]])
    assert _failures(checks) == {}
    checks, _ = _judge([[lib, 0x1000, 10]])  # all torch, but 10 intervals are below min_samples
    assert _failures(checks) == {}


def test_a_missing_malformed_or_tampered_record_fails_integrity():
    checks, metrics = Checks(), {}
    ks.judge_samples(checks, {}, load_criteria("kernel-default"), metrics, 1e-3)
    assert "samples are missing" in _failures(checks)["harness_integrity"]
    checks, _ = _judge([["x", "0x10", 1]])
    assert "malformed" in _failures(checks)["harness_integrity"]
    checks, _ = _judge([], problems=["the CPU sampler's SIGPROF handler was replaced"])
    assert "handler was replaced" in _failures(checks)["harness_integrity"]
