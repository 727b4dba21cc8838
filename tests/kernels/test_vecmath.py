"""The templates' vector exp, checked against double-precision exp over fp32's whole range and
at its edges, for every ISA path this compiler can build and this CPU can run."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

VECMATH = Path(__file__).resolve().parents[2] / "kernels" / "cpp" / "vecmath.h"

PROGRAM = r"""
#include "vecmath.h"
#include <cmath>
#include <cstdio>
int main() {
  double worst = 0; long bad = 0;
  for (double x0 = -110.0; x0 < 92.0; x0 += 0.000731) {
    float v[VW]; for (int i = 0; i < VW; ++i) v[i] = (float)x0 + i * 1e-5f;
    vf r = vexp(vload(v));
    for (int i = 0; i < VW; ++i) {
      double e = std::exp((double)v[i]), got = r[i];
      if (e > 1.2e-38 && e < 3.4e38) { double rel = std::fabs(got / e - 1); if (rel > worst) worst = rel; }
      else if (e <= 1.2e-38 && !(got >= 0 && got <= 1.2e-38)) ++bad;   // underflow: 0 or a denormal
      else if (e >= 3.41e38 && !std::isinf(got)) ++bad;
    }
  }
  float sp[4] = {-INFINITY, INFINITY, NAN, 0.f};
  float in[VW] = {}; for (int i = 0; i < VW; ++i) in[i] = sp[i % 4];
  vf r = vexp(vload(in));
  for (int i = 0; i < VW; ++i) {
    float want = std::exp(in[i]);
    if (!(r[i] == want || (std::isnan(want) && std::isnan(r[i])))) ++bad;
  }
  std::printf("%.3e %ld %d\n", worst, bad, VW);
}
"""


def _build(tmp: Path, flags: list[str]) -> Path | None:
    src = tmp / "t.cpp"
    src.write_text(PROGRAM)
    exe = tmp / ("t" + "".join(f.replace("-", "_").replace("=", "") for f in flags))
    res = subprocess.run(
        [
            "g++",
            "-O2",
            "-march=native",
            *flags,
            "-ffp-contract=fast",
            "-fno-math-errno",
            "-fopenmp",
            "-I",
            str(VECMATH.parent),
            str(src),
            "-o",
            str(exe),
        ],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    return exe


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is needed to build the cpp templates")
@pytest.mark.parametrize("flags", [[], ["-mno-avx512f"]], ids=["native", "no-avx512"])
def test_vexp_matches_double_exp_everywhere(tmp_path, flags):
    exe = _build(tmp_path, flags)
    worst, bad, width = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split()
    assert int(bad) == 0, "exp's edges (0 below the range, inf above, NaN through) are wrong"
    # A few ulp: far inside fp32's 1e-4 tolerance, and tight enough to catch a wrong coefficient.
    assert float(worst) < 5e-7, f"relative error {worst} at vector width {width}"


ACTIVATIONS = r"""
#include "vecmath.h"
#include <cmath>
#include <cstdio>
static double softplus(double x, double beta, double thr) { return beta * x > thr ? x : std::log1p(std::exp(beta * x)) / beta; }
static double gelu(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
static double gelu_tanh(double x) { return 0.5 * x * (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); }
// Worst error over [lo, hi): absolute below 1, relative above (allclose's atol and rtol in one).
#define SWEEP(NAME, EXPR, REF, LO, HI) { double worst = 0; \
  for (double x0 = LO; x0 < HI; x0 += (HI - LO) / 4e5) { \
    float v[VW]; for (int i = 0; i < VW; ++i) v[i] = (float)x0 + i * 3e-6f; \
    vf x = vload(v); vf r = EXPR; \
    for (int i = 0; i < VW; ++i) { double xd = v[i], want = REF, got = r[i]; \
      double err = std::fabs(got - want) / std::fmax(1.0, std::fabs(want)); \
      if (!(err <= worst)) worst = err; } } \
  std::printf("%s %.3e\n", NAME, worst); }
static int edge(float x, float got, double want) {
  // Infinities, NaN and zeros exactly; a finite non-zero value to an ulp (tanh(softplus(inf)) is 1 - 2^-24).
  bool ok = std::isnan(want) ? std::isnan(got) : (std::isinf(want) || want == 0) ? got == (float)want : std::fabs(got / want - 1) < 1.2e-7;
  return ok ? 0 : (std::printf("edge %g: %.9g, want %.9g\n", x, got, want), 1);
}
// Relative error alone over [lo, hi), for values far below 1; below fp32's normal range, a couple
// of the smallest denormals either way.
template <class F, class R> static double tail(double lo, double hi, F f, R ref) {
  double worst = 0;
  for (double x0 = lo; x0 < hi; x0 += (hi - lo) / 4e5) {
    float v[VW]; for (int i = 0; i < VW; ++i) v[i] = (float)x0 + i * 3e-6f;
    vf r = f(vload(v));
    for (int i = 0; i < VW; ++i) { double want = ref(v[i]);
      double err = want < 1.2e-38 ? std::fabs(r[i] - want) / 0x1p-126 : std::fabs(r[i] / want - 1);
      if (!(err <= worst)) worst = err; } }
  return worst;
}
// Lanes of one vector on both sides of a table's range, each as if it were alone: a lane below
// `lo` or a NaN sends the whole vector to the other form, the others to the table. Then the same
// vector with those lanes moved just inside the range.
template <class F, class R> static int mixed(const char* name, const float (&mix)[16], float lo, F f, R ref) {
  int bad = 0;
  for (int pass = 0; pass < 2; ++pass) {
    float in[VW]; for (int i = 0; i < VW; ++i) in[i] = mix[i];
    if (pass) for (int i = 0; i < VW; ++i) if (!(in[i] >= lo)) in[i] = lo + 0.01f + i * 0.01f;
    vf r = f(vload(in));
    for (int i = 0; i < VW; ++i) {
      double want = ref(in[i]);
      bool ok = std::isnan(want) ? std::isnan(r[i]) : (std::isinf(want) || want < 1.2e-38) ? r[i] == (float)want : std::fabs(r[i] / want - 1) < 1e-6;
      if (!ok) { std::printf("edge %s lane %d of a mixed vector: %g gave %.9g, want %.9g\n", name, i, in[i], r[i], want); ++bad; } } }
  return bad;
}
int main() {
  SWEEP("softplus", vsoftplus(x, 1.f, 20.f), softplus(xd, 1, 20), -120., 120.)
  SWEEP("softplus_beta", vsoftplus(x, 2.5f, 7.f), softplus(xd, 2.5, 7), -60., 60.)
  SWEEP("tanh_softplus", vtanh_softplus(x, 1.f, 20.f), std::tanh(softplus(xd, 1, 20)), -120., 120.)
  SWEEP("tanh_softplus_beta", vtanh_softplus(x, 0.5f, 20.f), std::tanh(softplus(xd, 0.5, 20)), -60., 60.)
  SWEEP("mish", vmish(x), xd * std::tanh(softplus(xd, 1, 20)), -120., 120.)
  SWEEP("erf", verf(x), std::erf(xd), -8., 8.)
  SWEEP("gelu", vgelu(x), gelu(xd), -12., 12.)
  SWEEP("sigmoid", vsigmoid(x), 1 / (1 + std::exp(-xd)), -120., 120.)
  SWEEP("silu", vsilu(x), xd / (1 + std::exp(-xd)), -120., 120.)
  SWEEP("tanh", vtanh(x), std::tanh(xd), -20., 20.)
  SWEEP("gelu_tanh", vgelu_tanh(x), gelu_tanh(xd), -12., 12.)
  // softplus and tanh(softplus), mish's factor, where their value is far below 1: relative error
  // alone (the tables' last or first intervals, and beyond them the exp forms, where a table left
  // at its end value would be off by orders).
  std::printf("softplus_tail %.3e\n", tail(-120., 0., [](vf x) { return vsoftplus(x, 1.f, 20.f); },
                                           [](double x) { return softplus(x, 1, 20); }));
  std::printf("tanh_softplus_tail %.3e\n", tail(-120., 10., [](vf x) { return vtanh_softplus(x, 1.f, 20.f); },
                                                [](double x) { return std::tanh(softplus(x, 1, 20)); }));
  int bad = 0;
  { const float mix[16] = {-20.f, -1.f, 0.5f, 3.f, 16.5f, NAN, -INFINITY, INFINITY,
                           -15.71f, -15.69f, 15.74f, 15.76f, -104.f, 0.f, -0.f, 40.f};
    bad += mixed("softplus", mix, -15.7f, [](vf x) { return vsoftplus(x, 1.f, 20.f); },
                 [](double x) { return softplus(x, 1, 20); }); }
  { const float mix[16] = {-23.f, -1.f, 0.5f, 3.f, 9.48f, NAN, -INFINITY, INFINITY,
                           -22.41f, -22.39f, 9.5f, 12.f, -104.f, 0.f, -0.f, 40.f};
    bad += mixed("tanh_softplus", mix, -22.4f, [](vf x) { return vtanh_softplus(x, 1.f, 20.f); },
                 [](double x) { return std::tanh(softplus(x, 1, 20)); }); }
  // |tanh| never exceeds 1, and is exactly 1 from 9.02 on, where fp32 rounds tanh to 1.
  { long off = 0; for (double x0 = -12; x0 < 12; x0 += 1e-4) { float a = vtanh(vsplat((float)x0))[0];
      off += a > 1.f || a < -1.f || (std::fabs(x0) > 9.02 && std::fabs(a) != 1.f); }
    if (off) { std::printf("edge tanh: |tanh| > 1, or not 1 where it saturates, at %ld points\n", off); } bad += off; }
  const float specials[] = {-INFINITY, INFINITY, NAN, 0.f, -0.f};
  for (float s : specials) {
    vf x = vsplat(s);
    bad += edge(s, vsoftplus(x, 1.f, 20.f)[0], softplus(s, 1, 20));
    bad += edge(s, vmish(x)[0], s == INFINITY ? INFINITY : s * std::tanh(softplus(s, 1, 20)));
    bad += edge(s, verf(x)[0], std::erf(s));
    // gelu(-inf) is -inf * 0, NaN, here and in torch; gelu(inf) is inf (torch's vectorized erf gives NaN).
    bad += edge(s, vgelu(x)[0], gelu(s));
    bad += edge(s, vtanh(x)[0], std::tanh(s));
    bad += edge(s, vgelu_tanh(x)[0], gelu_tanh(s));
    bad += edge(s, vtanh_softplus(x, 1.f, 20.f)[0], std::tanh(softplus(s, 1, 20)));
    // At -inf the clamp that keeps exp finite leaves sigmoid a denormal (4e-39) where torch has
    // 0, and silu -inf (AVX-512) or NaN where torch has -inf * 0 = NaN.
    if (s == -INFINITY) { bad += !(vsigmoid(x)[0] < 1e-38f); continue; }
    bad += edge(s, vsigmoid(x)[0], 1 / (1 + std::exp(-(double)s)));
    bad += edge(s, vsilu(x)[0], s == INFINITY ? INFINITY : s / (1 + std::exp(-(double)s)));
  }
  std::printf("bad %d\n", bad);
}
"""


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is needed to build the cpp templates")
@pytest.mark.parametrize("flags", [[], ["-mno-avx512f"]], ids=["native", "no-avx512"])
def test_activations_match_double_precision(tmp_path, flags):
    """softplus (any beta), the fused tanh(softplus) behind mish, and the rational erf behind gelu:
    a few ulp over their whole useful range, and the reference's values at inf, NaN and +-0."""
    src = tmp_path / "a.cpp"
    src.write_text(ACTIVATIONS)
    exe = tmp_path / ("a" + "".join(f.replace("-", "_") for f in flags))
    res = subprocess.run(
        [
            "g++",
            "-O2",
            "-march=native",
            *flags,
            "-ffp-contract=fast",
            "-fno-math-errno",
            "-fopenmp",
            "-I",
            str(VECMATH.parent),
            str(src),
            "-o",
            str(exe),
        ],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split("\n")
    worst = {line.split()[0]: float(line.split()[1]) for line in out if line and not line.startswith(("bad", "edge"))}
    assert out[-2] == "bad 0" or out[-1] == "bad 0", [line for line in out if line.startswith("edge")]
    assert set(worst) == {
        "softplus",
        "softplus_beta",
        "tanh_softplus",
        "tanh_softplus_beta",
        "mish",
        "erf",
        "gelu",
        "sigmoid",
        "silu",
        "tanh",
        "gelu_tanh",
        "softplus_tail",
        "tanh_softplus_tail",
    }
    too_far = {k: v for k, v in worst.items() if not v < 2e-6}
    assert not too_far, too_far


def _tables(monkeypatch):
    import importlib.util

    spec = importlib.util.spec_from_file_location("vecmath_tables", VECMATH.parent / "tables.py")
    tables = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, tables)  # its dataclasses look themselves up there
    spec.loader.exec_module(tables)
    return tables


def test_shipped_tables_meet_their_stated_bounds(monkeypatch):
    """vecmath.h's coefficient tables (used on AVX-512 only, so on an AVX2 machine this is their
    one check): over a dense grid of each function's domain, the fp32 coefficients stay within
    the relative error each table states, against the function in double precision."""
    tables = _tables(monkeypatch)
    shipped = tables.split(tables.numbers(tables.current(VECMATH.read_text())))
    assert set(shipped) == {t.name for t in tables.TABLES}
    errors = {t.name: tables.worst_error(t, shipped[t.name]) for t in tables.TABLES}
    over = {t.name: errors[t.name] for t in tables.TABLES if not 0 < errors[t.name] <= t.bound}
    assert not over, f"{over}; run: python kernels/cpp/tables.py --write"


def test_a_perturbed_coefficient_breaks_the_bound_and_a_last_bit_does_not(monkeypatch):
    """The check is about accuracy, not bits: one coefficient off by a millionth fails it, in any
    table and interval; the same coefficient moved by its last fp32 bit (what another LAPACK's
    rounding does) does not."""
    import numpy as np

    tables = _tables(monkeypatch)
    shipped = tables.split(tables.numbers(tables.current(VECMATH.read_text())))
    for t in tables.TABLES:
        k = 7  # an interval in the middle of every table's range
        bad = shipped[t.name].copy()
        bad[0, k] *= np.float32(1 + 2e-6)
        assert tables.worst_error(t, bad) > t.bound, t.name
        nudged = shipped[t.name].copy()
        nudged[0, k] = np.nextafter(nudged[0, k], np.float32(np.inf))
        assert tables.worst_error(t, nudged) <= t.bound, t.name


def test_a_refit_agrees_with_the_shipped_tables(monkeypatch):
    """kernels/cpp/tables.py regenerates the tables without LAPACK (a QR over math.fsum): a refit on
    this machine stays within each table's bound of the shipped one, and meets the bound itself."""
    tables = _tables(monkeypatch)
    shipped = tables.split(tables.numbers(tables.current(VECMATH.read_text())))
    for t in tables.TABLES:
        fitted = tables.fit(t)
        assert tables.worst_error(t, fitted) <= t.bound, t.name
        assert tables.worst_difference(t, shipped[t.name], fitted) <= t.bound, t.name
    assert tables.check(VECMATH.read_text()) == []
