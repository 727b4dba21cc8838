"""bench/activations.py: the in-process before/after of vecmath's activations runs and reports."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "activations.py"


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(BENCH), *args], capture_output=True, text=True, timeout=300, cwd=BENCH.parents[1]
    )


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is needed to build the activations")
def test_times_an_activation_against_a_copy_and_an_earlier_revision():
    res = _run("--only", "silu,softplus", "--rounds", "3", "--against", "HEAD")
    assert res.returncode == 0, res.stderr[-2000:]
    out = json.loads(res.stdout)
    assert set(out["activations"]) == {"silu", "softplus", "silu@against", "softplus@against"}
    for row in out["activations"].values():
        assert row["median_ms"] > 0 and row["fraction_of_copy"] > 0 and row["in_cache_ns"] > 0
    assert out["copy_gbps"] > 0 and out["rounds"] == 3 and out["against"] == "HEAD" and out["prefetch"] == 512


def test_the_prefetch_hint_is_in_the_loop_it_times():
    # Only the generated source is read: nothing is built, so no g++ is needed.
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_activations", BENCH)
    activations = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(activations)
    names = ["silu"]
    with_hint = activations._source({"cur": activations.HEADER}, names, 512)
    without = activations._source({"cur": activations.HEADER}, names, 0)
    # subject 0 is the copy, the roofline: never prefetched
    assert with_hint.count("vprefetch(xs + s + i + 512);") == 1 and "vprefetch(xs" not in without


@pytest.mark.parametrize(
    "args, words",
    [
        (("--only", "swish"), "unknown activation 'swish'"),
        (("--against", "no-such-revision"), "no kernels/cpp/vecmath.h at 'no-such-revision'"),
        (("--rounds", "0"), "--rounds must be at least 1"),
        (("--prefetch", "-1"), "--prefetch must be 0 or more floats"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, words):
    res = _run(*args)
    assert res.returncode == 2 and words in res.stderr, res.stderr
    assert "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1
